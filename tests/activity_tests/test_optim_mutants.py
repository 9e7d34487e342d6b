"""Mutation tests of andrea_course/activity_tests/test_optim.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import math

import torch

from mutant_checks import the_graded_test_names_the_mistake


# ----- the mutants: what a learner typically writes instead -----

def _lr(warmup_from_zero=False, to_zero=False, over_max_steps=False, no_clamp=False):
    def lr_at(step, lr, min_lr, warmup_steps, max_steps):
        if step < warmup_steps:
            return lr * (step if warmup_from_zero else step + 1) / warmup_steps
        span = max_steps if over_max_steps else max(1, max_steps - warmup_steps)
        progress = (step - warmup_steps) / span
        progress = progress if no_clamp else min(1.0, progress)
        low = 0.0 if to_zero else min_lr
        return low + 0.5 * (lr - low) * (1 + math.cos(math.pi * progress))
    return lr_at


def _adamw(correct="mv", decoupled=True, decay_times_lr=True, eps_inside=False, root=True, v_of=lambda g: g * g,
           v_by_beta1=False):
    def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        (b1, b2) = betas
        if not decoupled:
            grad = grad + weight_decay * param
        m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - (b1 if v_by_beta1 else b2)) * v_of(grad)
        m_hat = m / (1 - b1 ** step) if "m" in correct else m
        v_hat = v / (1 - b2 ** step) if "v" in correct else v
        if decoupled:
            param = param * (1 - (lr * weight_decay if decay_times_lr else weight_decay))
        denom = (v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps if root else v_hat + eps
        return param - lr * m_hat / denom, m, v
    return adamw_step


# ----- the twelfth fresh set's mutants -----

def _lr_unguarded(step, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def _lr_with_cosine(cosine):
    def lr_at(step, lr, min_lr, warmup_steps, max_steps):
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
        return min_lr + (lr - min_lr) * cosine(progress)
    return lr_at


def _adamw_slipping(swap_m=False, ascent=False, times="", l2_too=False, power=lambda step: step):
    def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        beta1, beta2 = betas
        grad = grad + weight_decay * param if l2_too else grad
        m = beta1 * grad + (1 - beta1) * m if swap_m else beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        m_hat = m / (1 - (beta1 * step if "m" in times else beta1 ** power(step)))
        v_hat = v / (1 - (beta2 * step if "v" in times else beta2 ** power(step)))
        param = param * (1 - lr * weight_decay)
        update = lr * m_hat / (v_hat.sqrt() + eps)
        return (param + update if ascent else param - update), m, v
    return adamw_step


def _lr_amplitude_lr(step, lr, min_lr, warmup_steps, max_steps):
    """The cosine's amplitude lr, not lr - min_lr."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr + 0.5 * lr * (1 + math.cos(math.pi * progress))


# ----- the sixteenth fresh set's mutants -----

def _adamw_decay_after(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    (b1, b2) = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
    param = param - lr * (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + eps)
    return param * (1 - lr * weight_decay), m, v                          # the decay after the step


def _adamw_eps_hat(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    (b1, b2) = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
    param = param * (1 - lr * weight_decay)
    return param - lr * math.sqrt(1 - b2 ** step) / (1 - b1 ** step) * m / (v.sqrt() + eps), m, v


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(root=False)},
     "divided by v̂ instead of its square root"),
    # the optimiser (notebook 09)
    ("test_optim.py", "test_lr_warm_up", {("optim", "lr_at"): _lr(warmup_from_zero=True)}, "a common convention, not this course"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps", {("optim", "lr_at"): _lr(to_zero=True)},
     "goes down to 0"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps", {("optim", "lr_at"): _lr(over_max_steps=True)},
     "does not reach min_lr"),
    ("test_optim.py", "test_lr_after_max_steps_stays_at_min_lr", {("optim", "lr_at"): _lr(no_clamp=True)},
     "climbs again"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="")}, "no bias correction"),
    ("test_optim.py", "test_adamw_first_step_moves_every_weight_by_about_lr",
     {("optim", "adamw_step"): _adamw(correct="")}, "no bias correction"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(decoupled=False)},
     "added to the gradient (L2"),
    ("test_optim.py", "test_adamw_weight_decay_is_decoupled", {("optim", "adamw_step"): _adamw(decoupled=False)},
     "added to the gradient (L2"),
    ("test_optim.py", "test_adamw_weight_decay_is_decoupled", {("optim", "adamw_step"): _adamw(decay_times_lr=False)},
     "not scaled by lr"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(eps_inside=True)},
     "eps inside the square root"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(v_by_beta1=True)},
     "v's new term weighted by 1 - beta1"),
    # the twelfth fresh set's classes
    ("test_optim.py", "test_lr_after_max_steps_stays_at_min_lr", {("optim", "lr_at"): _lr_unguarded},
     "ZeroDivisionError"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps",
     {("optim", "lr_at"): _lr_with_cosine(lambda p: 0.5 * (1 + math.cos(p)))}, "without π"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps",
     {("optim", "lr_at"): _lr_with_cosine(lambda p: math.cos(math.pi * p / 2))}, "a quarter cosine"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(swap_m=True)},
     "weights swapped"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(ascent=True)},
     "gradient ascent"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(times="m")},
     "m's bias correction divides by 1 - beta1·step"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(times="mv")},
     "the bias corrections divide by 1 - beta·step"),
    # the eleventh fresh set's classes
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="v")}, "m not bias-corrected"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="m")}, "v not bias-corrected"),
    ("test_optim.py", "test_adamw_first_step_moves_every_weight_by_about_lr", {("optim", "adamw_step"): _adamw(v_of=torch.abs)},
     "v averages |g|"),
    # the sixteenth fresh set's classes
    ("test_optim.py", "test_lr_warm_up", {("optim", "lr_at"): _lr_amplitude_lr}, "amplitude is lr instead of lr - min_lr"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(l2_too=True)},
     "weight decay applied twice"),
    ("test_optim.py", "test_adamw_matches_torch",
     {("optim", "adamw_step"): _adamw_slipping(power=lambda step: step - 1)}, "one step behind"),
    *(("test_optim.py", test, {("optim", "adamw_step"): _adamw_decay_after}, "weight decay applied after the Adam step")
      for test in ("test_adamw_matches_torch", "test_adamw_weight_decay_is_decoupled")),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_eps_hat}, "the 'epsilon hat' form"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
