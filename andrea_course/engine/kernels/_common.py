"""What every kernel file shares: interpreter mode, block sizes, how rows are laid out.

Without a GPU the kernels run in Triton's interpreter; TRITON_INTERPRET must be set before a
kernel is defined, so this module (imported first by every kernel file) sets it.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
# Elements per program of the elementwise kernels (GELU, SwiGLU): the interpreter pays per
# program, not per element, so it gets bigger blocks.
ELEMENTWISE_BLOCK = 4096 if INTERPRET else 1024


def n_programs(rows: int, device: torch.device) -> int:
    """How many programs share the rows of a norm's backward: a few per SM on a GPU, few in
    the interpreter."""
    if device.type == "cuda":
        return min(rows, 4 * torch.cuda.get_device_properties(device).multi_processor_count)
    return min(rows, 4)


def rows_of(x: torch.Tensor) -> torch.Tensor:
    """x (..., D) as a (rows, D) matrix with unit stride along D (a copy only if needed)."""
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()
