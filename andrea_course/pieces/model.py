"""Activity 7.3 · The whole model, as the engine builds it; its parameters counted; sampling the
next token and the KV cache, as the engine generates."""
from ..engine.model import ANDREA, KVCache, sample_next
from ..engine.params import count_parameters
from ..lessons import lesson

__all__ = list(lesson("model").pieces)     # the pieces the learner writes (lessons.py)
