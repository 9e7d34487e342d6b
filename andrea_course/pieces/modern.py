"""Activity 8 · The modern block, as the engine computes it."""
import math

import torch

from ..engine import ops
from ..engine.config import ModelConfig
from ..engine.model import RMSNorm, SwiGLU, apply_rope, rope_frequencies  # noqa: F401  (RMSNorm: given in the exercise file)
from ..lessons import lesson

__all__ = list(lesson("modern").pieces)     # the pieces the learner writes (lessons.py)

rms_norm = ops.rms_norm
swiglu = ops.swiglu


def swiglu_hidden_dim(d_model: int, multiple_of: int = 256) -> int:
    """F = 8D/3 rounded up to a multiple of `multiple_of` (3·D·F = 2·D·4D)."""
    return multiple_of * math.ceil(8 * d_model / (3 * multiple_of))


def kv_cache_bytes(cfg: ModelConfig, batch: int = 1, seq_len: int | None = None, bytes_per_value: int = 2) -> int:
    """Bytes of a full KV cache: keys and values (2) for L blocks, B sequences, G heads, S positions, K wide."""
    S = cfg.context_length if seq_len is None else seq_len
    return 2 * cfg.n_layers * batch * cfg.kv_heads * S * cfg.d_head * bytes_per_value


def rope_attention(q, k, v, cos, sin, past_k, past_v):
    """(y, k_all, v_all): q and the new k turned at positions S0.. (S0 = cached), the cache
    grown by the new k and v, causal attention of q over all of it."""
    start = past_k.shape[-2]
    k_all = torch.cat([past_k, apply_rope(k, cos, sin, start)], dim=-2)
    v_all = torch.cat([past_v, v], dim=-2)
    return ops.attention(apply_rope(q, cos, sin, start), k_all, v_all), k_all, v_all
