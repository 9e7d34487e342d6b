"""andrea_course: the shared package of the ANDREA course.

    from andrea_course import ModelConfig, ANDREA, count_parameters
    model = ANDREA(ModelConfig.preset("andrea-tiny"))
"""
from .config import ConfigError, ModelConfig
from .impl import get_impl
from .model import ANDREA
from .params import count_parameters

__all__ = ["ANDREA", "ConfigError", "ModelConfig", "count_parameters", "get_impl"]
__version__ = "0.1.0"
