"""Which of a learner's pieces pass their graded tests, and the model built from those.

    passing("exercises", ["attention.softmax", "mlp.MLP"])   # {"attention.softmax": "yours", "mlp.MLP": "engine: ..."}
    model = learner_model("andrea-tiny", "exercises")       # overlay.build with the pieces that pass

The verdict is decided here, in the grading layer, and handed down to overlay.build (which never
runs a test): a piece is "yours" when it is written and every one of its graded tests passes,
else the engine's, with why ("engine: not written yet", "engine: 2 of its 5 graded tests
fail", "engine: no file"). It is local.verdict() of the same run of the same tests
that check() and use() read (local.run_graded_many, remembered while the content of the
learner's files and of the tests stays the same).
"""
from __future__ import annotations

import os

from .. import overlay as _overlay
from ..config import ModelConfig
from . import local

def passing(impl: str | os.PathLike, exercises=None) -> dict[str, str]:
    """{exercise: "yours" | "engine: <why>"} for the learner's pieces `exercises` ("activity.piece";
    None: every piece a model can be built from, overlay.SLOTS and the steps and kernels they use),
    by their graded tests. Any piece of the course may be asked for (optim.lr_at, bpe.encode, ...)."""
    if exercises is None:
        exercises = list(dict.fromkeys([*_overlay.SLOTS, *(s for steps in _overlay.STEPS.values() for s in steps),
                                        *_overlay.TRITON_KERNELS.values()]))
    exercises = list(dict.fromkeys(exercises))
    return _run(_overlay.Overlay(impl), exercises)


def _run(folder: "_overlay.Overlay", exercises: list[str]) -> dict[str, str]:
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
    for exercise, result in local.run_graded_many(to_run, impl=str(folder.folder), reuse=True).items() if to_run else ():
        out[exercise] = local.verdict(result)
    return {e: out[e] for e in exercises}


def learner_model(cfg: ModelConfig | str, impl: str | os.PathLike, **switches):
    """overlay.build(cfg, impl, accept=passing(...)): the engine's ANDREA with each of the learner's
    pieces it is built from that passes its graded tests. switches: kernels, dropout, init_std."""
    bad = sorted(set(switches) - {"kernels", "dropout", "init_std"})
    if bad:
        raise TypeError(f"learner_model takes the run-time switches kernels, dropout and init_std, not {', '.join(bad)}")
    exercises = _overlay.model_pieces(cfg, switches.get("kernels", "torch"))
    return _overlay.build(cfg, impl, accept=passing(impl, exercises), **switches)
