"""Where the course lives: the folder that holds andrea_course/, exercises/, notebooks/ (a clone
of the course, or its learner's release), and the names every layer uses for its parts.

A leaf module: it imports nothing of the package, so the engine, the trainer, the grader and
the notebooks can all ask it without importing each other.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent            # andrea_course/
ROOT = PACKAGE.parent                                # the course's checkout (editable install)
STUB_MARK = "not implemented yet"                    # every generated exercise stub's message says this
COURSE_FOLDERS = ("solutions", "exercises")          # the answer key and the learner's files, in ROOT
