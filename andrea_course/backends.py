"""Back-ends of the hot operations, by name: one row per op slot, one column per back-end.

A slot's name is also the attribute that holds it in every module of the model (model.py):
MultiHeadAttention.attention, LayerNorm.layer_norm, RMSNorm.rms_norm, MLP.gelu,
SwiGLU.swiglu and ANDREA.cross_entropy. apply(model, "triton") walks the model's modules and
sets each of those attributes to that back-end's function, the way Liger-Kernel's
apply_liger_kernel_to_* swaps its kernels in by name. All back-ends compute the same thing.

Adding a kernel: its file in kernels/, one row here, its tests, its bench line (docs/architecture.md).
"""
from __future__ import annotations

import importlib

import torch.nn as nn

BACKENDS = ("torch", "triton")

#  slot            torch: PyTorch's fused op           triton: the course's kernel
TABLE: dict[str, dict[str, str]] = {
    "attention":     {"torch": "andrea_course.ops:attention",     "triton": "andrea_course.kernels.attention:attention"},
    "layer_norm":    {"torch": "andrea_course.ops:layer_norm",    "triton": "andrea_course.kernels.layernorm:layer_norm"},
    "rms_norm":      {"torch": "andrea_course.ops:rms_norm",      "triton": "andrea_course.kernels.rmsnorm:rms_norm"},
    "gelu":          {"torch": "andrea_course.ops:gelu",          "triton": "andrea_course.kernels.gelu:gelu_tanh"},
    "swiglu":        {"torch": "andrea_course.ops:swiglu",        "triton": "andrea_course.kernels.swiglu:swiglu"},
    "cross_entropy": {"torch": "andrea_course.ops:cross_entropy", "triton": "andrea_course.kernels.cross_entropy:cross_entropy"},
}


def op(slot: str, backend: str = "torch"):
    """The function of one slot on one back-end (imported on first use: Triton only when asked)."""
    if backend not in BACKENDS:
        raise ValueError(f"kernels must be one of {BACKENDS}, got {backend!r}")
    if slot not in TABLE:
        raise KeyError(f"no op slot {slot!r}; slots: {', '.join(TABLE)}")
    module, _, name = TABLE[slot][backend].partition(":")
    return getattr(importlib.import_module(module), name)


def apply(model: nn.Module, backend: str, keep: dict | None = None) -> None:
    """Set every op-slot attribute in model's modules to `backend`'s function; slots in `keep`
    ({slot: function}) get that function instead (a learner's own op, see overlay.py)."""
    fns = {slot: (keep or {}).get(slot) or op(slot, backend) for slot in TABLE}
    for module in model.modules():
        for slot, fn in fns.items():
            if slot in module.__dict__:           # an attribute set in the module's __init__
                setattr(module, slot, fn)
