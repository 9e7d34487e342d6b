"""Train the small ANDREA that ships with the course (andrea_course/data/andrea-stories.safetensors).

    .venv/bin/python tools/train_shipped_model.py    # about 4 min on one idle CPU core, far longer on a busy one

It runs andrea-train on the shipped stories with fixed settings and seed (on the CPU, so the
result is the same bits on every run of the same torch build), then stores the final weights
in fp16 (half the bytes; the model loads them into fp32) with the run's numbers in the header.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from andrea_course.capstone.cli import main as train_main             # noqa: E402
from andrea_course.train import load_tokenizer                       # noqa: E402
from andrea_course.train.sample import PRETRAINED_FILE                # noqa: E402
from andrea_course.train.trainer import read_log                     # noqa: E402
from andrea_course.engine.weights import load_weights, save_weights          # noqa: E402

ARGS = ["--config", "andrea-tiny", "--max-steps", "500", "--batch-size", "4", "--seed", "1337", "--device", "cpu",
        "--dtype", "fp32", "--eval-every", "100", "--sample-every", "200", "--checkpoint-every", "100"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "shipped")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run of this tool")
    p.add_argument("--out", type=Path, default=PRETRAINED_FILE)
    args = p.parse_args(argv)
    if not args.resume and args.run.exists():
        shutil.rmtree(args.run)
    torch.set_num_threads(1)     # one thread: the same bits everywhere, and fastest on a busy machine
    rc = train_main(ARGS + ["--out", str(args.run), "--no-progress"] + (["--resume"] if args.resume else []))
    if rc:
        return rc
    model = load_weights(args.run / "model.safetensors")
    log = read_log(args.run / "log.jsonl")
    val = [r["val_loss"] for r in log if "val_loss" in r]
    meta = {"trained_by": "tools/train_shipped_model.py", "args": json.dumps(ARGS), "steps": str(log[-1]["step"]),
            "tokens": str(log[-1]["tokens"]), "final_train_loss": f"{log[-1]['loss']:.4f}",
            "final_val_loss": f"{val[-1]:.4f}", "tokenizer_hash": load_tokenizer().hash}
    save_weights(model.half(), args.out, meta)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes): {meta}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
