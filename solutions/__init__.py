"""Reference solutions, one file per activity. `exercises/` is generated from these files."""
