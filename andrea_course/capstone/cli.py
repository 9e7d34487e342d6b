"""andrea-train: train ANDREA, the engine's or your own, on one CPU, one GPU or many (torchrun).

    andrea-train --config andrea-tiny --out runs/tiny                       # a laptop, minutes
    andrea-train --config andrea-tiny --impl exercises --out runs/mine      # your pieces that pass
    andrea-train --config configs/andrea-120m.json --out runs/120m --data data/fineweb
    torchrun --nproc_per_node 8 -m andrea_course.capstone --config andrea-120m --out runs/120m
    andrea-train --config andrea-tiny --out runs/tiny --resume              # go on where it stopped

With --impl the run trains your model: each of your pieces whose graded tests all pass (the
model's, adamw_step inside a torch.optim.Optimizer, lr_at, and, on the shipped stories, the BPE
that learns the run's own tokenizer: --bpe-merges, 256 unless given, so V = 513; --data brings
its own tokenizer); the engine's stands in for the rest.
RUN_DIR/pieces.json says, piece by piece, "yours" or why the engine's ran. The same command
without --impl and with the same --bpe-merges trains the engine's model on the same tokens:
on one thread the two loss curves agree within 1e-4 when your pieces are right
(andrea_course.capstone.compare_runs says where they part, and which piece to suspect).

--resume goes on with the pieces the run was trained with (the folder in pieces.json), read
afresh: a piece that passes now and did not then (or the other way) is said, and kept in
pieces.json's "changes"; a BPE that learns other merges now is refused (its tokens would differ).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..presets import TRAIN_PRESETS
from ..train import checkpoint as ckpt
from ..train.cli import Parser, UsageError, natural_float, positive_int, run
from ..train.devices import parse_device
from ..train.settings import TrainConfig, add_flags, check_kernels, load_config

PROG = "andrea-train"


def build_parser():
    p = Parser(PROG, __doc__, epilog=(
        "A preset or --config file sets the training settings; a flag overrides it. Presets: "
        + ", ".join(TRAIN_PRESETS) + " (andrea_course/presets.py; configs/*.json are the same as files). "
        "Exit status: 0 done or stopped by a signal (resume it), 1 the run failed (data, checkpoint, "
        "divergence, disk), 2 a bad argument or setting."))
    p.add_argument("--config", default="andrea-tiny", help="a training preset's name or a JSON file")
    p.add_argument("--out", help="the run's folder: logs, checkpoints, model.safetensors (required to train)")
    p.add_argument("--data", help="a folder written by andrea-prepare (default: the shipped stories)")
    p.add_argument("--impl", help="train your model: 'exercises', 'solutions' or a folder shaped like exercises/, "
                                  "each piece yours once its graded tests pass (default: the engine's pieces; "
                                  "on --resume, the run's own)")
    p.add_argument("--resume", nargs="?", const=True, default=False, metavar="CHECKPOINT",
                   help="continue from the run folder's latest checkpoint, or from the checkpoint folder given "
                        "(default: a new run)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: this process's GPU, else the CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on rank 0)")
    add_flags(p)
    add_plan_arguments(p)
    return p


def add_plan_arguments(p) -> None:
    """andrea-train's actions that train nothing."""
    g = p.add_argument_group("before paying for a GPU")
    g.add_argument("--plan", action="store_true",
                   help="print the memory, fit, time and cost of the run (no training); exit 1 if it cannot fit")
    g.add_argument("--gpu", help="the GPU to plan for: H100, A100, A100 80GB, L4, T4, ... (default: the one present)")
    g.add_argument("--num-gpus", type=positive_int, default=1, help="GPUs the run will use (torchrun's processes)")
    g.add_argument("--price-per-hour", type=natural_float, help="dollars per GPU-hour, for the cost (default: no cost)")
    g.add_argument("--gpu-check", action="store_true",
                   help="on a GPU: the Triton kernels' tests, a short compiled bf16 run of andrea-120m, "
                        "measured tokens/s, MFU and memory next to the plan (a minute or two)")


def run_action(args, tc) -> int:
    """--gpu-check, or --plan: print the plan; exit 1 if it cannot fit."""
    if args.gpu_check:
        from ..train.gpu_check import main as gpu_check
        return gpu_check()
    from ..train.plan import format_plan, make_plan
    plan = make_plan(tc, gpu=args.gpu, world=args.num_gpus, price_per_hour=args.price_per_hour)
    print(format_plan(plan))
    return 0 if plan.fits else 1


def main(argv=None) -> int:
    return run(PROG, _main, argv)


def _main(argv) -> int:
    from ..train.record import read_pieces
    from .parts import engine_parts, learner_parts, with_tokenizer
    p = build_parser()
    args = p.parse_args(argv)
    flags = {k: getattr(args, k) for k in TrainConfig.__dataclass_fields__ if hasattr(args, k)}
    tc = load_config(args.config, **flags)
    if args.plan or args.gpu_check:
        return run_action(args, tc)
    if not args.out:
        raise UsageError("--out RUN_DIR is required to train (only --plan and --gpu-check run without it)")
    note = check_kernels(tc.kernels, parse_device(args.device))      # Triton without a GPU: refused or interpreted
    if note:
        say(note)
    out = Path(args.out)
    if not args.resume and (ckpt.checkpoints_dir(out) / ckpt.LATEST).exists():
        raise UsageError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
    impl = args.impl
    if args.resume and impl is None:
        record = read_pieces(out) or {}
        impl = record.get("folder")
        if impl:
            say(f"resuming with the pieces the run was trained with, in {impl} (pieces.json; --impl chooses others)")
            if not Path(impl).is_dir():
                raise UsageError(f"the run was trained with the pieces in {impl}, which is no longer there: "
                                 f"pass --impl with their folder")
    if impl is not None:
        from ..overlay import ImplementationError, resolve
        try:
            resolve(impl)
        except ImplementationError as exc:
            raise UsageError(f"--impl: {exc}") from None
        if tc.data:                 # refused now, not after the graded tests
            from ..train.data import TokenData
            TokenData.from_folder(tc.data)
        tc = with_tokenizer(tc)
        try:
            parts = learner_parts(impl, tc)
        except ImplementationError as exc:
            raise UsageError(f"--impl: {exc}") from None
    else:
        parts = engine_parts()
    trainer = parts.trainer(tc, out, resume=args.resume, device=args.device, progress=not args.no_progress)
    if impl is not None:
        say(f"your model: {parts.summary(trainer.pieces)}")
    try:
        trainer.fit()
        trainer.d.barrier()        # every rank done before any tears its gloo/NCCL connections down
    finally:
        trainer.close()
    return 0


def say(line: str) -> None:
    if os.environ.get("RANK", "0") == "0":
        print(f"{PROG}: {line}", file=sys.stderr, flush=True)
