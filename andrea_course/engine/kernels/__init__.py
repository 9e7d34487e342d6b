"""Triton kernels for ANDREA's hot operations, forward and backward, one file per kernel.

Each file holds its @triton.jit kernels, a torch.autograd.Function, the function the model
calls and a plain PyTorch `*_reference` beside it. backends.py names which function fills
which op slot of the model with kernels="triton". Without a GPU the kernels run in Triton's
interpreter (slowly).
"""
from . import _common  # noqa: F401  (sets TRITON_INTERPRET before any kernel is defined)
from .attention import attention, attention_reference
from .cross_entropy import cross_entropy, cross_entropy_reference
from .gelu import gelu_tanh, gelu_tanh_reference
from .layernorm import layer_norm, layer_norm_reference
from .rmsnorm import rms_norm, rms_norm_reference
from .softmax import softmax, softmax_reference
from .swiglu import swiglu, swiglu_reference

__all__ = ["attention", "cross_entropy", "gelu_tanh", "layer_norm", "rms_norm", "softmax",
           "swiglu", "attention_reference", "cross_entropy_reference", "gelu_tanh_reference",
           "layer_norm_reference", "rms_norm_reference", "softmax_reference", "swiglu_reference"]
