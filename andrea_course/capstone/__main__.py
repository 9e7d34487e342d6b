"""python -m andrea_course.capstone: andrea-train (what torchrun starts on every process)."""
from .cli import main

raise SystemExit(main())
