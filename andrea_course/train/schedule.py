"""What one optimizer step is made of, besides the model: the learning-rate schedule, which
tensors weight decay acts on, and the work a step costs (FLOPs per token).

    lr_at(step, lr, min_lr, warmup_steps, max_steps)   the schedule (exercises/optim.py's lr_at
                                                       has exactly this signature: the learner's
                                                       replaces this one in their own run)
    param_groups(model, weight_decay)                  [decayed matrices, undecayed vectors]
    matmul_weights(cfg)                                weights used in a matrix product
    flops_per_token(cfg, T)                            training FLOPs per token

A leaf: it imports only math, torch and the model's config, so the trainer, the plan
(train/plan.py) and the engine's version of the learner's pieces (pieces/optim.py) all use it.
"""
from __future__ import annotations

import math

import torch

from ..engine.config import ModelConfig


def lr_at(step: int, lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """The learning rate of optimizer step `step` (0, 1, 2, ...): a linear warm-up to lr over
    warmup_steps (step 0 already takes lr/warmup_steps; step warmup_steps - 1 reaches lr), then
    half a cosine down to min_lr, reached at max_steps, and min_lr after that."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay every matrix (linear weights, the token and position tables, the head); not the
    vectors (biases, LayerNorm/RMSNorm gains). Weight decay pulls a tensor towards zero: for a
    matrix it keeps the weights small and the model smooth; a gain pulled to 0 would just shrink
    the signal the norm has worked to set to scale, and a bias has too few numbers to overfit."""
    decay, no_decay = [], []
    for p in model.parameters():          # a tied table appears once
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def matmul_weights(cfg: ModelConfig) -> int:
    """The weights a token meets in a matrix product, per forward pass: in each of the L blocks
    the q, k, v projection (D -> (H + 2G)·K), W_O (D -> D) and the MLP (2·D·F, or 3·D·F for
    SwiGLU's gate, up and down), then the head (D -> V: the token table itself when tied). The
    lookups (the token table's rows, the position table) are not products, RoPE has no weights,
    and biases are additions."""
    D, F, K = cfg.d_model, cfg.d_ff, cfg.d_head
    attention = D * (cfg.n_heads + 2 * cfg.kv_heads) * K + D * D
    mlp = (3 if cfg.mlp == "swiglu" else 2) * D * F
    return cfg.n_layers * (attention + mlp) + cfg.vocab_size * D


def flops_per_token(cfg: ModelConfig, T: int) -> float:
    """Training FLOPs per token at sequence length T, forward and backward, as model-FLOPs
    utilisation counts them (PaLM's appendix B, nanoGPT): 6 per matmul weight (2 forward, 4
    backward: the gradients of the input and of the weight) and, in each block, attention's
    scores and weighted sum, 4·T·H·K = 4·T·D forward and twice that backward (12·L·D·T; the
    causal mask and any recomputation are not discounted nor added). tests/train/test_plan.py holds
    this to PyTorch's FlopCounterMode, option by option."""
    return 6 * matmul_weights(cfg) + 12 * cfg.n_layers * cfg.d_model * T
