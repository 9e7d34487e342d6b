"""PyTorch's fused versions of the course's hot operations.

Each computes exactly what the reference piece computes (tests/test_model.py checks it) and
is what ANDREA runs with cfg.kernels == "torch" wherever the reference piece is in use:
the teaching code defines the model, the fused op makes it as fast as a plain PyTorch GPT.
"""
import torch
import torch.nn.functional as F


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Causal scaled dot-product attention.  q: (B, H, T, K), k, v: (B, H, S, K) -> (B, H, T, K).

    With S > T (keys cached) query i sits at position i + S - T; SDPA's is_causal aligns the
    mask to the top-left corner, so that case gets an explicit mask.
    """
    T, S = q.shape[-2], k.shape[-2]
    if not causal or T == 1:
        return F.scaled_dot_product_attention(q, k, v)
    if T == S:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    allowed = torch.arange(S, device=q.device)[None, :] <= torch.arange(T, device=q.device)[:, None] + (S - T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def layer_norm(x, weight, bias, eps: float = 1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def rms_norm(x, weight, eps: float = 1e-5):
    return F.rms_norm(x.float(), x.shape[-1:], weight.float(), eps).to(x.dtype)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def swiglu(gate, up):
    return F.silu(gate) * up
