"""Graded tests, activity 10 · the optimiser: the learning-rate schedule (against the trainer's
own lr_at) and one AdamW step (against torch.optim.AdamW on the same tensors, several steps).

    lr_at(step, lr, min_lr, warmup_steps, max_steps)
    adamw_step(param, grad, m, v, step, lr, betas, eps, weight_decay) -> (param, m, v)
"""
import math

import torch

from andrea_course.grading import expect_close, expect_equal, expect_true, graded
from andrea_course.train.schedule import lr_at as trainer_lr_at

SCHEDULES = [dict(lr=6e-4, min_lr=6e-5, warmup_steps=10, max_steps=100),
             dict(lr=2e-3, min_lr=0.0, warmup_steps=1, max_steps=7),
             dict(lr=1e-3, min_lr=1e-4, warmup_steps=0, max_steps=50)]


def _want(step, s):
    return trainer_lr_at(step, **s)


def _lr_mistakes(step, s):
    lr, min_lr, W, M = s["lr"], s["min_lr"], s["warmup_steps"], s["max_steps"]
    cosine = lambda p: min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))
    after = lambda p: cosine(p) if step >= W else _want(step, s)
    return {
        "a warm-up that starts from 0 (lr·step/warmup_steps): a common convention, not this course's, "
        "where step 0 already takes a step, lr·(step + 1)/warmup_steps, and the last warm-up step "
        "reaches lr": lr * step / W if step < W else _want(step, s),
        "the cosine goes down to 0, not to min_lr: min_lr + (lr - min_lr)·(1 + cos(π·progress))/2":
            (0.5 * lr * (1 + math.cos(math.pi * min(1.0, (step - W) / max(1, M - W))))) if step >= W else _want(step, s),
        "the cosine does not reach min_lr at max_steps: progress = (step - warmup_steps)/(max_steps - warmup_steps)":
            after(min(1.0, (step - W) / M)),
        "after max_steps the cosine climbs again: clamp progress at 1 (min(1.0, ...)), the rate stays at min_lr":
            after((step - W) / max(1, M - W)),
    }


def _close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


def _check_lr(lr_at, step, s):
    got = lr_at(step, **s)
    what = f"lr_at({step}, lr={s['lr']:g}, min_lr={s['min_lr']:g}, warmup_steps={s['warmup_steps']}, max_steps={s['max_steps']})"
    want = _want(step, s)
    if not _close(got, want):
        mistake = next((m for m, w in _lr_mistakes(step, s).items() if _close(got, w) and not _close(w, want)), None)
        expect_true(False, what, f"got {got!r}, expected {want!r}",
                    "warm-up: lr·(step + 1)/warmup_steps; then a cosine from lr to min_lr over the remaining steps",
                    mistake=mistake)


@graded("optim.lr_at", points=2)
def test_lr_warm_up(student):
    lr_at = student.piece("optim", "lr_at")
    for s in SCHEDULES[:2]:
        for step in range(s["warmup_steps"] + 1):
            _check_lr(lr_at, step, s)
    s = SCHEDULES[0]
    expect_equal(round(lr_at(s["warmup_steps"] - 1, **s), 12), s["lr"], "the last warm-up step's rate",
                 hint="the warm-up reaches the peak lr at step warmup_steps - 1")


@graded("optim.lr_at", points=2)
def test_lr_cosine_reaches_min_lr_at_max_steps(student):
    lr_at = student.piece("optim", "lr_at")
    for s in SCHEDULES:
        for step in range(s["warmup_steps"], s["max_steps"] + 1, max(1, s["max_steps"] // 13)):
            _check_lr(lr_at, step, s)
        _check_lr(lr_at, s["max_steps"], s)                     # exactly min_lr there


@graded("optim.lr_at", points=1)
def test_lr_after_max_steps_stays_at_min_lr(student):
    lr_at = student.piece("optim", "lr_at")
    for s in SCHEDULES:
        for step in (s["max_steps"] + 1, s["max_steps"] + s["max_steps"] // 2, 3 * s["max_steps"]):
            _check_lr(lr_at, step, s)


# ----------------------------------------------------------------------------- AdamW
def _randn(*shape, seed, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _torch_adamw(param, grads, lr, betas, eps, weight_decay):
    """[(param, m, v) after each step] from torch.optim.AdamW."""
    p = param.clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)
    out = []
    for g in grads:
        p.grad = g.clone()
        opt.step()
        st = opt.state[p]
        out.append((p.detach().clone(), st["exp_avg"].clone(), st["exp_avg_sq"].clone()))
    return out


def _mistaken_adamw(param, grads, lr, betas, eps, weight_decay, *, correct=True, decoupled=True,
                    decay_times_lr=True, eps_inside=False):
    """The update as a typical mistake computes it: [(param, m, v) after each step]."""
    (b1, b2), p = betas, param.clone()
    m, v, out = torch.zeros_like(p), torch.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        if not decoupled:
            g = g + weight_decay * p                                  # L2: Adam, not AdamW
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        m_hat, v_hat = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if correct else (m, v)
        if decoupled:
            p = p - (lr * weight_decay if decay_times_lr else weight_decay) * p
        p = p - lr * m_hat / ((v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps)
        out.append((p, m, v))
    return out


MISTAKES = {
    "no bias correction: divide m by (1 - beta1^step) and v by (1 - beta2^step), since both start at 0":
        dict(correct=False),
    "weight decay added to the gradient (L2, that is Adam, not AdamW): decay the weights directly, "
    "param·(1 - lr·weight_decay), outside the gradient": dict(decoupled=False),
    "weight decay not scaled by lr: the weights shrink by the fraction lr·weight_decay each step":
        dict(decay_times_lr=False),
    "eps inside the square root: divide by sqrt(v̂) + eps": dict(eps_inside=True),
}


def _run_adamw(student, param, grads, lr, betas, eps, weight_decay, what):
    adamw_step = student.piece("optim", "adamw_step")
    want = _torch_adamw(param, grads, lr, betas, eps, weight_decay)
    wrong = {name: _mistaken_adamw(param, grads, lr, betas, eps, weight_decay, **how) for name, how in MISTAKES.items()}
    p, m, v = param.clone(), torch.zeros_like(param), torch.zeros_like(param)
    for t, g in enumerate(grads, start=1):
        out = adamw_step(p, g.clone(), m, v, t, lr, betas, eps, weight_decay)
        expect_true(isinstance(out, (tuple, list)) and len(out) == 3, f"adamw_step(..., step={t})",
                    f"returned {type(out).__name__}, not (param, m, v)", "return the new param, m and v")
        p, m, v = out
        if t in (1, len(grads)):
            step = f"{what}, after step {t}"
            for i, name in enumerate(("param", "m", "v")):
                expect_close(out[i], want[t - 1][i], f"{name} {step}",
                             mistakes={n: w[t - 1][i] for n, w in wrong.items()},
                             hint="m, v: running means of g and g²; bias-correct both; decay param; step")


@graded("optim.adamw_step", points=3)
def test_adamw_matches_torch(student):
    # The trainer's dtype and tiny gradients, where eps matters.
    param, grads = _randn(8, seed=40, dtype=torch.float32), [1e-6 * _randn(8, seed=41 + t, dtype=torch.float32)
                                                           for t in range(4)]
    _run_adamw(student, param, grads, lr=3e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
               what="AdamW(lr=3e-3, eps=1e-6, weight_decay=0.01) on a float32 tensor with gradients of about 1e-6")
    param, grads = _randn(4, 6, seed=30), [_randn(4, 6, seed=31 + t) for t in range(6)]
    _run_adamw(student, param, grads, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
               what="AdamW(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1) on a (4, 6) float64 tensor")


@graded("optim.adamw_step", points=2)
def test_adamw_first_step_moves_every_weight_by_about_lr(student):
    """At step 1 the corrected m̂ is g and v̂ is g²: every weight moves by lr·g/(|g| + eps), about
    lr, whatever the size of its gradient (here from 1e-3 to 1e3)."""
    param = torch.zeros(7, dtype=torch.float64)
    grad = torch.tensor([1e-3, -1e-2, 0.1, -1.0, 10.0, -100.0, 1e3], dtype=torch.float64)
    _run_adamw(student, param, [grad], lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
               what="the first step from 0 with gradients from 1e-3 to 1e3 (no weight decay)")


@graded("optim.adamw_step", points=2)
def test_adamw_weight_decay_is_decoupled(student):
    """Weights of very different sizes and gradients of zero: plain Adam's L2 term would pass
    through the normalisation and move every weight by about lr; AdamW shrinks each by lr·wd."""
    param = torch.tensor([[1e-3, 0.5], [2.0, -40.0]], dtype=torch.float64)
    grads = [torch.zeros_like(param), 0.1 * _randn(2, 2, seed=50), torch.zeros_like(param)]
    _run_adamw(student, param, grads, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5,
               what="AdamW(lr=0.1, weight_decay=0.5) on weights from 1e-3 to 40, gradients 0 at steps 1 and 3")
