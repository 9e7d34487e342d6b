# The Triton back-end's plain-PyTorch twins (kernels/*_reference) for softmax and attention,
# the rest through the package's own names.
import types

from andrea_course.engine.kernels import attention_reference, softmax_reference

from . import attention as _engine

E = types.SimpleNamespace(**{name: getattr(_engine, name) for name in dir(_engine)})
E.softmax = softmax_reference
E.attention = attention_reference
