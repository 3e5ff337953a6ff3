"""The only place that runs the docker CLI: one runner (docker.py), the compose
project and the Swarm stack behind one interface (lab.py's `Lab`), the stack
file, the containers' limits as the engine applied them, and their cgroups."""
