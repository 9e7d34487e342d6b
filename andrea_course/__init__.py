"""andrea_course: the shared package of the ANDREA course.

    from andrea_course import ANDREA, ModelConfig, count_parameters, learner_model
    model = ANDREA("andrea-tiny")                          # the engine (model.py)
    mine = learner_model("andrea-tiny", "exercises")       # with your pieces that pass their tests
    mine.pieces["attention.softmax"]                       # "yours", or why the engine's runs
    count_parameters("andrea-120m")["total"]               # 98820096

Layers (docs/architecture.md): engine/ (config, ops, backends, model, kernels) <- pieces <-
overlay (a learner's code put in the engine: overlay.build) <- grading (which pieces pass:
grading.passing) <- notebook; train sits on the engine. The names below load on first use
(PEP 562), so `import andrea_course` imports neither torch nor a learner's code.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the module that defines it, imported when the name is first read
_LAZY = {
    "ANDREA": "engine.model",
    "ModelConfig": "engine.config",
    "ConfigError": "engine.config",
    "count_parameters": "engine.params",
    "Overlay": "overlay",
    "ImplementationError": "overlay",
    "build": "overlay",
    "learner_model": "grading.passing",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
