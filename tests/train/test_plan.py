"""The plan (andrea-train --plan) against measurement on the CPU: the GPU table, FLOPs per token
against PyTorch's FlopCounterMode, the peak memory of a training step against PyTorch's memory
profiler, and the command line."""
import pytest
import torch

from andrea_course import gpus
from andrea_course.presets import PRESETS


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


# ----------------------------------------------------------------------------- FLOPs
def _counted_flops_per_token(cfg, T: int) -> float:
    """FlopCounterMode's count for a forward and backward of one sequence of T tokens. On the CPU,
    SDPA runs a kernel FlopCounterMode has no formula for: it gets the library's own forward
    formula, and a backward of twice that (dQ, dK, dV and the scores' gradient: the model-FLOPs
    convention, which counts no recomputation)."""
    from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

    from andrea_course import ANDREA
    aten = torch.ops.aten
    cpu_sdpa = {aten._scaled_dot_product_flash_attention_for_cpu:
                lambda q, k, v, *_, out_shape=None, **__: sdpa_flop_count(q, k, v),
                aten._scaled_dot_product_flash_attention_for_cpu_backward:
                lambda dy, q, k, v, *_, out_shape=None, **__: 2 * sdpa_flop_count(q, k, v)}
    torch.manual_seed(0)
    model = ANDREA(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, T))
    with FlopCounterMode(display=False, custom_mapping=cpu_sdpa) as counter:
        model(ids, ids)[1].backward()
    assert any("scaled_dot_product" in str(op) for op in counter.get_flop_counts()["Global"])
    return counter.get_total_flops() / T


SMALL = dict(vocab_size=300, context_length=64, d_model=64, n_layers=2, n_heads=4, d_ff=160)


@pytest.mark.parametrize("name,T", [("andrea-tiny", 256), ("andrea-tiny-modern", 256), ("andrea-120m", 128)])
def test_flops_per_token_match_pytorchs_flop_counter(name, T):
    from andrea_course import ModelConfig
    from andrea_course.train.schedule import flops_per_token
    torch.set_num_threads(1)
    cfg = ModelConfig.preset(name)
    counted, predicted = _counted_flops_per_token(cfg, T), flops_per_token(cfg, T)
    print(f"{name} T={T}: predicted {predicted / 1e6:.2f} MFLOP/token, counted {counted / 1e6:.2f}")
    assert predicted == counted


@pytest.mark.parametrize("option", [dict(), dict(position="rope"), dict(tie_embeddings=True), dict(mlp="swiglu"),
                                    dict(n_kv_heads=2), dict(n_kv_heads=1), dict(bias=False), dict(norm="rmsnorm"),
                                    dict(position="rope", tie_embeddings=True, mlp="swiglu", n_kv_heads=2,
                                         bias=False, norm="rmsnorm")], ids=lambda o: ",".join(o) or "classic")
def test_flops_per_token_are_exact_for_every_model_option(option):
    """Every option of ModelConfig, alone and all together: the count is FlopCounterMode's to the
    FLOP (RoPE turns q and k without a matmul and has no table; a tied head still multiplies)."""
    from andrea_course import ModelConfig
    from andrea_course.train.schedule import flops_per_token
    cfg = ModelConfig(**SMALL, **option)
    assert flops_per_token(cfg, 48) == _counted_flops_per_token(cfg, 48)


# ----------------------------------------------------------------------------- memory
def _measured_peak(tc) -> int:
    """The peak of the trainer's own training step on the CPU, from PyTorch's memory profiler:
    every tensor's allocation and release over the second step (the first creates AdamW's state)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    from andrea_course.train.trainer import Trainer
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(tc, out, device="cpu", progress=False)
        trainer.train_step()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            trainer.train_step()
    live = peak = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action in (Action.PREEXISTING, Action.CREATE):
            live += size
        elif action == Action.DESTROY:
            live -= size
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("name,B,T,dtype,checkpointing", [
    ("andrea-tiny", 8, 256, "fp32", False),          # the CPU run's own settings
    # autocast: bf16 copies of matmul inputs and weights; activation checkpointing; RMSNorm,
    # SwiGLU, grouped KV heads, a tied head; weights, gradients and AdamW at full size.
    # 30 to 60 s each on one core (the profiler records every allocation's stack): nightly.
    pytest.param("andrea-tiny", 8, 256, "bf16", False, marks=pytest.mark.nightly),
    pytest.param("andrea-tiny", 8, 256, "bf16", True, marks=pytest.mark.nightly),
    pytest.param("andrea-tiny-modern", 8, 256, "bf16", False, marks=pytest.mark.nightly),
    pytest.param("andrea-120m", 1, 64, "fp32", False, marks=pytest.mark.nightly),
    pytest.param("andrea-tiny-rope", 8, 256, "fp32", False, marks=pytest.mark.nightly),     # q, k turned
    pytest.param("andrea-tiny-rope", 8, 256, "bf16", False, marks=pytest.mark.nightly),
])
def test_peak_memory_of_a_step_matches_the_memory_profiler(name, B, T, dtype, checkpointing):
    from andrea_course.train.plan import step_memory
    from andrea_course.train.settings import TrainConfig, model_config
    model = dict(PRESETS["andrea-tiny"], position="rope") if name == "andrea-tiny-rope" else name
    tc = TrainConfig(model=model, batch_size=B, seq_len=T, dtype=dtype, checkpointing=checkpointing, eval_every=0,
                     sample_every=0, checkpoint_every=0, tensorboard=False)
    measured = _measured_peak(tc)
    predicted = step_memory(model_config(tc), B, T, dtype, checkpointing=checkpointing, device="cpu").peak
    print(f"{name} B={B} T={T} {dtype} checkpointing={checkpointing}: predicted {predicted / 2**20:.1f} MiB, "
          f"measured {measured / 2**20:.1f} MiB")
    assert predicted == pytest.approx(measured, rel=0.15)


def test_memory_model_parts():
    from andrea_course import ModelConfig, count_parameters
    from andrea_course.train.plan import step_memory
    cfg = ModelConfig.preset("andrea-120m")
    N = count_parameters(cfg)["total"]
    one = step_memory(cfg, 16, 1024, "bf16")
    assert (one.weights, one.gradients, one.optimizer) == (4 * N, 4 * N, 8 * N)
    assert one.activations == 2 * step_memory(cfg, 8, 1024, "bf16").activations          # linear in B
    ckpt = step_memory(cfg, 16, 1024, "bf16", checkpointing=True)
    assert ckpt.activations < one.activations / 5 and ckpt.peak < one.peak
    fsdp = step_memory(cfg, 16, 1024, "bf16", world=8, fsdp=True)
    assert fsdp.optimizer == 8 * N // 8 and fsdp.distributed > 0
    assert step_memory(cfg, 16, 1024, "bf16", world=8).distributed == 4 * N            # DDP's buckets
    assert step_memory(cfg, 16, 1024, "bf16", accum=2).backward_start == one.backward_start + 4 * N


# ----------------------------------------------------------------------------- the command
PLAN = ["--plan", "--config", "configs/andrea-120m.json"]


@pytest.fixture
def in_repo(monkeypatch):
    from pathlib import Path
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("gpu", ["H100", "A100", "L4", "T4"])
def test_plan_command_for_andrea_120m(gpu, in_repo, capsys):
    from andrea_course.capstone.cli import main
    assert main(PLAN + ["--gpu", gpu, "--price-per-hour", "2"]) == 0
    out = capsys.readouterr().out
    assert f"1 × {gpu} " in out and "fits: yes" in out and "peak of a step" in out
    assert "661.8 MFLOP per token" in out and "10,000 steps × 524,288 tokens" in out
    assert "cost at $2.00 per GPU-hour" in out
    assert ("fp16 autocast" if gpu == "T4" else "bf16 autocast") in out      # a T4 has no bf16


def test_plan_refuses_what_cannot_fit_and_its_advice_fits(in_repo, capsys):
    from andrea_course.train.plan import make_plan
    from andrea_course.capstone.cli import main
    from andrea_course.train.settings import load_config
    assert main(PLAN + ["--gpu", "T4", "--batch-size", "32"]) == 1
    out = capsys.readouterr().out
    assert "does not fit" in out and "--checkpointing" in out
    b = int(out.split("--batch-size ")[1].split()[0])
    assert make_plan(load_config("configs/andrea-120m.json", batch_size=b), gpu="T4", data=(None, "")).fits
    assert not make_plan(load_config("configs/andrea-120m.json", batch_size=2 * b), gpu="T4", data=(None, "")).fits


@pytest.mark.parametrize("args,message", [
    (["--gpu", "K80"], "unknown GPU 'K80'"),
    ([], "no GPU here to plan for"),
    (["--gpu", "H100", "--price-per-hour", "-1"], "--price-per-hour: must be a finite number >= 0"),
    (["--gpu", "H100", "--num-gpus", "0"], "--num-gpus: must be a whole number >= 1"),
    (["--gpu", "H100", "--batch-size", "24"], "total_batch_tokens 524288 is not a multiple of"),
])
def test_plan_usage_errors_say_what_was_wrong(args, message, in_repo, capsys):
    from andrea_course.capstone.cli import main
    try:
        status = main(PLAN + args)
    except SystemExit as exc:          # argparse's own refusals
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_gpu_check_without_a_gpu_says_so_in_one_line(capsys):
    from andrea_course.capstone.cli import main
    assert main(["--gpu-check"]) == 1
    err = capsys.readouterr().err
    assert "no CUDA GPU here" in err and len(err.strip().splitlines()) == 1


def test_gpu_check_measures_on_the_cpu_and_prints_markdown(tmp_path):
    """The check's measuring and reporting, rehearsed on the CPU with a micro model."""
    from andrea_course.train import gpu_check
    from andrea_course.train.plan import make_plan
    from andrea_course.train.settings import TrainConfig
    micro = {"vocab_size": 8449, "context_length": 32, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64}
    tc = TrainConfig(**gpu_check.settings("fp32", False, 3, model=micro, batch_size=2, seq_len=32))
    got = gpu_check.measure(tc, "cpu", warmup=1, steps=2)
    assert got["tokens_per_s"] > 0 and got["mfu"] is None and got["peak_bytes"] is None
    plan = make_plan(tc, gpu="H100", data=(None, ""))
    table = gpu_check.report("CPU", "fp32", "5 passed", got, got, plan)
    assert "| andrea-train --gpu-check | plan | measured |" in table and "|---|---:|---:|" in table


def test_markdown_tables_escape_pipes():
    from andrea_course.train.plan import markdown_table
    assert markdown_table(["a", "b"], [[1, "x|y"]], right={1}) == "| a | b |\n|---|---:|\n| 1 | x\\|y |"


def test_cloud_docs_show_the_plans_real_output(in_repo, capsys):
    from pathlib import Path

    from andrea_course.capstone.cli import main
    assert main(PLAN + ["--gpu", "H100", "--price-per-hour", "3"]) == 0
    docs = Path("docs/cloud.md").read_text(encoding="utf-8")
    assert "andrea-train --plan --config configs/andrea-120m.json --gpu H100 --price-per-hour 3" in docs
    assert capsys.readouterr().out in docs


def test_gpu_check_runs_the_kernel_tests_it_finds(tmp_path, monkeypatch):
    from andrea_course.train import gpu_check
    passing = tmp_path / "test_one.py"
    passing.write_text("def test_one():\n    assert 1 + 1 == 2\n")
    monkeypatch.setattr(gpu_check, "KERNEL_TESTS", [passing, tmp_path / "test_gone.py"])
    summary = gpu_check.kernel_tests()
    assert "1 passed" in summary and "FAILED" not in summary and "not found" in summary and "test_gone.py" in summary
