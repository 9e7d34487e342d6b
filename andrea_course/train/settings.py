"""TrainConfig: every setting of a training run, each with its rule and its help text.

The fields below are the one statement of the settings: `andrea-train`'s flags are made from
them (name, type, help, default), JSON config files are checked against them, and `--resume`
sorts them into what makes a run the run it is and what may change between stops.

    tc = load_config("andrea-tiny", max_steps=100)      # a preset (andrea_course.presets) ...
    tc = load_config("configs/andrea-120m.json")         # ... or a JSON file, flags on top
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.config import RUN_SWITCHES, ConfigError, ModelConfig
from ..presets import PRESETS, TRAIN_PRESETS
from .cli import MAX_SEED

N_BYTES = 256          # a byte-level BPE's first ids; its end-of-text token comes after the merges


def setting(default, help: str, resume: str = "fixed", **rule):
    """A TrainConfig field: its default, its help text, what --resume makes of it (fixed: the
    checkpoint's value only; switch: how the run runs, may change; schedule: the optimisation's
    settings, may change, the trainer says what changed), and its rule: min and max (inclusive), above
    (exclusive lower bound), below (exclusive upper bound), choices. The model's own run-time
    switches (config.RUN_SWITCHES) are switches without saying so."""
    return field(default=default, metadata={"help": help, "resume": resume, **rule})


@dataclass
class TrainConfig:
    model: str | dict = setting("andrea-tiny", "a model preset's name, or ModelConfig fields")
    seq_len: int | None = setting(None, "T for training (default: the model's context length)", min=1)
    batch_size: int = setting(16, "B: sequences per micro-batch per process", "switch", min=1)
    grad_accum: int = setting(1, "A: micro-batches per optimizer step", "switch", min=1)
    total_batch_tokens: int | None = setting(
        None, "if set, A = this / (B·T·W): the same run on 1 or 8 GPUs (default: off)", "switch", min=1)
    max_steps: int = setting(1000, "optimizer steps to train to", "schedule", min=1)
    lr: float = setting(2e-3, "peak learning rate", "schedule", above=0)
    min_lr: float = setting(2e-4, "learning rate at the end of the cosine", "schedule", min=0)
    warmup_steps: int = setting(50, "steps of linear warm-up", "schedule", min=0)
    weight_decay: float = setting(0.1, "AdamW weight decay (matrices only)", "schedule", min=0)
    beta1: float = setting(0.9, "AdamW beta1", "schedule", min=0, below=1)
    beta2: float = setting(0.95, "AdamW beta2", "schedule", min=0, below=1)
    grad_clip: float = setting(1.0, "max global L2 norm of the gradient (0: off)", "schedule", min=0)
    eval_every: int = setting(100, "steps between validation losses (0: never)", "switch", min=0)
    eval_batches: int = setting(8, "batches in a validation loss", "switch", min=1)
    sample_every: int = setting(200, "steps between samples (0: never)", "switch", min=0)
    sample_tokens: int = setting(80, "tokens in a sample", "switch", min=1)
    sample_prompt: str = setting("Once upon a time", "the samples' prompt", "switch")
    checkpoint_every: int = setting(200, "steps between checkpoints (0: only at the end and on a signal)", "switch",
                                     min=0)
    keep_checkpoints: int = setting(2, "checkpoints kept (older ones are deleted)", "switch", min=1)
    seed: int = setting(1337, "seed of the model's initialisation and the data order", min=0, max=MAX_SEED)
    dtype: str = setting("auto", "autocast precision (auto: bf16 on a GPU that has it, fp16 on one "
                                 "that hasn't, fp32 on the CPU)", "switch", choices=("auto", "fp32", "bf16", "fp16"))
    compile: bool = setting(False, "torch.compile the model", "switch")
    fsdp: bool = setting(False, "shard parameters, gradients and optimizer state (FSDP2) instead of DDP", "switch")
    checkpointing: bool = setting(False, "activation checkpointing: keep each block's input only and recompute "
                                         "its activations in the backward (a third more work, far less memory)",
                                  "switch")
    kernels: str = setting("torch", "attention and friends: PyTorch's fused ops or the course's Triton kernels",
                           choices=("torch", "triton"))
    dropout: float = setting(0.0, "dropout probability while training", min=0, below=1)
    init_std: float | None = setting(None, "std of the initial weights (default: 1/sqrt(D))", above=0)
    tensorboard: bool = setting(True, "write TensorBoard logs to RUN_DIR/tensorboard", "switch")
    data: str | None = setting(None, "a folder written by andrea-prepare (default: the shipped stories); "
                                     "where it lives may change, its tokens may not", "switch")
    stories: int | None = setting(None, "train on the first N stories shipped with the course, not all 6,000 "
                                        "(a short run needs only a few; default: all; not with --data)", min=1)
    bpe_merges: int | None = setting(
        None, "train the run's own byte-level BPE with this many merges on the first stories shipped with "
              "the course (tokenizer.BPE_STORIES); the model's V becomes 256 + merges + 1 "
              "(default: the shipped tokenizer, or --data's)", min=0)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """ConfigError naming the first setting that breaks its rule."""
        hints = typing.get_type_hints(TrainConfig)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            setattr(self, f.name, _checked(f.name, value, hints[f.name], f.metadata))
        cfg = model_config(self)
        if self.stories is not None and self.data:
            raise ConfigError(f"stories (--stories) picks from the shipped stories, and data (--data {self.data}) "
                              f"brings other tokens: give one or the other")
        if self.seq_len is not None and self.seq_len > cfg.context_length:
            raise ConfigError(f"seq_len (--seq-len) {self.seq_len} is longer than the model's context "
                              f"length {cfg.context_length}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _checked(name, value, hint, meta):
    """value, converted where JSON cannot say it (an int for a float), or ConfigError."""
    kinds = typing.get_args(hint) or (hint,)
    where = f"{name} ({flag(name)})" if name != "model" else name
    if value is None:
        if type(None) in kinds:
            return None
        raise ConfigError(f"{where} must not be null")
    kind = next(k for k in kinds if k is not type(None))
    if dict in kinds and isinstance(value, dict):
        return value
    ok = {int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool),
          bool: isinstance(value, bool), str: isinstance(value, str)}[kind]
    if not ok:
        names = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
        raise ConfigError(f"{where} must be {names[kind]}" + (" or a ModelConfig object" if dict in kinds else "")
                          + f", got {value!r} ({type(value).__name__})")
    if kind is float:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, got {value!r}")
    rules = [("min", lambda v, b: v >= b, ">="), ("max", lambda v, b: v <= b, "<="),
             ("above", lambda v, b: v > b, ">"), ("below", lambda v, b: v < b, "<")]
    for key, holds, sign in rules:
        if key in meta and not holds(value, meta[key]):
            raise ConfigError(f"{where} must be {sign} {meta[key]}, got {value!r}")
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"{where} must be one of {', '.join(meta['choices'])}, got {value!r}")
    return value


def model_config(tc: TrainConfig) -> ModelConfig:
    """The model's shape (ModelConfig) that tc names; ConfigError if it names none.

    With bpe_merges the run makes its own tokenizer, and the vocabulary follows it:
    V = 256 bytes + bpe_merges + 1 end-of-text, whatever the preset says; a model given by its
    fields must then leave vocab_size out or agree."""
    if isinstance(tc.model, str):
        if tc.model not in PRESETS:
            raise ConfigError(f"unknown model preset {tc.model!r}; known: {', '.join(PRESETS)}")
        fields = dict(PRESETS[tc.model])
    else:
        fields = dict(tc.model)
        if tc.bpe_merges is not None and fields.get("vocab_size", bpe_vocab(tc.bpe_merges)) != bpe_vocab(tc.bpe_merges):
            raise ConfigError(f"model.vocab_size {fields['vocab_size']} does not fit bpe_merges (--bpe-merges) "
                              f"{tc.bpe_merges}: the run's own tokenizer has V = 256 + {tc.bpe_merges} + 1 = "
                              f"{bpe_vocab(tc.bpe_merges)}; leave vocab_size out of the model")
    if tc.bpe_merges is not None:
        fields["vocab_size"] = bpe_vocab(tc.bpe_merges)
    try:
        return ModelConfig.from_dict(fields)
    except TypeError as exc:
        raise ConfigError(f"model: {exc}") from exc


def bpe_vocab(n_merges: int) -> int:
    """V of a byte-level BPE with n_merges merges: the 256 bytes, the merges, <|endoftext|>."""
    return N_BYTES + n_merges + 1


def step_shape(tc: TrainConfig, cfg: ModelConfig, world: int) -> tuple[int, int]:
    """(T, A): the sequence length, and the micro-batches a step accumulates on each of `world`
    processes (with total_batch_tokens, as many as make the global batch that size)."""
    T = tc.seq_len or cfg.context_length
    if not tc.total_batch_tokens:
        return T, tc.grad_accum
    per = tc.batch_size * T * world
    if tc.total_batch_tokens % per:
        raise ConfigError(f"total_batch_tokens {tc.total_batch_tokens} is not a multiple of "
                          f"B·T·W = {tc.batch_size}·{T}·{world} = {per}")
    return T, tc.total_batch_tokens // per


def model_switches(tc: TrainConfig) -> dict:
    """How the run's model runs: ANDREA's keyword arguments (config.RUN_SWITCHES) from tc."""
    return {name: getattr(tc, name) for name in RUN_SWITCHES}


def load_config(name_or_file: str, **overrides) -> TrainConfig:
    """A training preset's name (andrea_course.presets.TRAIN_PRESETS) or a JSON file
    {"model": ..., "batch_size": ..., ...} whose fields go over its model's preset; then the
    overrides that are not None. ConfigError (one line, naming the file and the rule) otherwise."""
    path = Path(name_or_file)
    if name_or_file in TRAIN_PRESETS:
        base = dict(TRAIN_PRESETS[name_or_file])
    elif path.suffix == ".json" or path.exists() or "/" in name_or_file:
        base = _read_config_file(path)
    else:
        near = difflib.get_close_matches(name_or_file, TRAIN_PRESETS, n=1)
        raise ConfigError(f"unknown preset {name_or_file!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                          + f"; known presets: {', '.join(TRAIN_PRESETS)}; or give a JSON file")
    base.update({k: v for k, v in overrides.items() if v is not None})
    known = [f.name for f in dataclasses.fields(TrainConfig)]
    unknown = sorted(set(base) - set(known))
    if unknown:
        hints = [f"{u!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(u, known, n=1)) else repr(u)
                 for u in unknown]
        raise ConfigError(f"unknown training settings {', '.join(hints)} in {name_or_file}; "
                          f"known: {', '.join(known)}")
    return TrainConfig(**base)


def _read_config_file(path: Path) -> dict:
    if path.is_dir():
        raise ConfigError(f"config {path} is a folder, not a JSON file")
    if not path.is_file():
        raise ConfigError(f"no config file {path} (and no preset of that name: {', '.join(TRAIN_PRESETS)})")
    try:
        fields = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(fields, dict):
        raise ConfigError(f"{path} must hold a JSON object such as {{\"model\": \"andrea-tiny\", \"lr\": 0.002}}, "
                          f"not a {type(fields).__name__}")
    model = fields.get("model", "andrea-tiny")
    base = dict(TRAIN_PRESETS[model]) if isinstance(model, str) and model in TRAIN_PRESETS else {}
    return {**base, **fields}


def check_kernels(kernels: str, device) -> str | None:
    """Refuse (ConfigError) kernels this run cannot use; None, or a line to say before the run.

    The course's Triton kernels compile for a CUDA GPU. On another device they run only in
    Triton's interpreter, far slower than PyTorch's ops: andrea-train does that only when asked
    with TRITON_INTERPRET=1, and says so."""
    if kernels != "triton":
        return None
    import importlib.util
    import os
    if importlib.util.find_spec("triton") is None:
        raise ConfigError("--kernels triton needs Triton, which is not installed: pip install "
                          "'andrea-course[kernels]' (Linux), or train with --kernels torch")
    if getattr(device, "type", str(device)) == "cuda":
        return None
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return (f"--kernels triton on {device}: the Triton kernels run in Triton's interpreter "
                f"(TRITON_INTERPRET=1), far slower than --kernels torch")
    raise ConfigError(f"--kernels triton needs a CUDA GPU, and this run is on {device}: train with "
                      f"--kernels torch, or set TRITON_INTERPRET=1 to run the kernels in Triton's "
                      f"interpreter (far slower)")


# ----------------------------------------------------------------------------- flags and resume
def add_flags(parser: argparse.ArgumentParser, skip=("model", "data")) -> None:
    """One flag per TrainConfig field: --batch-size N, --compile/--no-compile, ... Each flag's
    default is None ("not given"): the preset's or the config file's value stands."""
    hints = typing.get_type_hints(TrainConfig)
    group = parser.add_argument_group("training settings (TrainConfig; a flag overrides the preset or "
                                      "--config file)")
    for f in dataclasses.fields(TrainConfig):
        if f.name in skip:
            continue
        kind = next(k for k in (typing.get_args(hints[f.name]) or (hints[f.name],)) if k is not type(None))
        shown = "none" if f.default is None else f.default
        text = f.metadata["help"]
        text += f" (TrainConfig's default: {shown})" if "default" not in text else ""
        if kind is bool:
            group.add_argument(flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                               help=text.replace("%", "%%"))
        else:
            group.add_argument(flag(f.name), dest=f.name, type=kind, default=None, help=text.replace("%", "%%"),
                               metavar=f.name.upper() if "choices" not in f.metadata else None,
                               choices=f.metadata.get("choices"))


# What may differ between a checkpoint and the run that resumes it, read off the fields above:
# the run-time switches (the model's own, config.RUN_SWITCHES, and the trainer's) and the
# optimisation's settings (say, a lower lr after a divergence, or more steps: the resumed run
# then follows the new schedule; the trainer says what changed). Everything else must be equal:
# the model (equal ModelConfigs, the one rule for "the same model"), the data, the tokenizer,
# T, the seed and the global batch (B·A·W, checked by the data position), so the run goes on
# where it stopped.
def _resume_kind(kind: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(TrainConfig)
                 if f.metadata["resume"] == kind or (kind == "switch" and f.name in RUN_SWITCHES))


RUN_TIME = _resume_kind("switch")
SCHEDULE = _resume_kind("schedule")


def resume_differences(saved: dict, now: TrainConfig) -> tuple[list[str], list[str]]:
    """(refused, allowed): 'name: checkpoint X, this run Y' for each setting that differs."""
    refused, allowed = [], []
    for k, v in now.to_dict().items():
        if k == "model" or k not in saved or saved[k] == v:
            continue
        (allowed if k in RUN_TIME + SCHEDULE else refused).append(f"{k}: checkpoint {saved[k]!r}, this run {v!r}")
    return refused, allowed
