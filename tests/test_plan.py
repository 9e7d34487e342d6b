"""The plan (andrea-train --plan) against measurement on the CPU: the GPU table, FLOPs per token
against PyTorch's FlopCounterMode, the peak memory of a training step against PyTorch's memory
profiler, and the command line."""
import pytest
import torch

from andrea_course import gpus


def test_gpu_table_matches_device_names_most_specific_first():
    assert gpus.peak_flops(torch.device("cpu")) is None
    by = lambda name: gpus.find(name)
    # "NVIDIA H100 PCIe" must not be read as an SXM H100, nor "L40S" as an L4, nor an H200 as an H20
    assert by("NVIDIA H100 PCIe").peak_flops == 756e12 and by("NVIDIA H100 80GB HBM3").peak_flops == 989e12
    assert by("NVIDIA L40S").peak_flops == 362e12 and by("NVIDIA L4").peak_flops == 121e12
    assert by("NVIDIA H200").memory_gib == 141 and by("NVIDIA H20").memory_gib == 96
    assert by("NVIDIA A100-SXM4-80GB").memory_gib == 80 and by("NVIDIA A100-PCIE-40GB").memory_gib == 40
    assert by("NVIDIA A10G").peak_flops == 70e12 and by("NVIDIA A10").peak_flops == 125e12
    assert not by("Tesla T4").bf16 and not by("Tesla V100-SXM2-16GB").bf16 and by("h100").bf16
    assert by("Tesla V100-SXM2-32GB").memory_gib == 32
    assert by("a GPU nobody has heard of") is None
