"""The GPU's code paths, rehearsed on the CPU: bf16 autocast, fp16 with the gradient scaler,
torch.compile, activation checkpointing, FSDP2 with checkpointing under gloo. Each trains a few
steps of a micro model and resumes from its checkpoint with exactly the losses of the run never
stopped (one thread per process: bit for bit, see FIELD-NOTES). DDP's and FSDP2's own
checkpoints resuming on 1, 2 and 4 processes: tests/train/test_faults_dist.py."""
import pytest
import torch
from test_faults_dist import RUN, _processes, _same_curve, one_process  # noqa: F401 (a fixture)
from test_train import SETTINGS, _config_file, _trainer, data_dir  # noqa: F401 (a fixture)

from andrea_course.train import checkpoint as ckpt
from andrea_course.train.trainer import read_log


def _rewind(run, step: int) -> list:
    """Make `run` look stopped after `step`: later checkpoints and log lines gone. Returns the whole log."""
    whole = read_log(run / "log.jsonl")
    (run / "log.jsonl").write_text("".join(l + "\n" for l in (run / "log.jsonl").read_text().splitlines()[:step]))
    folder = ckpt.checkpoints_dir(run)
    for later in sorted(folder.glob("step_*")):
        if int(later.name.split("_")[1]) > step:
            for f in later.iterdir():
                f.unlink()
            later.rmdir()
    (folder / ckpt.LATEST).write_text(f"step_{step:07d}\n")
    return whole


def _losses(log):
    return [(r["step"], r["loss"]) for r in log]


def _run_stop_resume(tmp_path, data_dir, **changes):
    """4 steps with a checkpoint every 2; then from step 2 again. Returns (whole log, resumed log, trainer)."""
    settings = dict(max_steps=4, checkpoint_every=2, eval_every=0, **changes)
    _trainer(tmp_path, data_dir, **settings).fit()
    whole = _rewind(tmp_path / "run", 2)
    again = _trainer(tmp_path, data_dir, resume=True, **settings)
    assert again.step == 2
    saved = torch.load(ckpt.find(tmp_path / "run") / "state.pt", weights_only=True)
    again.fit()
    return whole, read_log(tmp_path / "run" / "log.jsonl"), again, saved


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_mixed_precision_resumes_identically(tmp_path, data_dir, dtype):
    whole, resumed, t, saved = _run_stop_resume(tmp_path, data_dir, dtype=dtype)
    assert t.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    assert _losses(resumed) == _losses(whole)
    if dtype == "fp16":      # the loss scale and its growth counter travel with the checkpoint
        assert t.scaler.is_enabled() and saved["scaler"]["scale"] > 0
        assert set(saved["scaler"]) >= {"scale", "growth_factor", "backoff_factor", "_growth_tracker"}
    else:
        assert not t.scaler.is_enabled()


def test_auto_dtype_is_fp16_on_a_gpu_whose_bf16_is_only_emulated(monkeypatch):
    """A T4 answers torch.cuda.is_bf16_supported() with True (emulated bf16, slow): auto must pick fp16."""
    from andrea_course.train.trainer import TrainConfig, choose_dtype
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert choose_dtype(TrainConfig(), torch.device("cuda")) == torch.float16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)    # an A100
    assert choose_dtype(TrainConfig(), torch.device("cuda")) == torch.bfloat16
    assert choose_dtype(TrainConfig(), torch.device("cpu")) == torch.float32


def test_fp16_gradient_scaler_skips_an_overflowing_step_and_backs_off(tmp_path, data_dir):
    """What fp16 on a T4 relies on: an inf in the gradients skips the step and halves the scale."""
    t = _trainer(tmp_path, data_dir, dtype="fp16", max_steps=2, eval_every=0)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}
    state = t.scaler.state_dict()
    t.scaler.load_state_dict(dict(state, scale=3e38))      # a loss scaled this much overflows fp16
    scale = t.scaler.get_scale()
    t.train_step()
    assert t.scaler.get_scale() == pytest.approx(scale * t.scaler.get_backoff_factor(), rel=1e-6)
    assert all(torch.equal(p, before[n]) for n, p in t.model.named_parameters())      # skipped
    t.scaler.update(new_scale=1024.0)
    t.train_step()
    assert not all(torch.equal(p, before[n]) for n, p in t.model.named_parameters())  # at a sane scale it steps


def test_activation_checkpointing_trains_the_same_losses(tmp_path, data_dir):
    """--checkpointing recomputes each block's activations in the backward: the same numbers."""
    runs = {}
    for checkpointing in (False, True):
        out = f"checkpointing_{checkpointing}"
        _trainer(tmp_path, data_dir, out=out, max_steps=3, eval_every=0, checkpointing=checkpointing).fit()
        runs[checkpointing] = _losses(read_log(tmp_path / out / "log.jsonl"))
    assert runs[True] == runs[False]


@pytest.mark.nightly              # a minute of torch.compile on a CPU; tests/capstone/test_capstone.py compiles a model in CI
def test_compiled_training_equals_eager_and_resumes_identically(tmp_path, data_dir):
    """torch.compile of the model (forward and backward) as the trainer does on a GPU, on the
    smallest model that shows it (one block); compiling costs about a minute on two cores."""
    one_block = dict(SETTINGS["model"], n_layers=1)
    eager = _trainer(tmp_path, data_dir, out="eager", model=one_block, max_steps=4, eval_every=0)
    eager.fit()
    whole, resumed, t, _ = _run_stop_resume(tmp_path, data_dir, model=one_block, compile=True)
    assert t.wrapped is not t.model                                  # it ran compiled
    for (s, a), (_, b) in zip(_losses(read_log(tmp_path / "eager" / "log.jsonl")), _losses(whole)):
        assert b == pytest.approx(a, rel=1e-5), s
    assert _losses(resumed) == _losses(whole)


@pytest.mark.slow(seconds=40)
def test_fsdp_with_checkpointing_on_two_processes_matches_one(tmp_path, data_dir, one_process):  # noqa: F811
    """FSDP2 and activation checkpointing together, as for a model too big for one GPU. (DDP's and
    FSDP2's checkpoints resuming on 1, 2 and 4 processes: tests/train/test_faults_dist.py.)"""
    config = _config_file(tmp_path, data_dir, batch_size=2, **RUN)
    _same_curve(one_process, _processes(2, config, tmp_path / "two", "--fsdp", "--checkpointing"))
