"""Your Triton kernels inside the package's autograd: forward and gradients, fp32 and bf16.

The graded tests (andrea_course/activity_tests/test_kernels.py) check the forward kernels you write in
exercises/kernels.py, in fp32 and fp16. With kernels="triton" your model launches them through
the package's launchers, whose backward is the package's; this checks that path as training
uses it: each kernel of yours launched by the package's function (andrea_course.engine.kernels:
gelu_tanh, layer_norm, softmax, with kernel= yours), its output and the gradient of every input
against the plain PyTorch reference computed in fp32, within the tolerances of
tests/engine/test_kernels.py.

    python bench/learner_kernels.py                       # exercises/ on this machine's device
    python bench/learner_kernels.py --impl solutions --json K.json
    python bench/learner_kernels.py --dtypes fp32         # on a CPU (Triton's interpreter): fp32 only

A kernel still a stub is reported as not written, and not launched. Exit status: 0 when every
kernel was checked (whatever the verdicts: they are yours), 2 a bad argument.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

import torch

if not torch.cuda.is_available():          # Triton reads it when it is first imported
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOL = {torch.float32: (2e-5, 1e-4), torch.bfloat16: (3e-2, 3e-2)}     # (atol, rtol), tests/engine/test_kernels.py's


def cases(K):
    """name -> (the package's launcher, its reference, the inputs in fp32: (B, T, D)-like shapes
    whose last axis is not a power of two, so every tail is masked)."""
    g = torch.Generator().manual_seed(0)
    x = lambda *shape, scale=1.0, shift=0.0: torch.randn(*shape, generator=g) * scale + shift
    return {
        "gelu_kernel": (lambda k: (lambda x: K.gelu_tanh(x, kernel=k)), K.gelu_tanh_reference, [x(3, 769, scale=3.0)]),
        "layer_norm_kernel": (lambda k: (lambda x, w, b: K.layer_norm(x, w, b, 1e-5, kernel=k)),
                              lambda x, w, b: K.layer_norm_reference(x, w, b, 1e-5),
                              [x(2, 5, 769, scale=2.0, shift=3.0), x(769, shift=1.0), x(769)]),
        "softmax_kernel": (lambda k: (lambda s: K.softmax(s, kernel=k)), K.softmax_reference, [x(4, 1000, scale=3.0)]),
    }


def compare(fn, ref, inputs, dtype, device) -> dict:
    """fn(inputs in dtype) against ref(the same values in fp32): the largest error beyond the
    tolerance's share, of the output and of every input's gradient (<= 1: within tolerance)."""
    atol, rtol = TOL[dtype]
    low = [t.to(device, dtype).requires_grad_() for t in inputs]
    high = [t.detach().float().requires_grad_() for t in low]
    y, y_ref = fn(*low), ref(*high)
    dy = torch.randn(y_ref.shape, generator=torch.Generator().manual_seed(1)).to(device)
    (y.float() * dy).sum().backward()
    (y_ref * dy).sum().backward()
    share = lambda a, b: ((a.float() - b).abs() / (atol + rtol * b.abs())).max().item()
    grads = [share(a.grad, b.grad) if a.grad is not None else float("inf") for a, b in zip(low, high)]
    return dict(forward=share(y, y_ref.detach()), gradients=max(grads),
                max_abs_diff=(y.float() - y_ref.detach()).abs().max().item())


def check(impl: Path, dtypes: list[str], device: str) -> list[dict]:
    from andrea_course.engine import kernels as K
    from andrea_course.overlay import unwritten_pieces
    path = impl / "kernels.py"
    source = path.read_text(encoding="utf-8")
    stubs = unwritten_pieces(source)
    spec = importlib.util.spec_from_file_location("kernels_of_the_learner", path)
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    rows = []
    for name, (launcher, ref, inputs) in cases(K).items():
        for dt in dtypes:
            row = dict(kernel=name, dtype=dt, written=name not in stubs, forward=None, gradients=None,
                       max_abs_diff=None, ok=False, error=None)
            if row["written"]:
                try:
                    row.update(compare(launcher(getattr(mine, name)), ref, inputs, DTYPES[dt], device))
                    row["ok"] = row["forward"] <= 1 and row["gradients"] <= 1
                except Exception as exc:          # noqa: BLE001 - a learner's kernel may fail any way
                    row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
            rows.append(row)
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/learner_kernels.py", description=__doc__.split("\n")[0])
    p.add_argument("--impl", default="exercises", help="the folder holding kernels.py: exercises (default), "
                                                        "solutions or a path")
    p.add_argument("--dtypes", default="fp32,bf16", help="comma-separated: fp32, bf16 (default: both)")
    p.add_argument("--json", metavar="FILE", help="also write the rows to FILE")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    impl = ROOT / args.impl if args.impl in ("exercises", "solutions") else Path(args.impl)
    dtypes = [d for d in args.dtypes.split(",") if d]
    gpu = torch.cuda.is_available()
    if not (impl / "kernels.py").is_file():
        p.error(f"--impl {args.impl}: {impl / 'kernels.py'} is not there")
    if set(dtypes) - set(DTYPES):
        p.error(f"--dtypes: {', '.join(sorted(set(dtypes) - set(DTYPES)))} is not one of fp32, bf16")
    if "bf16" in dtypes and not gpu:
        p.error("--dtypes bf16 needs a GPU: Triton's interpreter computes bf16 wrongly; give --dtypes fp32")
    rows = check(impl, dtypes, "cuda" if gpu else "cpu")
    where = torch.cuda.get_device_name() if gpu else "cpu (interpreter)"
    for r in rows:
        verdict = ("not written" if not r["written"] else f"error: {r['error']}" if r["error"] else
                   f"{'ok' if r['ok'] else 'WRONG'}: forward {r['forward']:.2f}, gradients {r['gradients']:.2f} "
                   f"of the tolerance, max abs diff {r['max_abs_diff']:.1e}")
        print(f"{r['kernel']:>18} {r['dtype']}: {verdict}")
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} right on {where}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=where, impl=str(impl), rows=rows), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
