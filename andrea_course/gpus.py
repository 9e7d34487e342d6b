"""The GPUs the course knows: memory, dense tensor-core peak, whether they have bf16.

One table, read by the trainer's MFU display (peak_flops) and by `andrea-train --plan` (find).
Figures are the vendors' data-sheet numbers, dense (without 2:4 sparsity), for bf16 with fp32
accumulation; on a GPU without bf16 (V100, T4) the fp16 peak, which is what such a GPU trains in.
Memory is the data sheet's, in GiB (what "80 GB" of HBM is); the driver shows a little less.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str             # every word of it must appear in the device's name (case ignored)
    memory_gib: float
    peak_flops: float     # dense bf16 (fp16 where bf16 is missing) FLOP/s
    bf16: bool

    def matches(self, device_name: str) -> bool:
        return all(word in device_name.lower() for word in self.name.lower().split())


# In order: the first match wins, so a more specific name ("H100 PCIe", "A100 80GB", "L40S")
# comes before the name it contains ("H100", "A100", "L40", "L4").
GPUS = [
    GPU("H100 PCIe", 80, 756e12, True), GPU("H100 NVL", 94, 835e12, True), GPU("H100", 80, 989e12, True),
    GPU("GH200", 96, 989e12, True), GPU("H200", 141, 989e12, True), GPU("H20", 96, 148e12, True),
    GPU("B200", 180, 2250e12, True),
    GPU("A100 80GB", 80, 312e12, True), GPU("A100", 40, 312e12, True), GPU("A800", 80, 312e12, True),
    GPU("L40S", 48, 362e12, True), GPU("L40", 48, 181e12, True), GPU("L4", 24, 121e12, True),
    GPU("A10G", 24, 70e12, True),          # AWS's A10 at lower clocks: a common estimate, no data sheet
    GPU("A10", 24, 125e12, True), GPU("RTX 6000 Ada", 48, 364e12, True), GPU("RTX A6000", 48, 155e12, True),
    GPU("RTX 4090", 24, 165e12, True), GPU("RTX 3090", 24, 71e12, True),
    GPU("V100 32GB", 32, 125e12, False), GPU("V100", 16, 125e12, False), GPU("T4", 16, 65e12, False),
]


def find(name: str) -> GPU | None:
    """The table's entry for a device name ("NVIDIA H100 80GB HBM3") or a short one ("h100")."""
    return next((g for g in GPUS if g.matches(name)), None)


def present(device=None) -> tuple[str, float] | None:
    """(name, memory in GiB) of this process's CUDA device, or None without one."""
    import torch
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    return props.name, props.total_memory / 2**30


def peak_flops(device) -> float | None:
    """The dense peak of a torch device for MFU; None on the CPU or a GPU not in the table."""
    if device.type != "cuda":
        return None
    import torch
    gpu = find(torch.cuda.get_device_name(device))
    return gpu.peak_flops if gpu else None
