"""What a relation sees (grading/relations.py, grading/reruns.py): the Seen it returns, the
tolerances it compares with, and the keys under which a test's inputs carry its call."""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

FLOAT_TOL = {torch.float64: (1e-9, 1e-7), torch.float32: (1e-5, 1e-4), torch.float16: (2e-3, 2e-3),
             torch.bfloat16: (1e-2, 1e-2)}
MAX_NUMEL = 1 << 20                     # larger outputs are not searched
CALL = "(call)"              # the key under which `inputs` carries the one call of a learner's piece (student.Call)


class Seen(NamedTuple):
    keys: frozenset          # what describes it; the second input must share one
    say: Callable[[str], str]  # the sentence, given the shared key
    fix: str | None = None   # replaces the test's hint when the hint would lead astray
    exact: bool = False      # an exact observation, said even where no other input is wrong


class Relation(NamedTuple):
    text: str
    fix: str | None = None


def tensors(got, want) -> bool:
    """Both tensors, small enough to search, the expected one more than a single number."""
    return (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and want.numel() <= MAX_NUMEL
            and got.numel() <= MAX_NUMEL and want.numel() > 1)


def floats(got, want) -> bool:
    return tensors(got, want) and got.is_floating_point() and want.is_floating_point()


def near(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor, loose: float = 1.0) -> bool:
    """a equals b within the tolerance of ref's dtype (loosened by `loose`)."""
    if a.shape != b.shape:
        return False
    at, rt = FLOAT_TOL.get(ref.dtype, (1e-6, 1e-5))
    a, b = a.detach().double(), b.detach().double()
    scale = float(b[torch.isfinite(b)].abs().max()) if torch.isfinite(b).any() else 1.0
    return bool(torch.allclose(a, b, atol=loose * at * max(scale, 1.0), rtol=loose * rt, equal_nan=True))
