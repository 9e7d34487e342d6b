"""The engine's version of every piece a learner writes, one file per activity, by the
exercise's own names (pieces/attention.py holds attention.softmax, ...).

Each is written with PyTorch's own ops or the engine's modules (model.py), never copied from
the answer key (solutions/). A piece stands in for the learner's own while theirs is not
written, fails its graded tests, or is not the piece being graded (overlay.py); the graded
tests compare the learner's output with these. `names(activity)` lists an activity's pieces
(each module's __all__); a test checks it against the solution regions.
"""
from __future__ import annotations

import ast
import functools
import importlib
import types
from pathlib import Path

# The activities, in the course's order; the model is built from the first seven.
ACTIVITIES = ("embeddings", "attention", "multihead", "mlp", "block", "modern", "model", "kernels", "bpe", "optim")
MODEL_ACTIVITIES = ACTIVITIES[:7]


def module(activity: str) -> types.ModuleType:
    """pieces/<activity>.py (imported on first use: kernels needs Triton, bpe needs tokenizers)."""
    if activity not in ACTIVITIES:
        raise KeyError(f"no activity named {activity!r}; activities: {', '.join(ACTIVITIES)}")
    return importlib.import_module(f"{__name__}.{activity}")


@functools.lru_cache(maxsize=None)
def names(activity: str) -> tuple[str, ...]:
    """The pieces a learner writes in exercises/<activity>.py: the module's __all__, read from its
    source, so that naming the pieces never imports Triton or tokenizers (kernels, bpe)."""
    if activity not in ACTIVITIES:
        raise KeyError(f"no activity named {activity!r}; activities: {', '.join(ACTIVITIES)}")
    tree = ast.parse((Path(__file__).parent / f"{activity}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise KeyError(f"pieces/{activity}.py has no __all__")


def get(activity: str, name: str):
    """The engine's version of one piece."""
    if name not in names(activity):
        raise KeyError(f"activity {activity!r} has no piece {name!r}; its pieces: {', '.join(names(activity))}")
    return getattr(module(activity), name)
