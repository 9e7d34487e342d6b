"""The engine's version of every piece a learner writes, one file per activity, by the
exercise's own names (pieces/attention.py holds attention.softmax, ...).

Each is written with PyTorch's own ops or the engine's modules (model.py), never copied from
the answer key (solutions/). A piece stands in for the learner's own while theirs is not
written, fails its graded tests, or is not the piece being graded (overlay.py); the graded
tests compare the learner's output with these. The activities and their pieces come from the
lesson table (lessons.py); each module's __all__ is its row's pieces, so naming the pieces never
imports Triton or tokenizers (kernels, bpe).

What pieces/ may import: the engine (model, ops, config, params, kernels/) and, of train/, only
the two leaves that hold what a piece shares with the trainer: train/schedule.py (optim.lr_at)
and train/tokenizer.py (bpe's word-splitting rules); never the trainer (docs/architecture.md).
"""
from __future__ import annotations

import importlib
import types

from ..lessons import ACTIVITIES, lesson  # noqa: F401  (ACTIVITIES: the course's order, read here by callers)


def module(activity: str) -> types.ModuleType:
    """pieces/<activity>.py (imported on first use: kernels needs Triton, bpe needs tokenizers)."""
    lesson(activity)                                  # a clear KeyError for a name that is no activity
    return importlib.import_module(f"{__name__}.{activity}")


def names(activity: str) -> tuple[str, ...]:
    """The pieces a learner writes in exercises/<activity>.py, in the file's order (lessons.py)."""
    return lesson(activity).pieces


def get(activity: str, name: str):
    """The engine's version of one piece."""
    if name not in names(activity):
        raise KeyError(f"activity {activity!r} has no piece {name!r}; its pieces: {', '.join(names(activity))}")
    return getattr(module(activity), name)
