"""python -m andrea_course.capstone: andrea-train (what torchrun starts on every process).

Under torchrun a process leaves with os._exit once its run is over and its output flushed: the
interpreter's own shutdown can otherwise destroy gloo's tensors while gloo's threads still hold
them, and abort a rank that finished cleanly ("terminate called without an active exception")."""
import os
import sys

from .cli import main

code = main()
if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
raise SystemExit(code)
