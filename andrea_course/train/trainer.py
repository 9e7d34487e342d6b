"""andrea-train: train ANDREA on one CPU, one GPU or many (torchrun), resumable at any step.

    andrea-train --config andrea-tiny --out runs/tiny                       # a laptop, minutes
    andrea-train --config configs/andrea-120m.json --out runs/120m --data data/fineweb
    torchrun --nproc_per_node 8 -m andrea_course.train.trainer --config andrea-120m --out runs/120m
    andrea-train --config andrea-tiny --out runs/tiny --resume              # go on where it stopped

One optimizer step: A micro-batches of B sequences of T tokens on each of W processes
(B·T·A·W tokens), mean loss, backward (gradients averaged over processes by DDP), clip the
global gradient norm, AdamW, learning rate from the schedule. Every step appends one JSON line
to RUN_DIR/log.jsonl; every N steps an evaluation loss, a sample and a checkpoint. SIGTERM or
Ctrl-C saves a checkpoint at the end of the current step and stops; --resume continues with
exactly the losses the run would have had (on the CPU, bit for bit).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from ..config import ConfigError, ModelConfig
from ..gpus import peak_flops
from ..presets import TRAIN_PRESETS  # noqa: F401  (the notebooks read the presets from here)
from . import checkpoint as ckpt
from . import files
from .data import Batches, TokenData, eval_batches
from .runlog import RunLog, read_log, trim
from .settings import TrainConfig, add_flags, check_kernels, load_config, model_config, resume_differences  # noqa: F401


# ----------------------------------------------------------------------------- the model
def build_model(tc: TrainConfig, cfg: ModelConfig, factory=None) -> torch.nn.Module:
    """The one place the trainer builds ANDREA: the shape `cfg` with tc's run-time switches.

    factory(cfg, kernels=, dropout=, init_std=) -> model: who builds it (default: the engine's
    ANDREA). The seam for a learner's model: a caller above the grading layer hands in
    functools.partial(grading.passing.learner_model, impl=...) or overlay.build with its verdict;
    train/ itself never imports the overlay, the grader or the notebooks."""
    if factory is None:
        from ..model import ANDREA as factory
    return factory(cfg, kernels=tc.kernels, dropout=tc.dropout, init_std=tc.init_std)


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


# ----------------------------------------------------------------------------- the pieces
def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warm-up to tc.lr over warmup_steps, then a cosine down to min_lr at max_steps."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    progress = min(1.0, (step - tc.warmup_steps) / max(1, tc.max_steps - tc.warmup_steps))
    return tc.min_lr + 0.5 * (tc.lr - tc.min_lr) * (1 + math.cos(math.pi * progress))


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay every matrix (linear weights, the token and position tables, the head); not the
    vectors (biases, LayerNorm/RMSNorm gains). Weight decay pulls a tensor towards zero: for a
    matrix it keeps the weights small and the model smooth; a gain pulled to 0 would just shrink
    the signal the norm has worked to set to scale, and a bias has too few numbers to overfit."""
    decay, no_decay = [], []
    for p in model.parameters():          # a tied table appears once
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def flops_per_token(cfg: ModelConfig, n_params: int, T: int) -> float:
    """Training FLOPs per token, forward + backward (PaLM's estimate, as nanoGPT): 6 per weight
    used in a matrix product (not the position table nor, when untied, the input lookup) plus
    attention's 12·L·D·T (scores and weighted sum, causal mask ignored)."""
    lookup = cfg.context_length * cfg.d_model + (0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model)
    return 6 * (n_params - lookup) + 12 * cfg.n_layers * cfg.d_model * T


# ----------------------------------------------------------------------------- distributed
@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def on(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.on:
            dist.barrier()

    def mean(self, value: float) -> float:
        if not self.on:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t) / self.world

    def any(self, flag: bool) -> bool:
        if not self.on:
            return flag
        t = torch.tensor([int(flag)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t)


def parse_device(device_arg: str | None, local_rank: int = 0) -> torch.device:
    """The device asked for, or this process's GPU, else the CPU; ConfigError for one that is
    not there (a typo, cuda without a GPU, cuda:3 on a machine with two)."""
    if not device_arg:
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(device_arg)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"--device {device_arg!r} is not a device: give cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {device_arg}: no CUDA GPU is visible to PyTorch "
                              f"(torch.cuda.is_available() is False); leave --device out to use the CPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"--device {device_arg}: this machine has {torch.cuda.device_count()} GPU(s), "
                              f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--device {device_arg}: Apple's MPS is not available here")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"--device {device_arg}: the trainer runs on cpu, cuda or mps")
    return device


def setup_distributed(device_arg: str | None) -> Dist:
    """torchrun sets RANK, WORLD_SIZE, LOCAL_RANK: NCCL on GPUs, gloo on the CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    device = parse_device(device_arg, local)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Dist(rank, world, local, device)


def choose_dtype(tc: TrainConfig, device: torch.device) -> torch.dtype:
    if tc.dtype == "fp32" or (tc.dtype == "auto" and device.type != "cuda"):
        return torch.float32
    if tc.dtype == "bf16":
        return torch.bfloat16
    if tc.dtype == "fp16":
        return torch.float16
    # without emulation: a T4 or V100 "supports" bf16 only emulated, slowly; they train in fp16
    return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16


# ----------------------------------------------------------------------------- the trainer
class Diverged(RuntimeError):
    """The loss or the weights stopped being finite numbers."""


class StopRequested:
    """SIGTERM (a preempted spot machine, torchrun stopping) or SIGINT (Ctrl-C): finish the
    step, save a checkpoint, stop. A second Ctrl-C stops at once, except while a checkpoint is
    being written: then right after it."""

    def __init__(self):
        self.signal = None
        self.saving = False
        self.again = False
        self._old = {}
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        if self.signal is not None and signum == signal.SIGINT:   # a second Ctrl-C
            if self.saving:
                self.again = True
                return
            raise KeyboardInterrupt
        self.signal = signum

    @contextlib.contextmanager
    def checkpointing(self):
        self.saving = True
        try:
            yield
        finally:
            self.saving = False
        if self.again:
            raise KeyboardInterrupt

    def restore(self):
        for s, h in self._old.items():
            signal.signal(s, h)


class Trainer:
    """A run: everything it needs is checked in the constructor (config, device, data,
    checkpoint) before anything in the run folder is changed; fit() then trains."""

    def __init__(self, tc: TrainConfig, out: str | os.PathLike, resume: str | bool = False,
                 device: str | None = None, factory=None, progress: bool = True):
        tc.validate()
        self.tc, self.out, self.progress = tc, Path(out), progress
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"--out {self.out} is a file, not a run folder")
        self.d = d = setup_distributed(device)
        self.cfg = model_config(tc)
        self.T, self.accum = step_shape(tc, self.cfg, d.world)
        self.tokens_per_step = tc.batch_size * self.T * self.accum * d.world

        # data
        self.data = TokenData.from_folder(tc.data) if tc.data else TokenData.from_corpus()
        self.data.check_vocab(self.cfg.vocab_size)
        self.batches = Batches(self.data.train, self.T, tc.batch_size, self.accum, d.rank, d.world, tc.seed)

        # model, optimizer
        torch.manual_seed(tc.seed)
        self.factory = factory             # builds the model (build_model): the engine's, or a learner's
        self.model = build_model(tc, self.cfg, factory).to(d.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.dtype = choose_dtype(tc, d.device)
        self.scaler = torch.amp.GradScaler(d.device.type, enabled=self.dtype == torch.float16)
        self.step = 0
        self.resumed_from: Path | None = None
        self.notes: list[str] = []         # what resuming changed, said when the run starts
        self.tokenizer = None

        self.sharded = tc.fsdp and d.on
        self.wrapped = self._wrap(self.model)
        self.optimizer = torch.optim.AdamW(param_groups(self.model, tc.weight_decay), lr=tc.lr,
                                           betas=(tc.beta1, tc.beta2), eps=1e-8,
                                           fused=d.device.type == "cuda" and not self.sharded)
        if resume:
            self._resume(self.out if resume is True else Path(resume))
        if self.step >= tc.max_steps:
            raise ConfigError(f"the checkpoint is at step {self.step} and max_steps is {tc.max_steps}: "
                              f"nothing to train; raise --max-steps to go on")
        if d.main:
            files.check_writable_folder(self.out, "the run folder")
        self.peak = peak_flops(d.device)
        self.flops_per_token = flops_per_token(self.cfg, self.n_params, self.T)

    # ----- wrapping for many processes -----
    def _wrap(self, model):
        """Activation checkpointing per block; FSDP2 (fully_shard replaces the parameters by sharded
        ones, so the optimizer is made after this) or DDP; then torch.compile."""
        d, tc = self.d, self.tc
        if tc.checkpointing:
            from torch.distributed._composable import checkpoint
            for block in model.blocks:
                checkpoint(block)
        if tc.fsdp and d.on:
            from torch.distributed.fsdp import fully_shard
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
        elif d.on:
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[d.local_rank] if d.device.type == "cuda" else None)
        if tc.compile:
            model = torch.compile(model)
        return model

    # The weights and the optimizer state are saved whole and by parameter name, whatever the
    # wrapping: torch.distributed.checkpoint's state-dict API gathers FSDP's shards (a
    # collective call all ranks make) and names the optimizer's state by parameter, so any
    # number of processes, sharded or not, can load them.
    def _full_states(self, with_optimizer: bool = True) -> tuple:
        """(model to save, optimizer state dict): on rank 0 complete, elsewhere (None, {})."""
        from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                             get_optimizer_state_dict)
        opts = StateDictOptions(full_state_dict=self.sharded, cpu_offload=self.sharded)
        # the model's first: it also puts back FSDP's sharded parameters that an evaluation's
        # forward pass (no backward to reshard) left gathered, which the optimizer's needs
        weights = get_model_state_dict(self.model, options=opts) if self.sharded else None
        optim = get_optimizer_state_dict(self.model, self.optimizer, options=opts) if with_optimizer else {}
        if not self.sharded:
            return (self.model, optim) if self.d.main else (None, {})
        if not self.d.main:
            return None, {}
        copy = build_model(self.tc, self.cfg, self.factory)
        copy.load_state_dict(weights)
        return copy, optim

    def _load_optimizer(self, state: dict) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict
        set_optimizer_state_dict(self.model, self.optimizer, state,
                                 options=StateDictOptions(full_state_dict=self.sharded))

    # ----- checkpoints -----
    def _state(self, optimizer_state: dict) -> dict:
        return {"step": self.step, "optimizer": optimizer_state, "scaler": self.scaler.state_dict(),
                "data": self.batches.state_dict(), "train_config": json.dumps(self.tc.to_dict()),
                "model_config": json.dumps(self.cfg.to_dict(), sort_keys=True),
                "data_identity": json.dumps({"source": self.data.source, "fingerprint": self.data.fingerprint,
                                             "tokenizer_hash": self.data.tokenizer_hash})}

    def _weights_finite(self) -> bool:
        local = all(bool(torch.isfinite(p.to_local() if hasattr(p, "to_local") else p).all())
                    for p in self.model.parameters())
        return not self.d.any(not local)

    def save_checkpoint(self, loss: float | None = None) -> Path | None:
        """A checkpoint of this step, unless the weights are no longer finite: then Diverged,
        and the checkpoints already written (all finite) stay."""
        if not self._weights_finite():
            raise Diverged(f"the weights hold NaN or inf after step {self.step}: no checkpoint written")
        model, optim = self._full_states()
        error = None
        try:
            folder = ckpt.save(self.out, self.step,
                               lambda path: self._save_weights(model, path, {"step": str(self.step)}),
                               self._state(optim) if self.d.main else {}, self.d.rank, self.d.world,
                               barrier=self.d.barrier, keep=self.tc.keep_checkpoints, loss=loss)
        except ckpt.CheckpointError as exc:
            error, folder = exc, None
        if self.d.any(error is not None):      # every rank stops, not only the one that failed
            raise error or ckpt.CheckpointError(f"another process could not write the checkpoint of step {self.step}")
        if folder is not None:
            self._print(f"checkpoint: {folder}")
        return folder

    @staticmethod
    def _save_weights(model, path, metadata):
        from ..weights import save_weights
        save_weights(model, path, metadata)

    def _resume(self, where: Path) -> None:
        """Load a checkpoint after checking it is this run's: the same model shape, data,
        tokenizer, T, seed and global batch; run-time switches and the schedule may differ."""
        from ..weights import WeightsError, load_weights
        folder = ckpt.find(where)
        state, rng = ckpt.load(folder, self.d.rank)
        saved_cfg = ModelConfig.from_dict(json.loads(state["model_config"]))
        if saved_cfg != self.cfg:                  # the one rule for "the same model"
            saved_shape, now_shape = saved_cfg.to_dict(), self.cfg.to_dict()
            diff = "; ".join(f"{k}: checkpoint {saved_shape.get(k)!r}, this run {v!r}"
                             for k, v in now_shape.items() if saved_shape.get(k) != v)
            raise ckpt.CheckpointError(f"{folder} holds a model with another config ({diff}): "
                                       f"resume with the checkpoint's model")
        saved_data = json.loads(state.get("data_identity", "{}"))
        if saved_data and saved_data["tokenizer_hash"] != self.data.tokenizer_hash:
            raise ckpt.CheckpointError(
                f"{folder} was trained on data made with tokenizer {saved_data['tokenizer_hash']}, this run's "
                f"data ({self.data.source}) with tokenizer {self.data.tokenizer_hash}: resume with --data "
                f"{saved_data['source']}")
        if saved_data and saved_data["fingerprint"] != self.data.fingerprint:
            raise ckpt.CheckpointError(
                f"{folder} was trained on other data ({saved_data['source']}) than this run's "
                f"({self.data.source}): their tokens differ; resume with --data {saved_data['source']}")
        refused, allowed = resume_differences(json.loads(state["train_config"]), self.tc)
        if refused:
            raise ckpt.CheckpointError(f"{folder} was trained with other settings ({'; '.join(refused)}): "
                                       f"only run-time switches and the schedule may change on resume")
        self.batches.load_state_dict(state["data"])
        try:
            saved = load_weights(folder / "model.safetensors", model=None if self.sharded else self.model)
        except WeightsError as exc:
            raise ckpt.CheckpointError(f"refusing to resume from {folder}: {exc}") from exc
        self.model.train()
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict)
            set_model_state_dict(self.model, saved.state_dict(), options=StateDictOptions(full_state_dict=True))
        self._load_optimizer(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        ckpt.set_rng_state(rng)
        self.step = int(state["step"])
        self.resumed_from = folder
        if allowed:
            self.notes.append("resuming with changed settings: " + "; ".join(allowed))

    # ----- one step -----
    def autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.d.device.type, dtype=self.dtype)

    def train_step(self) -> tuple[float, float]:
        """One optimizer step; returns (mean loss over the global batch, gradient norm)."""
        model, opt = self.wrapped, self.optimizer
        model.train()
        for group in opt.param_groups:       # the schedule is a function of the step alone
            group["lr"] = lr_at(self.step, self.tc)
        micro = self.batches.next_step()
        total = torch.zeros((), device=self.d.device)
        for a, (x, y) in enumerate(micro):
            x, y = x.to(self.d.device, non_blocking=True), y.to(self.d.device, non_blocking=True)
            last = a == len(micro) - 1
            sync = contextlib.nullcontext() if (last or not hasattr(model, "no_sync")) else model.no_sync()
            with sync:
                with self.autocast():
                    loss = model(x, y)[1]        # not holding the (B, T, V) logits through the backward
                loss = loss / len(micro)
                self.scaler.scale(loss).backward()
            total += loss.detach()
        self.scaler.unscale_(opt)
        if self.tc.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        else:
            norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in self.model.parameters() if p.grad is not None))
        self.scaler.step(opt)
        self.scaler.update()
        opt.zero_grad(set_to_none=True)
        self.step += 1
        return self.d.mean(float(total)), float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    @torch.no_grad()
    def evaluate(self) -> float:
        self.wrapped.eval()
        losses = torch.zeros(2, dtype=torch.float64, device=self.d.device)
        for x, y in eval_batches(self.data.val, self.T, self.tc.batch_size, self.tc.eval_batches,
                                 self.d.rank, self.d.world):
            with self.autocast():
                _, loss = self.wrapped(x.to(self.d.device), y.to(self.d.device))
            losses += torch.tensor([float(loss), 1.0], dtype=torch.float64, device=self.d.device)
        if self.d.on:
            dist.all_reduce(losses)
        self.wrapped.train()
        return float(losses[0] / losses[1]) if losses[1] > 0 else float("nan")

    @torch.no_grad()
    def sample(self) -> str:
        """A short continuation of the prompt (rank 0; a generator of its own, so the training
        RNG and therefore the loss curve do not depend on when samples are drawn)."""
        from .sample import generate_text
        if self.tokenizer is None:
            from .tokenizer import load_tokenizer
            self.tokenizer = load_tokenizer(self.out / "tokenizer.json")
        if self.tc.fsdp and self.d.on:
            return ""
        return generate_text(self.model, self.tokenizer, self.tc.sample_prompt, self.tc.sample_tokens,
                             temperature=0.8, top_k=40, seed=self.tc.seed + self.step)

    # ----- the loop -----
    def _print(self, msg: str) -> None:
        if self.d.main:
            print(msg, file=sys.stderr, flush=True)

    def _start_files(self) -> tuple:
        """The run folder's files, now that every input has been accepted: the tokenizer and
        config (each written then renamed), the log (cut back to the checkpoint's step when
        resuming), TensorBoard (told to hide what a resumed run will log again)."""
        tc = self.tc
        from .tokenizer import TOKENIZER_FILE
        own = Path(tc.data) / "tokenizer.json" if tc.data else None
        files.copy(own if own and own.is_file() else TOKENIZER_FILE, self.out / "tokenizer.json")
        files.write_text(self.out / "config.json", json.dumps(
            {"train": tc.to_dict(), "model": self.cfg.to_dict(), "world_size": self.d.world,
             "tokens_per_step": self.tokens_per_step, "grad_accum": self.accum}, indent=1))
        if self.resumed_from is not None:
            note = trim(self.out / "log.jsonl", self.step)
            if note:
                self.notes.append(note)
        log = RunLog(self.out / "log.jsonl", new=self.resumed_from is None)
        tb = self._tensorboard() if tc.tensorboard else None
        return log, tb

    def fit(self, on_step=None) -> dict:
        """Train to max_steps (or a signal). on_step(record) is called on rank 0 after every step
        (the notebook draws its live loss plot with it). Returns the last step's record.
        A loss or weights that stop being finite raise Diverged: no checkpoint of them is written."""
        tc, d = self.tc, self.d
        log, tb = self._start_files() if d.main else (None, None)
        stop = StopRequested()
        bar = self._bar()
        if self.resumed_from is not None:
            self._print(f"resumed from {self.resumed_from} at step {self.step}")
        for note in self.notes:
            self._print(note)
        self._print(f"ANDREA {self.n_params:,} parameters on {d.world} x {d.device.type} ({self.dtype}); "
                    f"{self.tokens_per_step:,} tokens a step (B={tc.batch_size} T={self.T} A={self.accum} "
                    f"W={d.world}); data: {self.data.source} ({len(self.data.train):,} train tokens)")
        last = {}
        try:
            while self.step < tc.max_steps:
                t0 = time.perf_counter()
                lr = lr_at(self.step, tc)
                loss, norm = self.train_step()
                if d.device.type == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                rec = {"step": self.step, "loss": loss, "lr": lr,
                       "grad_norm": norm, "tokens": self.step * self.tokens_per_step,
                       "tokens_per_s": self.tokens_per_step / dt}
                if self.peak:
                    rec["mfu"] = self.flops_per_token * rec["tokens_per_s"] / (self.peak * d.world)
                finite = math.isfinite(loss)
                if finite and tc.eval_every and (self.step % tc.eval_every == 0 or self.step == tc.max_steps):
                    rec["val_loss"] = self.evaluate()
                if finite and d.main and tc.sample_every and self.step % tc.sample_every == 0:
                    rec["sample"] = self.sample()
                    self._print(f"step {self.step} sample: {rec['sample']!r}")
                if d.main:
                    log.append(rec)
                    if tb:
                        for k in ("loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
                            if k in rec:
                                tb.add_scalar(f"train/{k}" if k != "val_loss" else "val/loss", rec[k], self.step)
                        if "sample" in rec:
                            tb.add_text("sample", rec["sample"], self.step)
                    bar.update(1)
                    bar.set_postfix(self._postfix(rec))
                    if on_step:
                        on_step(rec)
                if not finite:
                    good = ckpt.good_checkpoints(self.out)
                    raise Diverged(f"the loss is {loss} at step {self.step} (lr {lr:.3g}): the run diverged and "
                                   f"stops; " + (f"the last checkpoint, all finite, is {good[0]}: resume from it "
                                                 f"with a lower --lr" if good else "no checkpoint was written")
                                   + f" (steps to {self.step} are in {self.out / 'log.jsonl'})")
                last = rec
                stopping = d.any(stop.signal is not None)
                if stopping or (tc.checkpoint_every and self.step % tc.checkpoint_every == 0):
                    with stop.checkpointing():
                        self.save_checkpoint(loss)
                if stopping:
                    self._print(f"stopped by signal at step {self.step}; continue with --resume")
                    break
            else:
                if not (tc.checkpoint_every and self.step % tc.checkpoint_every == 0):
                    with stop.checkpointing():
                        self.save_checkpoint(last.get("loss"))
        finally:
            stop.restore()
            bar.close()
            if log:
                log.close()
            if tb:
                tb.close()
        model, _ = self._full_states(with_optimizer=False)
        if d.main:
            self._final(model)
        return last

    def _postfix(self, rec: dict) -> dict:
        out = {"loss": f"{rec['loss']:.3f}", "tok/s": f"{rec['tokens_per_s']:,.0f}"}
        if "mfu" in rec:
            out["mfu"] = f"{100 * rec['mfu']:.1f}%"
        if "val_loss" in rec:
            out["val"] = f"{rec['val_loss']:.3f}"
        return out

    def _bar(self):
        from tqdm.auto import tqdm
        return tqdm(total=self.tc.max_steps, initial=self.step, unit="step", dynamic_ncols=True,
                    disable=not (self.d.main and self.progress))

    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            self._print("tensorboard is not installed: no TensorBoard logs (pip install tensorboard)")
            return None
        # purge_step: TensorBoard hides what earlier event files logged from this step on, so a
        # resumed run's steps are not shown twice.
        return SummaryWriter(str(self.out / "tensorboard"),
                             purge_step=self.step + 1 if self.resumed_from is not None else None)

    def _final(self, model) -> None:
        """The exported weights and the loss plot."""
        self._save_weights(model, self.out / "model.safetensors", {"step": str(self.step)})
        try:
            plot_losses(self.out / "log.jsonl", self.out / "loss.png")
        except ImportError:
            self._print("matplotlib is not installed: no loss.png")

    def close(self) -> None:
        if self.d.on and dist.is_initialized():
            dist.destroy_process_group()


def plot_losses(log_path, png_path=None, ax=None):
    """Training loss per step and validation loss; to a PNG file, or onto a matplotlib axis."""
    import matplotlib
    if ax is None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    recs = read_log(log_path)
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["step"] for r in recs], [r["loss"] for r in recs], label="train", lw=1)
    val = [r for r in recs if "val_loss" in r]
    if val:
        ax.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.legend()
    ax.grid(alpha=0.3)
    if own:
        fig.tight_layout()
        tmp = Path(png_path).with_name(Path(png_path).name + ".tmp")
        fig.savefig(tmp, dpi=100, format="png")
        plt.close(fig)
        os.replace(tmp, png_path)
    return ax


# ----------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    from .cli import Parser
    p = Parser("andrea-train", __doc__, epilog=(
        "A preset or --config file sets the training settings; a flag overrides it. Presets: "
        + ", ".join(TRAIN_PRESETS) + " (andrea_course/presets.py; configs/*.json are the same as files). "
        "Exit status: 0 done or stopped by a signal (resume it), 1 the run failed (data, checkpoint, "
        "divergence, disk), 2 a bad argument or setting."))
    p.add_argument("--config", default="andrea-tiny", help="a training preset's name or a JSON file")
    p.add_argument("--out", help="the run's folder: logs, checkpoints, model.safetensors (required to train)")
    p.add_argument("--data", help="a folder written by andrea-prepare (default: the shipped stories)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="CHECKPOINT",
                   help="continue from the run folder's latest checkpoint, or from the checkpoint folder given "
                        "(default: a new run)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: this process's GPU, else the CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on rank 0)")
    add_flags(p)
    from .plan import add_arguments as add_plan_arguments     # --plan, --gpu-check: actions, not settings
    add_plan_arguments(p)
    return p


def main(argv=None) -> int:
    from .cli import run
    return run("andrea-train", _main, argv)


def _main(argv) -> int:
    from .cli import UsageError
    p = build_parser()
    args = p.parse_args(argv)
    flags = {k: getattr(args, k) for k in TrainConfig.__dataclass_fields__ if hasattr(args, k)}
    tc = load_config(args.config, **flags)
    if args.plan or args.gpu_check:
        from .plan import run_action
        return run_action(args, tc)
    if not args.out:
        raise UsageError("--out RUN_DIR is required to train (only --plan and --gpu-check run without it)")
    note = check_kernels(tc.kernels, parse_device(args.device))
    if note:
        print(f"andrea-train: {note}", file=sys.stderr)
    out = Path(args.out)
    if not args.resume and (ckpt.checkpoints_dir(out) / ckpt.LATEST).exists():
        raise UsageError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
    trainer = Trainer(tc, out, resume=args.resume, device=args.device, progress=not args.no_progress)
    try:
        trainer.fit()
        trainer.d.barrier()        # every rank done before any tears its gloo/NCCL connections down
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
