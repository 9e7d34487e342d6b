"""The device a command runs on: --device as andrea-train and andrea-sample read it."""
from __future__ import annotations

import torch

from ..engine.config import ConfigError


def parse_device(device_arg: str | None, local_rank: int = 0) -> torch.device:
    """The device asked for, or this process's GPU, else the CPU; ConfigError for one that is
    not there (a typo, cuda without a GPU, cuda:3 on a machine with two)."""
    if not device_arg:
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(device_arg)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"--device {device_arg!r} is not a device: give cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device {device_arg}: no CUDA GPU is visible to PyTorch "
                              f"(torch.cuda.is_available() is False); leave --device out to use the CPU")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"--device {device_arg}: this machine has {torch.cuda.device_count()} GPU(s), "
                              f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--device {device_arg}: Apple's MPS is not available here")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"--device {device_arg}: the trainer runs on cpu, cuda or mps")
    return device
