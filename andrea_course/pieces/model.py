"""Activity 7.3 · The whole model, as the engine builds it; its parameters counted."""
from ..model import ANDREA
from ..params import count_parameters

__all__ = ["ANDREA", "count_parameters"]
