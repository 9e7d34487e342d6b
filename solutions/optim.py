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
    ### BEGIN SOLUTION
    ### SUMMARY: Linear warm-up to lr, then half a cosine down to min_lr, then min_lr.
    ### HINT: Two phases. While warming up the rate climbs in equal increments, and this course counts step 0 as the first increment, so the rate at step s is s + 1 warm-up shares of lr and the last warm-up step lands exactly on lr (starting from a rate of 0 is the other common convention, not a mistake, but not the one graded here). After warm-up turn the step into a progress fraction, 0 at the end of warm-up and 1 at max_steps, capped at 1, and let half a cosine period carry the rate from lr down to min_lr.
    ### API: math.cos and math.pi; min(1.0, f) caps a fraction; half a cosine from a down to b over a fraction p is b plus (a - b) times (1 + cos(πp)) / 2. `[round(0.5 * (1 + math.cos(math.pi * p)), 3) for p in (0, 0.5, 1)]` gives `[1.0, 0.5, 0.0]`; `min(1.0, 12 / 10)` gives `1.0`
    ### LINE: if step < warmup_steps: return lr * (step + 1) / warmup_steps; progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps)); return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))   # 0 .. 1
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))
    ### END SOLUTION


def adamw_step(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int,
               lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
    """One AdamW update of one tensor: what torch.optim.AdamW does to each parameter.

    param, grad, m, v: tensors of one shape (m and v start as zeros); step: this update's number,
    counted from 1 (the bias correction's t). Returns (param, m, v), the new values.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: One AdamW update of one tensor; returns the new param, m and v.
    ### HINT: Keep two running averages: of the gradient (its direction) and of its square (its typical size). Both start at zero, so early on they are too small; dividing each by one minus its decay rate to the power of the step number corrects that. Weight decay is a separate, plain shrink of the weights by the fraction lr times weight_decay, never added to the gradient. The step itself is lr times the corrected average over the square root of the corrected square, with eps added to that root.
    ### API: Unpack the pair betas into two numbers; a running average is beta times the old value plus (1 - beta) times the new one; ** raises to a power; .sqrt() is elementwise. `m = torch.tensor([0.]); m = 0.9 * m + (1 - 0.9) * torch.tensor([2.]); m / (1 - 0.9 ** 1)` gives `[2.]`
    ### LINE: beta1, beta2 = betas; m = beta1 * m + (1 - beta1) * grad; v = beta2 * v + (1 - beta2) * grad * grad; m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step); param = param * (1 - lr * weight_decay) - lr * m_hat / (v_hat.sqrt() + eps); return param, m, v
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad                         # running mean of g
    v = beta2 * v + (1 - beta2) * grad * grad                  # running mean of g²
    m_hat = m / (1 - beta1 ** step)                            # bias correction: both started at 0
    v_hat = v / (1 - beta2 ** step)
    param = param * (1 - lr * weight_decay)                    # decoupled: not through the gradient
    param = param - lr * m_hat / (v_hat.sqrt() + eps)
    return param, m, v
    ### END SOLUTION
