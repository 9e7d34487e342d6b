"""Activity 10 · The optimiser, as the engine computes it: the trainer's own schedule
(train/schedule.py's lr_at, the learner's signature) and one tensor's update by
torch.optim.AdamW itself."""
import torch

from ..lessons import lesson
from ..train.schedule import lr_at

__all__ = list(lesson("optim").pieces)     # the pieces the learner writes (lessons.py)


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
