"""Did your run follow the engine's? Where two loss curves part, and which piece to suspect.

    result = compare_runs("runs/mine", "runs/engine")     # two runs of the same settings and seed
    print(result)                                          # they agree, or where they part and why

Two runs of the same settings, random seed and data compute the same numbers up to rounding when every
piece of one computes what the other's does: the losses stay within 1e-4 for many steps (one
thread; tests/capstone/test_capstone.py). When they part, what differs first says where to look, because
each logged quantity comes from one stage of a step:

    the tokens (config.json)  the tokenizer: other merges (train_bpe) or other ids (encode)
    lr at some step           the schedule (lr_at)
    loss at step 1            the forward pass of a model piece (nothing has been updated yet)
    grad_norm at step 1       the backward pass of a model piece whose forward is right
    a later loss              the update (adamw_step), or a gradient off by too little to see

Then each of your pieces of that stage is run alone in the engine's model, against the engine's
own, on one batch (overlay.build with only that piece accepted): the one whose loss, gradients,
update or schedule differs is the one to suspect.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..train.runlog import read_log
from .parts import TRAINING_PIECES

TOLERANCE = 1e-4          # the largest loss difference of "the same model" (10 steps, one thread)


@dataclass
class Comparison:
    steps: int                       # steps both runs logged
    max_gap: float                   # the largest loss difference over them
    parted_at: int | None            # the first step whose loss differs by more than the tolerance
    clue: str = ""                   # what differs first: tokens, lr, forward, backward, update
    suspects: list = field(default_factory=list)
    findings: list = field(default_factory=list)   # the pieces run alone, one line each
    confirmed: bool = False          # the suspects differ from the engine's when run alone
    message: str = ""

    @property
    def agree(self) -> bool:
        return self.parted_at is None and self.clue == ""

    def __str__(self) -> str:
        return self.message


def _read(run: Path) -> tuple[list, dict, dict]:
    log = read_log(run / "log.jsonl")
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    pieces = json.loads((run / "pieces.json").read_text(encoding="utf-8")) if (run / "pieces.json").is_file() else {}
    return log, config, pieces


def _differ(a: float, b: float, tolerance: float, relative: bool = False) -> bool:
    scale = max(abs(a), abs(b), 1e-12) if relative else 1.0
    return not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > tolerance * scale


def compare_runs(mine, engine, tolerance: float = TOLERANCE, check: bool = True) -> Comparison:
    """Compare run `mine` (your pieces, RUN/pieces.json says which) with run `engine`, step by
    step; when they part, name the stage and, with check, run each of your pieces of that stage
    alone against the engine's to name the piece."""
    mine, engine = Path(mine), Path(engine)
    log_a, config_a, record = _read(mine)
    log_b, config_b, _ = _read(engine)
    settings = lambda c: {k: v for k, v in c["train"].items() if k not in ("data",)}
    if settings(config_a) != settings(config_b) or config_a["model"] != config_b["model"]:
        diff = sorted(k for k in set(config_a["train"]) | set(config_b["train"])
                      if config_a["train"].get(k) != config_b["train"].get(k)) or ["model"]
        raise ValueError(f"{mine} and {engine} were trained with different settings ({', '.join(diff)}): "
                         f"compare two runs of the same settings and the same seed")
    steps = min(len(log_a), len(log_b))
    gaps = [abs(a["loss"] - b["loss"]) for a, b in zip(log_a, log_b)]
    max_gap = max(gaps, default=0.0)
    parted = next((a["step"] for a, g in zip(log_a, gaps) if not g <= tolerance), None)
    yours = [name for name, status in record.get("pieces", {}).items() if status == "yours"]
    result = Comparison(steps, max_gap, parted)

    data_a, data_b = config_a.get("data", {}), config_b.get("data", {})
    first = next((i for i, (a, b) in enumerate(zip(log_a, log_b))
                  if _differ(a["lr"], b["lr"], 1e-9, relative=True) or _differ(a["loss"], b["loss"], tolerance)
                  or _differ(a["grad_norm"], b["grad_norm"], tolerance, relative=True)), None)
    if data_a.get("tokenizer_hash") != data_b.get("tokenizer_hash"):
        result.clue, stage = "tokens", "the runs read different tokens: your tokenizer's merges are not the engine's"
        candidates = [n for n in yours if n.startswith("bpe.")]
    elif data_a.get("fingerprint") != data_b.get("fingerprint"):
        result.clue, stage = "tokens", "the runs read different tokens of the same merges: the text is encoded differently"
        candidates = [n for n in yours if n in ("bpe.encode",)]
    elif first is None:
        candidates, stage = [], ""
    else:
        a, b = log_a[first], log_b[first]
        model = [n for n in yours if n not in TRAINING_PIECES]
        if _differ(a["lr"], b["lr"], 1e-9, relative=True):
            result.clue = "lr"
            stage = f"the learning rate of step {a['step']} ({a['lr']:.6g}, the engine's {b['lr']:.6g}): the schedule"
            candidates = [n for n in yours if n == "optim.lr_at"]
        elif first == 0 and _differ(a["loss"], b["loss"], tolerance):
            result.clue, stage = "forward", "the loss of the very first step, before any update: the forward pass"
            candidates = model
        elif first == 0:
            result.clue = "backward"
            stage = (f"the gradient's norm at step 1 ({a['grad_norm']:.6g}, the engine's {b['grad_norm']:.6g}) with "
                     f"the same loss: the backward pass of a piece whose forward is right")
            candidates = model
        else:
            result.clue = "update"
            stage = (f"the loss of step {a['step']}, with the first step's loss, gradient and every learning rate "
                     f"the same: the update (or a gradient off by too little to show in its norm)")
            candidates = [n for n in yours if n == "optim.adamw_step"] + model
    if result.clue and check and record.get("folder"):
        from .isolate import isolate
        for name in candidates:
            differs, line = isolate(name, record["folder"], config_a["train"])
            result.findings.append(line)
            if differs:
                result.suspects.append(name)
        result.confirmed = bool(result.suspects)
    if not result.suspects:
        result.suspects = candidates
    result.message = _message(result, stage, tolerance, log_a, log_b, yours, record)
    return result


def _message(r: Comparison, stage: str, tolerance: float, log_a, log_b, yours, record) -> str:
    if r.agree:
        whose = ("none of your pieces ran (each is the engine's until it passes: pieces.json says why), so "
                 "both runs are the engine's" if not yours else
                 f"{len(yours)} of your pieces ran ({', '.join(yours)})")
        return (f"Your run follows the engine's: over {r.steps} steps the losses differ by at most {r.max_gap:.1e} "
                f"(same model: within {tolerance:g}); {whose}.")
    if r.parted_at is not None:
        a, b = (next(rec for rec in log if rec["step"] == r.parted_at) for log in (log_a, log_b))
        where = (f"The curves part at step {r.parted_at}: your loss {a['loss']:.5f}, the engine's {b['loss']:.5f} "
                 f"(at most {r.max_gap:.2e} apart over {r.steps} steps).")
    else:
        where = f"The losses stay within {tolerance:g} over {r.steps} steps, but the runs differ."
    lines = [where, f"What differs first: {stage}."]
    if r.confirmed:
        lines.append(f"Suspect {', '.join(r.suspects)}: run alone in the engine's model, "
                     f"{'it differs' if len(r.suspects) == 1 else 'they differ'} from the engine's.")
    elif r.suspects:
        lines.append(f"Suspect one of {', '.join(r.suspects)}, your pieces at that stage" + (
            " (each alone matched the engine's on one batch: the difference builds up over the steps)."
            if r.findings else "."))
    else:
        lines.append("None of your pieces runs at that stage: were the two runs given the same settings and data?")
    lines += [f"  {line}" for line in r.findings]
    return "\n".join(lines)

