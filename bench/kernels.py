"""Benchmark ANDREA's Triton kernels (andrea_course.engine.kernels) on a GPU.

Each kernel runs against PyTorch eager (what the model's torch path runs), torch.compile of the
plain formula and, for attention, F.scaled_dot_product_attention, at ANDREA-120M's training
shapes in bf16: B·T = 8×1,024 tokens, D = 768, F = 3,072 (GELU) or 2,048 (SwiGLU, the modern
preset), H = 12, K = 64, V = 8,449. Forward, and forward+backward. Printed per line: time in
milliseconds, achieved GB/s (memory-bound kernels: the bytes each must move at least, divided by
the time) or TFLOP/s (attention), and Triton's speed-up over each baseline (>1: Triton is faster).

    python bench/kernels.py                 # the table
    python bench/kernels.py --markdown      # the same as a Markdown table for docs/kernels.md
    python bench/kernels.py --smoke         # no GPU: tiny shapes in the interpreter, to test this script
    python bench/kernels.py --json K.json   # also every time, with the bytes or FLOPs behind each rate

Without a GPU (and without --smoke) it says so and exits 0.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--smoke", action="store_true", help="tiny shapes, interpreter timing: checks this script runs")
    p.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--json", metavar="FILE", help="also write the measurements to FILE (bench/gpu_day.py reads it)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    gpu = torch.cuda.is_available()
    if not gpu and not args.smoke:
        print("bench/kernels.py: no CUDA GPU here, nothing measured. The kernels need a GPU to be timed "
              "(on the CPU they run in Triton's interpreter, thousands of times slower). Run this on a GPU "
              "machine; `--smoke` checks the script itself on the CPU.")
        return 0
    if not gpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")

    import torch.nn.functional as F

    from andrea_course.engine import kernels as K
    from andrea_course.engine import ops
    import math

    def attention_formula(q, k, v):
        T, S = q.shape[-2], k.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T).logical_not(),
                                    float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def layer_norm_formula(x, w, b, eps=1e-5):
        mean = x.mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps) * w + b

    def rms_norm_formula(x, w, eps=1e-5):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

    def softmax_formula(s):
        e = (s - s.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    # eager PyTorch written from the course's formulas, as a learner writes them
    formula = dict(gelu=lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                   layer_norm=layer_norm_formula, rms_norm=rms_norm_formula,
                   swiglu=lambda g, u: g * torch.sigmoid(g) * u, softmax=softmax_formula,
                   attention=attention_formula)

    device = "cuda" if gpu else "cpu"
    dtype = torch.bfloat16 if gpu else torch.float32         # the interpreter's bf16 is wrong
    if gpu:
        B, T, D, Fg, Fs, H, KD, V = 8, 1024, 768, 3072, 2048, 12, 64, 8449
    else:
        B, T, D, Fg, Fs, H, KD, V = 1, 64, 96, 128, 96, 2, 32, 300
    N = B * T
    size = torch.tensor([], dtype=dtype).element_size()

    def timer(fn):
        if gpu:
            import triton.testing
            return triton.testing.do_bench(fn, warmup=25, rep=100)
        fn()
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def maybe_compile(fn):
        if args.no_compile or not gpu:
            return None
        try:
            return torch.compile(fn)
        except Exception as exc:                              # no compiler toolchain, old GPU, ...
            print(f"  torch.compile unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None

    def randn(*shape, scale=1.0, grad=True):
        return (torch.randn(*shape, device=device, dtype=dtype) * scale).requires_grad_(grad)

    # name -> (inputs, triton fn, {baseline name: fn}, bytes fwd, bytes fwd+bwd, flops fwd, flops fwd+bwd)
    cases = {}
    x = randn(N, Fg)
    cases["gelu_tanh"] = ([x], K.gelu_tanh,
                          {"eager": ops.gelu, "formula": formula["gelu"], "compile": maybe_compile(K.gelu_tanh_reference)},
                          2 * x.numel() * size, 5 * x.numel() * size, None, None)
    g, u = randn(N, Fs, scale=2.0), randn(N, Fs)
    cases["swiglu"] = ([g, u], K.swiglu,
                       {"eager": ops.swiglu, "formula": formula["swiglu"], "compile": maybe_compile(K.swiglu_reference)},
                       3 * g.numel() * size, 8 * g.numel() * size, None, None)
    x = randn(N, D)
    w, b = randn(D), randn(D)
    eps = 1e-5
    cases["layer_norm"] = ([x, w, b], lambda x, w, b: K.layer_norm(x, w, b, eps),
                           {"eager": lambda x, w, b: ops.layer_norm(x, w, b, eps),
                            "formula": lambda x, w, b: formula["layer_norm"](x, w, b, eps),
                            "compile": maybe_compile(lambda x, w, b: K.layer_norm_reference(x, w, b, eps))},
                           2 * x.numel() * size, 5 * x.numel() * size, None, None)
    cases["rms_norm"] = ([x, w], lambda x, w: K.rms_norm(x, w, eps),
                         {"eager": lambda x, w: ops.rms_norm(x, w, eps),
                          "formula": lambda x, w: formula["rms_norm"](x, w, eps),
                          "compile": maybe_compile(lambda x, w: K.rms_norm_reference(x, w, eps))},
                         2 * x.numel() * size, 5 * x.numel() * size, None, None)
    s = randn(B * H * T, T, scale=3.0)
    cases["softmax"] = ([s], K.softmax,
                        {"eager": lambda s: torch.softmax(s, dim=-1), "formula": formula["softmax"],
                         "compile": maybe_compile(K.softmax_reference)},
                        2 * s.numel() * size, 5 * s.numel() * size, None, None)
    logits = randn(B, T, V, scale=2.0)
    targets = torch.randint(0, V, (B, T), device=device)
    cases["cross_entropy"] = ([logits, targets], K.cross_entropy,
                              {"eager": K.cross_entropy_reference, "compile": maybe_compile(K.cross_entropy_reference)},
                              logits.numel() * size, 3 * logits.numel() * size, None, None)
    q, k, v = randn(B, H, T, KD), randn(B, H, T, KD), randn(B, H, T, KD)
    attn_flops = 4 * B * T * T * H * KD / 2                  # causal: half the score matrix
    cases["attention"] = ([q, k, v], K.attention,
                          {"eager": K.attention_reference, "formula": formula["attention"], "sdpa": ops.attention,
                           "compile": maybe_compile(K.attention_reference)},
                          None, None, attn_flops, attn_flops * 3.5)   # backward = 2.5 x forward

    only = {n for n in args.only.split(",") if n}
    rows, records = [], []
    for name, (inputs, tri, baselines, bytes_f, bytes_fb, flops_f, flops_fb) in cases.items():
        if only and name not in only:
            continue
        floats = [t for t in inputs if t.is_floating_point()]
        with torch.no_grad():
            err = (tri(*inputs).float() - baselines["eager"](*inputs).float()).abs().max().item()
        dy = None

        def fwd(fn):
            def run():
                with torch.no_grad():
                    fn(*inputs)
            return run

        def fwd_bwd(fn):
            def run():
                for t in floats:
                    t.grad = None
                out = fn(*inputs)
                out.backward(dy if out.dim() else None)
            return run

        with torch.no_grad():
            out0 = tri(*inputs)
        dy = torch.randn_like(out0) if out0.dim() else None
        for mode, wrap, nbytes, flops in (("fwd", fwd, bytes_f, flops_f), ("fwd+bwd", fwd_bwd, bytes_fb, flops_fb)):
            ms = {"triton": timer(wrap(tri))}
            for base, fn in baselines.items():
                if fn is not None:
                    try:
                        ms[base] = timer(wrap(fn))
                    except Exception as exc:
                        print(f"  {name} {mode} {base}: failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
            rate = (f"{nbytes / ms['triton'] / 1e6:,.0f} GB/s" if nbytes else f"{flops / ms['triton'] / 1e9:,.1f} TFLOP/s")
            rows.append((name, mode, ms, rate, err))
            records.append(dict(kernel=name, mode=mode, ms=ms, bytes=nbytes, flops=flops, max_abs_diff=err))
    report(rows, args.markdown, gpu, dtype, (B, T, D, Fg, Fs, H, KD, V))
    if args.json:
        import json
        shapes = dict(zip(("B", "T", "D", "F_gelu", "F_swiglu", "H", "K", "V"), (B, T, D, Fg, Fs, H, KD, V)))
        where = torch.cuda.get_device_name() if gpu else "cpu (interpreter)"
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(dict(device=where, dtype=str(dtype).replace("torch.", ""), shapes=shapes, rows=records), f, indent=1)
    return 0


def report(rows, markdown: bool, gpu: bool, dtype, shapes) -> None:
    bases = ["eager", "formula", "compile", "sdpa"]
    B, T, D, Fg, Fs, H, KD, V = shapes
    where = torch.cuda.get_device_name() if gpu else "CPU, Triton interpreter (smoke test: times mean nothing)"
    head = (f"{where}; {str(dtype).replace('torch.', '')}; B·T = {B}×{T}, D = {D}, F = {Fg} (GELU) / {Fs} (SwiGLU), "
            f"H = {H}, K = {KD}, V = {V}; torch {torch.__version__}")
    cols = ["kernel", "pass", "triton ms", "triton rate"] + [f"{b} ms" for b in bases] + [f"vs {b}" for b in bases] + ["max abs diff vs eager"]
    table = []
    for name, mode, ms, rate, err in rows:
        t = ms["triton"]
        table.append([name, mode, f"{t:.3f}", rate]
                     + [f"{ms[b]:.3f}" if b in ms else "-" for b in bases]
                     + [f"{ms[b] / t:.2f}x" if b in ms else "-" for b in bases]
                     + [f"{err:.1e}"])
    if markdown:       # as docs/kernels.md takes it
        from andrea_course.train.plan import markdown_table
        print(head + "\n")
        print(markdown_table(cols, table, right=set(range(2, len(cols)))))
    else:
        print(head)
        widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(cols)]
        print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
        for r in table:
            print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    print("\neager: PyTorch's fused op where it has one (F.gelu, F.layer_norm, ...; attention: the scores "
          "materialised); formula: eager PyTorch written from the course's formula, as a learner writes it.")
    print("vs X = X's time / Triton's time (>1: Triton faster). Rates: bytes each kernel must move at least "
          "(GB/s), or causal attention FLOPs, 4·B·T²·H·K/2 forward and 2.5x that backward (TFLOP/s).")


if __name__ == "__main__":
    sys.exit(main())
