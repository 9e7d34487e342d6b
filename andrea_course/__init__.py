"""andrea_course: the shared package of the ANDREA course.

    from andrea_course import ANDREA, ModelConfig, count_parameters
    model = ANDREA("andrea-tiny")                          # the engine (model.py)
    model = ANDREA("andrea-tiny", impl="exercises")        # with your pieces that pass their tests
    count_parameters("andrea-120m")["total"]               # 98820096

Layers (docs/architecture.md): config, ops, backends, model (the engine) <- pieces, overlay
(a learner's code, by name) <- grading, notebook, train.
"""
from .config import ConfigError, ModelConfig
from .model import ANDREA
from .overlay import ImplementationError, Overlay
from .params import count_parameters

__all__ = ["ANDREA", "ConfigError", "ImplementationError", "ModelConfig", "Overlay", "count_parameters"]
__version__ = "0.1.0"
