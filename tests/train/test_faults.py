"""The fault suite, part 1: bad input to andrea-train, andrea-sample and andrea-prepare.

Each case is one command line a learner could type. It must be refused with exactly one line
on stderr that names the input and the rule (no traceback, no progress bar drawn first), with
exit status 2 for a bad argument or setting and 1 for input that cannot be used (data, weights,
checkpoints). Progress bars stay on (no --no-progress) so a bar drawn too early shows up.
"""
import json
import shutil

import numpy as np
import pytest
import torch

from andrea_course.train import load_corpus, train_tokenizer
from andrea_course.train.prepare import main as prepare_main, prepare
from andrea_course.train.sample import main as sample_main
from andrea_course.capstone.cli import main as train_main

pytestmark = pytest.mark.faults

MICRO = {"vocab_size": 8449, "context_length": 32, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64}
SETTINGS = dict(model=MICRO, batch_size=4, seq_len=32, lr=3e-3, warmup_steps=2, max_steps=2, eval_every=0,
                sample_every=0, checkpoint_every=0, tensorboard=False)


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    """A workspace: a small data folder, a micro config, a finished micro run, text files."""
    root = tmp_path_factory.mktemp("faults")
    prepare(load_corpus()[:100], root / "data", progress=False)
    prepare(load_corpus()[100:200], root / "other_data", progress=False)
    small_tok = train_tokenizer(load_corpus()[:50], n_merges=10)
    prepare(load_corpus()[:100], root / "small_tok_data", small_tok, progress=False)
    small_tok.save(root / "small_tokenizer.json")
    config = root / "micro.json"
    config.write_text(json.dumps(dict(SETTINGS, data=str(root / "data"))), encoding="utf-8")
    assert train_main(["--config", str(config), "--out", str(root / "run"), "--no-progress"]) == 0
    modern = dict(MICRO, norm="rmsnorm", mlp="swiglu", bias=False)
    (root / "modern.json").write_text(json.dumps(dict(SETTINGS, model=modern, data=str(root / "data"))))
    assert train_main(["--config", str(root / "modern.json"), "--out", str(root / "modern"), "--no-progress"]) == 0
    (root / "a_file").write_text("not a folder")
    (root / "empty").mkdir()
    (root / "latin1.txt").write_bytes("Caf\u00e9 au lait.\n".encode("latin-1"))
    (root / "utf16.txt").write_bytes("Once upon a time.\n".encode("utf-16"))
    (root / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "zero.txt").write_bytes(b"")
    (root / "blank.txt").write_text("  \n\n\t \n")
    (root / "no_text_field.jsonl").write_text('{"body": "x"}\n')
    (root / "text_not_str.jsonl").write_text('{"text": 5}\n')
    (root / "others").mkdir()
    (root / "others" / "notes.doc").write_text("someone's file")
    (root / "only_images").mkdir()
    (root / "only_images" / "x.png").write_bytes(b"\x89PNG")
    (root / "ascii.txt").write_text("Once upon a time.\n")     # an even number of bytes, no byte-order mark
    (root / "loop").symlink_to("loop")
    (root / "dangling").symlink_to(root / "gone")
    return root


def _json(w, name, obj):
    path = w / f"{name}.json"
    path.write_text(json.dumps(obj) if not isinstance(obj, bytes) else "", encoding="utf-8")
    if isinstance(obj, bytes):
        path.write_bytes(obj)
    return str(path)


def _data_variant(w, name, change_meta=None, change_files=None):
    """A copy of the data folder with meta.json or shard files changed."""
    folder = w / name
    if not folder.exists():
        shutil.copytree(w / "data", folder)
        meta = json.loads((folder / "meta.json").read_text())
        if change_meta:
            change_meta(meta)
            (folder / "meta.json").write_text(json.dumps(meta))
        if change_files:
            change_files(folder)
    return str(folder)


def _cut_shard(folder):
    shard = folder / "train_000000.bin"
    shard.write_bytes(shard.read_bytes()[:-6])


def _as_float32(folder):
    for shard in folder.glob("*.bin"):
        shard.write_bytes(np.fromfile(shard, dtype=np.uint16).astype(np.float32).tobytes())


def _no_meta(folder):
    (folder / "meta.json").unlink()


def _bad_json_meta(folder):
    (folder / "meta.json").write_text("{not json")


def _no_tokenizer(folder):
    """The folder without its tokenizer.json, its meta.json naming a tokenizer that is not the course's."""
    (folder / "tokenizer.json").unlink()
    meta = json.loads((folder / "meta.json").read_text())
    meta["tokenizer_hash"] = "0123456789abcdef"
    (folder / "meta.json").write_text(json.dumps(meta))


def _tiny_data(folder):
    meta = json.loads((folder / "meta.json").read_text())
    for shard in meta["shards"]["train"]:
        np.zeros(10, np.uint16).tofile(folder / shard["file"])
        shard["tokens"] = 10
    (folder / "meta.json").write_text(json.dumps(meta))


def _cfg(w):
    return str(w / "micro.json")


def _out(w, name="new"):
    return str(w / "runs" / name)


# (tool, argv(w) -> list, exit status, a phrase the one line must hold)
TRAIN = [
    ("missing config file", lambda w: ["--config", str(w / "nope.json")], 2, "no config file"),
    ("unknown preset", lambda w: ["--config", "andrea-huge"], 2, "unknown preset 'andrea-huge'"),
    ("preset typo", lambda w: ["--config", "andrea-tiyn"], 2, "did you mean 'andrea-tiny'"),
    ("config is a folder", lambda w: ["--config", str(w / "empty")], 2, "is a folder"),
    ("config not JSON", lambda w: ["--config", _json(w, "broken", b"")], 2, "not valid JSON"),
    ("config a JSON list", lambda w: ["--config", _json(w, "list", [1, 2])], 2, "JSON object"),
    ("config typo'd field", lambda w: ["--config", _json(w, "typo", {"warmup_step": 1})], 2, "did you mean 'warmup_steps'"),
    ("config string for int", lambda w: ["--config", _json(w, "str", {"batch_size": "8"})], 2, "batch_size (--batch-size) must be an integer"),
    ("config float for int", lambda w: ["--config", _json(w, "flt", {"max_steps": 1.5})], 2, "max_steps (--max-steps) must be an integer"),
    ("config bool for int", lambda w: ["--config", _json(w, "bool", {"batch_size": True})], 2, "must be an integer"),
    ("config null", lambda w: ["--config", _json(w, "null", {"batch_size": None})], 2, "must not be null"),
    ("config string for bool", lambda w: ["--config", _json(w, "sbool", {"compile": "yes"})], 2, "compile (--compile) must be true or false"),
    ("config unknown model preset", lambda w: ["--config", _json(w, "model", {"model": "andrea-huge"})], 2, "unknown model preset"),
    ("config model breaks a rule", lambda w: ["--config", _json(w, "shape", {"model": dict(MICRO, d_model=31)})], 2, "divisible"),
    ("config model unknown field", lambda w: ["--config", _json(w, "mfield", {"model": dict(MICRO, width=3)})], 2, "unknown config fields"),
    ("config not UTF-8", lambda w: ["--config", _json(w, "latin", "é".encode("latin-1"))], 2, "not UTF-8"),
    ("--batch-size 0", lambda w: ["--config", _cfg(w), "--batch-size", "0"], 2, "batch_size (--batch-size) must be >= 1, got 0"),
    ("--batch-size -3", lambda w: ["--config", _cfg(w), "--batch-size", "-3"], 2, "must be >= 1, got -3"),
    ("--batch-size abc", lambda w: ["--config", _cfg(w), "--batch-size", "abc"], 2, "invalid int value"),
    ("--grad-accum 0", lambda w: ["--config", _cfg(w), "--grad-accum", "0"], 2, "grad_accum (--grad-accum) must be >= 1"),
    ("--max-steps 0", lambda w: ["--config", _cfg(w), "--max-steps", "0"], 2, "max_steps (--max-steps) must be >= 1"),
    ("--max-steps -5", lambda w: ["--config", _cfg(w), "--max-steps", "-5"], 2, "must be >= 1, got -5"),
    ("--checkpoint-every -1", lambda w: ["--config", _cfg(w), "--checkpoint-every", "-1"], 2, "checkpoint_every"),
    ("--eval-every -1", lambda w: ["--config", _cfg(w), "--eval-every", "-1"], 2, "eval_every"),
    ("--seq-len 0", lambda w: ["--config", _cfg(w), "--seq-len", "0"], 2, "seq_len (--seq-len) must be >= 1"),
    ("--seq-len past the context", lambda w: ["--config", _cfg(w), "--seq-len", "64"], 2, "longer than the model's context length 32"),
    ("--lr nan", lambda w: ["--config", _cfg(w), "--lr", "nan"], 2, "must be a finite number"),
    ("--lr inf", lambda w: ["--config", _cfg(w), "--lr", "inf"], 2, "must be a finite number"),
    ("--lr 0", lambda w: ["--config", _cfg(w), "--lr", "0"], 2, "lr (--lr) must be > 0"),
    ("--lr -1", lambda w: ["--config", _cfg(w), "--lr", "-1"], 2, "lr (--lr) must be > 0"),
    ("--beta2 1", lambda w: ["--config", _cfg(w), "--beta2", "1"], 2, "beta2 (--beta2) must be < 1"),
    ("--dropout 1", lambda w: ["--config", _cfg(w), "--dropout", "1"], 2, "dropout (--dropout) must be < 1"),
    ("--keep-checkpoints 0", lambda w: ["--config", _cfg(w), "--keep-checkpoints", "0"], 2, "keep_checkpoints"),
    ("--total-batch-tokens not a multiple", lambda w: ["--config", _cfg(w), "--total-batch-tokens", "100"], 2, "not a multiple"),
    ("--seed -1", lambda w: ["--config", _cfg(w), "--seed", "-1"], 2, "seed (--seed) must be >= 0"),
    ("--seed past 64 bits", lambda w: ["--config", _cfg(w), "--seed", "1180591620717411303424"], 2, "seed (--seed) must be <= 9223372036854775807, got 1180591620717411303424"),
    ("--dtype fp64", lambda w: ["--config", _cfg(w), "--dtype", "fp64"], 2, "invalid choice"),
    ("--kernels cuda", lambda w: ["--config", _cfg(w), "--kernels", "cuda"], 2, "invalid choice"),
    ("--device foo", lambda w: ["--config", _cfg(w), "--device", "foo"], 2, "is not a device"),
    ("--device cuda:7", lambda w: ["--config", _cfg(w), "--device", "cuda:7"], 2, "--device cuda:7"),
    ("unknown flag", lambda w: ["--config", _cfg(w), "--learning-rate", "1"], 2, "unrecognized arguments"),
    ("--out is a file", lambda w: ["--config", _cfg(w), "--out", str(w / "a_file")], 2, "is a file"),
    ("--out cannot be written", lambda w: ["--config", _cfg(w), "--out", "/proc/andrea-run"], 2, "cannot write the run folder"),
    ("--out holds a run", lambda w: ["--config", _cfg(w), "--out", str(w / "run")], 2, "already holds a run"),
    ("--data missing", lambda w: ["--config", _cfg(w), "--data", str(w / "nowhere")], 1, "no data folder"),
    ("--data a file", lambda w: ["--config", _cfg(w), "--data", str(w / "a_file")], 1, "(it is a file)"),
    ("--data a loop of links", lambda w: ["--config", _cfg(w), "--data", str(w / "loop")], 1, "loop: it is a symbolic link that leads back to itself"),
    ("--data a broken link", lambda w: ["--config", _cfg(w), "--data", str(w / "dangling")], 1, "dangling: it is a symbolic link to"),
    ("data of a smaller tokenizer", lambda w: ["--config", _cfg(w), "--data", str(w / "small_tok_data")], 1, "of V = 267, but the model's vocabulary is V = 8449"),
    ("data without its own tokenizer", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_notok", change_files=_no_tokenizer)], 1, "made with tokenizer 0123456789abcdef (V = 8449), which it does not hold"),
    ("--data without meta.json", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_nometa", change_files=_no_meta)], 1, "has no meta.json"),
    ("meta.json not JSON", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_badjson", change_files=_bad_json_meta)], 1, "not valid JSON"),
    ("meta.json without shards", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_noshards", lambda m: m.pop("shards"))], 1, "no 'shards'"),
    ("meta.json shards not a list", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_shardlist", lambda m: m["shards"].update(train="x"))], 1, "shards.train must list"),
    ("int32 shards", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_int32", lambda m: m.update(dtype="int32"))], 1, "must be uint16"),
    ("float32 shards", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_f32", lambda m: m.update(dtype="float32"), _as_float32)], 1, "must be uint16"),
    ("truncated shard", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_cut", change_files=_cut_shard)], 1, "truncated"),
    ("data for a bigger vocabulary", lambda w: ["--config", _json(w, "smallv", dict(SETTINGS, model=dict(MICRO, vocab_size=1000), data=str(w / "data")))], 1, "V = 8449"),
    ("too little data", lambda w: ["--config", _cfg(w), "--data", _data_variant(w, "d_tiny", change_files=_tiny_data)], 1, "too little data"),
    ("--resume without a checkpoint", lambda w: ["--config", _cfg(w), "--out", str(w / "empty"), "--resume"], 1, "no checkpoint to resume from"),
    ("--resume a missing path", lambda w: ["--config", _cfg(w), "--resume", str(w / "gone")], 1, "does not exist"),
    ("--resume a file", lambda w: ["--config", _cfg(w), "--resume", str(w / "a_file")], 1, "is a file"),
    ("--resume with other data", lambda w: ["--config", _cfg(w), "--out", str(w / "run"), "--resume", "--max-steps", "4", "--data", str(w / "other_data")], 1, "other data"),
    ("--resume with another tokenizer's data", lambda w: ["--config", _json(w, "smalltok", dict(SETTINGS, data=str(w / "small_tok_data"), max_steps=4)), "--out", str(w / "run"), "--resume"], 1, "tokenizer"),
    ("--resume another model", lambda w: ["--config", _json(w, "wider", dict(SETTINGS, model=dict(MICRO, d_model=64), data=str(w / "data"), max_steps=4)), "--out", str(w / "run"), "--resume"], 1, "another config (d_model: checkpoint 32, this run 64)"),
    ("--resume another seed", lambda w: ["--config", _cfg(w), "--out", str(w / "run"), "--resume", "--max-steps", "4", "--seed", "1"], 1, "seed: checkpoint 1337, this run 1"),
    ("--resume another global batch", lambda w: ["--config", _cfg(w), "--out", str(w / "run"), "--resume", "--max-steps", "4", "--batch-size", "2"], 1, "same global batch"),
    ("--resume past max_steps", lambda w: ["--config", _cfg(w), "--out", str(w / "run"), "--resume", "--max-steps", "1"], 2, "nothing to train"),
]
if torch.cuda.is_available():
    TRAIN.remove(next(c for c in TRAIN if c[0] == "--device cuda:7"))
else:
    TRAIN.append(("--device cuda without a GPU", lambda w: ["--config", _cfg(w), "--device", "cuda"], 2, "no CUDA GPU"))


def _corrupt_weights(w):
    run = w / "run_corrupt"
    if not run.exists():
        shutil.copytree(w / "run", run)
        weights = next((run / "checkpoints").glob("step_*")) / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-1] ^= 0xFF
        weights.write_bytes(bytes(data))
    return str(next((run / "checkpoints").glob("step_*")))


SAMPLE = [
    ("--ckpt missing", lambda w: ["--ckpt", str(w / "nope")], 1, "does not exist"),
    ("--ckpt a folder without weights", lambda w: ["--ckpt", str(w / "empty")], 1, "no weights at"),
    ("--ckpt not safetensors", lambda w: ["--ckpt", str(w / "a_file")], 1, "not a readable safetensors file"),
    ("--ckpt fails its manifest", lambda w: ["--ckpt", _corrupt_weights(w)], 1, "SHA-256 does not match"),
    ("no --ckpt nor --pretrained", lambda w: ["--prompt", "x"], 2, "one of the arguments --ckpt --pretrained --hf is required"),
    ("--top-k 0", lambda w: ["--pretrained", "--top-k", "0"], 2, "--top-k: must be a whole number >= 1, or none"),
    ("--top-k -3", lambda w: ["--pretrained", "--top-k", "-3"], 2, "--top-k"),
    ("--max-new-tokens -1", lambda w: ["--pretrained", "--max-new-tokens", "-1"], 2, "--max-new-tokens: must be a whole number >= 0"),
    ("--temperature -1", lambda w: ["--pretrained", "--temperature", "-1"], 2, "--temperature: must be a finite number >= 0"),
    ("--temperature nan", lambda w: ["--pretrained", "--temperature", "nan"], 2, "--temperature"),
    ("--num-samples 0", lambda w: ["--pretrained", "--num-samples", "0"], 2, "--num-samples"),
    ("--seed -1", lambda w: ["--pretrained", "--seed", "-1"], 2, "--seed"),
    ("--seed past 64 bits", lambda w: ["--pretrained", "--seed", "1180591620717411303424"], 2, "--seed: must be a whole number from 0 to 9223372036854775807"),
    ("--prompt not UTF-8", lambda w: ["--pretrained", "--prompt", "caf\udce9"], 2, "--prompt is not valid UTF-8"),
    ("--device foo", lambda w: ["--pretrained", "--device", "foo"], 2, "is not a device"),
    ("--tokenizer missing", lambda w: ["--pretrained", "--tokenizer", str(w / "nope.json")], 1, "no tokenizer at"),
    ("--tokenizer corrupt", lambda w: ["--pretrained", "--tokenizer", str(w / "a_file")], 1, "not a readable tokenizer"),
    ("--tokenizer of another V", lambda w: ["--pretrained", "--tokenizer", str(w / "small_tokenizer.json")], 2, "V = 267"),
    ("--export-hf onto a file", lambda w: ["--pretrained", "--max-new-tokens", "1", "--export-hf", str(w / "a_file")], 2, "is a file"),
    ("--export-hf into someone's folder", lambda w: ["--pretrained", "--max-new-tokens", "1", "--export-hf", str(w / "others")], 2, "other files"),
    ("--export-hf of a modern model", lambda w: ["--ckpt", str(w / "modern"), "--max-new-tokens", "1", "--export-hf", str(w / "hf_modern")], 2, "GPT-2 cannot express"),
]
if not torch.cuda.is_available():
    SAMPLE.append(("--device cuda without a GPU", lambda w: ["--pretrained", "--device", "cuda"], 2, "no CUDA GPU"))

PREPARE = [
    ("missing input", lambda w: [str(w / "missing.txt"), "--out", str(w / "p1")], 2, "no file or folder"),
    ("folder without text files", lambda w: [str(w / "only_images"), "--out", str(w / "p2")], 2, "no text files"),
    ("latin-1 text", lambda w: [str(w / "latin1.txt"), "--out", str(w / "p3")], 1, "byte 3 (0xe9)"),
    ("UTF-16 text", lambda w: [str(w / "utf16.txt"), "--out", str(w / "p4")], 1, "byte 0 (0xff)"),
    ("a binary file", lambda w: [str(w / "picture.png"), "--out", str(w / "p5")], 1, "not valid utf-8"),
    ("--encoding utf-16 on ASCII text", lambda w: [str(w / "ascii.txt"), "--encoding", "utf-16", "--out", str(w / "p17")], 1, "ascii.txt is not utf-16 text: it does not start with the byte-order mark"),
    ("a 0-byte file", lambda w: [str(w / "zero.txt"), "--out", str(w / "p6")], 1, "empty or blank"),
    ("a blank file", lambda w: [str(w / "blank.txt"), "--out", str(w / "p7")], 1, "empty or blank"),
    ("--shard-tokens 0", lambda w: ["--stories", "--out", str(w / "p8"), "--shard-tokens", "0"], 2, "--shard-tokens: must be a whole number >= 1"),
    ("--shard-tokens -1", lambda w: ["--stories", "--out", str(w / "p8"), "--shard-tokens", "-1"], 2, "--shard-tokens"),
    ("--val-every -1", lambda w: ["--stories", "--out", str(w / "p9"), "--val-every", "-1"], 2, "--val-every"),
    ("--val-every 1", lambda w: ["--stories", "--out", str(w / "p9"), "--val-every", "1"], 2, "or a whole number >= 2"),
    ("--encoding bogus", lambda w: [str(w / "latin1.txt"), "--out", str(w / "p10"), "--encoding", "klingon"], 2, "unknown encoding"),
    ("--out is a file", lambda w: ["--stories", "--out", str(w / "a_file")], 2, "is a file"),
    ("--out someone's folder", lambda w: ["--stories", "--out", str(w / "others")], 2, "other files in it"),
    ("--out cannot be written", lambda w: [str(w / "latin1.txt"), "--encoding", "latin-1", "--out", "/proc/andrea-data"], 1, "/proc/"),
    ("jsonl without text", lambda w: [str(w / "no_text_field.jsonl"), "--out", str(w / "p11")], 1, "no_text_field.jsonl:1"),
    ("jsonl text not a string", lambda w: [str(w / "text_not_str.jsonl"), "--out", str(w / "p12")], 1, "text_not_str.jsonl:1"),
    ("--tokenizer missing", lambda w: ["--stories", "--out", str(w / "p13"), "--tokenizer", str(w / "nope.json")], 1, "no tokenizer at"),
    ("no input", lambda w: ["--out", str(w / "p14")], 2, "exactly one"),
    ("two sources", lambda w: ["--stories", str(w / "latin1.txt"), "--out", str(w / "p15")], 2, "exactly one"),
    ("missing input onto a prepared folder", lambda w: [str(w / "missing.txt"), "--out", str(w / "data")], 2, "no file or folder"),
]
try:
    import datasets  # noqa: F401
except ImportError:
    PREPARE.append(("--hf-dataset without datasets", lambda w: ["--hf-dataset", "x/y", "--out", str(w / "p16")], 1, "pip install datasets"))

CASES = ([("andrea-train", train_main, *c) for c in TRAIN] + [("andrea-sample", sample_main, *c) for c in SAMPLE]
         + [("andrea-prepare", prepare_main, *c) for c in PREPARE])


@pytest.mark.parametrize("prog, main, name, argv, status, phrase", CASES, ids=[f"{c[0]}: {c[2]}" for c in CASES])
def test_bad_input_is_refused_in_one_line(w, capsys, prog, main, name, argv, status, phrase):
    args = argv(w)
    if main is train_main and "--out" not in args:
        args += ["--out", _out(w, name.replace(" ", "_").replace("/", "_"))]
    before = sorted(p.name for p in (w / "data").iterdir())
    code = _exit_status(main, args)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == status and len(lines) == 1 and phrase in lines[0], (code, err)
    assert lines[0].startswith(f"{prog}: ") and "Traceback" not in err
    assert out == ""                                  # nothing sampled or printed before the refusal
    assert sorted(p.name for p in (w / "data").iterdir()) == before     # the prepared folder untouched


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU runs the Triton kernels compiled")
def test_triton_kernels_without_a_gpu_are_refused_unless_interpreted(w, capsys, monkeypatch):
    """On the CPU the kernels run only in Triton's interpreter: refused in one line (exit 2,
    nothing written) unless TRITON_INTERPRET=1 asks for it, and then said before the run."""
    from andrea_course.train.settings import check_kernels
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    out = w / "runs" / "triton_on_cpu"
    code = _exit_status(train_main, ["--config", _cfg(w), "--kernels", "triton", "--out", str(out)])
    printed, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and printed == "" and not out.exists(), (code, err)
    assert lines[0].startswith("andrea-train: error: --kernels triton needs a CUDA GPU, and this run is on cpu")
    assert "--kernels torch" in lines[0] and "TRITON_INTERPRET=1" in lines[0]
    assert check_kernels("torch", torch.device("cpu")) is None
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert "run in Triton's interpreter" in check_kernels("triton", torch.device("cpu"))


def _exit_status(main, args) -> int:
    """What the command would exit with (argparse's refusals raise SystemExit)."""
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


def test_every_option_has_help_and_a_default_and_there_is_a_version(capsys):
    from andrea_course.train.prepare import build_parser as prepare_parser
    from andrea_course.train.sample import build_parser as sample_parser
    from andrea_course.capstone.cli import build_parser as train_parser
    for parser in (train_parser(), sample_parser(), prepare_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.dest not in ("help", "version", "out"):
                assert action.help, (parser.prog, action.dest)
                shown = parser._get_formatter()._get_help_string(action)
                assert "default" in shown, (parser.prog, action.dest, shown)
        assert "--version" in text
        with pytest.raises(SystemExit) as done:
            parser.parse_args(["--version"])
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(parser.prog + " ")
