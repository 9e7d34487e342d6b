# Your work for notebooks/09_capstone.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 10 · The optimiser: the learning-rate schedule and AdamW, what every step of
andrea-train does once backward has filled the gradients.

    lr_at(step)     linear warm-up to lr over warmup_steps, then half a cosine down to min_lr
                    at max_steps, and min_lr after that
    adamw_step      Adam's update with decoupled weight decay (Loshchilov and Hutter, 2019):
        m = beta1·m + (1 - beta1)·g                 running mean of the gradient
        v = beta2·v + (1 - beta2)·g²                running mean of its square
        m̂ = m / (1 - beta1^t),  v̂ = v / (1 - beta2^t)   bias correction: m and v start at 0
        p = p - lr·weight_decay·p - lr·m̂ / (sqrt(v̂) + eps)

Adam divides each weight's step by the size of its own recent gradients, so every weight
moves by about lr whatever its gradient's scale. Weight decay added to the gradient (L2, as
plain Adam does it) would be divided by that size too, and weights with large gradients would
hardly be decayed; AdamW decays every weight by the same fraction lr·weight_decay instead.
"""
import math

import torch


def lr_at(step: int, lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """The learning rate of optimizer step `step` (0, 1, 2, ...).

    Warm-up: step s < warmup_steps uses lr·(s + 1)/warmup_steps (step 0 already takes a small
    step; the last warm-up step reaches lr). Then a cosine from lr down to min_lr, reached
    exactly at step max_steps; every step after max_steps keeps min_lr.
    """
    # Hint: Linear warm-up to lr, then half a cosine down to min_lr, then min_lr.
    # More help: hint("optim.lr_at") in the notebook, one level at a time.
    raise NotImplementedError('optim.lr_at: not implemented yet. Hint: Linear warm-up to lr, then half a cosine down to min_lr, then min_lr.')


def adamw_step(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int,
               lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
    """One AdamW update of one tensor: what torch.optim.AdamW does to each parameter.

    param, grad, m, v: tensors of one shape (m and v start as zeros); step: this update's number,
    counted from 1 (the bias correction's t). Returns (param, m, v), the new values.
    """
    # Hint: One AdamW update of one tensor; returns the new param, m and v.
    # More help: hint("optim.adamw_step") in the notebook, one level at a time.
    raise NotImplementedError('optim.adamw_step: not implemented yet. Hint: One AdamW update of one tensor; returns the new param, m and v.')
