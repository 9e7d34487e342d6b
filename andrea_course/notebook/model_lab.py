"""Helpers for notebook 06 (twelve blocks make ANDREA-120M): build the model from the learner's
code with a clear fallback, and get a small trained ANDREA to generate text with."""
from __future__ import annotations

import torch

from ..engine.config import ModelConfig
from ..grading.passing import learner_model
from ..engine.model import ANDREA
from .checks import notebook_impl
from .block_lab import one_thread


def build_model(cfg: ModelConfig | str, impl=None, quiet: bool = False):
    """ANDREA for cfg with the learner's pieces that pass their graded tests, the engine's for
    the rest (grading.passing.learner_model). Should even that fail to build or to run two tokens, say why and
    use the engine alone, so the notebook carries on. Prints one line saying whose pieces run, and
    one for each piece of yours that the model's first run did not run (model.pieces says why)."""
    impl = impl if impl is not None else notebook_impl()
    try:
        model = learner_model(cfg, impl)
        with torch.no_grad():
            model(torch.zeros(1, 2, dtype=torch.long))
    except Exception as exc:                       # a learner's piece that crashes
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"your pieces could not build or run ANDREA ({type(exc).__name__}: {first}); "
              "using the engine's. Run the check cells to find out why.")
        return ANDREA(cfg)
    if not quiet:
        mine = sorted(e for e, who in model.pieces.items() if who == "yours")
        failing = sorted(e for e, who in model.pieces.items() if "fail" in who)
        if mine:
            print(f"building ANDREA with your {len(mine)} pieces that pass their tests ({', '.join(mine)}), "
                  "the engine's for the rest")
        else:
            print("building ANDREA from the engine: none of your pieces is written and passing yet")
        if failing:
            print(f"not used until their graded tests pass: {', '.join(failing)}")
        for exercise, who in model.pieces.items():      # passing, but the model did not run it as it is
            if who.startswith(("not run: ", "engine: yours raised")):
                print(f"{exercise}: {who}")
    return model


def small_trained_model(steps: int = 120, seed: int = 0):
    """(model, tokenizer, where it came from).

    The small ANDREA that ships with the course (andrea_course.train.pretrained) when present;
    otherwise a tiny ANDREA trained here, for `steps` steps on the shipped stories (seconds)."""
    from ..train import load_corpus, load_tokenizer
    try:
        from ..train import pretrained
        model, tok = pretrained()
        return model.eval(), tok, "the small ANDREA trained on the course's stories, shipped in andrea_course/data"
    except (FileNotFoundError, ImportError):
        pass
    tok = load_tokenizer()
    stories = load_corpus()[:400]
    data = torch.tensor([i for s in stories for i in tok.encode(s) + [tok.eot_id]], dtype=torch.long)
    cfg = ModelConfig.preset("andrea-tiny", n_layers=2, d_model=64, n_heads=4, d_ff=256,
                             context_length=64, vocab_size=tok.vocab_size)
    torch.manual_seed(seed)
    model = ANDREA(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    g = torch.Generator().manual_seed(seed)
    T, B, losses = cfg.context_length, 8, []
    with one_thread():
        for _ in range(steps):
            ix = torch.randint(0, len(data) - T - 1, (B,), generator=g)
            x = torch.stack([data[i:i + T] for i in ix])
            y = torch.stack([data[i + 1:i + T + 1] for i in ix])
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return model.eval(), tok, (f"the shipped model is not in andrea_course/data, so a tiny ANDREA was trained "
                               f"here: {steps} steps on {len(stories)} of the course's stories, loss "
                               f"{losses[0]:.2f} -> {sum(losses[-10:]) / 10:.2f}")
