"""Mutation tests of andrea_course/activity_tests/test_inside.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import torch

from andrea_course import pieces

from mutant_checks import the_graded_test_names_the_mistake


# ----- the mutants: what a learner typically writes instead -----

def _stream_leaving_its_hooks(model, ids):
    """residual_stream with hooks that are never removed."""
    seen = []
    for module in [model.embed, *model.blocks]:
        module.register_forward_hook(lambda mod, inp, out: seen.append(out))
    with torch.no_grad():
        model(ids)
    return torch.stack(seen)


def _patterns_of_the_block_input(model, ids):
    """attention_patterns recomputed from each block's input (the stream), not ln1 of it."""
    inputs = []
    handles = [b.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for b in model.blocks]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    weights = pieces.module("inside")._weights
    with torch.no_grad():
        return torch.stack([weights(b.attn, x, model.cfg.n_heads) for b, x in zip(model.blocks, inputs)])


def _induction_on_the_earlier_copy(patterns, period):
    t = torch.arange(period, patterns.shape[-2])
    return patterns[..., t, t - period].mean(dim=(1, 3))


# ----- the twelfth fresh set's mutants -----

def _stream_with_gradients(model, ids):
    seen = []
    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]
    try:
        model(ids)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(seen)


def _patterns_normalised_twice(model, ids):
    inputs = []
    handles = [b.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for b in model.blocks]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    weights = pieces.module("inside")._weights
    with torch.no_grad():
        return torch.stack([weights(b.attn, b.ln1(x), model.cfg.n_heads) for b, x in zip(model.blocks, inputs)])


def _induction_on(key_shift=1, first=0, last=0):
    def induction_scores(patterns, period):
        t = torch.arange(period + first, patterns.shape[-2] + last)
        return patterns[..., t, t - period + key_shift].mean(dim=(1, 3))
    return induction_scores


# ----- the sixteenth fresh set's mutants -----

def _lens_norming_the_last_entry_only(model, stream):
    with torch.no_grad():
        return torch.cat([stream[:-1], model.ln_f(stream[-1:])]) @ model.output_weight().T


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    # inside your model (notebook 10)
    ("test_inside.py", "test_residual_stream_removes_its_hooks", {("inside", "residual_stream"): _stream_leaving_its_hooks},
     "hook(s) left on the model"),
    ("test_inside.py", "test_attention_patterns", {("inside", "attention_patterns"): _patterns_of_the_block_input},
     "the block's input (the residual stream)"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: (stream @ model.output_weight().T).detach()}, "without the final norm"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on_the_earlier_copy},
     "the earlier copy of the same token"),
    # the twelfth fresh set's classes
    ("test_inside.py", "test_residual_stream", {("inside", "residual_stream"): _stream_with_gradients},
     "the model run with gradients on"),
    ("test_inside.py", "test_attention_patterns", {("inside", "attention_patterns"): _patterns_normalised_twice},
     "ln1 is applied twice"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: (model.ln_f(stream[-1]) @ model.output_weight().T).detach()},
     "only the last entry of the stream"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: torch.softmax(model.ln_f(stream) @ model.output_weight().T,
                                                                   dim=-1).detach()},
     "softmax probabilities returned instead of the logits"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(key_shift=-1)},
     "the token before the earlier copy"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(first=1)},
     "the queries started at period + 1"),
    ("test_inside.py", "test_induction_scores",
     {("inside", "induction_scores"): lambda w, period: w.diagonal(offset=1 - period, dim1=-2, dim2=-1).mean(dim=(1, 3))},
     "the queries started at period - 1"),
    ("test_inside.py", "test_induction_scores",
     {("inside", "induction_scores"): lambda p, period: p[..., torch.arange(period, p.shape[-2]), :][
         ..., torch.arange(period, p.shape[-2]) - period + 1].mean(dim=(1, 3, 4))}, "the whole grid averaged"),
    # the sixteenth fresh set's classes
    ("test_inside.py", "test_logit_lens", {("inside", "logit_lens"): _lens_norming_the_last_entry_only},
     "the final norm applied to the last entry of the stream only"),
    # the nineteenth fresh set's classes
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(last=-1)},
     "the last query, T - 1, left out"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
