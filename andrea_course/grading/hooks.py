"""What a grading run does with a submission after its graded tests, switched on by a settings
file in the hidden tests' folder. Each file names its hook by entry point ("andrea_course.<module>:
<class>"), imported only when a course has that file: the pipeline imports nothing of the capstone.

    hook = load(path)                 # hook.describe(), hook.key (the results field it fills)
    prepare = hook.prepare() if hook.wants(folder) else None    # the tests' worker parent runs it first
    entry = hook.after(folder, tests, isolation, seconds=left, started=parent)  # or hook.stopped(why)

`parent`: the worker parent the graded tests used, prepared with `prepare` (an entry point and its
argument, run before it forks any worker) and so kept past pytest (pipeline.Spec.prepare), or None
(the hook then starts one of its own); the hook closes it.

The capstone's leaderboard is the one hook (capstone/leaderboard.py: Leaderboard).
"""
from __future__ import annotations

from pathlib import Path

from ..worker.server import entry_point

AFTER_TESTS = {"leaderboard.json": "andrea_course.capstone.leaderboard:Leaderboard"}
LEADERBOARD_FILE = "leaderboard.json"


def load(path, kind: str = LEADERBOARD_FILE):
    """The hook of the settings file at `path` (named by `kind`, the file name the hidden tests'
    folder holds it by: any file name may be given on the command line)."""
    return entry_point(AFTER_TESTS[kind]).load(Path(path))
