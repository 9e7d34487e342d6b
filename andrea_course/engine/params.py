"""count_parameters: ANDREA's parameters by component, from a config or from a built model."""
from __future__ import annotations

import torch
import torch.nn as nn

from .config import ModelConfig


def count_parameters(cfg_or_model: ModelConfig | str | nn.Module) -> dict:
    """{component: count} with the keys token_table, position_table, attention, mlp, norms
    (one block each), block (one block), blocks (all L), final_norm, head (0 when tied) and total.

    A config is counted on a model built on the meta device (sizes only, no memory), so the
    count is that of the tensors ANDREA really has; a tied table counts once.
    """
    if isinstance(cfg_or_model, nn.Module):
        return _count_tensors(cfg_or_model)
    from .model import ANDREA
    cfg = ModelConfig.preset(cfg_or_model) if isinstance(cfg_or_model, str) else cfg_or_model
    with torch.device("meta"):
        return _count_tensors(ANDREA(cfg))


def _count_tensors(model: nn.Module) -> dict:
    n = lambda m: sum(p.numel() for p in m.parameters()) if m is not None else 0
    n_tensor = lambda t: t.numel() if t is not None else 0
    block = model.blocks[0]
    counts = dict(token_table=model.embed.token_table.numel(),
                  position_table=n_tensor(model.embed.position_table),     # None with RoPE
                  attention=n(block.attn), mlp=n(block.mlp), norms=n(block.ln1) + n(block.ln2),
                  block=n(block), blocks=sum(n(b) for b in model.blocks),
                  final_norm=n(model.ln_f), head=n(model.head))
    counts["total"] = sum(p.numel() for p in model.parameters())   # a tied table counts once
    return counts
