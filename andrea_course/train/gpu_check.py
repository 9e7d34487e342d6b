"""andrea-train --gpu-check: a minute or two on a fresh GPU machine, before the long run (not yet timed on one).

1. The Triton kernels' tests (tests/engine/test_kernels.py and the graded andrea_course/activity_tests/
   test_kernels.py), compiled for this GPU rather than interpreted as on the CPU.
2. A few eager steps of ANDREA-120M (B = 16, T = 1,024): the peak memory PyTorch allocated,
   next to the plan's prediction (the plan counts eager PyTorch).
3. A short compiled run in bf16 (fp16 on a GPU without bf16): tokens/s and MFU, next to the
   plan's assumed range.

It prints a Markdown table that docs/cloud.md and docs/kernels.md can take as is, so the first
real GPU run also tells the course what the truth is. Without a GPU it says so and exits 1.
"""
from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .. import gpus
from ..paths import ACTIVITY_TESTS
from .plan import GIB, MFU_RANGE, PlanError, make_plan, markdown_table

MODEL, B, T = "andrea-120m", 16, 1024
PACKAGE = Path(__file__).resolve().parents[1]
# The package's kernels (in a clone of the course) and the learner's graded kernels (shipped in the package).
KERNEL_TESTS = [PACKAGE.parent / "tests" / "engine" / "test_kernels.py", ACTIVITY_TESTS / "test_kernels.py"]


def settings(dtype: str, compile: bool, steps: int, **changes) -> dict:
    return dict(dict(model=MODEL, batch_size=B, seq_len=T, grad_accum=1, max_steps=steps, dtype=dtype,
                     compile=compile, eval_every=0, sample_every=0, checkpoint_every=0, tensorboard=False),
                **changes)


def measure(tc, device: str, warmup: int, steps: int) -> dict:
    """Train `warmup` steps (compiling, AdamW's state), then time `steps` more: tokens/s, MFU and
    the peak memory PyTorch allocated over the timed steps (GPU only)."""
    from .trainer import Trainer
    gc.collect()                         # the previous measurement's model and optimizer, gone
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as out:
        t = Trainer(tc, out, device=device, progress=False)
        cuda = t.d.device.type == "cuda"
        for _ in range(warmup):
            t.train_step()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        for _ in range(steps):
            t.train_step()
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    tokens_per_s = steps * t.tokens_per_step / seconds
    return dict(tokens_per_s=tokens_per_s, mfu=t.flops_per_token * tokens_per_s / t.peak if t.peak else None,
                peak_bytes=torch.cuda.max_memory_allocated() if cuda else None, seconds=seconds)


def kernel_tests() -> str:
    """Run the kernels' tests that are here; pytest's summary line."""
    files = [str(f) for f in KERNEL_TESTS if f.is_file()]
    missing = [str(f) for f in KERNEL_TESTS if not f.is_file()]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                          capture_output=True, text=True, cwd=PACKAGE.parent)
    lines = [l for l in done.stdout.splitlines() if l.strip()]
    if done.returncode != 0:
        print(done.stdout[-6000:], done.stderr[-2000:], file=sys.stderr)
    return ((lines[-1] if lines else "no output") + ("" if done.returncode == 0 else " (FAILED: pytest's output above)")
            + (f"; not found: {', '.join(missing)} (a pip install has no tests/: clone the course)" if missing else ""))


def report(name: str, dtype: str, kernels: str, eager: dict, compiled: dict, plan) -> str:
    mib = lambda n: f"{n / GIB:.2f} GiB" if n is not None else "-"
    k = lambda n: f"{n / 1e3:,.0f}k"
    lo, hi = (plan.speed(m)[0] for m in MFU_RANGE) if plan else (None, None)
    rows = [
        [f"peak memory, eager {dtype} (max_memory_allocated)", mib(plan.memory.peak) if plan else "-",
         mib(eager["peak_bytes"])],
        [f"peak memory, compiled {dtype}", "(less than eager)", mib(compiled["peak_bytes"])],
        ["tokens/s, eager", "-", k(eager["tokens_per_s"])],
        ["tokens/s, compiled", f"{k(lo)} – {k(hi)}" if plan else "-", k(compiled["tokens_per_s"])],
        ["MFU, compiled", f"{100 * MFU_RANGE[0]:.0f} – {100 * MFU_RANGE[1]:.0f} % (assumed)",
         f"{100 * compiled['mfu']:.1f} %" if compiled["mfu"] else "- (GPU not in andrea_course/gpus.py)"],
    ]
    return "\n".join([
        f"{name}; {MODEL}, B = {B}, T = {T:,}, {dtype}; torch {torch.__version__}",
        "", f"kernels' tests: {kernels}", "",
        markdown_table(["andrea-train --gpu-check", "plan", "measured"], rows, right={1, 2})])


def main(argv=None) -> int:
    if not torch.cuda.is_available():
        print("andrea-train --gpu-check: no CUDA GPU here (torch.cuda.is_available() is False), nothing to check",
              file=sys.stderr)
        return 1
    from .trainer import TrainConfig, choose_dtype
    name = torch.cuda.get_device_name()
    gpu = gpus.find(name)
    dtype = "bf16" if choose_dtype(TrainConfig(), torch.device("cuda")) == torch.bfloat16 else "fp16"
    print(f"checking {name}: the kernels' tests, then ANDREA-120M eager and compiled ...", file=sys.stderr, flush=True)
    kernels = kernel_tests()
    eager = measure(TrainConfig(**settings(dtype, False, 5)), "cuda", warmup=2, steps=3)
    compiled = measure(TrainConfig(**settings(dtype, True, 15)), "cuda", warmup=5, steps=10)
    try:
        plan = make_plan(TrainConfig(**settings(dtype, False, 1)), gpu=name if gpu else None) if gpu else None
    except PlanError:
        plan = None
    print(report(name, dtype, kernels, eager, compiled, plan))
    return 0 if "FAILED" not in kernels else 1


if __name__ == "__main__":
    raise SystemExit(main())
