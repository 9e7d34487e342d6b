"""The training loop: train ANDREA on one CPU, one GPU or many (torchrun), resumable at any step.

    trainer = Trainer(load_config("andrea-tiny", max_steps=100), "runs/tiny")
    trainer.fit()                     # log.jsonl, checkpoints, model.safetensors, loss.png
    Trainer(tc, "runs/tiny", resume=True).fit()        # on from the latest checkpoint

The command line is `andrea-train` (andrea_course/capstone.py), which builds a Trainer with the
learner's pieces or without. One optimizer step: A micro-batches of B sequences of T tokens on
each of W processes (B·T·A·W tokens), mean loss, backward (gradients averaged over processes by
DDP), clip the global gradient norm, the optimizer, the learning rate from the schedule. Every
step appends one JSON line to RUN_DIR/log.jsonl; every N steps an evaluation loss, a sample and a
checkpoint. SIGTERM or Ctrl-C saves a checkpoint at the end of the current step and stops;
resuming continues with exactly the losses the run would have had (on the CPU, bit for bit).

Whose code trains is handed in, never looked up here: the model (model_factory), the optimizer
(optimizer_factory), the schedule (lr_schedule) and the BPE that makes the run's own tokenizer
(bpe); each defaults to the engine's. `pieces`, a record of whose pieces run, is written to
RUN_DIR/pieces.json and kept in every checkpoint.
"""
from __future__ import annotations

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

from ..engine.config import ConfigError, ModelConfig
from ..gpus import peak_flops
from ..presets import TRAIN_PRESETS  # noqa: F401  (the notebooks read the presets from here)
from . import checkpoint as ckpt
from . import files
from .data import Batches, TokenData, eval_batches
from .devices import parse_device
from .record import PIECES_FILE, model_says, resumed_record
from .runlog import RunLog, read_log, trim
from .schedule import flops_per_token, lr_at, param_groups
from .settings import (TrainConfig, load_config, model_config, model_switches,  # noqa: F401 (load_config: callers)
                       resume_differences, step_shape)

# ----------------------------------------------------------------------------- the engine's parts
def engine_model(cfg: ModelConfig, **switches) -> torch.nn.Module:
    """The engine's ANDREA of shape `cfg`, run as `switches` say (config.RUN_SWITCHES)."""
    from ..engine.model import ANDREA
    return ANDREA(cfg, **switches)


def engine_adamw(groups: list[dict], *, lr: float, betas: tuple, eps: float, fused: bool = False):
    """torch.optim.AdamW (fused on a GPU)."""
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused)


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
    checkpoint) before anything in the run folder is changed; fit() then trains.

    Whose code trains (each None: the engine's):
      model_factory(cfg, kernels=, dropout=, init_std=) -> the model, built right after the seed
      optimizer_factory(param_groups, lr=, betas=, eps=) -> a torch.optim.Optimizer
      lr_schedule(step, lr, min_lr, warmup_steps, max_steps) -> the step's learning rate
      bpe     with tc.bpe_merges: what learns and runs the run's own tokenizer, an object with
              train_bpe(text, n_merges), encode(text, merges), decode(ids, merges)
      pieces  the record written to RUN_DIR/pieces.json ({"pieces": {name: "yours" | "engine: why"},
              ...}); compared with the checkpoint's on resume, and what changed is said
    """

    def __init__(self, tc: TrainConfig, out: str | os.PathLike, resume: str | bool = False,
                 device: str | None = None, progress: bool = True, *, model_factory=None,
                 optimizer_factory=None, lr_schedule=None, bpe=None, pieces: dict | None = None):
        tc.validate()
        self.tc, self.out, self.progress = tc, Path(out), progress
        if self.out.exists() and not self.out.is_dir():
            raise ConfigError(f"--out {self.out} is a file, not a run folder")
        if bpe is not None and tc.bpe_merges is None:
            raise ConfigError("a BPE was handed in but bpe_merges (--bpe-merges) is not set: the run would "
                              "not make a tokenizer of its own")
        self.d = d = setup_distributed(device)
        self.cfg = model_config(tc)
        self.T, self.accum = step_shape(tc, self.cfg, d.world)
        self.tokens_per_step = tc.batch_size * self.T * self.accum * d.world
        self.pieces = json.loads(json.dumps({"pieces": {}, **(pieces or {})}))    # the run's own copy
        self.notes: list[str] = []         # what the run's pieces and resuming changed, said when it starts

        # the tokenizer and the data
        self.tokenizer, self.own_tokenizer = None, tc.bpe_merges is not None
        if self.own_tokenizer:
            from .tokenizer import run_tokenizer
            self.tokenizer = run_tokenizer(tc.bpe_merges, bpe)
            self.pieces["tokenizer"] = {"merges": tc.bpe_merges, "hash": self.tokenizer.hash,
                                        "seconds": round(self.tokenizer.learned_in, 2)}
        self.data = self._data()
        self.data.check_vocab(self.cfg.vocab_size)
        self.batches = Batches(self.data.train, self.T, tc.batch_size, self.accum, d.rank, d.world, tc.seed)

        # model, optimizer, schedule
        self.model_factory = model_factory or engine_model
        torch.manual_seed(tc.seed)
        self.model = self.model_factory(self.cfg, **model_switches(tc)).to(d.device)
        torch.manual_seed(tc.seed)      # dropout's draws start here, however the model was built
        self.notes += model_says(self.pieces, self.model)
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.dtype = choose_dtype(tc, d.device)
        self.scaler = torch.amp.GradScaler(d.device.type, enabled=self.dtype == torch.float16)
        self.step = 0
        self.resumed_from: Path | None = None
        self.lr_schedule = lr_schedule or lr_at

        self.sharded = tc.fsdp and d.on
        self.wrapped = self._wrap(self.model)
        groups = param_groups(self.model, tc.weight_decay)
        if optimizer_factory is None:
            self.optimizer = engine_adamw(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=1e-8,
                                          fused=d.device.type == "cuda" and not self.sharded)
        else:
            self.optimizer = optimizer_factory(groups, lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=1e-8)
        if resume:
            self._resume(self.out if resume is True else Path(resume))
        if self.step >= tc.max_steps:
            raise ConfigError(f"the checkpoint is at step {self.step} and max_steps is {tc.max_steps}: "
                              f"nothing to train; raise --max-steps to go on")
        if d.main:
            files.check_writable_folder(self.out, "the run folder")
        self.peak = peak_flops(d.device)
        self.flops_per_token = flops_per_token(self.cfg, self.T)

    def _data(self) -> TokenData:
        """The run's tokens: --data's folder, else the shipped stories (with the run's own
        tokenizer if it has one). A folder made with another tokenizer than the run's own is refused."""
        tc, tok = self.tc, self.tokenizer
        if not tc.data:
            return TokenData.from_corpus(tok, stories=tc.stories)
        data = TokenData.from_folder(tc.data)
        if tok is not None and data.tokenizer_hash != tok.hash:
            from .data import DataError
            raise DataError(f"--data {tc.data} was made with tokenizer {data.tokenizer_hash}, but this run makes its "
                            f"own (bpe_merges {tc.bpe_merges}: {tok.hash}): leave --data out to train on the shipped "
                            f"stories, or prepare the folder with the run's tokenizer.json "
                            f"(andrea-prepare --tokenizer RUN_DIR/tokenizer.json)")
        return data

    def lr(self, step: int) -> float:
        """The learning rate of optimizer step `step`, by the run's schedule."""
        tc = self.tc
        return float(self.lr_schedule(step, tc.lr, tc.min_lr, tc.warmup_steps, tc.max_steps))

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
        copy = self.model_factory(self.cfg, **model_switches(self.tc))
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
                "data_identity": json.dumps(self._data_identity()), "pieces": json.dumps(self.pieces)}

    def _data_identity(self) -> dict:
        return {"source": self.data.source, "fingerprint": self.data.fingerprint,
                "tokenizer_hash": self.data.tokenizer_hash}

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
        from ..engine.weights import save_weights
        save_weights(model, path, metadata)

    def _resume(self, where: Path) -> None:
        """Load a checkpoint after checking it is this run's: the same model shape, data,
        tokenizer, T, seed and global batch; run-time switches and the schedule may differ."""
        from ..engine.weights import WeightsError, load_weights
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
        own = (f"this run's own tokenizer ({self.tc.bpe_merges} merges, learned again now by the BPE handed in; "
               f"{PIECES_FILE} says whose)")
        if saved_data and saved_data["tokenizer_hash"] != self.data.tokenizer_hash:
            if self.own_tokenizer:
                raise ckpt.CheckpointError(
                    f"{folder} was trained on tokens of tokenizer {saved_data['tokenizer_hash']}, but {own} is "
                    f"{self.data.tokenizer_hash}: the BPE learns other merges than when the run started; put it "
                    f"back as it was, or start a new run")
            raise ckpt.CheckpointError(
                f"{folder} was trained on data made with tokenizer {saved_data['tokenizer_hash']}, this run's "
                f"data ({self.data.source}) with tokenizer {self.data.tokenizer_hash}: resume with --data "
                f"{saved_data['source']}")
        if saved_data and saved_data["fingerprint"] != self.data.fingerprint:
            if self.own_tokenizer and not self.tc.data:
                raise ckpt.CheckpointError(
                    f"{folder} was trained on other tokens of the same stories: {own} has the same merges but "
                    f"encodes them differently now; put its encode back as it was, or start a new run")
            raise ckpt.CheckpointError(
                f"{folder} was trained on other data ({saved_data['source']}) than this run's "
                f"({self.data.source}): their tokens differ; resume with --data {saved_data['source']}")
        refused, allowed = resume_differences(json.loads(state["train_config"]), self.tc)
        if refused:
            raise ckpt.CheckpointError(f"{folder} was trained with other settings ({'; '.join(refused)}): "
                                       f"only run-time switches and the schedule may change on resume")
        self.batches.load_state_dict(state["data"])
        try:      # sharded: the engine's model of the same config reads the file, its tensors are then set
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
        self.pieces, notes = resumed_record(json.loads(state.get("pieces", "{}")), self.pieces, self.step)
        self.notes += notes

    # ----- one step -----
    def autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.d.device.type, dtype=self.dtype)

    def train_step(self) -> tuple[float, float]:
        """One optimizer step; returns (mean loss over the global batch, gradient norm)."""
        model, opt = self.wrapped, self.optimizer
        model.train()
        lr = self.lr(self.step)
        for group in opt.param_groups:       # the schedule is a function of the step alone
            group["lr"] = lr
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
            self.tokenizer = load_tokenizer(self.out / "tokenizer.json")      # the data's
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
        if self.own_tokenizer:
            self.tokenizer.save(self.out / "tokenizer.json")
        else:
            folder = Path(tc.data) / "tokenizer.json" if tc.data else None
            files.copy(folder if folder and folder.is_file() else TOKENIZER_FILE, self.out / "tokenizer.json")
        files.write_text(self.out / "config.json", json.dumps(
            {"train": tc.to_dict(), "model": self.cfg.to_dict(), "world_size": self.d.world,
             "tokens_per_step": self.tokens_per_step, "grad_accum": self.accum,
             "data": self._data_identity()}, indent=1))
        files.write_text(self.out / PIECES_FILE, json.dumps(self.pieces, indent=1))
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
        self._announce()
        last = {}
        try:
            while self.step < tc.max_steps:
                t0 = time.perf_counter()
                lr = self.lr(self.step)
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
                    self._record(rec, log, tb, bar, on_step)
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

    def _announce(self) -> None:
        """What the run is, printed before its first step."""
        tc, d = self.tc, self.d
        if self.resumed_from is not None:
            self._print(f"resumed from {self.resumed_from} at step {self.step}")
        for note in self.notes:
            self._print(note)
        if self.own_tokenizer:
            from .tokenizer import BPE_STORIES
            t = self.pieces["tokenizer"]
            self._print(f"tokenizer: the run's own, {t['merges']} merges learned on the first {BPE_STORIES} stories "
                        f"in {t['seconds']:.1f} s (V = {self.tokenizer.vocab_size:,})")
        self._print(f"ANDREA {self.n_params:,} parameters on {d.world} x {d.device.type} ({self.dtype}); "
                    f"{self.tokens_per_step:,} tokens a step (B={tc.batch_size} T={self.T} A={self.accum} "
                    f"W={d.world}); data: {self.data.source} ({len(self.data.train):,} train tokens)")

    def _record(self, rec: dict, log, tb, bar, on_step) -> None:
        """One step's record, on rank 0: the log, TensorBoard, the progress bar and on_step."""
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
    from matplotlib.figure import Figure        # not pyplot: the caller's backend stays as it is
    recs = read_log(log_path)
    own = ax is None
    if own:
        fig = Figure(figsize=(7, 4))
        ax = fig.subplots()
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
        os.replace(tmp, png_path)
    return ax
