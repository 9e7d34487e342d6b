# The engine's attention held by an engine MultiHeadAttention (its self.attention), the other
# pieces through the package's own names.
import types

from andrea_course import ModelConfig
from andrea_course.engine.model import MultiHeadAttention

from . import attention as _engine

E = types.SimpleNamespace(**{name: getattr(_engine, name) for name in dir(_engine)})
E.attention = MultiHeadAttention(ModelConfig.preset("andrea-tiny")).attention
