"""Build tools of the repository (not imported by the program): `python -m tools.<name>`."""
