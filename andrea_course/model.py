"""ANDREA, assembled from the pieces of whichever implementation is chosen (see impl.py)."""
from __future__ import annotations

import os

import torch.nn as nn

from . import ops
from .config import ModelConfig
from .impl import Impl, get_impl, reference_of, runs_reference_only

# The activities whose pieces make up the model (kernels and the tokenizer do not).
MODEL_ACTIVITIES = ("embeddings", "attention", "multihead", "mlp", "block", "modern", "model")


def ANDREA(cfg: ModelConfig | str, impl: str | os.PathLike | Impl | None = None) -> nn.Module:
    """Build ANDREA for a config (or a preset's name) from an implementation.

    impl: "solutions" (default, or $ANDREA_IMPL), "exercises", a submission folder, or an Impl.
    The model's `.pieces` says, for every piece, whose code it runs ("yours", "reference").
    With cfg.kernels == "torch", every reference hot operation (attention, LayerNorm, RMSNorm,
    GELU) runs as PyTorch's fused equivalent; a learner's own piece always runs as written.
    With cfg.kernels == "triton", the Triton kernels of andrea_course.kernels replace them.
    """
    cfg = ModelConfig.preset(cfg) if isinstance(cfg, str) else cfg
    impl = impl if isinstance(impl, Impl) else get_impl(impl)
    model = impl.module("model").ANDREA(cfg)
    model.impl = impl
    model.pieces = impl.report(MODEL_ACTIVITIES)
    swap_ops(model, impl, cfg.kernels)
    return model


def _fused_ops(impl: Impl) -> dict:
    """{id(reference function): its fused torch replacement}."""
    ref = impl.reference or impl
    return {
        id(ref.module("attention").attention): ops.attention,
        id(ref.module("block").layer_norm): ops.layer_norm,
        id(ref.module("modern").rms_norm): ops.rms_norm,
        id(ref.module("mlp").gelu_tanh): ops.gelu_tanh,
        id(ref.module("modern").swiglu): ops.swiglu,
        id(ref.module("model").cross_entropy): ref.module("model").cross_entropy,
    }


def swap_ops(model: nn.Module, impl: Impl, kernels: str = "torch") -> None:
    """Replace every reference hot operation held by a module (attend, norm_fn, act, glu,
    loss_fn) by its fused version; the learner's own functions are left as they are.

    With kernels == "triton", andrea_course.kernels.triton_ops maps an op's name (attention,
    layer_norm, rms_norm, gelu_tanh, swiglu, cross_entropy) to its Triton version."""
    fast = _fused_ops(impl)
    if kernels == "triton":
        from .kernels import triton_ops
        fast = {k: triton_ops.get(v.__name__, v) for k, v in fast.items()}
    for module in model.modules():
        for attr in ("attend", "norm_fn", "act", "glu", "loss_fn"):
            fn = module.__dict__.get(attr)
            ref = reference_of(fn)
            if ref is not None and id(ref) in fast and runs_reference_only(fn):
                setattr(module, attr, fast[id(ref)])
