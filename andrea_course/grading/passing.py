"""Which of a learner's pieces pass their graded tests, and the model built from those.

    passing("exercises", ["attention.softmax", "mlp.MLP"])   # {"attention.softmax": "yours", "mlp.MLP": "engine: ..."}
    model = learner_model("andrea-tiny", "exercises")       # overlay.build with the pieces that pass

The verdict is decided here, in the grading layer (local.verdict() of the same run check() and
use() read), and handed down to overlay.build, which never runs a test.
"""
from __future__ import annotations

import os

from .. import overlay as _overlay
from ..engine.config import ModelConfig
from . import local


def passing(impl: str | os.PathLike, exercises=None) -> dict[str, str]:
    """{exercise: "yours" | "engine: <why>"} for the learner's pieces `exercises` ("activity.piece";
    None: every piece a model can be built from), by their graded tests."""
    if exercises is None:
        exercises = [*_overlay.SLOTS, *(s for steps in _overlay.STEPS.values() for s in steps),
                     *_overlay.TRITON_KERNELS.values()]
    exercises = list(dict.fromkeys(exercises))
    folder = _overlay.Overlay(impl)
    out, to_run = {}, []
    for exercise in exercises:
        activity, _, piece = str(exercise).partition(".")
        if activity not in _overlay.pieces.ACTIVITIES or piece not in _overlay.pieces.names(activity):
            raise KeyError(f"no piece {exercise!r}: name one as 'activity.piece', e.g. 'attention.softmax'")
        if not folder.path(activity).is_file():
            out[exercise] = "engine: no file"
        elif piece not in folder.written(activity):
            out[exercise] = "engine: not written yet"
        else:
            to_run.append(exercise)
    for exercise, result in local.run_graded_many(to_run, impl=str(folder.folder), reuse=True).items():
        out[exercise] = local.verdict(result)
    return {e: out[e] for e in exercises}


def learner_model(cfg: ModelConfig | str, impl: str | os.PathLike, **switches):
    """overlay.build(cfg, impl, accept=passing(...)): the engine's ANDREA with each of the learner's
    pieces it is built from that passes its graded tests. switches: kernels, dropout, init_std."""
    bad = sorted(set(switches) - {"kernels", "dropout", "init_std"})
    if bad:
        raise TypeError(f"learner_model takes the run-time switches kernels, dropout and init_std, "
                        f"not {', '.join(bad)}")
    exercises = _overlay.model_pieces(cfg, switches.get("kernels", "torch"))
    return _overlay.build(cfg, impl, accept=passing(impl, exercises), **switches)
