"""Training throughput: andrea-train's step against a plain training loop, in the same run.

    .venv/bin/python bench/train.py                      # CPU: andrea-tiny, ratio to the plain loop
    .venv/bin/python bench/train.py --config andrea-120m # GPU: bf16 tokens/s and MFU

The plain loop is the shortest correct one (nanoGPT's): random ids, model(x, y), backward,
clip, AdamW.step, zero_grad. The trainer's step does the same plus its bookkeeping (data
position, schedule, gradient scaler, loss all-reduce): the ratio says what that costs. Both use
the same model class and settings; the best of --repeats timings of --steps steps is reported.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from andrea_course import ANDREA                                               # noqa: E402
from andrea_course.gpus import peak_flops                                       # noqa: E402
from andrea_course.presets import TRAIN_PRESETS                               # noqa: E402
from andrea_course.train.schedule import flops_per_token                        # noqa: E402
from andrea_course.train.settings import TrainConfig                            # noqa: E402
from andrea_course.train.trainer import Trainer                                 # noqa: E402


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def plain_loop(cfg, B, T, steps, device, dtype, repeats):
    torch.manual_seed(0)
    model = ANDREA(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=device.type == "cuda")
    x = torch.randint(0, cfg.vocab_size, (B, T + 1), device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32)

    def step():
        with autocast:
            _, loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()                                           # warm-up (allocations, kernels)
    best = float("inf")
    for _ in range(repeats):
        sync(device)
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return B * T * steps / best


def trainer_loop(tc, steps, device, repeats):
    with tempfile.TemporaryDirectory() as run:
        trainer = Trainer(tc, run, device=str(device), progress=False)
        trainer.train_step()
        best = float("inf")
        for _ in range(repeats):
            sync(device)
            t = time.perf_counter()
            for _ in range(steps):
                trainer.train_step()
            sync(device)
            best = min(best, time.perf_counter() - t)
        return trainer.tokens_per_step * steps / best, trainer


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="andrea-tiny")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    preset = dict(TRAIN_PRESETS.get(args.config, {}))
    B = args.batch_size or (preset.get("batch_size", 8) if device.type == "cuda" else 4)
    T = args.seq_len or preset.get("seq_len", 256)
    tc = TrainConfig(model=args.config, batch_size=B, seq_len=T, grad_accum=1, max_steps=10**6,
                     tensorboard=False, sample_every=0, eval_every=0, checkpoint_every=0)
    trainer_tps, trainer = trainer_loop(tc, args.steps, device, args.repeats)
    plain_tps = plain_loop(trainer.cfg, B, T, args.steps, device, trainer.dtype, args.repeats)
    out = {"config": args.config, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
           "threads": torch.get_num_threads(), "dtype": str(trainer.dtype).replace("torch.", ""),
           "B": B, "T": T, "params": trainer.n_params,
           "trainer_tokens_per_s": round(trainer_tps, 1), "plain_tokens_per_s": round(plain_tps, 1),
           "ratio": round(trainer_tps / plain_tps, 3)}
    peak = peak_flops(device)
    if peak:
        out["mfu"] = round(flops_per_token(trainer.cfg, T) * trainer_tps / peak, 4)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>22}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
