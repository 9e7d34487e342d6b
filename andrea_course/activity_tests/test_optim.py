"""Graded tests, activity 10 · the optimiser: the learning-rate schedule (against the trainer's
own lr_at) and one AdamW step (against torch.optim.AdamW on the same tensors, several steps).

    lr_at(step, lr, min_lr, warmup_steps, max_steps)
    adamw_step(param, grad, m, v, step, lr, betas, eps, weight_decay) -> (param, m, v)
"""
import math

import torch
from torch.optim.adamw import adamw as torch_adamw

from andrea_course.grading import (Case, Second, expect_cases, expect_close, expect_equal, expect_runs, expect_true,
                                   graded)
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
    progress = min(1.0, (step - W) / max(1, M - W))
    full_period = min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(2 * math.pi * progress))
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
        "a full cosine period, cos(2π·progress), that falls to min_lr halfway and climbs back to lr by max_steps: "
        "half a period, cos(π·progress), carries the rate from lr down to min_lr":
            full_period if step >= W else _want(step, s),
        "step warmup_steps still treated as warm-up (step <= warmup_steps), so its rate overshoots to "
        "lr·(warmup_steps + 1)/warmup_steps: warm up only while step < warmup_steps, then the cosine starts at lr":
            (lr * (step + 1) / W if step == W else _want(step, s)) if W > 0 else None,   # W = 0: a ZeroDivisionError
        "a straight line from lr down to min_lr after warm-up: the decay is half a cosine, min_lr + (lr - min_lr)·"
        "(1 + cos(π·progress))/2": min_lr + (lr - min_lr) * (1 - progress) if step >= W else _want(step, s),
        "the cosine's 0.5 forgotten, so the rate starts the decay at 2·lr - min_lr: "
        "min_lr + 0.5·(lr - min_lr)·(1 + cos(π·progress))":
            min_lr + (lr - min_lr) * (1 + math.cos(math.pi * progress)) if step >= W else _want(step, s),
        "the progress computed with // (integer division): it is 0 until max_steps, so the rate stays at lr and "
        "drops to min_lr at once; progress = (step - warmup_steps) / (max_steps - warmup_steps)":
            after(min(1.0, (step - W) // max(1, M - W))) if step >= W else _want(step, s),
        "the cosine's progress counted from step 0, step/(max_steps - warmup_steps), so the decay starts "
        "part-way down: count from the end of warm-up, (step - warmup_steps)/(max_steps - warmup_steps)":
            after(min(1.0, step / max(1, M - W))),
        "the cosine's progress counted from step 0 over the whole run, step/max_steps, so the decay starts "
        "part-way down: count from the end of warm-up, (step - warmup_steps)/(max_steps - warmup_steps)":
            after(min(1.0, step / max(1, M))),
        "cos(progress) without π: the cosine covers only one radian, so the rate ends well above min_lr; "
        "half a cosine period is cos(π·progress)":
            min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(progress)) if step >= W else _want(step, s),
        "the cosine's amplitude is lr instead of lr - min_lr, so the decay starts at lr + min_lr and ends at "
        "min_lr: min_lr + 0.5·(lr - min_lr)·(1 + cos(π·progress))":
            min_lr + 0.5 * lr * (1 + math.cos(math.pi * progress)) if step >= W else _want(step, s),
        "a quarter cosine, cos(π·progress/2), instead of half a cosine: the same ends (lr, then min_lr), but another "
        "decay in between; min_lr + (lr - min_lr)·(1 + cos(π·progress))/2":
            min_lr + (lr - min_lr) * math.cos(math.pi * progress / 2) if step >= W else _want(step, s),
    }


def _rate(value):
    """A learning rate as a float64 0-d tensor, for the judge (anything else as it is)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return value


LR_HINT = "warm-up: lr·(step + 1)/warmup_steps; then a cosine from lr to min_lr over the remaining steps"


def _lr_case(lr_at, step, s):
    what = (f"lr_at({step}, lr={s['lr']:g}, min_lr={s['min_lr']:g}, warmup_steps={s['warmup_steps']}, "
            f"max_steps={s['max_steps']})")
    return Case(what, lambda: _rate(lr_at(step, s["lr"], s["min_lr"], s["warmup_steps"], s["max_steps"])),   # as the trainer calls it
                _rate(_want(step, s)),
                {name: _rate(value) for name, value in _lr_mistakes(step, s).items()
                 if value is None or value != _want(step, s)})


def _check_lrs(lr_at, points):
    """lr_at at every (step, schedule) of `points`; a named mistake confirmed at another of them."""
    expect_cases(*(_lr_case(lr_at, step, s) for step, s in points), atol=1e-15, rtol=1e-9, hint=LR_HINT)


@graded("optim.lr_at", points=2)
def test_lr_warm_up(student):
    lr_at = student.piece("optim", "lr_at")
    _check_lrs(lr_at, [(step, s) for s in SCHEDULES for step in range(s["warmup_steps"] + 1)])   # W = 0 too
    s = SCHEDULES[0]
    expect_equal(round(lr_at(s["warmup_steps"] - 1, **s), 12), s["lr"], "the last warm-up step's rate",
                 hint="the warm-up reaches the peak lr at step warmup_steps - 1")


@graded("optim.lr_at", points=2)
def test_lr_cosine_reaches_min_lr_at_max_steps(student):
    lr_at = student.piece("optim", "lr_at")
    _check_lrs(lr_at, [(step, s) for s in SCHEDULES
                       for step in [*range(s["warmup_steps"], s["max_steps"] + 1, max(1, s["max_steps"] // 13)),
                                    s["max_steps"]]])                  # exactly min_lr at max_steps


NO_DECAY = dict(lr=1e-3, min_lr=1e-4, warmup_steps=20, max_steps=20)     # warm-up the whole run: no cosine left
DECAY_BY_ZERO = ("the progress divided by max_steps - warmup_steps with no guard: when warm-up lasts the whole run "
                 "(warmup_steps == max_steps) that is 0, and every step after it raised ZeroDivisionError; divide by "
                 "max(1, max_steps - warmup_steps)")


def _unguarded_progress(step, s):
    """The slip: the length of the decay not guarded, (step - warmup_steps) / (max_steps - warmup_steps)."""
    return lambda: min(1.0, (step - s["warmup_steps"]) / (s["max_steps"] - s["warmup_steps"]))


@graded("optim.lr_at", points=1)
def test_lr_after_max_steps_stays_at_min_lr(student):
    lr_at = student.piece("optim", "lr_at")
    s, after = NO_DECAY, NO_DECAY["max_steps"] + 1
    expect_runs(lambda: lr_at(after, **s), f"lr_at({after}, {s})", mistakes={DECAY_BY_ZERO: _unguarded_progress(after, s)},
                second=Second(lambda: lr_at(after + 4, **s), None, {DECAY_BY_ZERO: _unguarded_progress(after + 4, s)}),
                hint="after max_steps the rate is min_lr, also when warm-up lasted the whole run")
    _check_lrs(lr_at, [*((step, s) for s in SCHEDULES
                         for step in (s["max_steps"] + 1, s["max_steps"] + 5, s["max_steps"] + s["max_steps"] // 2,
                                      3 * s["max_steps"])),
                       *((step, s) for step in (after, after + 4, after + 6))])


# ----------------------------------------------------------------------------- AdamW
def _randn(*shape, seed, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _torch_adamw(param, grads, lr, betas, eps, weight_decay):
    """[(param, m, v) after each step] from PyTorch's AdamW, through its functional form
    (torch.optim.adamw.adamw, the very function torch.optim.AdamW.step calls): building the
    optimizer object would import torch's compiler stack, seconds per run, for the same numbers."""
    p, m, v, out = param.clone(), torch.zeros_like(param), torch.zeros_like(param), []
    step = torch.tensor(0.0)
    for g in grads:
        torch_adamw([p], [g.clone()], [m], [v], [], [step], foreach=False, capturable=False, differentiable=False,
                    fused=None, grad_scale=None, found_inf=None, has_complex=False, amsgrad=False,
                    beta1=betas[0], beta2=betas[1], lr=lr, weight_decay=weight_decay, eps=eps, maximize=False)
        out.append((p.clone(), m.clone(), v.clone()))
    return out


def _mistaken_adamw(param, grads, lr, betas, eps, weight_decay, *, correct="mv", decoupled=True,
                    decay_times_lr=True, eps_inside=False, v_of_g=False, swapped="", from_zero=False,
                    return_hats=False, root=True, m_v_returned_swapped=False, power_of_one_minus=False,
                    m_weights_swapped=False, ascent=False, times_not_power="", l2_too=False, one_behind=False,
                    decay_after=False, eps_hat=False, v_new_by_beta1=False):
    """The update as a typical mistake computes it: [(param, m, v) after each step].

    correct: which of the running means are bias-corrected ("mv" both, "m" or "v" one, "" neither);
    swapped: "all" (beta2, beta1 = betas: every beta swapped), "means" (the running means swapped,
    the bias correction right); v_of_g: v averages g (True), |g| ("abs") or g² (False); return_hats:
    m̂ and v̂ returned, and so fed to the next step; not root: divided by v̂ + eps, no square root; m_v_returned_swapped: (param, v, m) returned, and so
    fed back as m and v swapped; power_of_one_minus: the correction divides by (1 - beta)^step;
    m_weights_swapped: m = beta1·g + (1 - beta1)·m; ascent: the step added, not subtracted;
    times_not_power: which corrections ("m", "mv") divide by 1 - beta·step instead of 1 - beta^step;
    l2_too: the decay added to the gradient as well as decoupled; one_behind: corrected with beta^(step - 1);
    decay_after: the weights decayed after the step, the update shrunk with them; eps_hat: the bias
    corrections folded into the step size, eps added to sqrt(v) before v's correction divides it;
    v_new_by_beta1: v's new term weighted by 1 - beta1, v = beta2·v + (1 - beta1)·g²."""
    (b1, b2), p = betas, param.clone()
    c1, c2 = b1, b2                                                   # the betas of the bias correction
    if swapped:
        b1, b2 = b2, b1
        c1, c2 = (b1, b2) if swapped == "all" else (c1, c2)
    m, v, out = torch.zeros_like(p), torch.zeros_like(p), []
    for t, g in enumerate(grads, start=1):
        if not decoupled or l2_too:
            g = g + weight_decay * p                                  # L2: Adam, not AdamW
        m, v = (b1 * g + (1 - b1) * m if m_weights_swapped else b1 * m + (1 - b1) * g,
                b2 * v + (1 - (b1 if v_new_by_beta1 else b2)) * {True: g, "abs": g.abs(), False: g * g}[v_of_g])
        n = t + 1 if from_zero else t - 1 if one_behind else t
        m_hat = m / (1 - (c1 * n if "m" in times_not_power else c1 ** n)) if "m" in correct else m
        v_hat = v / (1 - (c2 * n if "v" in times_not_power else c2 ** n)) if "v" in correct else v
        if power_of_one_minus:
            m_hat, v_hat = m / (1 - c1) ** n, v / (1 - c2) ** n
        decay = (lr * weight_decay if decay_times_lr else weight_decay) if decoupled else 0.0
        p = p if decay_after else p - decay * p
        if eps_hat:                                   # lr·sqrt(1 - beta2^t)/(1 - beta1^t)·m / (sqrt(v) + eps)
            p = p - lr * math.sqrt(1 - c2 ** n) / (1 - c1 ** n) * m / (v.sqrt() + eps)
        else:
            p = p - (-1 if ascent else 1) * lr * m_hat / ((v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps
                                                          if root else v_hat + eps)
        p = p - decay * p if decay_after else p
        if return_hats:
            m, v = m_hat, v_hat
        if m_v_returned_swapped:
            m, v = v, m                                   # the caller reads them back in this order
        out.append((p, None, None) if swapped == "means" else (p, m, v))   # its m, v: those of "all" (None: not listed)
    return out


MISTAKES = {
    "no bias correction: divide m by (1 - beta1^step) and v by (1 - beta2^step), since both start at 0":
        dict(correct=""),
    "m not bias-corrected (v is): divide m by (1 - beta1^step) as well, since it starts at 0 too":
        dict(correct="v"),
    "v not bias-corrected (m is): divide v by (1 - beta2^step) as well, since it starts at 0 too":
        dict(correct="m"),
    "weight decay added to the gradient (L2, that is Adam, not AdamW): AdamW's decay never goes through the "
    "gradient, m or v; it only shrinks the weights directly, param·(1 - lr·weight_decay)": dict(decoupled=False),
    "weight decay applied twice: added to the gradient (L2, which m and v then average and sqrt(v̂) divides) "
    "and decayed directly as well; AdamW's decay is only the direct one, param·(1 - lr·weight_decay)":
        dict(l2_too=True),
    "the bias correction one step behind, 1 - beta^(step - 1): step already counts from 1, so at step 1 that "
    "divides by 1 - beta^0 = 0; divide by 1 - beta1^step and 1 - beta2^step": dict(one_behind=True),
    "weight decay not scaled by lr: the weights shrink by the fraction lr·weight_decay each step":
        dict(decay_times_lr=False),
    "eps inside the square root: divide by sqrt(v̂) + eps": dict(eps_inside=True),
    "v averages g instead of g²: v = beta2·v + (1 - beta2)·g·g, the running mean of the gradient's square":
        dict(v_of_g=True),
    "v averages |g| instead of g²: v = beta2·v + (1 - beta2)·g·g, the running mean of the gradient's square "
    "(its root, sqrt(v̂), then has the gradient's scale)": dict(v_of_g="abs"),
    "divided by v̂ instead of its square root: v̂ is a mean of squares, so the step is m̂ / (sqrt(v̂) + eps)":
        dict(root=False),
    "beta1 and beta2 swapped: betas is (beta1, beta2), so unpack it as beta1, beta2 = betas; m averages g "
    "with beta1, v averages g² with beta2": dict(swapped="all"),
    "beta1 and beta2 swapped in the running means: m averages g with beta1, v averages g² with beta2, "
    "the betas your bias correction already divides by": dict(swapped="means"),
    "the bias correction counts from 0 (1 - beta^(step + 1)): step already counts from 1, so divide by "
    "1 - beta1^step and 1 - beta2^step": dict(from_zero=True),
    "the bias correction divides by (1 - beta)^step instead of 1 - beta^step: the power goes on beta alone, "
    "m / (1 - beta1 ** step)": dict(power_of_one_minus=True),
    "(param, v, m) returned: the order is (param, m, v), and the caller feeds them back in that order":
        dict(m_v_returned_swapped=True),
    "returned the bias-corrected m̂ and v̂: return the running means m and v themselves, which the next "
    "step averages and corrects again": dict(return_hats=True),
    "the running mean's weights swapped, m = beta1·g + (1 - beta1)·m: it keeps 90% of the new gradient and 10% of "
    "the history; m = beta1·m + (1 - beta1)·g": dict(m_weights_swapped=True),
    "weight decay applied after the Adam step, to the updated weights: (param - lr·m̂/(sqrt(v̂) + eps))·"
    "(1 - lr·weight_decay) shrinks the step too; decay the old weights first, param·(1 - lr·weight_decay), "
    "then subtract lr·m̂/(sqrt(v̂) + eps)": dict(decay_after=True),
    "eps added to sqrt(v) before the bias correction (the bias correction folded into the step size, "
    "lr·sqrt(1 - beta2^step)/(1 - beta1^step)·m/(sqrt(v) + eps), the 'epsilon hat' form): against the "
    "corrected sqrt(v̂) that eps weighs 1/sqrt(1 - beta2^step) times more, so in the first steps small gradients "
    "take smaller steps; add eps to the corrected root: lr·m̂/(sqrt(v̂) + eps)": dict(eps_hat=True),
    "v's new term weighted by 1 - beta1, v = beta2·v + (1 - beta1)·g² (the line above copied?): v's weights are "
    "beta2 and 1 - beta2, so that they sum to 1; v = beta2·v + (1 - beta2)·g²": dict(v_new_by_beta1=True),
    "the step added instead of subtracted (param + lr·m̂/...): that is gradient ascent, uphill; the update is "
    "param - lr·m̂ / (sqrt(v̂) + eps)": dict(ascent=True),
    "m's bias correction divides by 1 - beta1·step instead of 1 - beta1^step (* for **): from step 2 on that is "
    "negative; m / (1 - beta1 ** step)": dict(times_not_power="m"),
    "the bias corrections divide by 1 - beta·step instead of 1 - beta^step (* for **): from step 2 on that is "
    "negative; m / (1 - beta1 ** step) and v / (1 - beta2 ** step)": dict(times_not_power="mv"),
}


ADAMW_HINT = "m, v: running means of g and g²; bias-correct both; decay param; step"


def _adamw_run(adamw_step, param, grads, lr, betas, eps, weight_decay):
    """The learner's adamw_step applied step by step: [(param, m, v) after each step] (an error or a
    value that is not a triple ends the run with that value)."""
    p, m, v, out = param.clone(), torch.zeros_like(param), torch.zeros_like(param), []
    for t, g in enumerate(grads, start=1):
        step = adamw_step(p, g.clone(), m, v, t, lr, betas, eps, weight_decay)
        out.append(step)
        if not (isinstance(step, (tuple, list)) and len(step) == 3):
            break
        p, m, v = (x.clone() if isinstance(x, torch.Tensor) else x for x in step)
    return out


def _run_adamw(student, setup, other):
    """setup, other: (param, grads, lr, betas, eps, weight_decay, what). After step 1 and after the
    last step of `setup`, param, m and v against torch.optim.AdamW; a named mistake is confirmed at
    the same step of `other`."""
    adamw_step = student.piece("optim", "adamw_step")
    runs = {}

    def expectations(config):
        param, grads, lr, betas, eps, wd, _ = config
        want = _torch_adamw(param, grads, lr, betas, eps, wd)
        tiny = max(g.abs().max().item() for g in grads) < 1e-3        # eps outweighs v: |g| looks like g² there
        wrong = {name: _mistaken_adamw(param, grads, lr, betas, eps, wd, **how) for name, how in MISTAKES.items()
                 if not (tiny and how.get("v_of_g") == "abs")}
        return want, wrong

    def run(config):
        if id(config) not in runs:
            runs[id(config)] = _adamw_run(adamw_step, *config[:6])
        return runs[id(config)]

    def learner(config, t, i):
        out = run(config)
        step = out[min(t, len(out)) - 1]
        return step[i] if isinstance(step, (tuple, list)) and len(step) == 3 else step

    want, wrong = expectations(setup)
    want2, wrong2 = expectations(other)
    n, n2, what = len(setup[1]), len(other[1]), setup[6]
    for t, t2 in ((1, 1), (n, n2)):
        out = run(setup)
        step = out[min(t, len(out)) - 1]
        expect_true(isinstance(step, (tuple, list)) and len(step) == 3, f"adamw_step(..., step={min(t, len(out))})",
                    f"returned {type(step).__name__}, not (param, m, v)", "return the new param, m and v")
        kept = {n: s.dtype for n, s in zip(("param", "m", "v"), step) if isinstance(s, torch.Tensor)}
        narrow = {n: d for n, d in kept.items() if d.is_floating_point and d.itemsize < setup[0].dtype.itemsize}
        expect_true(not narrow, f"adamw_step(..., step={min(t, len(out))})",
                    ", ".join(f"{n} is {str(d).removeprefix('torch.')}" for n, d in narrow.items()) +
                    f" for a {str(setup[0].dtype).removeprefix('torch.')} param",
                    "keep param, m and v at least as wide as the param's dtype", mistake=(
                        "the optimiser's state kept in a narrower dtype than the param: m and v in float16 (or "
                        "bfloat16) lose precision, and a small gradient's square underflows to 0 in v, so that "
                        "weight's step becomes lr·m̂/eps; AdamW keeps m and v in the param's own dtype"))
        for i, name in enumerate(("param", "m", "v")):
            expect_close(step[i], want[t - 1][i], f"{name} {what}, after step {t}",
                         mistakes={k: w[t - 1][i] for k, w in wrong.items() if _tells(k, t, i)},
                         second=Second(lambda i=i, t2=t2: learner(other, t2, i), want2[t2 - 1][i],
                                       {k: w[t2 - 1][i] for k, w in wrong2.items() if _tells(k, t2, i)}),
                         hint=ADAMW_HINT)


def _tells(mistake: str, step: int, output: int) -> bool:
    """Whether the mistake can be told from the others in output `output` (0 param, 1 m, 2 v) after
    `step`: the correction one step behind divides by 0 at step 1, and its NaN, carried on, is every
    later NaN's; the decay applied twice has the L2 mistake's m and v (and its text covers both); v's
    new term by 1 - beta1 has, after step 1, the swapped betas' v (its param differs, and is checked first)."""
    how = MISTAKES[mistake]
    return (not (how.get("one_behind") and step > 1) and not (how.get("l2_too") and output > 0)
            and not (how.get("v_new_by_beta1") and step == 1 and output == 2))


@graded("optim.adamw_step", points=3)
def test_adamw_matches_torch(student):
    # The trainer's dtype and tiny gradients, where eps matters.
    small = (_randn(2, 4, seed=40, dtype=torch.float32),
             [1e-6 * _randn(2, 4, seed=41 + t, dtype=torch.float32) for t in range(4)], 3e-3, (0.9, 0.999), 1e-6, 0.01,
             "AdamW(lr=3e-3, eps=1e-6, weight_decay=0.01) on a (2, 4) float32 weight with gradients of about 1e-6")
    wide = (_randn(4, 6, seed=30), [_randn(4, 6, seed=31 + t) for t in range(6)], 1e-2, (0.9, 0.95), 1e-8, 0.1,
            "AdamW(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1) on a (4, 6) float64 tensor")
    small64 = (_randn(5, seed=42), [2e-6 * _randn(5, seed=43 + t) for t in range(3)], 2e-3, (0.9, 0.999), 1e-6, 0.05,
               "AdamW(lr=2e-3, eps=1e-6, weight_decay=0.05) on a float64 tensor with gradients of about 2e-6")
    wide2 = (_randn(3, 5, seed=60), [_randn(3, 5, seed=61 + t) for t in range(5)], 3e-2, (0.8, 0.9), 1e-8, 0.2,
             "AdamW(lr=3e-2, betas=(0.8, 0.9), weight_decay=0.2) on a (3, 5) float64 tensor")
    flat = (_randn(8, seed=70, dtype=torch.float32), [1e-6 * _randn(8, seed=71 + t, dtype=torch.float32) for t in range(3)],
            3e-3, (0.9, 0.999), 1e-6, 0.01,
            "AdamW(lr=3e-3, eps=1e-6, weight_decay=0.01) on a (8,) float32 bias with gradients of about 1e-6")
    _run_adamw(student, small, small64)
    _run_adamw(student, flat, small64)
    _run_adamw(student, wide, wide2)


@graded("optim.adamw_step", points=2)
def test_adamw_first_step_moves_every_weight_by_about_lr(student):
    """At step 1 the corrected m̂ is g and v̂ is g²: every weight moves by lr·g/(|g| + eps), about
    lr, whatever the size of its gradient (here from 1e-3 to 1e3)."""
    grad = torch.tensor([1e-3, -1e-2, 0.1, -1.0, 10.0, -100.0, 1e3], dtype=torch.float64)
    first = (torch.zeros(7, dtype=torch.float64), [grad], 0.01, (0.9, 0.999), 1e-8, 0.0,
             "the first step from 0 with gradients from 1e-3 to 1e3 (no weight decay)")
    other = (torch.ones(6, dtype=torch.float64), [torch.tensor([2e-5, 2e-3, -0.5, 4.0, -30.0, 500.0], dtype=torch.float64)],
             0.05, (0.8, 0.99), 1e-8, 0.0, "the first step from 1 with gradients from 2e-5 to 500 (no weight decay)")
    _run_adamw(student, first, other)


@graded("optim.adamw_step", points=2)
def test_adamw_weight_decay_is_decoupled(student):
    """Weights of very different sizes and gradients of zero: plain Adam's L2 term would pass
    through the normalisation and move every weight by about lr; AdamW shrinks each by lr·wd."""
    param = torch.tensor([[1e-3, 0.5], [2.0, -40.0]], dtype=torch.float64)
    grads = [torch.zeros_like(param), 0.1 * _randn(2, 2, seed=50), torch.zeros_like(param)]
    param2 = torch.tensor([3.0, -0.02, 15.0], dtype=torch.float64)
    grads2 = [torch.zeros_like(param2), 0.2 * _randn(3, seed=51), torch.zeros_like(param2), torch.zeros_like(param2)]
    _run_adamw(student, (param, grads, 0.1, (0.9, 0.999), 1e-8, 0.5,
                         "AdamW(lr=0.1, weight_decay=0.5) on weights from 1e-3 to 40, gradients 0 at steps 1 and 3"),
               (param2, grads2, 0.05, (0.9, 0.999), 1e-8, 0.3,
                "AdamW(lr=0.05, weight_decay=0.3) on weights from 0.02 to 15, gradients 0 at steps 1, 3 and 4"))
