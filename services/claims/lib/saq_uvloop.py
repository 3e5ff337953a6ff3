"""SAQ's command line under uvloop, as the streaq benchmark's author ran it (importing
streaq installed uvloop there): `python -m saq_uvloop --quiet bench_saq.settings --workers N`."""

import uvloop

uvloop.install()  # before SAQ is imported, as the author's run had it

from saq.__main__ import main  # noqa: E402

main()
