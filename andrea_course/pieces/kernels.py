"""Activity 9 · The GELU and LayerNorm forward kernels, as the package's Triton back-end has them."""
from ..kernels.gelu import gelu_kernel
from ..kernels.layernorm import layer_norm_kernel

__all__ = ["gelu_kernel", "layer_norm_kernel"]
