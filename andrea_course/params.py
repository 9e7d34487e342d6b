"""count_parameters: ANDREA's parameters by component, from a config or from a built model."""
from __future__ import annotations

import torch.nn as nn

from .config import ModelConfig
from .impl import get_impl


def count_parameters(cfg_or_model: ModelConfig | str | nn.Module, impl=None) -> dict:
    """{component: count} with the keys token_table, position_table, attention, mlp, norms,
    block (one block each), blocks (all L), final_norm, head and total.

    From a config the counts come from the sizes (the activity's count_parameters); from a
    model they come from its tensors, so the two can be checked against each other.
    """
    if isinstance(cfg_or_model, nn.Module):
        return _count_tensors(cfg_or_model)
    cfg = ModelConfig.preset(cfg_or_model) if isinstance(cfg_or_model, str) else cfg_or_model
    return get_impl(impl).module("model").count_parameters(cfg)


def _count_tensors(model: nn.Module) -> dict:
    n = lambda m: sum(p.numel() for p in m.parameters()) if m is not None else 0
    block = model.blocks[0]
    counts = dict(token_table=model.embed.token_table.numel(),
                  position_table=model.embed.position_table.numel(),
                  attention=n(block.attn), mlp=n(block.mlp), norms=n(block.ln1) + n(block.ln2),
                  block=n(block), blocks=sum(n(b) for b in model.blocks),
                  final_norm=n(model.ln_f), head=n(model.head))
    counts["total"] = sum(p.numel() for p in model.parameters())   # a tied table counts once
    return counts
