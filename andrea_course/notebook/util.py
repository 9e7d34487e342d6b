"""Small helpers the notebooks share: seeding, timing, number formatting."""
from __future__ import annotations

import random
import time


def seed(n: int = 0) -> None:
    """Seed Python's and torch's generators, so every run of a notebook draws the same numbers."""
    random.seed(n)
    try:
        import torch
        torch.manual_seed(n)
    except ImportError:
        pass


def timed(fn, repeat: int = 5, number: int = 1) -> float:
    """The best time of `repeat` runs of `number` calls of fn(), in seconds per call.

    Best-of is the least noisy estimate on a shared machine. Timings are for reading, never
    for asserting: they change from machine to machine.
    """
    best = float("inf")
    fn()                                    # warm up (allocations, lazy initialisation)
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def human(n: float) -> str:
    """6488832 -> '6.49M', 1536 -> '1.54K'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:g}"
