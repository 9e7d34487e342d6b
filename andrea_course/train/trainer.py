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
import dataclasses
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from ..config import ModelConfig
from . import checkpoint as ckpt
from .data import Batches, DataError, TokenData, eval_batches


# ----------------------------------------------------------------------------- configuration
@dataclass
class TrainConfig:
    model: str | dict = "andrea-tiny"       # a preset's name, or ModelConfig fields
    seq_len: int | None = None              # T for training (None: the model's context length)
    batch_size: int = 16                    # B: sequences per micro-batch per process
    grad_accum: int = 1                     # A: micro-batches per optimizer step
    total_batch_tokens: int | None = None   # if set, A = this / (B·T·W): the same run on 1 or 8 GPUs
    max_steps: int = 1000
    lr: float = 2e-3                        # peak learning rate
    min_lr: float = 2e-4                    # where the cosine ends
    warmup_steps: int = 50
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0                  # max global L2 norm of the gradient (0: off)
    eval_every: int = 100
    eval_batches: int = 8
    sample_every: int = 200
    sample_tokens: int = 80
    sample_prompt: str = "Once upon a time"
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    seed: int = 1337
    dtype: str = "auto"                     # auto | fp32 | bf16 | fp16 (auto: bf16 on a GPU that has it, fp16 on one that hasn't, fp32 on the CPU)
    compile: bool = False                   # torch.compile the model
    kernels: str = "torch"                  # the hot ops: PyTorch's fused ops or the course's Triton kernels
    dropout: float = 0.0                    # probability of every dropout layer while training
    init_std: float | None = None           # scale of the initial weights (None: 1/sqrt(D))
    fsdp: bool = False                      # shard parameters, gradients and optimizer state (FSDP2) instead of DDP
    tensorboard: bool = True
    data: str | None = None                 # a prepared folder (andrea-prepare); None: the shipped stories

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Sensible training settings for each model preset; a JSON config file overrides any of them.
TRAIN_PRESETS: dict[str, dict] = {
    # 2,048 tokens a step: on two laptop cores about a second; the loss is below 3 within 200 steps.
    "andrea-tiny": dict(batch_size=8, seq_len=256, max_steps=800, lr=2e-3, warmup_steps=30),
    "andrea-tiny-modern": dict(batch_size=8, seq_len=256, max_steps=800, lr=2e-3, warmup_steps=30),
    # GPT-2 small's recipe: 0.5M tokens a step, 6e-4 peak, 700 steps of warm-up.
    "andrea-120m": dict(batch_size=16, seq_len=1024, total_batch_tokens=524288, max_steps=10000,
                        lr=6e-4, min_lr=6e-5, warmup_steps=700, eval_every=250, eval_batches=20,
                        sample_every=500, checkpoint_every=500),
    "andrea-120m-modern": dict(batch_size=16, seq_len=1024, total_batch_tokens=524288, max_steps=10000,
                               lr=6e-4, min_lr=6e-5, warmup_steps=700, eval_every=250, eval_batches=20,
                               sample_every=500, checkpoint_every=500),
}


def load_config(name_or_file: str, **overrides) -> TrainConfig:
    """A preset's name (andrea-tiny, ...) or a JSON file {"model": ..., "batch_size": ..., ...}."""
    path = Path(name_or_file)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise FileNotFoundError(f"no config file {path}")
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from exc
        model = fields.get("model", "andrea-tiny")
        base = dict(TRAIN_PRESETS.get(model, {})) if isinstance(model, str) else {}
        base.update(fields)
    else:
        ModelConfig.preset(name_or_file)                    # a clear error for an unknown name
        base = dict(TRAIN_PRESETS.get(name_or_file, {}), model=name_or_file)
    base.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(base) - known)
    if unknown:
        raise ValueError(f"unknown training settings {unknown}; known: {sorted(known)}")
    return TrainConfig(**base)


def model_config(tc: TrainConfig) -> ModelConfig:
    return ModelConfig.preset(tc.model) if isinstance(tc.model, str) else ModelConfig.from_dict(tc.model)


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


# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' data sheets, without sparsity.
# Matched in order against torch.cuda.get_device_name(); an unknown device has no MFU.
GPU_PEAK_BF16 = [
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("H200", 989e12), ("GH200", 989e12),
    ("H20", 148e12), ("B200", 2250e12), ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12),
    ("L40", 181e12), ("L4", 121e12), ("A10G", 70e12),   # A10G: AWS's A10, lower clocks; a common estimate
    ("A10", 125e12), ("RTX 6000 Ada", 364e12), ("RTX A6000", 155e12), ("RTX 4090", 165e12),
    ("RTX 3090", 71e12), ("V100", 125e12), ("T4", 65e12),   # V100, T4: no bf16, their fp16 peak
]


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, peak in GPU_PEAK_BF16:
        if key in name:
            return peak
    return None


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


def setup_distributed(device_arg: str | None) -> Dist:
    """torchrun sets RANK, WORLD_SIZE, LOCAL_RANK: NCCL on GPUs, gloo on the CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if device_arg:
        device = torch.device(device_arg)
    else:
        device = torch.device(f"cuda:{local}") if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Dist(rank, world, local, device)


def choose_dtype(tc: TrainConfig, device: torch.device) -> torch.dtype:
    if tc.dtype == "fp32" or (tc.dtype == "auto" and device.type != "cuda"):
        return torch.float32
    if tc.dtype == "bf16":
        return torch.bfloat16
    if tc.dtype == "fp16":
        return torch.float16
    if tc.dtype == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    raise ValueError(f"dtype must be auto, fp32, bf16 or fp16, got {tc.dtype!r}")


# ----------------------------------------------------------------------------- the trainer
class StopRequested:
    """SIGTERM (a preempted spot machine, torchrun stopping) or SIGINT (Ctrl-C): finish the
    step, save a checkpoint, stop."""

    def __init__(self):
        self.signal = None
        self._old = {}
        for s in (signal.SIGTERM, signal.SIGINT):
            self._old[s] = signal.signal(s, self._handle)

    def _handle(self, signum, frame):
        if self.signal is not None and signum == signal.SIGINT:   # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.signal = signum

    def restore(self):
        for s, h in self._old.items():
            signal.signal(s, h)


class Trainer:
    def __init__(self, tc: TrainConfig, out: str | os.PathLike, resume: str | bool = False,
                 device: str | None = None, impl=None, progress: bool = True):
        from ..model import ANDREA
        from ..weights import save_weights
        self.tc, self.out, self.progress = tc, Path(out), progress
        self.d = d = setup_distributed(device)
        self.cfg = model_config(tc)
        self.T = tc.seq_len or self.cfg.context_length
        if self.T > self.cfg.context_length:
            raise ValueError(f"seq_len {self.T} is longer than the model's context length {self.cfg.context_length}")
        self.accum = tc.grad_accum
        if tc.total_batch_tokens:
            per = tc.batch_size * self.T * d.world
            if tc.total_batch_tokens % per:
                raise ValueError(f"total_batch_tokens {tc.total_batch_tokens} is not a multiple of "
                                 f"B·T·W = {tc.batch_size}·{self.T}·{d.world} = {per}")
            self.accum = tc.total_batch_tokens // per
        self.tokens_per_step = tc.batch_size * self.T * self.accum * d.world

        # data
        self.data = TokenData.from_folder(tc.data) if tc.data else TokenData.from_corpus()
        self.data.check_vocab(self.cfg.vocab_size)
        self.batches = Batches(self.data.train, self.T, tc.batch_size, self.accum, d.rank, d.world, tc.seed)

        # model, optimizer, schedule
        torch.manual_seed(tc.seed)
        self.model = ANDREA(self.cfg, impl=impl, kernels=tc.kernels, dropout=tc.dropout,
                            init_std=tc.init_std).to(d.device)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.dtype = choose_dtype(tc, d.device)
        self.optimizer = torch.optim.AdamW(param_groups(self.model, tc.weight_decay), lr=tc.lr,
                                           betas=(tc.beta1, tc.beta2), eps=1e-8,
                                           fused=d.device.type == "cuda")
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_at(s, tc) / tc.lr)
        self.scaler = torch.amp.GradScaler(d.device.type, enabled=self.dtype == torch.float16)
        self.step = 0
        self.resumed = bool(resume)
        self._save_weights = save_weights
        self.tokenizer = None

        self.sharded = tc.fsdp and d.on
        self.wrapped = self._wrap(self.model)
        if resume:
            self._resume(self.out if resume is True else Path(resume))
        self.peak = peak_flops(d.device)
        self.flops_per_token = flops_per_token(self.cfg, self.n_params, self.T)

    # ----- wrapping for many processes -----
    def _wrap(self, model):
        d, tc = self.d, self.tc
        if tc.fsdp and d.on:
            from torch.distributed.fsdp import fully_shard
            for block in model.blocks:
                fully_shard(block)
            fully_shard(model)
            self.optimizer = self._rebuild_optimizer_after_shard()
        elif d.on:
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(model, device_ids=[d.local_rank] if d.device.type == "cuda" else None)
        if tc.compile:
            model = torch.compile(model)
        return model

    def _rebuild_optimizer_after_shard(self):
        """fully_shard replaced the parameters by sharded ones: the optimizer must hold those."""
        opt = torch.optim.AdamW(param_groups(self.model, self.tc.weight_decay), lr=self.tc.lr,
                                betas=(self.tc.beta1, self.tc.beta2), eps=1e-8)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, self.tc) / self.tc.lr)
        return opt

    # With FSDP every rank holds a shard: gathering the full weights and optimizer state is a
    # collective call that all ranks make; only rank 0 then writes.
    def _full_states(self) -> tuple:
        """(model to save, optimizer state dict): on rank 0 complete, elsewhere (None, {})."""
        if not self.sharded:
            return self.model, (self.optimizer.state_dict() if self.d.main else {})
        from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                             get_optimizer_state_dict)
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        weights = get_model_state_dict(self.model, options=opts)
        optim = get_optimizer_state_dict(self.model, self.optimizer, options=opts)
        if not self.d.main:
            return None, {}
        from ..model import ANDREA
        copy = ANDREA(self.cfg, impl=self.model.impl)
        copy.load_state_dict(weights)
        return copy, optim

    # ----- checkpoints -----
    def _state(self, optimizer_state: dict) -> dict:
        return {"step": self.step, "optimizer": optimizer_state,
                "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
                "data": self.batches.state_dict(), "train_config": json.dumps(self.tc.to_dict()),
                "model_config": json.dumps(self.cfg.to_dict(), sort_keys=True)}

    def save_checkpoint(self) -> Path | None:
        model, optim = self._full_states()
        folder = ckpt.save(self.out, self.step,
                           lambda path: self._save_weights(model, path, {"step": str(self.step)}),
                           self._state(optim) if self.d.main else {}, self.d.rank, self.d.world,
                           barrier=self.d.barrier, keep=self.tc.keep_checkpoints)
        if folder is not None:
            self._print(f"checkpoint: {folder}")
        return folder

    def _resume(self, where: Path) -> None:
        from ..weights import WeightsError, load_weights
        folder = ckpt.find(where)
        state, rng = ckpt.load(folder, self.d.rank, self.d.world)
        saved_cfg = json.loads(state["model_config"])
        if ModelConfig.from_dict(saved_cfg) != self.cfg:        # the one rule for "the same model"
            diff = {k: (saved_cfg.get(k), v) for k, v in self.cfg.to_dict().items() if saved_cfg.get(k) != v}
            raise ckpt.CheckpointError(f"{folder} holds a model with another config; differences "
                                       f"(checkpoint, this run): {diff}")
        try:
            saved = load_weights(folder / "model.safetensors", model=None if self.sharded else self.model,
                                 impl=self.model.impl)
        except WeightsError as exc:
            raise ckpt.CheckpointError(f"refusing to resume from {folder}: {exc}") from exc
        self.model.train()
        if self.sharded:
            from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                                 set_optimizer_state_dict)
            opts = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.model, saved.state_dict(), options=opts)
            set_optimizer_state_dict(self.model, self.optimizer, state["optimizer"], options=opts)
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.batches.load_state_dict(state["data"])
        ckpt.set_rng_state(rng)
        self.step = int(state["step"])
        if self.d.main:       # the log keeps exactly the steps the checkpoint has seen
            log = self.out / "log.jsonl"
            if log.exists():
                lines = [l for l in log.read_text(encoding="utf-8").splitlines()
                         if l.strip() and json.loads(l)["step"] <= self.step]
                log.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
        self._print(f"resumed from {folder} at step {self.step}")

    # ----- one step -----
    def autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.d.device.type, dtype=self.dtype)

    def train_step(self) -> tuple[float, float]:
        """One optimizer step; returns (mean loss over the global batch, gradient norm)."""
        model, opt = self.wrapped, self.optimizer
        model.train()
        micro = self.batches.next_step()
        total = torch.zeros((), device=self.d.device)
        for a, (x, y) in enumerate(micro):
            x, y = x.to(self.d.device, non_blocking=True), y.to(self.d.device, non_blocking=True)
            last = a == len(micro) - 1
            sync = contextlib.nullcontext() if (last or not hasattr(model, "no_sync")) else model.no_sync()
            with sync:
                with self.autocast():
                    _, loss = model(x, y)
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
        self.scheduler.step()
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

    def fit(self, on_step=None) -> dict:
        """Train to max_steps (or a signal). on_step(record) is called on rank 0 after every step
        (the notebook draws its live loss plot with it). Returns the last step's record."""
        tc, d = self.tc, self.d
        self.out.mkdir(parents=True, exist_ok=True)
        if d.main:           # the run keeps the tokenizer its data was made with, for sampling
            from .tokenizer import TOKENIZER_FILE
            own = Path(tc.data) / "tokenizer.json" if tc.data else None
            shutil.copyfile(own if own and own.is_file() else TOKENIZER_FILE, self.out / "tokenizer.json")
            (self.out / "config.json").write_text(json.dumps(
                {"train": tc.to_dict(), "model": self.cfg.to_dict(), "world_size": d.world,
                 "tokens_per_step": self.tokens_per_step, "grad_accum": self.accum}, indent=1), encoding="utf-8")
        log = open(self.out / "log.jsonl", "a" if self.resumed else "w", encoding="utf-8") if d.main else None
        tb = self._tensorboard() if d.main and tc.tensorboard else None
        stop = StopRequested()
        bar = self._bar()
        self._print(f"ANDREA {self.n_params:,} parameters on {d.world} x {d.device.type} ({self.dtype}); "
                    f"{self.tokens_per_step:,} tokens a step (B={tc.batch_size} T={self.T} A={self.accum} "
                    f"W={d.world}); data: {self.data.source} ({len(self.data.train):,} train tokens)")
        last = {}
        try:
            while self.step < tc.max_steps:
                t0 = time.perf_counter()
                lr = self.optimizer.param_groups[0]["lr"]
                loss, norm = self.train_step()
                if d.device.type == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                rec = {"step": self.step, "loss": loss, "lr": lr,
                       "grad_norm": norm, "tokens": self.step * self.tokens_per_step,
                       "tokens_per_s": self.tokens_per_step / dt}
                if self.peak:
                    rec["mfu"] = self.flops_per_token * rec["tokens_per_s"] / (self.peak * d.world)
                if tc.eval_every and (self.step % tc.eval_every == 0 or self.step == tc.max_steps):
                    rec["val_loss"] = self.evaluate()
                if d.main and tc.sample_every and self.step % tc.sample_every == 0:
                    rec["sample"] = self.sample()
                    self._print(f"step {self.step} sample: {rec['sample']!r}")
                if d.main:
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
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
                last = rec
                stopping = d.any(stop.signal is not None)
                if stopping or (tc.checkpoint_every and self.step % tc.checkpoint_every == 0):
                    self.save_checkpoint()
                if stopping:
                    self._print(f"stopped by signal at step {self.step}; continue with --resume")
                    break
            else:
                if not (tc.checkpoint_every and self.step % tc.checkpoint_every == 0):
                    self.save_checkpoint()
        finally:
            stop.restore()
            bar.close()
            if log:
                log.close()
            if tb:
                tb.close()
        model, _ = self._full_states()
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
        return SummaryWriter(str(self.out / "tensorboard"))

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


def read_log(path: str | os.PathLike) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


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
        fig.savefig(png_path, dpi=100)
        plt.close(fig)
    return ax


# ----------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="andrea-train", description=__doc__.split("\n")[0])
    p.add_argument("--config", default="andrea-tiny", help="a preset (andrea-tiny, andrea-120m, ...) or a JSON file")
    p.add_argument("--out", required=True, help="the run's folder: logs, checkpoints, model.safetensors")
    p.add_argument("--data", help="a folder written by andrea-prepare (default: the shipped stories)")
    p.add_argument("--resume", nargs="?", const=True, default=False,
                   help="continue from the run folder's latest checkpoint, or from the checkpoint given")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--sample-every", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--grad-accum", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--dtype", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--compile", action="store_true", default=None)
    p.add_argument("--fsdp", action="store_true", default=None, help="shard the model (FSDP2) instead of DDP")
    p.add_argument("--kernels", choices=["torch", "triton"], help="attention and friends: PyTorch's fused ops or the course's Triton kernels")
    p.add_argument("--no-tensorboard", dest="tensorboard", action="store_false", default=None)
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: this process's GPU, else the CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    tc = load_config(args.config, data=args.data, max_steps=args.max_steps, checkpoint_every=args.checkpoint_every,
                     eval_every=args.eval_every, sample_every=args.sample_every, batch_size=args.batch_size,
                     grad_accum=args.grad_accum, seq_len=args.seq_len, lr=args.lr, seed=args.seed,
                     dtype=args.dtype, compile=args.compile, fsdp=args.fsdp, tensorboard=args.tensorboard)
    if args.kernels:
        tc.kernels = args.kernels
    out = Path(args.out)
    if not args.resume and (ckpt.checkpoints_dir(out) / ckpt.LATEST).exists():
        print(f"{out} already holds a run: pass --resume to continue it, or choose another --out", file=sys.stderr)
        return 2
    try:
        trainer = Trainer(tc, out, resume=args.resume, device=args.device, progress=not args.no_progress)
    except (ckpt.CheckpointError, DataError, FileNotFoundError, ValueError) as exc:
        print(f"andrea-train: {exc}", file=sys.stderr)
        return 1
    try:
        trainer.fit()
    finally:
        trainer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
