"""The fault suite, part 2: a training run under faults loses nothing and says what happened.

A diverged run keeps its last finite checkpoint; a crash, a torn log line or a full disk never
loses or blocks the run's history; a corrupt checkpoint is refused in one line naming the last
good one; prepared data is byte-exact or refused, and a failed preparation leaves the old folder.
Micro model, one thread, a few steps each.
"""
import errno
import json
import shutil
import signal

import pytest
import torch

from andrea_course.train import EOT, load_corpus, load_tokenizer
from andrea_course.train import checkpoint as ckpt
from andrea_course.train.data import TokenData
from andrea_course.train.prepare import main as prepare_main, prepare
from andrea_course.train.runlog import RunLog, read_log
from andrea_course.train.settings import TrainConfig, resume_differences
from andrea_course.capstone.cli import main as train_main
from andrea_course.train.trainer import StopRequested, Trainer

pytestmark = pytest.mark.faults

MICRO = {"vocab_size": 8449, "context_length": 32, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64}
SETTINGS = dict(model=MICRO, batch_size=4, seq_len=32, lr=3e-3, warmup_steps=2, max_steps=6, eval_every=0,
                sample_every=0, checkpoint_every=2, tensorboard=False)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    prepare(load_corpus()[:100], out, progress=False)
    return out


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory, data_dir):
    """The losses of 6 steps never stopped: what every broken-and-resumed run must give."""
    folder = tmp_path_factory.mktemp("unbroken")
    _trainer(folder / "run", data_dir).fit()
    return _losses(folder / "run")


def _trainer(out, data_dir, resume=False, **changes) -> Trainer:
    torch.set_num_threads(1)
    return Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), **changes)), out, resume=resume, progress=False)


def _config(folder, data_dir, **changes):
    path = folder / "micro.json"
    path.write_text(json.dumps(dict(SETTINGS, data=str(data_dir), **changes)), encoding="utf-8")
    return str(path)


def _losses(run):
    return [(r["step"], r["loss"]) for r in read_log(run / "log.jsonl")]


def _crash_at(step):
    """An on_step callback that kills the run after `step` (before that step's checkpoint)."""
    def on_step(rec):
        if rec["step"] == step:
            raise KeyboardInterrupt
    return on_step


def _last_line(err):
    lines = [l for l in err.strip().splitlines() if l.startswith("andrea-")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- divergence
def test_a_diverged_run_stops_and_keeps_its_last_finite_checkpoint(tmp_path, data_dir, capsys):
    from andrea_course.engine.weights import load_weights
    config = _config(tmp_path, data_dir, lr=1e6, warmup_steps=1, max_steps=12, checkpoint_every=1, keep_checkpoints=2)
    assert train_main(["--config", config, "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    line = _last_line(capsys.readouterr().err)
    assert "the loss is nan" in line and "diverged" in line and "lower --lr" in line
    good = ckpt.good_checkpoints(tmp_path / "run")
    assert good and ckpt.find(tmp_path / "run") == good[0] and str(good[0]) in line
    for folder in good:                      # rotation kept checkpoints, and only finite ones
        model = load_weights(folder / "model.safetensors")
        assert all(torch.isfinite(p).all() for p in model.parameters())
    assert not (tmp_path / "run" / "model.safetensors").exists()
    # the way out: resume from it with a lower learning rate
    t = _trainer(tmp_path / "run", data_dir, resume=True, lr=1e-3, warmup_steps=1, max_steps=12,
                 checkpoint_every=1, keep_checkpoints=2)
    assert t.step == int(good[0].name[5:]) and "lr: checkpoint 1000000.0, this run 0.001" in t.notes[0]


# ----------------------------------------------------------------------------- the log
def test_a_crash_and_a_torn_log_line_are_trimmed_on_resume(tmp_path, data_dir, unbroken, capsys):
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _trainer(run, data_dir).fit(on_step=_crash_at(5))            # checkpoint at 4, log to 5
    with open(run / "log.jsonl", "ab") as f:
        f.write(b'{"step": 6, "loss": 3.1')                           # the crash tore the last line
    _trainer(run, data_dir, resume=True).fit()
    assert _losses(run) == unbroken
    assert f"{run / 'log.jsonl'}: cut 1 line(s) after step 4 and a torn last line" in capsys.readouterr().err


def test_an_edited_log_is_refused_naming_the_line(tmp_path, data_dir):
    run = tmp_path / "run"
    _trainer(run, data_dir, max_steps=4).fit()
    lines = (run / "log.jsonl").read_text().splitlines()
    lines[1] = "not json"
    (run / "log.jsonl").write_text("\n".join(lines) + "\n")
    t = _trainer(run, data_dir, resume=True)
    with pytest.raises(ValueError, match=r"log.jsonl:2 is not a JSON record"):
        t.fit()


def test_a_full_disk_during_a_log_append_loses_nothing(tmp_path, data_dir, unbroken, capsys, monkeypatch):
    run = tmp_path / "run"
    config = _config(tmp_path, data_dir)
    append = RunLog.append

    class FullDisk:                      # takes 20 bytes of a line, then the disk is full
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(bytes(data[:20]))
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.f.close()

    def full_at_step_5(self, rec):
        if rec["step"] == 5:
            self.f = FullDisk(self.f)
        append(self, rec)

    monkeypatch.setattr(RunLog, "append", full_at_step_5)
    assert train_main(["--config", config, "--out", str(run), "--no-progress"]) == 1
    assert _last_line(capsys.readouterr().err) == f"andrea-train: no space left on device: {run / 'log.jsonl'}"
    monkeypatch.setattr(RunLog, "append", append)                      # space freed
    assert train_main(["--config", config, "--out", str(run), "--no-progress", "--resume"]) == 0
    assert _losses(run) == unbroken


# ----------------------------------------------------------------------------- checkpoints
def test_a_full_disk_during_a_checkpoint_keeps_the_last_good_one(tmp_path, data_dir, capsys, monkeypatch):
    run = tmp_path / "run"
    save = torch.save

    def full_disk(obj, path, *a, **k):
        if "step_0000004" in str(path) and str(path).endswith("state.pt"):
            raise RuntimeError("[enforce fail at inline_container.cc:783] . unexpected pos 1089856 vs 1089808")
        return save(obj, path, *a, **k)

    monkeypatch.setattr(ckpt.torch, "save", full_disk)
    assert train_main(["--config", _config(tmp_path, data_dir), "--out", str(run), "--no-progress"]) == 1
    line = _last_line(capsys.readouterr().err)
    good = run / "checkpoints" / "step_0000002"
    assert (f"could not write checkpoint {run / 'checkpoints' / 'step_0000004'}: no space left on device; "
            f"the last good checkpoint is {good}") in line
    assert ckpt.find(run) == good and ckpt.verify(good)["step"] == 2
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step_0000002"]


def _flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def _rehash(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"] = {f: ckpt._sha256(folder / f) for f in manifest["files"]}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _drop_from_manifest(folder, name):
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["files"][name]
    (folder / "manifest.json").write_text(json.dumps(manifest))


# each corrupts the run of two checkpoints (steps 2, 4); the one line must name the good one
S4 = "step_0000004"
CORRUPTIONS = {
    "truncated weights": (lambda r: (r / S4 / "model.safetensors").write_bytes((r / S4 / "model.safetensors").read_bytes()[:1000]), "step_0000002"),
    "altered optimizer state": (lambda r: _flip_last_byte(r / S4 / "state.pt"), "step_0000002"),
    "no manifest": (lambda r: (r / S4 / "manifest.json").unlink(), "step_0000002"),
    "garbage manifest": (lambda r: (r / S4 / "manifest.json").write_bytes(b"\x00\xff garbage"), "step_0000002"),
    "manifest lists no state": (lambda r: _drop_from_manifest(r / S4, "state.pt"), "step_0000002"),
    "missing RNG file": (lambda r: (r / S4 / "rng_rank0.pt").unlink(), "step_0000002"),
    "empty latest": (lambda r: (r / "latest").write_text(""), "step_0000004"),
    "garbage latest": (lambda r: (r / "latest").write_bytes(b"\x89\xfe\x00zz"), "step_0000004"),
    "latest names a missing checkpoint": (lambda r: (r / "latest").write_text("step_0000006\n"), "step_0000004"),
    "state that hashes right but does not load": (lambda r: ((r / S4 / "state.pt").write_bytes(b"PK junk"), _rehash(r / S4)), "step_0000002"),
}


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory, data_dir):
    """A run of 6 steps killed after step 5: checkpoints at steps 2 and 4, the log to step 5."""
    folder = tmp_path_factory.mktemp("two")
    with pytest.raises(KeyboardInterrupt):
        _trainer(folder / "run", data_dir).fit(on_step=_crash_at(5))
    return folder / "run"


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_a_corrupt_checkpoint_is_refused_in_one_line_naming_the_last_good_one(tmp_path, data_dir, two_checkpoints,
                                                                               capsys, name):
    corrupt, good = CORRUPTIONS[name]
    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    corrupt(run / "checkpoints")
    code = train_main(["--config", _config(tmp_path, data_dir), "--out", str(run), "--no-progress", "--resume"])
    line = _last_line(capsys.readouterr().err)
    assert code == 1 and f"--resume {run / 'checkpoints' / good}" in line, line
    assert (run / "checkpoints" / good).is_dir()             # nothing was deleted


def test_a_run_folder_named_like_a_checkpoint_and_a_crashed_save_resume(tmp_path, data_dir, two_checkpoints, unbroken):
    run = tmp_path / "step_0000001"
    shutil.copytree(two_checkpoints, run)
    shutil.copytree(run / "checkpoints" / S4, run / "checkpoints" / "step_0000006.tmp")   # a save cut short
    _trainer(run, data_dir, resume=True).fit()
    assert _losses(run) == unbroken


def test_a_second_ctrl_c_during_the_stop_checkpoint_waits_for_it(capsys, monkeypatch):
    stop = StopRequested()
    try:
        stop._handle(signal.SIGINT, None)                 # the first: finish the step, save, stop
        with pytest.raises(KeyboardInterrupt):
            with stop.checkpointing():
                stop._handle(signal.SIGINT, None)         # the second, while saving: after the save
                saved = True
        assert saved
    finally:
        stop.restore()

    def interrupted(self, on_step=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "fit", interrupted)
    monkeypatch.setattr(Trainer, "__init__", lambda self, *a, **k: setattr(self, "d", None))
    monkeypatch.setattr(Trainer, "close", lambda self: None)
    assert train_main(["--out", "unused"]) == 130
    assert capsys.readouterr().err == "andrea-train: interrupted\n"


def test_tensorboard_does_not_repeat_steps_after_a_resume(tmp_path, data_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _trainer(run, data_dir, tensorboard=True).fit(on_step=_crash_at(5))
    _trainer(run, data_dir, tensorboard=True, resume=True).fit()
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]


def test_run_time_switches_may_change_on_resume_and_the_schedule_is_named(tmp_path, data_dir, two_checkpoints):
    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    t = _trainer(run, data_dir, resume=True, dtype="bf16", eval_every=3, batch_size=2, grad_accum=2, max_steps=8)
    assert t.step == 4 and "dtype: checkpoint 'auto', this run 'bf16'" in t.notes[0]
    assert "max_steps: checkpoint 6, this run 8" in t.notes[0]
    t.fit()
    saved = dict(SETTINGS, model=MICRO, kernels="torch", compile=False)
    refused, allowed = resume_differences(saved, TrainConfig(**dict(SETTINGS, kernels="triton", compile=True)))
    assert refused == [] and len(allowed) == 2


# ----------------------------------------------------------------------------- data
def test_prepare_keeps_text_byte_exact(tmp_path):
    tok = load_tokenizer()
    src = tmp_path / "src"
    src.mkdir()
    text = f"Windows line.\r\nOld Mac line.\rA literal {EOT} in a line.\n"
    (src / "a.txt").write_bytes(text.encode("utf-8"))
    (src / "b.txt").write_bytes("Café crème.\n".encode("latin-1"))
    assert prepare_main([str(src / "a.txt"), "--out", str(tmp_path / "a"), "--val-every", "0", "--no-progress"]) == 0
    train = TokenData.from_folder(tmp_path / "a").train
    ids = train.read(0, len(train)).tolist()
    assert ids.count(tok.eot_id) == 1 and ids[-1] == tok.eot_id      # only the boundary prepare adds
    assert tok.decode(ids[:-1]) == text.rstrip("\r\n")                # CRLF, CR and the literal kept
    assert prepare_main([str(src / "b.txt"), "--out", str(tmp_path / "b"), "--encoding", "latin-1",
                         "--val-every", "0", "--no-progress"]) == 0
    train = TokenData.from_folder(tmp_path / "b").train
    assert tok.decode(train.read(0, len(train)).tolist()[:-1]) == "Café crème."


def test_a_failed_preparation_leaves_the_old_folder_and_a_good_one_replaces_it(tmp_path, capsys):
    out = tmp_path / "data"
    prepare(load_corpus()[:40], out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tmp_path / "bad.txt").write_bytes(b"fine\n" * 100 + b"\xff")
    assert prepare_main([str(tmp_path / "bad.txt"), "--out", str(out)]) == 1
    assert _last_line(capsys.readouterr().err) == (f"andrea-prepare: {tmp_path / 'bad.txt'} is not valid utf-8 text: "
                                                   "byte 500 (0xff) cannot be decoded; give its encoding with "
                                                   "--encoding (latin-1, cp1252, utf-16, ...)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "data"]      # no staging left
    prepare(load_corpus()[40:60], out, progress=False)
    assert json.loads((out / "meta.json").read_text())["documents"] == {"train": 19, "val": 1}
    assert not (out / "train_000000.bin").read_bytes() == before["train_000000.bin"]
