"""AdamW made of a per-tensor update function: how a run trains with the learner's adamw_step.

    opt = StepwiseAdamW(param_groups(model, 0.1), update=adamw_step, lr=3e-3, betas=(0.9, 0.95))
    loss.backward(); opt.step(); opt.zero_grad()

`update(param, grad, m, v, step, lr, betas, eps, weight_decay) -> (param, m, v)` is
exercises/optim.py's adamw_step: one tensor's new weights and running means from the old, with
`step` counted from 1. StepwiseAdamW is a real torch.optim.Optimizer: parameter groups (the
trainer decays the matrices only), the learning rate set per group by the schedule, and state
kept by parameter under torch.optim.AdamW's own names (step, exp_avg, exp_avg_sq), so its
state_dict saves and loads as AdamW's does: checkpoints, --resume, torch.distributed.checkpoint,
even a run resumed with the other optimizer.
"""
from __future__ import annotations

import torch


class StepwiseAdamW(torch.optim.Optimizer):
    """AdamW whose update of each tensor is `update` (see the module's docstring)."""

    def __init__(self, params, update, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        if not callable(update):
            raise TypeError(f"update must be a function (param, grad, m, v, step, lr, betas, eps, weight_decay) "
                            f"-> (param, m, v), got {type(update).__name__}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        self.update = update

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:                        # as torch.optim.AdamW starts a tensor's state
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                out = self.update(p.detach(), p.grad, m, v, int(state["step"]), group["lr"], group["betas"],
                                  group["eps"], group["weight_decay"])
                if not (isinstance(out, (tuple, list)) and len(out) == 3):
                    raise TypeError(f"the AdamW update returned {type(out).__name__}, not (param, m, v)")
                for name, target, new in zip(("param", "m", "v"), (p, m, v), out):
                    if not isinstance(new, torch.Tensor) or new.shape != target.shape:
                        got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
                        raise ValueError(f"the AdamW update returned {name} of shape {got} for a parameter of "
                                         f"shape {tuple(target.shape)}")
                    if new is not target:
                        target.copy_(new)
        return loss
