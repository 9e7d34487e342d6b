"""The training loop on the CPU: the loss falls, a run stopped by SIGTERM and resumed has exactly
the losses of a run never stopped, two gloo processes match one, and bad checkpoints are refused."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from andrea_course.train import checkpoint as ckpt
from andrea_course.train import load_corpus
from andrea_course.train.prepare import prepare
from andrea_course.train.sample import main as sample_main
from andrea_course.train.schedule import flops_per_token, lr_at, matmul_weights, param_groups
from andrea_course.train.settings import TrainConfig, load_config
from andrea_course.train.trainer import Trainer, read_log

MICRO = {"vocab_size": 8449, "context_length": 32, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64}
SETTINGS = dict(model=MICRO, batch_size=4, seq_len=32, lr=3e-3, min_lr=3e-4, warmup_steps=3, max_steps=12,
                eval_every=4, eval_batches=2, sample_every=0, checkpoint_every=0, tensorboard=False)
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    prepare(load_corpus()[:200], out, progress=False)
    return out


def _config_file(folder: Path, data_dir: Path, **changes) -> Path:
    path = folder / "micro.json"
    path.write_text(json.dumps(dict(SETTINGS, data=str(data_dir), **changes)), encoding="utf-8")
    return path


def _train_cmd(config: Path, out: Path, *extra, nproc: int = 1) -> list:
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
                if nproc > 1 else [sys.executable])
    return launcher + ["-m", "andrea_course.capstone", "--config", str(config), "--out", str(out),
                       "--no-progress", "--device", "cpu", *extra]


def _losses(out: Path) -> list:
    return [(r["step"], r["loss"]) for r in read_log(out / "log.jsonl")]


def _trainer(tmp_path, data_dir, out="run", resume=False, **changes) -> Trainer:
    torch.set_num_threads(1)      # as the subprocesses (OMP_NUM_THREADS=1): the same bits
    return Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), **changes)), tmp_path / out,
                   resume=resume, progress=False)


# ----------------------------------------------------------------------------- pieces
def test_schedule_warms_up_then_decays_to_min_lr():
    s = dict(lr=1.0, min_lr=0.1, warmup_steps=10, max_steps=110)
    assert lr_at(0, **s) == pytest.approx(0.1)
    assert lr_at(9, **s) == pytest.approx(1.0)
    assert lr_at(60, **s) == pytest.approx(0.55)
    assert lr_at(110, **s) == pytest.approx(0.1) and lr_at(500, **s) == pytest.approx(0.1)
    lrs = [lr_at(step, **s) for step in range(10, 111)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))


def test_the_engines_schedule_is_the_learners_piece():
    """One schedule, one signature: the engine's version of exercises/optim.py's lr_at is the
    trainer's own function, and the trainer logs exactly it."""
    import inspect

    from andrea_course.pieces import optim
    assert optim.lr_at is lr_at
    solution = Path(__file__).resolve().parents[2] / "solutions" / "optim.py"
    if solution.is_file():
        source = solution.read_text(encoding="utf-8")
        assert "def lr_at(step: int, lr: float, min_lr: float, warmup_steps: int, max_steps: int)" in source
    assert list(inspect.signature(lr_at).parameters) == ["step", "lr", "min_lr", "warmup_steps", "max_steps"]


def test_weight_decay_only_for_matrices():
    from andrea_course import ANDREA, ModelConfig
    for cfg in (ModelConfig(**MICRO), ModelConfig(**MICRO, tie_embeddings=True)):
        model = ANDREA(cfg)
        decay, no_decay = param_groups(model, 0.1)
        assert all(p.dim() == 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
        assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
        n = sum(p.numel() for g in (decay, no_decay) for p in g["params"])
        assert n == sum(p.numel() for p in model.parameters())      # a tied table only once
        ids = {id(p) for p in decay["params"]}
        assert id(model.embed.token_table) in ids and id(model.blocks[0].ln1.weight) not in ids


def test_flops_per_token_counts_matmul_weights_and_attention():
    from andrea_course import ModelConfig
    cfg = ModelConfig.preset("andrea-120m")
    # 6 FLOPs per matmul weight (98,820,096 less the two lookup tables, less the 82,944 biases and
    # 38,400 LayerNorm numbers, which are additions) + 12·L·D·T for attention
    assert matmul_weights(cfg) == 98_820_096 - 786_432 - 6_488_832 - 82_944 - 38_400
    assert flops_per_token(cfg, 1024) == 6 * matmul_weights(cfg) + 12 * 12 * 768 * 1024
    # RoPE: no position table, nothing to subtract; a tied head still multiplies by the table
    rope = cfg.replace(position="rope")
    assert matmul_weights(rope) == matmul_weights(cfg)
    assert matmul_weights(cfg.replace(tie_embeddings=True)) == matmul_weights(cfg)


def test_run_time_switches_are_listed_once():
    """config.RUN_SWITCHES (how a model runs) is the one list: TrainConfig has a setting for each,
    which may change on resume, and load_weights lets its caller choose each."""
    from andrea_course.engine.config import RUN_SWITCHES
    from andrea_course.train.settings import RUN_TIME, SCHEDULE, model_switches
    assert set(RUN_SWITCHES) <= set(RUN_TIME) and not set(RUN_TIME) & set(SCHEDULE)
    assert model_switches(TrainConfig(dropout=0.1)) == {"kernels": "torch", "dropout": 0.1, "init_std": None}
    assert {"model", "seed", "seq_len", "bpe_merges", "stories"}.isdisjoint(RUN_TIME + SCHEDULE)


def test_a_runs_own_tokenizer_sets_the_vocabulary_and_refuses_other_data(tmp_path, data_dir):
    from andrea_course.engine.config import ConfigError
    from andrea_course.train.data import DataError
    from andrea_course.train.settings import model_config
    assert model_config(TrainConfig(model="andrea-tiny", bpe_merges=100)).vocab_size == 357
    with pytest.raises(ConfigError, match="model.vocab_size 8449 does not fit bpe_merges .--bpe-merges. 100"):
        TrainConfig(model=MICRO, bpe_merges=100)
    assert model_config(TrainConfig(model={k: v for k, v in MICRO.items() if k != "vocab_size"},
                                    bpe_merges=100)).vocab_size == 357
    with pytest.raises(ConfigError, match="stories .--stories. picks from the shipped stories"):
        TrainConfig(model=MICRO, stories=10, data=str(data_dir))
    micro = {k: v for k, v in MICRO.items() if k != "vocab_size"}
    with pytest.raises(DataError, match="this run makes its own .bpe_merges 64"):
        _trainer(tmp_path, data_dir, model=micro, bpe_merges=64)
    with pytest.raises(ConfigError, match="a BPE was handed in but bpe_merges"):
        Trainer(TrainConfig(**SETTINGS), tmp_path / "run", bpe=object(), progress=False)


def test_pieces_json_records_whose_pieces_ran(tmp_path, data_dir):
    """The trainer writes the record it is handed (the engine's alone: no pieces) and, resuming
    with other pieces, says what changed and keeps it."""
    t = _trainer(tmp_path, data_dir, max_steps=2, eval_every=0)
    t.fit()
    assert json.loads((tmp_path / "run" / "pieces.json").read_text()) == {"pieces": {}}
    record = {"whose": "yours", "pieces": {"optim.lr_at": "yours"}}
    again = Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), max_steps=3, eval_every=0)), tmp_path / "run",
                    resume=True, progress=False, pieces=record)
    assert "optim.lr_at: until step 2 not in the run; from now on yours" in again.notes
    assert "whose: until step 2 None; from now on yours" in again.notes
    again.fit()
    saved = json.loads((tmp_path / "run" / "pieces.json").read_text())
    assert saved["changes"] == [{"step": 2, "piece": "optim.lr_at", "before": "not in the run", "now": "yours"}]


def test_the_built_model_has_the_last_word_on_whose_piece_runs(tmp_path, data_dir):
    """A record may call a piece yours that the model built with it does not run (the overlay
    keeps the engine's for a reason of its own): the trainer takes the model's word."""
    from andrea_course import ANDREA

    def factory(cfg, **switches):
        model = ANDREA(cfg, **switches)
        model.pieces = {"multihead.MultiHeadAttention": "engine: why the model says so", "mlp.MLP": "yours"}
        return model
    record = {"pieces": {"multihead.MultiHeadAttention": "yours", "mlp.MLP": "yours", "optim.lr_at": "yours"}}
    t = Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), max_steps=1, eval_every=0)), tmp_path / "run",
                progress=False, model_factory=factory, pieces=record)
    assert t.pieces["pieces"] == {"multihead.MultiHeadAttention": "engine: why the model says so", "mlp.MLP": "yours",
                                  "optim.lr_at": "yours"}
    assert record["pieces"]["multihead.MultiHeadAttention"] == "yours"          # the caller's record untouched
    assert any("multihead.MultiHeadAttention: the model runs the engine's" in note for note in t.notes)


def test_config_files_and_presets(tmp_path):
    assert load_config("andrea-tiny").model == "andrea-tiny"
    assert load_config("andrea-tiny", max_steps=7).max_steps == 7
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"model": "andrea-tiny", "lr": 0.5}), encoding="utf-8")
    tc = load_config(str(path))
    assert tc.lr == 0.5 and tc.seq_len == 256             # the preset's settings under the file's
    path.write_text(json.dumps({"model": "andrea-tiny", "learning_rate": 0.5}), encoding="utf-8")
    with pytest.raises(ValueError, match="unknown training settings"):
        load_config(str(path))
    with pytest.raises(ValueError, match="unknown preset"):
        load_config("andrea-huge")


def test_shipped_configs_are_the_presets():
    """configs/NAME.json is the user-facing copy of the training preset NAME in andrea_course/presets.py."""
    from andrea_course.presets import PRESETS, TRAIN_PRESETS
    paths = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.json"))
    assert paths
    for path in paths:
        assert path.stem in TRAIN_PRESETS, f"{path.name} is not a preset of andrea_course/presets.py"
        assert load_config(str(path)) == load_config(path.stem), f"{path.name} differs from its preset"
    assert all(p["model"] in PRESETS for p in TRAIN_PRESETS.values())


# ----------------------------------------------------------------------------- runs
def test_a_tiny_run_learns_and_writes_its_outputs(tmp_path, data_dir):
    t = _trainer(tmp_path, data_dir, max_steps=30, warmup_steps=5, eval_every=15, sample_every=30, sample_tokens=8,
                 tensorboard=True)
    seen = []
    last = t.fit(on_step=seen.append)
    log = read_log(tmp_path / "run" / "log.jsonl")
    assert [r["step"] for r in log] == list(range(1, 31)) and seen == log
    assert log[-1]["loss"] < log[0]["loss"] - 1.5, (log[0]["loss"], log[-1]["loss"])
    assert 9.0 < log[0]["loss"] < 10.0                            # about ln V = 9.04 at the start
    assert "val_loss" in log[14] and "val_loss" in log[29] and "sample" in last
    assert last["tokens"] == 30 * 4 * 32
    assert "mfu" not in last                                      # the CPU has no peak to measure against
    run = tmp_path / "run"
    for name in ("model.safetensors", "loss.png", "config.json"):
        assert (run / name).is_file()
    assert any((run / "tensorboard").iterdir())
    assert ckpt.find(run).name == "step_0000030"


def test_resume_from_a_periodic_checkpoint_drops_the_later_log_lines(tmp_path, data_dir):
    t = _trainer(tmp_path, data_dir, max_steps=6, checkpoint_every=3)
    t.fit()
    whole = _losses(tmp_path / "run")
    # a crash after step 5: the log has 5 lines, the newest checkpoint is step 3
    lines = (tmp_path / "run" / "log.jsonl").read_text().splitlines()[:5]
    (tmp_path / "run" / "log.jsonl").write_text("\n".join(lines) + "\n")
    run = tmp_path / "run" / "checkpoints"
    (run / "latest").write_text("step_0000003\n")
    for p in (run / "step_0000006").iterdir():
        p.unlink()
    (run / "step_0000006").rmdir()
    t2 = Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), max_steps=6, checkpoint_every=3)),
                 tmp_path / "run", resume=True, progress=False)
    assert t2.step == 3
    t2.fit()
    assert _losses(tmp_path / "run") == whole


def test_gradient_accumulation_matches_a_bigger_batch(tmp_path, data_dir):
    a = _trainer(tmp_path, data_dir, out="a", max_steps=3, batch_size=4, eval_every=0)
    b = _trainer(tmp_path, data_dir, out="b", max_steps=3, batch_size=2, grad_accum=2, eval_every=0)
    a.fit(), b.fit()
    for (_, la), (_, lb) in zip(_losses(tmp_path / "a"), _losses(tmp_path / "b")):
        assert lb == pytest.approx(la, rel=1e-5)


# ----------------------------------------------------------------------------- bad checkpoints
def test_truncated_checkpoint_is_refused_and_the_good_one_kept(tmp_path, data_dir):
    _trainer(tmp_path, data_dir, max_steps=4, checkpoint_every=2, eval_every=0).fit()
    good, bad = tmp_path / "run/checkpoints/step_0000002", tmp_path / "run/checkpoints/step_0000004"
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ckpt.CheckpointError, match="corrupt") as err:
        _trainer(tmp_path, data_dir, max_steps=6, checkpoint_every=2, eval_every=0, resume=True)
    assert str(good) in str(err.value)                  # says which good checkpoint remains
    assert good.is_dir() and ckpt.verify(good)["step"] == 2
    t = Trainer(TrainConfig(**dict(SETTINGS, data=str(data_dir), max_steps=6, eval_every=0)),
                tmp_path / "run", resume=good, progress=False)
    assert t.step == 2


def test_checkpoint_of_another_config_is_refused(tmp_path, data_dir):
    _trainer(tmp_path, data_dir, max_steps=2, eval_every=0).fit()
    other = dict(MICRO, d_model=48)
    with pytest.raises(ckpt.CheckpointError, match="another config"):
        _trainer(tmp_path, data_dir, model=other, max_steps=4, resume=True)
    with pytest.raises(Exception, match="per_step|batch"):
        _trainer(tmp_path, data_dir, max_steps=4, batch_size=2, resume=True)
    assert ckpt.verify(ckpt.find(tmp_path / "run"))["step"] == 2


def test_missing_manifest_is_refused(tmp_path, data_dir):
    _trainer(tmp_path, data_dir, max_steps=2, eval_every=0).fit()
    folder = ckpt.find(tmp_path / "run")
    (folder / "manifest.json").unlink()
    with pytest.raises(ckpt.CheckpointError, match="incomplete"):
        ckpt.load(folder, rank=0)


def test_cli_refuses_to_overwrite_a_run_and_reports_bad_resume(tmp_path, data_dir, capsys):
    from andrea_course.capstone.cli import main
    config = _config_file(tmp_path, data_dir, max_steps=2, eval_every=0)
    assert main(["--config", str(config), "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    assert main(["--config", str(config), "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["--config", str(config), "--out", str(tmp_path / "empty"), "--resume", "--no-progress"]) == 1
    assert "no checkpoint" in capsys.readouterr().err


def test_sample_cli_from_a_run(tmp_path, data_dir, capsys):
    _trainer(tmp_path, data_dir, max_steps=2, eval_every=0).fit()
    args = ["--ckpt", str(tmp_path / "run"), "--prompt", "Once", "--max-new-tokens", "5", "--seed", "3"]
    assert sample_main(args) == 0
    first = capsys.readouterr().out
    assert sample_main(args) == 0
    assert capsys.readouterr().out == first and first.startswith("Once")
    assert sample_main(["--ckpt", str(tmp_path / "nothing")]) == 1


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_mixed_precision_on_request(tmp_path, data_dir, dtype):
    t = _trainer(tmp_path, data_dir, max_steps=3, eval_every=3, dtype=dtype)
    assert t.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    assert t.scaler.is_enabled() == (dtype == "fp16")             # a loss scale only for fp16's narrow range
    last = t.fit()
    assert torch.isfinite(torch.tensor(last["loss"])) and last["val_loss"] < 9.6
    assert all(p.dtype == torch.float32 for p in t.model.parameters())   # master weights stay fp32



def test_export_to_hugging_face_generates_the_same_text(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    assert sample_main(["--pretrained", "--max-new-tokens", "1", "--export-hf", str(tmp_path / "hf")]) == 0
    from andrea_course.train import pretrained
    from andrea_course.train.sample import generate_text
    model, tok = pretrained()
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ids = hf_tok("Once upon a time", return_tensors="pt").input_ids
    assert ids[0].tolist() == tok.encode("Once upon a time")
    out = hf_model.generate(ids, max_new_tokens=12, do_sample=False)
    assert hf_tok.decode(out[0, ids.shape[1]:]) == generate_text(model, tok, "Once upon a time", 12, temperature=0)


class TestSeveralProcesses:
    """Tests that start processes of their own (a class: `--dist loadscope` gives it its own worker)."""

    def test_sigterm_then_resume_gives_the_losses_of_an_unbroken_run(self, tmp_path, data_dir):
        # 60 steps: the signal lands after step 5 and long before the end, even on a fast machine
        config = _config_file(tmp_path, data_dir, max_steps=60, checkpoint_every=25, eval_every=0)
        _trainer(tmp_path, data_dir, out="whole", max_steps=60, checkpoint_every=25, eval_every=0).fit()
        whole = _losses(tmp_path / "whole")
        assert len(whole) == 60

        broken = tmp_path / "broken"
        proc = subprocess.Popen(_train_cmd(config, broken), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        log = broken / "log.jsonl"
        while proc.poll() is None and not (log.exists() and len(log.read_text().splitlines()) >= 5):
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert b"stopped by signal" in err
        stopped_at = len(read_log(log))
        assert 5 <= stopped_at < 60
        assert ckpt.find(broken).name == f"step_{stopped_at:07d}"      # saved at the step it stopped

        _trainer(tmp_path, data_dir, out="broken", max_steps=60, checkpoint_every=25, eval_every=0, resume=True).fit()
        assert _losses(broken) == whole                                 # bit for bit
