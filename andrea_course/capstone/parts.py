"""Whose code trains: the learner's pieces that pass their graded tests, handed to the trainer.

    parts = learner_parts("exercises", tc)       # model, AdamW, schedule, BPE: yours where they pass
    trainer = parts.trainer(tc, "runs/mine")     # a train.Trainer with them; RUN/pieces.json says whose
    engine_parts().trainer(tc, "runs/engine")    # the same run on the engine's pieces alone

The grading layer says which pieces pass (grading.passing); the overlay builds the engine's
model with those pieces in it (overlay.build); this module adds the pieces the trainer itself
runs: adamw_step (inside train.optimizer.StepwiseAdamW, a real torch.optim.Optimizer), lr_at,
and the BPE (train_bpe, encode, decode) that makes the run's own tokenizer
(TrainConfig.bpe_merges: V = 256 + merges + 1, learned on the first stories shipped with the
course). A piece that does not pass is the engine's, and the record says why.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import types
from dataclasses import dataclass, field

import torch

from .. import overlay
from ..train.optimizer import StepwiseAdamW
from ..train.schedule import matmul_weights
from ..train.settings import TrainConfig, model_config, model_switches
from ..train.trainer import Trainer

# The pieces the trainer runs besides the model's, in the order a step meets them.
TOKENIZER_PIECES = ("bpe.train_bpe", "bpe.encode", "bpe.decode")
BPE_HELPERS = ("bpe.pair_counts", "bpe.merge_pair", "bpe.most_frequent_pair")   # called by train_bpe, encode
OPTIM_PIECES = ("optim.lr_at", "optim.adamw_step")
TRAINING_PIECES = TOKENIZER_PIECES + BPE_HELPERS + OPTIM_PIECES
DEFAULT_BPE_MERGES = 256        # with --impl and no --bpe-merges: V = 256 bytes + 256 merges + <|endoftext|> = 513


@dataclass
class Parts:
    """What a Trainer is built from (None: the engine's), and the record of whose they are."""
    model_factory: object = None
    optimizer_factory: object = None
    lr_schedule: object = None
    bpe: object = None
    pieces: dict = field(default_factory=dict)

    def trainer(self, tc: TrainConfig, out, **kwargs) -> Trainer:
        return Trainer(tc, out, model_factory=self.model_factory, optimizer_factory=self.optimizer_factory,
                       lr_schedule=self.lr_schedule, bpe=self.bpe, pieces=self.pieces, **kwargs)

    @property
    def yours(self) -> list[str]:
        return [name for name, status in self.pieces["pieces"].items() if status == "yours"]

    def summary(self, record: dict | None = None) -> str:
        """One paragraph: whose pieces, and why each engine's piece runs (in `record`, a
        trainer's, once its model is built; else as the graded tests say)."""
        record = record or self.pieces
        table = record["pieces"]
        if not table:
            return "the engine's pieces alone"
        why: dict[str, list[str]] = {}
        for name, status in table.items():
            if status != "yours":
                why.setdefault(status.removeprefix("engine: "), []).append(name)
        engine = "; ".join(f"{', '.join(names)} ({reason})" for reason, names in why.items())
        yours = [name for name, status in table.items() if status == "yours"]
        text = f"{len(yours)} of your {len(table)} pieces in the run ({record['folder']})"
        return text + (f"; the engine's: {engine}" if engine else ": all yours")


def engine_parts() -> Parts:
    """The engine alone: its ANDREA, torch.optim.AdamW, train/schedule.py's lr_at, Hugging Face BPE."""
    return Parts(pieces={"whose": "the engine's", "folder": None, "pieces": {}})


def with_tokenizer(tc: TrainConfig, default: int = DEFAULT_BPE_MERGES) -> TrainConfig:
    """tc with a tokenizer of the run's own (bpe_merges) when it has none and reads the shipped
    stories: a run with the learner's pieces trains on tokens of the learner's BPE. Data of a
    folder (--data) come with their own tokenizer, which the run then reads."""
    if tc.bpe_merges is not None or tc.data:
        return tc
    return dataclasses.replace(tc, bpe_merges=default)


def learner_parts(impl: str | os.PathLike, tc: TrainConfig) -> Parts:
    """The parts of a run with the learner's pieces in `impl` ("exercises", "solutions" or a
    folder shaped like exercises/): each piece theirs once all its graded tests pass."""
    folder = overlay.resolve(impl)
    try:                                         # the graded tests run with pytest: imported only here,
        from ..grading.passing import passing    # so training the engine needs no test tools
    except ModuleNotFoundError as exc:
        if exc.name != "pytest":
            raise
        raise overlay.ImplementationError("your pieces are used once their graded tests pass, and the tests "
                                          "need pytest: pip install pytest") from None
    cfg, switches = model_config(tc), model_switches(tc)
    model_pieces = list(_model_pieces(cfg, folder, switches)) or list(getattr(overlay, "SLOTS", ()))
    status = passing(folder, model_pieces + list(TRAINING_PIECES))
    accepted = {name for name, s in status.items() if s == "yours"}
    # the overlay may still say no to a passing piece (RoPE, ...): the model built says last (train/record.py)
    table = {name: status[name] for name in model_pieces}
    learner = overlay.Overlay(folder, accept=accepted)
    parts = Parts(**learner_training(folder, status))
    for name in OPTIM_PIECES:
        table[name] = status[name]

    tokenizer = [name for name in TOKENIZER_PIECES if status[name] == "yours"]
    if tc.bpe_merges is None:
        for name in TOKENIZER_PIECES + BPE_HELPERS:
            table[name] = ("engine: the run reads tokens made by a tokenizer file (no bpe_merges: "
                           "--data's, or the shipped one), so no BPE runs")
    else:
        if tokenizer:
            bpe = learner.module("bpe")      # the engine's (pieces/bpe.py) for what does not pass
            parts.bpe = types.SimpleNamespace(train_bpe=bpe.train_bpe, encode=bpe.encode, decode=bpe.decode)
        for name in TOKENIZER_PIECES:
            table[name] = status[name]
        callers = [n for n in ("bpe.train_bpe", "bpe.encode") if status[n] == "yours"]
        for name in BPE_HELPERS:
            table[name] = status[name] if status[name] != "yours" or callers else (
                "engine: yours passes, but it runs only inside your train_bpe and encode, and the engine's run")
    parts.pieces = {"whose": f"yours: {folder}", "folder": str(folder), "pieces": table}
    return parts


def _model_pieces(cfg, folder, switches: dict) -> dict[str, str]:
    """model.pieces of the engine's model as the overlay builds it for this folder: the pieces
    the model is made of. Its own random draws are put back (the run's seed stays the run's); a
    large model is built on the meta device (sizes, no memory)."""
    big = matmul_weights(cfg) > 20_000_000
    with torch.random.fork_rng(devices=[]), (torch.device("meta") if big else contextlib.nullcontext()):
        return dict(overlay.build(cfg, folder, accept=set(), **switches).pieces)


def learner_training(impl: str | os.PathLike, accept) -> dict:
    """What a train.Trainer runs with the learner's pieces that `accept` (the grading layer's
    verdicts, {"activity.piece": "yours" | "engine: <why>"}, or a set of the passing ones) lets in:
    {"model_factory": overlay.build with the model's pieces, "optimizer_factory": StepwiseAdamW with
    the learner's adamw_step (None: the engine's AdamW), "lr_schedule": the learner's lr_at (None:
    the engine's)}. The capstone (andrea-train --impl) and the leaderboard both train with these."""
    folder = overlay.resolve(impl)
    given = dict(accept) if isinstance(accept, dict) else {e: overlay.YOURS for e in accept}
    accepted = {e for e, verdict in given.items() if verdict == overlay.YOURS}
    optim = overlay.Overlay(folder, accept=accepted).module("optim") if accepted & {"optim.adamw_step", "optim.lr_at"} else None
    out = {"model_factory": lambda cfg, **sw: overlay.build(cfg, folder, accept=given, **sw),
           "optimizer_factory": None, "lr_schedule": None}
    if "optim.adamw_step" in accepted:
        update = optim.adamw_step
        out["optimizer_factory"] = lambda groups, **kw: StepwiseAdamW(groups, update=update, **kw)
    if "optim.lr_at" in accepted:
        out["lr_schedule"] = optim.lr_at
    return out
