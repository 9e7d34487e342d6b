"""The fault suite, part 3: a checkpoint written by N processes resumes on M.

Two gloo processes on the CPU (DDP, then FSDP2) train 4 steps with the global batch of one
process; their losses match one process's. Their step-2 checkpoint then resumes on 1 process
and on 4 (the same global batch: B = 4 and B = 1), and steps 3 and 4 match the unbroken run
within float tolerance: the data order goes on exactly, the optimizer state loads by name.
"""
import json
import shutil
import subprocess

import pytest

from andrea_course.train import checkpoint as ckpt
from andrea_course.train.runlog import read_log
from test_train import ENV, _config_file, _train_cmd, _trainer, data_dir  # noqa: F401  (data_dir: a fixture)

pytestmark = [pytest.mark.faults, pytest.mark.slow(seconds=50)]
RUN = dict(max_steps=4, eval_every=2, checkpoint_every=2)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, data_dir):  # noqa: F811
    """4 steps of one process with B = 4: what every split of the same global batch must reproduce."""
    folder = tmp_path_factory.mktemp("one")
    _trainer(folder, data_dir, out="run", batch_size=4, **RUN).fit()
    return read_log(folder / "run" / "log.jsonl")


def _processes(n, config, out, *extra):
    done = subprocess.run(_train_cmd(config, out, *extra, nproc=n), env=ENV, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return read_log(out / "log.jsonl")


def _same_curve(a, b, steps=(1, 2, 3, 4)):
    a = [r for r in a if r["step"] in steps]
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(steps)
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5, abs=1e-5)
        assert rb["tokens"] == ra["tokens"]
        if "val_loss" in ra:
            assert rb["val_loss"] == pytest.approx(ra["val_loss"], rel=1e-5)


def _from_step_2(run, to):
    """A copy of `run` as it was when stopped after step 2."""
    shutil.copytree(run / "checkpoints" / "step_0000002", to / "checkpoints" / "step_0000002")
    (to / "checkpoints" / "latest").write_text("step_0000002\n")
    (to / "log.jsonl").write_text("".join(l + "\n" for l in (run / "log.jsonl").read_text().splitlines()[:2]))
    return to


@pytest.mark.parametrize("mode", ["ddp", pytest.param("fsdp", marks=pytest.mark.nightly)])   # FSDP also in test_rehearsal
def test_two_processes_match_one_and_resume_on_one_and_on_four(tmp_path, data_dir, one_process, mode):  # noqa: F811
    extra = ["--fsdp"] if mode == "fsdp" else []
    config = _config_file(tmp_path, data_dir, batch_size=2, **RUN)
    two = _processes(2, config, tmp_path / "two", *extra)
    _same_curve(one_process, two)
    manifest = json.loads((ckpt.find(tmp_path / "two") / "manifest.json").read_text())
    assert manifest["world_size"] == 2 and {"rng_rank0.pt", "rng_rank1.pt"} <= set(manifest["files"])
    from andrea_course.engine.weights import load_weights
    assert load_weights(tmp_path / "two" / "model.safetensors").cfg.d_model == 32   # whole weights

    on_one = _from_step_2(tmp_path / "two", tmp_path / "one")
    _trainer(tmp_path, data_dir, out="one", batch_size=4, resume=True, **RUN).fit()
    _same_curve(one_process, read_log(on_one / "log.jsonl"))

    on_four = _from_step_2(tmp_path / "two", tmp_path / "four")
    _same_curve(one_process, _processes(4, config, on_four, "--resume", "--batch-size", "1", *extra))
