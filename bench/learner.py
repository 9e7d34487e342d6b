"""Does your model train as fast as the engine's?  (a script, not a test)

    .venv/bin/python bench/learner.py                    # andrea-tiny, B = 8, T = 256, one thread
    .venv/bin/python bench/learner.py --threads 2 --steps 10 --repeats 5

Times the trainer's whole step (forward, loss, backward, clipping, the optimizer, the schedule)
of three runs of the same settings and seed, side by side:

  engine          the engine's ANDREA, torch.optim.AdamW, the trainer's lr_at
  PyTorch pieces  a learner's folder (the answer key, copied) whose pieces that have a PyTorch op
                  call it: attention by F.scaled_dot_product_attention, GELU, LayerNorm and RMSNorm
                  by theirs, SwiGLU by F.silu, AdamW's update by in-place ops as torch.optim.AdamW
                  does it; built by the overlay, its AdamW step inside train.optimizer.StepwiseAdamW
  answer key      the answer key's pieces as written, from the formulas (attention materialises
                  its (T, S) scores; LayerNorm in four ops)

Every piece of the two learner runs passes its graded tests (the script checks); the steps of
the three runs alternate, so a busy machine slows each alike; the table shows the median step,
in wall-clock time and in the process's CPU time (which a busy machine disturbs less on one
thread), and the ratio to the engine (target for the PyTorch pieces: <= 1.10).
"""
from __future__ import annotations

import argparse
import ast
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from andrea_course.capstone import engine_parts, learner_parts   # noqa: E402
from andrea_course.train.settings import TrainConfig              # noqa: E402

# The pieces that have a PyTorch op, written with it (each replaces the function of that name).
PYTORCH_PIECES = {
    "attention": '''
def attention(q, k, v, causal=True):
    import torch
    import torch.nn.functional as F
    T, S = q.shape[-2], k.shape[-2]
    if not causal:
        return F.scaled_dot_product_attention(q, k, v)
    if T == S:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
''',
    "mlp": '''
def gelu_tanh(x):
    import torch.nn.functional as F
    return F.gelu(x, approximate="tanh")
''',
    "block": '''
def layer_norm(x, weight, bias, eps=1e-5):
    import torch.nn.functional as F
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
''',
    "modern": '''
def rms_norm(x, weight, eps=1e-5):
    import torch
    import torch.nn.functional as F
    wide = torch.promote_types(x.dtype, torch.float32)
    return F.rms_norm(x.to(wide), x.shape[-1:], weight.to(wide), eps).to(x.dtype)


def swiglu(gate, up):
    import torch.nn.functional as F
    return F.silu(gate) * up
''',
    "optim": '''
def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    import math
    beta1, beta2 = betas
    m = m.lerp(grad, 1 - beta1)
    v = (v * beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (v.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
    param = param * (1 - lr * weight_decay)
    return param.addcdiv_(m, denom, value=-lr / (1 - beta1 ** step)), m, v
''',
}


def pytorch_pieces(folder: Path) -> Path:
    """A copy of the answer key with PYTORCH_PIECES in place of the functions of those names."""
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for activity, source in PYTORCH_PIECES.items():
        path = folder / f"{activity}.py"
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        new = {n.name: n for n in ast.parse(source).body}
        for node in sorted((n for n in ast.parse("".join(lines)).body
                            if isinstance(n, ast.FunctionDef) and n.name in new), key=lambda n: -n.lineno):
            lines[node.lineno - 1:node.end_lineno] = [ast.get_source_segment(source, new[node.name]) + "\n"]
        path.write_text("".join(lines), encoding="utf-8")
    return folder


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="andrea-tiny", help="a training preset")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--steps", type=int, default=5, help="steps per timing")
    p.add_argument("--repeats", type=int, default=5, help="timings per run (alternating)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    args = p.parse_args(argv)
    if not (ROOT / "solutions").is_dir():
        raise SystemExit("bench/learner.py builds its learner's folders from the answer key (solutions/), "
                         "which this copy of the course does not have")
    torch.set_num_threads(args.threads)
    tc = TrainConfig(model=args.config, batch_size=args.batch_size, seq_len=args.seq_len, max_steps=10**6,
                     bpe_merges=256, eval_every=0, sample_every=0, checkpoint_every=0, tensorboard=False)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folders = {"PyTorch pieces": pytorch_pieces(tmp / "pytorch"), "answer key": tmp / "key"}
        shutil.copytree(ROOT / "solutions", folders["answer key"], ignore=shutil.ignore_patterns("__pycache__"))
        runs = {"engine": engine_parts().trainer(tc, tmp / "engine", device="cpu", progress=False)}
        for name, folder in folders.items():
            parts = learner_parts(folder, tc)
            unused = {k: v for k, v in parts.pieces["pieces"].items() if v != "yours"}
            if unused:
                raise SystemExit(f"{name}: not every piece passes its graded tests: {unused}")
            runs[name] = parts.trainer(tc, tmp / name.replace(" ", "_"), device="cpu", progress=False)
        wall, cpu = {name: [] for name in runs}, {name: [] for name in runs}
        first = {name: t.train_step()[0] for name, t in runs.items()}   # warm-up: AdamW's state, allocations
        gap = max(abs(loss - first["engine"]) for loss in first.values())
        if gap > 1e-4:
            raise SystemExit(f"the runs are not the same model: their first losses are {first}")
        for _ in range(args.repeats):
            for name, t in runs.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                for _ in range(args.steps):
                    t.train_step()
                wall[name].append((time.perf_counter() - start) / args.steps)
                cpu[name].append((time.process_time() - start_cpu) / args.steps)
    step = {name: statistics.median(ts) for name, ts in wall.items()}
    step_cpu = {name: statistics.median(ts) for name, ts in cpu.items()}
    print(f"{args.config}, B = {args.batch_size}, T = {args.seq_len}, {args.threads} thread(s), "
          f"torch {torch.__version__}; median of {args.repeats} x {args.steps} steps, alternating; "
          f"the first step's losses agree within {gap:.1e}")
    print("| run | step, wall (ms) | / engine | step, CPU time (ms) | / engine | tokens/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in runs:
        print(f"| {name} | {1000 * step[name]:.1f} | {step[name] / step['engine']:.3f} | "
              f"{1000 * step_cpu[name]:.1f} | {step_cpu[name] / step_cpu['engine']:.3f} | "
              f"{args.batch_size * args.seq_len / step[name]:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
