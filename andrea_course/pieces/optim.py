"""Activity 10 · The optimiser, as the engine computes it: the trainer's schedule
(train/trainer.py's lr_at) and one tensor's update by torch.optim.AdamW itself."""
import torch

from ..train.settings import TrainConfig
from ..train.trainer import lr_at as _trainer_lr_at
from ..lessons import lesson

__all__ = list(lesson("optim").pieces)     # the pieces the learner writes (lessons.py)


def lr_at(step: int, lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """The trainer's schedule: linear warm-up, then a cosine to min_lr at max_steps."""
    return _trainer_lr_at(step, TrainConfig(lr=lr, min_lr=min_lr, warmup_steps=warmup_steps, max_steps=max_steps))


def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """(param, m, v) after one torch.optim.AdamW step from the state (m, v, step - 1)."""
    p = param.detach().clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)
    opt.state[p] = {"step": torch.tensor(float(step - 1)), "exp_avg": m.detach().clone(),
                    "exp_avg_sq": v.detach().clone()}
    p.grad = grad.detach().clone()
    opt.step()
    state = opt.state[p]
    return p.detach(), state["exp_avg"], state["exp_avg_sq"]
