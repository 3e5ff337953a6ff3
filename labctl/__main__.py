"""`python -m labctl <command>`: the lab's experiments (`python -m labctl --help`)."""

import sys

from labctl.app import main

sys.exit(main())
