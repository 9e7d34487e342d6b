"""andrea-train --plan: what a run will take, before anyone pays for a GPU.

    andrea-train --plan --config configs/andrea-120m.json --gpu H100 --price-per-hour 3

For the config, the data and a GPU (named, or the one present): the memory of one training
step (weights, gradients, AdamW's state, the activations saved for the backward at the
micro-batch, with and without activation checkpointing), whether it fits, the micro-batch and
accumulation, FLOPs per token, tokens/s and hours over an assumed MFU range, and the cost.

The memory model counts, tensor by tensor, what PyTorch keeps for the backward with the ops
ANDREA runs (SDPA, fused LayerNorm, GELU, SwiGLU, cross-entropy); tests/train/test_plan.py holds it
against PyTorch's memory profiler on the CPU. A step's peak is the larger of two moments:
the start of the backward (activations and the loss's gradient at their widest, no gradients
yet unless accumulating) and the optimizer step (all gradients, no activations).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .. import gpus
from ..engine.config import ModelConfig
from .cli import UsageError
from .schedule import flops_per_token
from .settings import model_config, step_shape

MFU_RANGE = (0.35, 0.50)    # assumed: nanoGPT and llm.c report this range for GPT-2 small on A100 and H100
CUDA_RESERVED_GIB = 1.0     # the CUDA context and cuBLAS workspaces: memory PyTorch's counters do not see
HEADROOM = 0.10             # left free for the caching allocator's fragmentation
GIB = 2**30
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


class PlanError(UsageError):
    """A plan that cannot be made (unknown GPU, no GPU to plan for): exit 2, the message says what to give."""


@dataclass
class Memory:
    """Bytes per process at a training step's peak, by part."""
    weights: int            # fp32 master weights
    gradients: int          # fp32
    optimizer: int          # AdamW's two moments, fp32
    weight_copies: int      # autocast's bf16/fp16 copies of the matmul weights, kept for the backward
    activations: int        # saved for the backward at the micro-batch
    loss: int               # logits' log-probabilities and their gradient, at the loss's backward
    recompute: int          # checkpointing: one block's activations, rebuilt in the backward
    distributed: int        # DDP's gradient buckets, or FSDP's gathered (unsharded) parameters
    optimizer_step: int     # temporaries of the optimizer step (the CPU's AdamW; none for fused CUDA AdamW)
    accumulating: bool      # gradients live through the backward of micro-batches after the first

    @property
    def backward_start(self) -> int:
        return (self.weights + self.optimizer + self.distributed + self.weight_copies + self.activations
                + max(self.loss, self.recompute) + (self.gradients if self.accumulating else 0))

    @property
    def optimizer_peak(self) -> int:
        return self.weights + self.optimizer + self.distributed + self.gradients + self.optimizer_step

    @property
    def peak(self) -> int:
        return max(self.backward_start, self.optimizer_peak)


@functools.lru_cache(maxsize=32)
def _sizes(cfg: ModelConfig) -> dict:
    """Parameter counts the memory model needs (from the public count_parameters)."""
    from ..engine.params import count_parameters
    c = count_parameters(cfg)
    linear_per_block = c["block"] - c["norms"]                     # qkv, W_O and the MLP, with biases
    head = cfg.vocab_size * cfg.d_model                            # the head, or the tied table used as it
    return dict(total=c["total"], block=c["block"], linear_per_block=linear_per_block, head=head,
                root=c["total"] - c["blocks"], largest=max(head, linear_per_block // 2))


def activation_bytes(cfg: ModelConfig, dtype: str, device: str = "cuda") -> tuple[int, int]:
    """Bytes saved for the backward per token: (in one block, after the blocks).

    Under autocast (bf16, fp16) a matmul saves a low-precision copy of its input; the residual
    stream, the norms and their statistics stay fp32 (the master weights are fp32)."""
    a, r = DTYPE_BYTES[dtype], 4                     # a: matmul inputs and outputs; r: the residual stream
    D, F, H, G, K = cfg.d_model, cfg.d_ff, cfg.n_heads, cfg.kv_heads, cfg.d_head
    autocast = a != 4
    if cfg.norm == "layernorm":
        norm = r * D + 8                             # its input, mean and 1/std
    else:                                            # RMSNorm: input and 1/rms; on the CPU it is not fused
        norm = r * D + 4 + (r * D if device == "cpu" else 0)   # and keeps x/rms too
    attention = (norm + a * D                        # ln1; its output as qkv reads it
                 + a * (H + 2 * G) * K               # q, k, v
                 + (rope_bytes(cfg, a) if cfg.position == "rope" else 0)
                 + (2 * a * H * K if G < H else 0)   # k, v repeated for the H query heads
                 + a * D + 4 * H                     # attention's output and log-sum-exp
                 + a * D)                            # the heads merged: W_O's input
    if cfg.mlp == "swiglu":                          # w_gate and w_up each cast ln2's output under autocast;
        mlp = norm + a * D * (2 if autocast else 1) + 4 * a * F   # gate, up, silu(gate), the product
    else:
        mlp = norm + a * D + 2 * a * F               # fc's output (GELU's input) and GELU's output
    final = norm + a * D                             # ln_f and the head's input
    return attention + mlp, final


def rope_bytes(cfg: ModelConfig, a: int) -> int:
    """What RoPE adds per token in a block: q and k turned (new tensors, a bytes a number, which
    attention saves) and, under autocast, the fp32 copies of their halves that the turning's
    products save (in fp32 those are views of q and k, which stay alive anyway)."""
    turned = (cfg.n_heads + cfg.kv_heads) * cfg.d_head
    return a * turned + (4 * turned if a != 4 else 0)


def step_memory(cfg: ModelConfig, B: int, T: int, dtype: str = "bf16", *, accum: int = 1, world: int = 1,
                fsdp: bool = False, checkpointing: bool = False, device: str = "cuda") -> Memory:
    """The peak memory of one training step, per process, by part."""
    s = _sizes(cfg)
    N, tokens, L, V = s["total"], B * T, cfg.n_layers, cfg.vocab_size
    shard = world if fsdp else 1
    per_block, final = activation_bytes(cfg, dtype, device)
    autocast = DTYPE_BYTES[dtype] != 4
    matmul_weights = L * s["linear_per_block"] + s["head"]
    if checkpointing:       # each block keeps only its input; its activations come back one block at a time
        saved = tokens * (L * 4 * cfg.d_model + final)
        recompute = tokens * per_block
        copies = s["head"] + s["linear_per_block"]    # autocast's copies live per block, while it runs
    else:
        saved, recompute, copies = tokens * (L * per_block + final), 0, matmul_weights
    if fsdp and world > 1:
        distributed = 4 * (s["root"] + 3 * s["block"])   # root unsharded; a block gathered, one prefetched, its grads
    elif world > 1:
        distributed = 4 * N                                  # DDP copies the gradients into flat buckets
    else:
        distributed = 0
    return Memory(weights=4 * N // shard, gradients=4 * N // shard, optimizer=8 * N // shard,
                  weight_copies=2 * copies if autocast else 0, activations=saved,
                  loss=12 * V * tokens,      # log-probs saved (4V), the gradient in and out of log_softmax (8V)
                  recompute=recompute, distributed=distributed,
                  optimizer_step=2 * 4 * s["largest"] if device == "cpu" else 0, accumulating=accum > 1)


# ----------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    name: str                # the model preset's name, or "the config's model"
    cfg: ModelConfig
    gpu: gpus.GPU
    memory_gib: float        # the GPU's memory (the one present: what the driver reports)
    world: int
    B: int
    T: int
    accum: int
    fixed_global_batch: bool  # total_batch_tokens set: B must divide the step's sequences, A follows
    dtype: str
    fsdp: bool
    checkpointing: bool
    steps: int
    train_tokens: int | None
    data_source: str
    price_per_hour: float | None
    memory: Memory           # as configured
    memory_other: Memory     # with checkpointing switched the other way
    flops_per_token: float

    @property
    def usable(self) -> float:
        return ((1 - HEADROOM) * self.memory_gib - CUDA_RESERVED_GIB) * GIB

    @property
    def fits(self) -> bool:
        return self.memory.peak <= self.usable

    @property
    def tokens_per_step(self) -> int:
        return self.B * self.T * self.accum * self.world

    def largest_batch(self, checkpointing: bool) -> int:
        """The largest micro-batch B that fits (0: none); with a fixed global batch, one that divides it."""
        sequences = self.B * self.accum          # per process and step
        accum = lambda b: max(1, sequences // b) if self.fixed_global_batch else self.accum
        mem = lambda b: step_memory(self.cfg, b, self.T, self.dtype, accum=accum(b), world=self.world,
                                    fsdp=self.fsdp, checkpointing=checkpointing).peak
        if mem(1) > self.usable:
            return 0
        lo, hi = 1, 2
        while mem(hi) <= self.usable and hi < 2**20:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if mem(mid) <= self.usable else (lo, mid)
        if self.fixed_global_batch:
            lo = max(d for d in range(1, min(lo, sequences) + 1) if sequences % d == 0)
        return lo

    def speed(self, mfu: float) -> tuple[float, float]:
        """(tokens/s over all GPUs, hours for the run) at a model-FLOPs utilisation."""
        recompute = 4 / 3 if self.checkpointing else 1.0     # the forward runs twice: 8 FLOPs per weight, not 6
        tokens_per_s = mfu * self.gpu.peak_flops * self.world / (self.flops_per_token * recompute)
        return tokens_per_s, self.steps * self.tokens_per_step / tokens_per_s / 3600


def make_plan(tc, *, gpu: str | None = None, world: int = 1, price_per_hour: float | None = None,
              data=None) -> Plan:
    """The plan for a TrainConfig on `world` GPUs named `gpu` (None: the one present)."""
    here = gpus.present()
    if gpu is None:
        if here is None:
            raise PlanError("no GPU here to plan for: name one with --gpu (" + ", ".join(g.name for g in gpus.GPUS) + ")")
        gpu = here[0]
    entry = gpus.find(gpu)
    if entry is None:
        raise PlanError(f"unknown GPU {gpu!r}; known: {', '.join(g.name for g in gpus.GPUS)}")
    memory_gib = here[1] if here and gpus.find(here[0]) == entry else entry.memory_gib
    cfg = model_config(tc)
    T, accum = step_shape(tc, cfg, world)
    dtype = tc.dtype if tc.dtype in ("fp32", "bf16", "fp16") else ("bf16" if entry.bf16 else "fp16")
    mem = lambda ckpt: step_memory(cfg, tc.batch_size, T, dtype, accum=accum, world=world, fsdp=tc.fsdp,
                                   checkpointing=ckpt)
    train_tokens, source = data if data is not None else _data(tc)
    return Plan(name=tc.model if isinstance(tc.model, str) else "the config's model", cfg=cfg, gpu=entry,
                memory_gib=memory_gib, world=world, B=tc.batch_size, T=T, accum=accum,
                fixed_global_batch=bool(tc.total_batch_tokens), dtype=dtype, fsdp=tc.fsdp,
                checkpointing=tc.checkpointing, steps=tc.max_steps, train_tokens=train_tokens, data_source=source,
                price_per_hour=price_per_hour, memory=mem(tc.checkpointing), memory_other=mem(not tc.checkpointing),
                flops_per_token=flops_per_token(cfg, T))


def _data(tc) -> tuple[int | None, str]:
    """(training tokens, where from) of the run's data."""
    from .data import DataError, TokenData
    if tc.bpe_merges is not None and not tc.data:
        return None, f"the shipped stories, in the tokens of the run's own {tc.bpe_merges}-merge BPE (made when it starts)"
    try:
        data = TokenData.from_folder(tc.data) if tc.data else TokenData.from_corpus(stories=tc.stories)
    except (DataError, FileNotFoundError) as exc:
        return None, f"{tc.data} ({exc})"
    return len(data.train), data.source


# ----------------------------------------------------------------------------- printing
def markdown_table(header: list[str], rows: list[list], right: set[int] = frozenset()) -> str:
    """A Markdown table (as docs/*.md take it): right-aligned columns by index, "|" in a cell escaped."""
    line = lambda cells: "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    rule = "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"
    return "\n".join([line(header), rule] + [line(row) for row in rows])


def gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def _count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def _passes(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


def _hours(h: float) -> str:
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.1f} h"


def format_plan(p: Plan) -> str:
    cfg, g = p.cfg, p.gpu
    on, off = (p.memory, p.memory_other) if not p.checkpointing else (p.memory_other, p.memory)
    n = _sizes(cfg)["total"]
    par = (f", FSDP over {p.world}" if p.fsdp else f", DDP over {p.world}") if p.world > 1 else ""
    out = [f"Plan: {p.name}, {n:,} parameters, on {p.world} × {g.name} ({p.memory_gib:.0f} GiB, "
           f"{g.peak_flops / 1e12:.0f} TFLOP/s dense {'bf16' if g.bf16 else 'fp16'}), "
           f"{p.dtype}{' autocast' if p.dtype != 'fp32' else ''}{par}",
           f"micro-batch B = {p.B} × T = {p.T:,} tokens, accumulation A = {p.accum}, W = {p.world}: "
           f"{p.tokens_per_step:,} tokens a step", ""]
    rows = [("weights (fp32)", "weights"), ("gradients (fp32)", "gradients"),
            ("AdamW state (2 × fp32)", "optimizer"), (f"{p.dtype} weight copies (autocast)", "weight_copies"),
            (f"activations at B = {p.B}", "activations"), ("logits and loss gradient", "loss"),
            ("one block recomputed", "recompute"), ("DDP buckets / FSDP gathered", "distributed")]
    cell = lambda n: gib(n) if n else "-"
    table = [[label, cell(getattr(on, k)), cell(getattr(off, k))] for label, k in rows
             if getattr(on, k) or getattr(off, k)]
    table.append(["**peak of a step**", f"**{gib(on.peak)}**", f"**{gib(off.peak)}**"])
    table.append(["largest B that fits", p.largest_batch(False), p.largest_batch(True)])
    mark = lambda ckpt: " (this run)" if ckpt == p.checkpointing else ""
    out.append(markdown_table(["memory per GPU", f"without checkpointing{mark(False)}",
                               f"with checkpointing{mark(True)}"], table, right={1, 2}))
    usable = p.usable
    out += ["", f"usable: {gib(usable)} ({100 - 100 * HEADROOM:.0f} % of {p.memory_gib:.0f} GiB, less "
                f"{CUDA_RESERVED_GIB:.0f} GiB for CUDA itself). Eager PyTorch's count; torch.compile usually needs less."]
    if p.fits:
        out.append(f"fits: yes, {gib(usable - p.memory.peak)} to spare.")
    tokens = p.steps * p.tokens_per_step
    out += ["", f"work: {p.flops_per_token / 1e6:,.1f} MFLOP per token (forward + backward: 6 per matmul weight, "
                f"attention 12·L·D·T); {p.steps:,} steps × {p.tokens_per_step:,} tokens = {_count(tokens)} tokens, "
                f"{p.flops_per_token * tokens:.2e} FLOPs"]
    if p.train_tokens:
        out.append(f"data: {p.data_source}, {_count(p.train_tokens)} training tokens: the run reads them "
                   f"{_passes(tokens / p.train_tokens)} times")
    else:
        out.append(f"data: {p.data_source}")
    price = p.price_per_hour
    head = ["MFU (assumed)", "tokens/s", "time for the run"] + ([f"cost at ${price:.2f} per GPU-hour"] if price else [])
    speed = []
    for mfu in MFU_RANGE:
        tps, hours = p.speed(mfu)
        speed.append([f"{100 * mfu:.0f} %", _count(tps), _hours(hours)]
                     + ([f"${hours * price * p.world:,.2f}"] if price else []))
    out += ["", markdown_table(head, speed, right={1, 2, 3}),
            "", f"The MFU range is an assumption (what well-tuned GPT-2-small training reaches on A100 and "
                f"H100); `andrea-train --gpu-check` measures it on your GPU."
                + (" Give --price-per-hour for the cost." if not price else "")
                + (" Checkpointing recomputes the forward: a third more work." if p.checkpointing else "")]
    if not p.fits:
        out += ["", refusal(p)]
    return "\n".join(out)


def refusal(p: Plan) -> str:
    """Why the plan cannot run, and what would make it fit."""
    fixes = []
    b = p.largest_batch(p.checkpointing)
    if b and p.fixed_global_batch:
        fixes.append(f"--batch-size {b} (accumulation {p.B * p.accum // b} keeps {p.tokens_per_step:,} tokens a step)")
    elif b:
        fixes.append(f"--batch-size {b} --grad-accum {math.ceil(p.B * p.accum / b)} (about the same tokens a step)")
    if not p.checkpointing and p.largest_batch(True) >= p.B:
        fixes.append("--checkpointing (recompute activations in the backward; a third more work)")
    if not p.fsdp:
        fixes.append("--fsdp on several GPUs (shards weights, gradients and AdamW's state)")
    fixes.append("a GPU with more memory")
    return (f"does not fit: a step needs {gib(p.memory.peak)}, the {p.gpu.name} has {gib(p.usable)} usable. "
            f"Change: " + "; or ".join(fixes) + ".")
