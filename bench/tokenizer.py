"""Benchmark a run's own tokenizer: plain-Python BPE (the engine's pieces, as a learner writes
them) against Hugging Face's trainer, side by side, on the text a run learns its merges from.

    python bench/tokenizer.py                 # 256 merges on the first BPE_STORIES stories
    python bench/tokenizer.py --merges 512

Prints each one's time (best of --repeat), the ratio, and how long encoding 1,000 stories takes
with the learned merges (plain Python, word by word, as the learner's encode does).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--merges", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    from andrea_course.pieces import bpe
    from andrea_course.train.corpus import load_corpus
    from andrea_course.train.tokenizer import BPE_STORIES, bpe_text, train_tokenizer
    stories = load_corpus()
    text = bpe_text(stories[:BPE_STORIES])
    python, merges = best(lambda: bpe.train_bpe(text, args.merges), args.repeat)
    library, _ = best(lambda: train_tokenizer([text], n_merges=args.merges), args.repeat)
    sample = "".join(stories[:1000])
    encoding, _ = best(lambda: bpe.encode(sample, merges), 1)
    print(f"{args.merges} merges on the first {BPE_STORIES} stories ({len(text.encode()) / 1e3:.0f} kB of text):")
    print(f"  plain-Python BPE (the pieces)   {python:6.2f} s")
    print(f"  Hugging Face's BpeTrainer       {library:6.2f} s")
    print(f"  plain Python / Hugging Face     {python / library:6.1f}x")
    print(f"  encoding 1,000 stories with those merges, word by word: {encoding:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
