"""The hot operations on PyTorch's own fused ops: the "torch" back-end (backends.py).

Each computes what the course's formula computes (the graded tests hold the learner's pieces
to these): attention with the causal mask, LayerNorm, RMSNorm in fp32, GELU in its tanh form,
SwiGLU's gate and the next-token cross-entropy.
"""
import torch
import torch.nn.functional as F


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Scaled dot-product attention.  q: (..., T, K), k, v: (..., S, K) -> (..., T, K).

    Causal: query i may see keys j <= i + (S - T) (with S - T keys cached, query i sits at
    position i + S - T). SDPA's is_causal aligns its mask to the top-left corner, so S != T
    gets an explicit mask.
    """
    T, S = q.shape[-2], k.shape[-2]
    if not causal or T == 1:
        return F.scaled_dot_product_attention(q, k, v)
    if T == S:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)   # (T, S)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, eps: float = 1e-5) -> torch.Tensor:
    """(x - mean)/sqrt(var + eps)·weight + bias over the last axis (D), biased variance."""
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """x/sqrt(mean(x²) + eps)·weight over D, computed in at least fp32, returned in x's dtype."""
    wide = torch.promote_types(x.dtype, torch.float32)
    return F.rms_norm(x.to(wide), x.shape[-1:], weight.to(wide), eps).to(x.dtype)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU in its tanh form (GPT-2's): 0.5·x·(1 + tanh(sqrt(2/pi)·(x + 0.044715·x³)))."""
    return F.gelu(x, approximate="tanh")


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Swish(gate) ⊙ up, Swish(z) = z·sigmoid(z)."""
    return F.silu(gate) * up


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss in fp32.  logits: (B, T, V), targets: (B, T), -100 = ignored."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)
