"""One of your pieces alone against the engine's, in the conditions of a training run.

    differs, line = isolate("block.layer_norm", "exercises", train_settings)

A graded test holds a piece to what it must compute on inputs chosen to show the typical
mistakes; a training run asks more of it: its gradient, float32, the run's own settings (weight
decay 0 for the vectors, a schedule of max_steps). Here each piece meets those conditions once,
beside the engine's version, and the first difference is named:

    a model piece   the engine's model, and the same with only this piece yours, from one seed:
                    the loss and every parameter's gradient on one batch
    adamw_step      three AdamW steps on the model's own parameter groups, against torch.optim.AdamW
    lr_at           every step of the run's schedule, against train/schedule.py's
    the BPE         its merges on the run's slice of stories, and the ids of the first stories,
                    against Hugging Face tokenizers
"""
from __future__ import annotations

import torch

from .. import overlay
from ..train.settings import TrainConfig, model_config, model_switches

LOSS_TOLERANCE = 1e-5        # one forward pass in float32: rounding stays far below
GRAD_TOLERANCE = 1e-3        # of the largest gradient in the tensor
UPDATE_TOLERANCE = 1e-3      # of the learning rate: how far three steps may move a weight apart


def isolate(piece: str, folder, train: dict) -> tuple[bool, str]:
    """(differs, one line): `piece` of the learner's folder alone against the engine's, with the
    run's settings `train` (config.json's "train")."""
    tc = TrainConfig(**train)
    if piece == "optim.adamw_step":
        return _adamw(folder, tc)
    if piece == "optim.lr_at":
        return _lr(folder, tc)
    if piece.startswith("bpe."):
        return _bpe(piece, folder, tc)
    return _model_piece(piece, folder, tc)


def _batch(tc: TrainConfig, cfg):
    gen = torch.Generator().manual_seed(tc.seed)
    T = min(tc.seq_len or cfg.context_length, 64)
    ids = torch.randint(0, cfg.vocab_size, (2, T + 1), generator=gen)
    return ids[:, :-1], ids[:, 1:]


def _model(cfg, folder, accept: set, switches: dict, seed: int):
    torch.manual_seed(seed)
    return overlay.build(cfg, folder, accept=accept, **switches)


def _model_piece(piece: str, folder, tc: TrainConfig) -> tuple[bool, str]:
    cfg = model_config(tc)
    switches = dict(model_switches(tc), dropout=0.0)
    x, y = _batch(tc, cfg)
    with torch.random.fork_rng(devices=[]):
        engine = _model(cfg, folder, set(), switches, tc.seed)
        mine = _model(cfg, folder, {piece}, switches, tc.seed)
    if mine.pieces.get(piece) != "yours":
        return False, f"{piece} alone: not used ({mine.pieces.get(piece)})"
    losses = []
    for model in (engine, mine):
        loss = model(x, y)[1]
        loss.backward()
        losses.append(float(loss.detach()))
    gap = abs(losses[0] - losses[1])
    if not gap <= LOSS_TOLERANCE:
        return True, f"{piece} alone: the loss differs by {gap:.2e} ({losses[1]:.6f}, the engine's {losses[0]:.6f})"
    theirs = dict(mine.named_parameters())
    worst, where = 0.0, ""
    for name, p in engine.named_parameters():
        q = theirs.get(name)
        if p.grad is None:
            continue
        if q is None or q.grad is None:
            return True, f"{piece} alone: the loss is the engine's, but no gradient reaches {name}"
        size = float(p.grad.abs().max().clamp_min(1e-30))
        rel = float((p.grad - q.grad).abs().max()) / size
        if rel > worst:
            worst, where = rel, name
    if not worst <= GRAD_TOLERANCE:
        return True, (f"{piece} alone: the loss is the engine's, the gradients are not (of {where}: off by "
                      f"{worst:.1e} of its largest): its backward pass differs")
    return False, f"{piece} alone: loss and gradients the engine's (gradients within {worst:.1e} of their largest)"


def _adamw(folder, tc: TrainConfig) -> tuple[bool, str]:
    from ..train.optimizer import StepwiseAdamW
    from ..train.schedule import param_groups
    update = overlay.Overlay(folder, accept={"optim.adamw_step"}).module("optim").adamw_step
    cfg = model_config(tc)
    x, y = _batch(tc, cfg)
    with torch.random.fork_rng(devices=[]):
        models = [_model(cfg, folder, set(), dict(model_switches(tc), dropout=0.0), tc.seed) for _ in range(2)]
    grads = None
    opts = [torch.optim.AdamW(param_groups(models[0], tc.weight_decay), lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=1e-8),
            StepwiseAdamW(param_groups(models[1], tc.weight_decay), update=update, lr=tc.lr,
                          betas=(tc.beta1, tc.beta2), eps=1e-8)]
    for _ in range(3):
        if grads is None:
            models[0](x, y)[1].backward()
            grads = [p.grad.clone() for p in models[0].parameters()]
        for model, opt in zip(models, opts):
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            opt.step()
    worst, where = 0.0, ""
    for (name, p), q in zip(models[0].named_parameters(), models[1].parameters()):
        gap = float((p - q).abs().max()) / tc.lr
        if gap > worst:
            worst, where = gap, name
    decayed = "matrices decayed by weight_decay, vectors not"
    if not worst <= UPDATE_TOLERANCE:
        return True, (f"optim.adamw_step alone: three steps with the run's settings (lr {tc.lr:g}, betas "
                      f"({tc.beta1:g}, {tc.beta2:g}), {decayed}) move {where} {worst:.1e}·lr away from "
                      f"torch.optim.AdamW's")
    return False, f"optim.adamw_step alone: three steps as torch.optim.AdamW's ({decayed})"


def _lr(folder, tc: TrainConfig) -> tuple[bool, str]:
    from ..train.schedule import lr_at
    mine = overlay.Overlay(folder, accept={"optim.lr_at"}).module("optim").lr_at
    args = (tc.lr, tc.min_lr, tc.warmup_steps, tc.max_steps)
    for step in range(tc.max_steps + max(1, tc.max_steps // 10)):
        got, want = float(mine(step, *args)), lr_at(step, *args)
        if abs(got - want) > 1e-9 * max(abs(want), 1e-12):
            return True, (f"optim.lr_at alone: step {step} of this run's schedule (lr {tc.lr:g}, min_lr {tc.min_lr:g}, "
                          f"warmup_steps {tc.warmup_steps}, max_steps {tc.max_steps}) gets {got:.6g}, not {want:.6g}")
    return False, "optim.lr_at alone: this run's schedule, every step, the engine's"


def _bpe(piece: str, folder, tc: TrainConfig) -> tuple[bool, str]:
    from ..train.corpus import load_corpus
    from ..train.tokenizer import BPE_STORIES, bpe_text, train_tokenizer
    if tc.bpe_merges is None:
        return False, f"{piece}: the run read the shipped tokenizer's tokens"
    mod = overlay.Overlay(folder, accept={piece}).module("bpe")
    stories = load_corpus()
    text = bpe_text(stories[:BPE_STORIES])
    library = train_tokenizer([text], tc.bpe_merges)
    if piece in ("bpe.train_bpe", "bpe.pair_counts", "bpe.merge_pair", "bpe.most_frequent_pair"):
        if piece != "bpe.train_bpe":      # a helper runs inside the learner's own train_bpe
            mod = overlay.Overlay(folder, accept={piece, "bpe.train_bpe"}).module("bpe")
        merges = [tuple(int(t) for t in m) for m in mod.train_bpe(text, tc.bpe_merges)]
        r = next((i for i, (a, b) in enumerate(zip(merges, library.merges)) if a != b), None)
        if r is None and len(merges) != len(library.merges):
            r = min(len(merges), len(library.merges))
        if r is not None:
            got = merges[r] if r < len(merges) else "none"
            want = library.merges[r] if r < len(library.merges) else "none"
            return True, (f"{piece} alone: merge {r} of the run's {tc.bpe_merges} is {got}, the library's {want}")
        return False, f"{piece} alone: the run's {tc.bpe_merges} merges are the library's"
    sample = stories[:50]
    if piece == "bpe.encode":
        for i, story in enumerate(sample):
            got = [int(t) for t in mod.encode(story, library.merges)]
            if got != library.encode(story):
                return True, f"{piece} alone: story {i} gets other ids than the library gives with the same merges"
        return False, f"{piece} alone: the first {len(sample)} stories get the library's ids"
    for i, story in enumerate(sample):
        if mod.decode(library.encode(story), library.merges) != story:
            return True, f"{piece} alone: story {i}'s ids do not decode back to it"
    return False, f"{piece} alone: the first {len(sample)} stories decode back exactly"

