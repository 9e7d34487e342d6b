"""Which of a learner's pieces pass their graded tests, for whoever builds with them.

(A stand-in with the agreed signatures until the grading layer's own version replaces it.)

    passing("exercises", ["attention.attention", "optim.adamw_step"])   # {piece: "yours" | "engine: why"}
    learner_model(cfg, "exercises", kernels="torch")                    # the engine with those that pass
"""
from __future__ import annotations

import os

from .. import overlay, pieces


def passing(impl: str | os.PathLike, exercises=None) -> dict[str, str]:
    """{piece: "yours" | "engine: <why>"} from the graded tests (every piece when exercises is None)."""
    names = list(exercises) if exercises is not None else [
        f"{a}.{p}" for a in pieces.ACTIVITIES for p in pieces.names(a)]
    slots = [e for e in names if e in overlay.SLOTS]
    rest = [e for e in names if e not in overlay.SLOTS]
    out = {}
    if slots:
        out.update(overlay.passing(impl, list(overlay.SLOTS)))     # the list the model is built from
    if rest:
        out.update(overlay.passing(impl, rest))
    return {e: out[e] for e in names}


def learner_model(cfg, impl, **switches):
    """The engine's model with every piece of the learner's that passes its graded tests."""
    status = passing(impl, list(overlay.SLOTS))
    return overlay.build(cfg, impl, accept={e for e, s in status.items() if s == "yours"}, **switches)
