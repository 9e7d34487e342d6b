"""The capstone's leaderboard: the validation loss of the learner's own andrea-tiny, as Gradescope shows it.

    settings = Settings.load("instructor/hidden_tests/leaderboard.json")    # the instructor's, never shipped
    entry = measure(folder, results.tests, settings, isolation)              # after the graded tests
    entry.value      # 4.21: mean cross-entropy (nats per token) on the held-out stories, or None
    entry.note       # one line for the learner: the value and whose pieces trained, or why there is none

1. In a fresh learner's worker (worker/, forked by the worker parent the graded tests used once
   they ended: the same tier, cgroup and limits; never the grader's process): the engine's
   andrea-tiny with each of the learner's pieces that PASSED all its graded tests in this run
   (the verdicts are the grader's, handed down as overlay.build's accept=), trained `steps`
   optimizer steps of B sequences of T tokens on the first `stories` shipped stories (the shipped
   tokenizer: every learner's loss counts the same tokens), with the learner's adamw_step and
   lr_at where they pass, as andrea-train --impl trains (train.Trainer). The worker sends back
   the weights: a dict of tensors (train()).
2. In the grader: the weights are checked against the engine's andrea-tiny (the same names,
   shapes and dtype, every value finite; check_weights), loaded into the ENGINE's ANDREA (no
   learner code runs there), and the mean cross-entropy is measured on stories the learner never
   had: `held_out_stories` stories that train/corpus.py's generator writes from the instructor's
   own number (`held_out_seed`, kept with the hidden tests, so it is not in the learner's
   release), tokenized with the shipped tokenizer, cut into windows of T + 1 tokens.

A submission none of whose pieces of the model or its training (overlay.model_pieces, adamw_step,
lr_at) passes gets no value, and nothing is trained: its model would be the engine's, not
theirs. A training that fails (a crash, a timeout, a loss that stops being finite, weights
refused) gives no value and one line saying why; the score never depends on the leaderboard.
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import overlay
from ..engine.config import ModelConfig

SETTINGS_FILE = "leaderboard.json"       # looked for in the hidden tests' folder (staging.Course)
NAME = "Validation loss"                 # the leaderboard's column on Gradescope
BYTES_SLACK = 1 << 20                    # a reply may be this much larger than the weights (names, header)
TRAIN = f"{__name__}:train"              # the entry points the learner's worker runs (worker/server.py)
WARM_UP = f"{__name__}:warm_up"


class LeaderboardError(ValueError):
    """Settings that cannot be used, or weights that are refused; the message says which."""


@dataclass(frozen=True)
class Settings:
    """What every submission's model is trained and measured with (one class, one leaderboard)."""
    held_out_seed: int                    # the generator's number for the held-out stories (the instructor's)
    held_out_stories: int = 100           # stories in the held-out split
    model: str = "andrea-tiny"            # a model preset
    steps: int = 30                       # optimizer steps
    batch_size: int = 8                   # B
    seq_len: int = 64                     # T, for training and for the held-out windows
    stories: int = 500                    # training: the first N shipped stories
    lr: float = 2e-3
    warmup_steps: int = 5
    train_seed: int = 1337                # the initial weights and the order of the batches
    timeout: float = 120.0                # seconds of the worker's time for the whole training

    def __post_init__(self):
        from ..train.corpus import SEED
        for name, kind in (("held_out_seed", int), ("held_out_stories", int), ("steps", int), ("batch_size", int),
                           ("seq_len", int), ("stories", int), ("train_seed", int)):
            value = getattr(self, name)
            if type(value) is not kind or value < (0 if name.endswith("seed") else 1):
                raise LeaderboardError(f"leaderboard setting {name} must be a {'non-negative' if name.endswith('seed') else 'positive'} "
                                       f"integer, got {value!r}")
        for name in ("lr", "timeout"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
                raise LeaderboardError(f"leaderboard setting {name} must be a positive number, got {value!r}")
        if type(self.warmup_steps) is not int or self.warmup_steps < 0:
            raise LeaderboardError(f"leaderboard setting warmup_steps must be a non-negative integer, got {self.warmup_steps!r}")
        if self.held_out_seed == SEED:
            raise LeaderboardError(f"leaderboard setting held_out_seed {SEED} is the shipped stories' own: the "
                                   f"held-out split would be stories learners train on; choose another number")
        try:
            cfg = ModelConfig.preset(self.model)
        except (KeyError, ValueError, TypeError) as exc:
            raise LeaderboardError(f"leaderboard setting model: {exc}") from None
        if self.seq_len > cfg.context_length:
            raise LeaderboardError(f"leaderboard setting seq_len {self.seq_len} is longer than {self.model}'s "
                                   f"context length {cfg.context_length}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Settings":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise LeaderboardError(f"the leaderboard's settings {path} cannot be read: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise LeaderboardError(f"the leaderboard's settings {path} are not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise LeaderboardError(f"the leaderboard's settings {path} must be a JSON object of settings")
        known = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                raise LeaderboardError(f"{path}: no leaderboard setting {key!r}" +
                                       (f" (did you mean {close[0]!r}?)" if close else f"; the settings are {', '.join(known)}"))
        if "held_out_seed" not in data:
            raise LeaderboardError(f"{path} has no held_out_seed: the number the held-out stories are written "
                                   f"from, one of your own that learners never see")
        return cls(**data)

    def model_config(self) -> ModelConfig:
        return ModelConfig.preset(self.model)

    def for_worker(self) -> dict:
        """What the learner's worker needs to train: everything but the held-out split's number."""
        return {k: v for k, v in dataclasses.asdict(self).items() if not k.startswith("held_out")}

    def describe(self) -> str:
        return (f"{self.model} trained {self.steps} steps of {self.batch_size}x{self.seq_len} tokens on the shipped "
                f"stories, measured on {self.held_out_stories} held-out stories")


# ----------------------------------------------------------------------------- in the learner's worker
def train(folder: str, accept: dict, settings: dict) -> dict:
    """Train the engine's model with the learner's pieces that passed (accept: the grader's
    verdicts, {"activity.piece": "yours" | "engine: <why>"}) for the settings' steps; returns
    {"weights": {name: tensor}, "pieces": {piece: verdict as the model ran it}, "loss": last loss}.
    Runs in the learner's worker (the worker's "run" request of this entry point), never in the grader."""
    import tempfile

    from ..train.settings import TrainConfig
    from ..train.trainer import Trainer
    from .parts import learner_training

    s = dict(settings)
    tc = TrainConfig(model=s["model"], seq_len=s["seq_len"], batch_size=s["batch_size"], max_steps=s["steps"],
                     lr=s["lr"], min_lr=s["lr"] / 10, warmup_steps=s["warmup_steps"], seed=s["train_seed"],
                     stories=s["stories"], eval_every=0, sample_every=0, checkpoint_every=0, tensorboard=False,
                     dtype="fp32")
    parts = learner_training(folder, dict(accept))
    with tempfile.TemporaryDirectory(prefix="leaderboard-") as out:
        trainer = Trainer(tc, out, device="cpu", progress=False, **parts)
        loss = float("nan")
        for _ in range(tc.max_steps):
            loss, _ = trainer.train_step()
            if not math.isfinite(loss):
                raise FloatingPointError(f"the training loss became {loss} at step {trainer.step}")
        pieces = dict(getattr(trainer.model, "pieces", {}) or {})
        weights = {name: t.detach().clone() for name, t in trainer.model.state_dict().items()}
    return {"weights": weights, "pieces": pieces, "loss": loss}


# ----------------------------------------------------------------------------- in the grader
def expected(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """{name: (shape, dtype)} of the engine's model of `cfg` (built on the meta device: no memory)."""
    from ..engine.model import ANDREA
    with torch.device("meta"):
        model = ANDREA(cfg)
    return {name: (tuple(t.shape), t.dtype) for name, t in model.state_dict().items()}


def reply_limit(cfg: ModelConfig) -> int:
    """The most bytes a worker's reply of weights for `cfg` may take (larger is refused unread)."""
    return sum(math.prod(shape) * dtype.itemsize for shape, dtype in expected(cfg).values()) + BYTES_SLACK


def check_weights(weights, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The weights, if they are exactly what the engine's model of `cfg` holds: the same names,
    shapes and dtype, every value finite; else LeaderboardError naming the first fault."""
    if not isinstance(weights, dict):
        raise LeaderboardError(f"the weights came back as {type(weights).__name__}, not a dict of tensors")
    want = expected(cfg)
    missing = [n for n in want if n not in weights]
    extra = [str(n) for n in weights if n not in want]
    if missing or extra:
        what = (f"missing {missing[0]!r}" if missing else "") + (" and " if missing and extra else "") + \
               (f"an unknown {extra[0]!r}" if extra else "")
        raise LeaderboardError(f"the weights are not the engine model's: {what}")
    for name, (shape, dtype) in want.items():
        t = weights[name]
        if type(t) is not torch.Tensor:
            raise LeaderboardError(f"the weights' {name} is a {type(t).__name__}, not a tensor")
        if tuple(t.shape) != shape:
            raise LeaderboardError(f"the weights' {name} has shape {tuple(t.shape)}, not {shape}")
        if t.dtype != dtype:
            raise LeaderboardError(f"the weights' {name} is {t.dtype}, not {dtype}")
        if not bool(torch.isfinite(t).all()):
            raise LeaderboardError(f"the weights' {name} holds NaN or inf")
    return {name: weights[name] for name in want}


_HELD_OUT: dict[tuple, torch.Tensor] = {}


def held_out(settings: Settings) -> torch.Tensor:
    """(N,) the held-out stories' token ids (each story ends with <|endoftext|>), by the shipped
    tokenizer; made once per process."""
    key = (settings.held_out_seed, settings.held_out_stories)
    if key not in _HELD_OUT:
        from ..train.corpus import generate
        from ..train.tokenizer import load_tokenizer
        tok = load_tokenizer()
        ids = [i for story in tok.encode_ordinary_batch(generate(*key)) for i in story + [tok.eot_id]]
        _HELD_OUT[key] = torch.tensor(ids, dtype=torch.long)
    return _HELD_OUT[key]


@torch.no_grad()
def validation_loss(weights: dict[str, torch.Tensor], settings: Settings) -> float:
    """The mean cross-entropy (nats per token) of the ENGINE's model with `weights` on the held-out
    windows of T + 1 tokens (T = seq_len), in batches of 64 windows."""
    from ..engine.model import ANDREA
    cfg = settings.model_config()
    weights = check_weights(weights, cfg)
    with torch.random.fork_rng(devices=[]):
        model = ANDREA(cfg)
    model.load_state_dict(weights, strict=True)
    model.eval()
    ids, T = held_out(settings), settings.seq_len
    n = (len(ids) - 1) // T
    x = ids[: n * T].view(n, T)                                # (N, T)
    y = ids[1: n * T + 1].view(n, T)                           # (N, T)
    total = 0.0
    for i in range(0, n, 64):
        _, loss = model(x[i:i + 64], y[i:i + 64])
        total += float(loss) * len(x[i:i + 64])
    return total / n


def verdicts(tests) -> dict[str, str]:
    """{exercise: "yours" | "engine: <why>"} from this run's graded tests (runner's TestResult):
    a piece is the learner's when every one of its tests passed (the hidden ones included)."""
    from .. import pieces
    out: dict[str, list] = {}
    for t in tests:
        activity, _, piece = str(t.exercise).partition(".")
        if activity in pieces.ACTIVITIES and piece in pieces.names(activity):
            out.setdefault(t.exercise, []).append(t)
    verdict = {}
    for exercise, ts in out.items():
        failed = sum(not t.passed for t in ts)
        verdict[exercise] = "yours" if not failed else f"engine: {failed} of its {len(ts)} graded tests fail"
    return verdict


@dataclass
class Entry:
    value: float | None                  # the validation loss, or None (the note says why)
    note: str                            # one line for the learner and the instructor
    seconds: float = 0.0                 # training and measuring, all told

    def gradescope(self) -> list[dict]:
        """results.json's "leaderboard" field (empty without a value: no entry on the board)."""
        return [] if self.value is None else [{"name": NAME, "value": round(self.value, 4), "order": "asc"}]


GENERATION_ONLY = ("model.KVCache", "model.sample_next")    # pieces of the model no training step runs


def considered(settings: Settings) -> list[str]:
    """The learner's pieces a training step of the leaderboard's model runs (its model's, but
    what only generation uses; adamw_step; lr_at)."""
    return [*(p for p in overlay.model_pieces(settings.model_config()) if p not in GENERATION_ONLY),
            "optim.adamw_step", "optim.lr_at"]


def written_any(folder, settings: Settings) -> bool:
    """Whether the submission has written any piece the leaderboard trains with (its files read,
    never run; a file that does not parse counts as written): else no worker is started early."""
    for activity in dict.fromkeys(p.split(".")[0] for p in considered(settings)):
        path = Path(folder) / f"{activity}.py"
        try:
            stubs = overlay.unwritten_pieces(path.read_text(encoding="utf-8"))
        except OSError:
            continue
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
            return True
        if any(p.split(".")[1] not in stubs for p in considered(settings) if p.startswith(activity + ".")):
            return True
    return False


def start(folder, settings: Settings, isolation):
    """The learner's worker for the leaderboard (a worker.client.IsolatedStudent in `isolation`), its
    parent started now, prepared (warm_up) before it forks a worker: where no worker parent of the
    graded tests was kept for it (measure's `student`). measure() uses it, and closes it."""
    from ..worker.client import IsolatedStudent
    student = IsolatedStudent(folder, isolation=isolation, prepare=(WARM_UP, settings.for_worker()))
    student.boot()
    return student


def measure(folder, tests, settings: Settings, isolation, seconds: float | None = None, student=None) -> Entry:
    """Train the learner's model in a fresh worker of `isolation` (an Isolation; or forked by
    `student`: the graded tests' worker parent, prepared with warm_up and taken back after pytest,
    or one from start()) with the verdicts of `tests` (this run's TestResults), and measure it; at
    most `seconds` (default: the settings' timeout) of the worker's time. Closes `student`."""
    from ..worker.client import LearnerCodeError

    begin = time.monotonic()
    budget = min(settings.timeout, seconds) if seconds is not None else settings.timeout
    accept = verdicts(tests)
    cfg = settings.model_config()
    pieces = considered(settings)
    yours = [p for p in pieces if accept.get(p) == "yours"]
    if not yours:
        if student is not None:
            student.close()
        return Entry(None, f"Leaderboard: no value: none of your {len(pieces)} pieces that {settings.model} is built "
                           f"and trained with passes all its graded tests yet (the model would be the engine's alone)")
    student = student or start(folder, settings, isolation)
    try:
        if budget < 5:
            return Entry(None, f"Leaderboard: no value: no time was left to train ({max(budget, 0):.0f} s)")
        reply = student.run(TRAIN, accept, settings.for_worker(), timeout=budget, limit=reply_limit(cfg))
        if not isinstance(reply, dict):
            raise LeaderboardError(f"the training sent back a {type(reply).__name__}, not its weights")
        value = validation_loss(reply.get("weights"), settings)
    except (LearnerCodeError, LeaderboardError) as exc:
        return Entry(None, f"Leaderboard: no value: {_one_line(exc)}", time.monotonic() - begin)
    except Exception as exc:             # noqa: BLE001  (the learner's exception, from its worker)
        return Entry(None, f"Leaderboard: no value: the training failed: {type(exc).__name__}: {_one_line(exc)}",
                     time.monotonic() - begin)
    finally:
        student.close()
    seconds = time.monotonic() - begin
    rest = ", the engine's stood in for the rest" if len(yours) < len(pieces) else ""
    return Entry(value, f"Leaderboard: validation loss {value:.4f} ({settings.describe()}; {len(yours)} of your "
                        f"{len(pieces)} pieces trained it{rest}; {seconds:.0f} s)", seconds)


def warm_up(settings: dict) -> None:
    """In the worker's parent, before any worker is forked (never learner code): the training
    stories tokenized (train.data caches them for the forks) and the optimizer's imports. The
    graded tests' worker parent runs it (the runner's prepare): every worker it forks then has
    torch._dynamo imported already, which a graded test's first use of the meta device would
    import again, slower, under authorship's audit hook."""
    try:
        from ..train.data import TokenData
        TokenData.from_corpus(stories=settings["stories"])
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])        # imports torch._dynamo (seconds)
    except Exception:                    # noqa: BLE001  (the worker then does it, and says what fails)
        pass


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


class Leaderboard:
    """The leaderboard as the grading pipeline's after-test hook (grading/hooks.py): loaded from
    its settings file; where the submission wrote a piece it trains with, the graded tests' worker
    parent is prepared for the training (prepare) and kept for it; its entry measured after them."""

    key = "leaderboard"                  # the field of the run's results it fills

    def __init__(self, settings: Settings):
        self.settings = settings

    @classmethod
    def load(cls, path) -> "Leaderboard":
        return cls(Settings.load(path))

    def describe(self) -> str:
        return self.settings.describe()

    def wants(self, folder) -> bool:
        return written_any(folder, self.settings)

    def prepare(self) -> tuple:
        """What the graded tests' worker parent runs before it forks any worker (warm_up), so that
        it can fork the training's worker after the tests."""
        return (WARM_UP, self.settings.for_worker())

    def stopped(self, why: str) -> Entry:
        return Entry(None, f"Leaderboard: no value: {why}")

    def after(self, folder, tests, isolation, seconds: float | None = None, started=None) -> Entry:
        return measure(folder, tests, self.settings, isolation, seconds=seconds, student=started)

