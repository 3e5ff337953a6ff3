"""The typer commands, one module per make target (or a few close ones): their
options, each with its env var where it has one, and a call; nothing else."""
