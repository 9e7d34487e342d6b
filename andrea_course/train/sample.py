"""andrea-sample: text from a trained ANDREA, and the small model that ships with the course.

    andrea-sample --ckpt runs/tiny --prompt "Once upon a time" --max-new-tokens 100 --seed 1
    andrea-sample --ckpt runs/tiny/checkpoints/step_0000200 --temperature 0.7 --top-k 40
    andrea-sample --pretrained --prompt "Lily found"
    andrea-sample --ckpt runs/120m --export-hf exports/andrea-120m     # Hugging Face format
    andrea-sample --hf gpt2 --prompt "The meaning of life is"          # GPT-2 small (downloads once)
    andrea-sample --hf gpt2 --impl exercises                           # GPT-2's weights in your code

--ckpt takes a weights file, a checkpoint folder or a run folder (its model.safetensors, else
its latest checkpoint). Weights inside a checkpoint folder are checked against the SHA-256 in its
manifest, as the trainer checks them before resuming. --hf takes a GPT-2 model of `transformers`:
a hub name (gpt2, gpt2-medium: downloaded on first use, then read from the local cache) or a
folder written by save_pretrained, with its tokenizer; --impl (andrea_course.capstone.sample)
builds the model from the learner's pieces that pass and copies GPT-2's weights in.
"""
from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import torch

DATA = Path(__file__).resolve().parent.parent / "data"
PRETRAINED_FILE = DATA / "andrea-stories.safetensors"


def generate_text(model, tokenizer, prompt: str, max_new_tokens: int = 100, temperature: float = 0.8,
                  top_k: int | None = 40, seed: int | None = 0, stop_at_eot: bool = True) -> str:
    """The prompt's continuation (without the prompt). An empty prompt starts a new document."""
    ids = tokenizer.encode(prompt) if prompt else [tokenizer.eot_id]
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    gen = None
    if seed is not None:
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
    was_training = model.training
    model.eval()
    try:
        out = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k, generator=gen)
    finally:
        model.train(was_training)
    new = out[0, len(ids):].tolist()
    if stop_at_eot and tokenizer.eot_id in new:
        new = new[:new.index(tokenizer.eot_id)]
    return tokenizer.decode(new)


def weights_path(ckpt: str | Path) -> Path:
    """A weights file from a file, a checkpoint folder or a run folder; the weights of a
    checkpoint verified against its manifest (CheckpointError if they do not match)."""
    from .checkpoint import MANIFEST, CheckpointError, find, verify
    path = Path(ckpt)
    if not path.exists():
        raise FileNotFoundError(f"no weights at {path}: it does not exist")
    if path.is_dir() and (path / "model.safetensors").is_file() and not (path / MANIFEST).exists():
        return path / "model.safetensors"                # a finished run's exported weights
    if path.is_dir():
        try:
            path = find(path) / "model.safetensors"
        except CheckpointError as exc:
            raise FileNotFoundError(f"no weights at {ckpt}: give a .safetensors file, a checkpoint folder "
                                    f"or a run folder ({exc})") from exc
    if (path.parent / MANIFEST).is_file():              # inside a checkpoint: the manifest vouches for it
        verify(path.parent, only=(path.name,))
    return path


def run_folder(ckpt) -> Path | None:
    """The run folder a weights file, checkpoint folder or run folder belongs to, if any."""
    if ckpt is None:
        return None
    path = Path(ckpt)
    for folder in (path, path.parent, path.parent.parent, path.parent.parent.parent):
        if (folder / "tokenizer.json").is_file() and (folder / "log.jsonl").is_file():
            return folder
    return None


def run_tokenizer(ckpt) -> Path | None:
    """The tokenizer.json a run folder keeps (andrea-train copies its data's, or writes its own), if any."""
    folder = run_folder(ckpt)
    return folder / "tokenizer.json" if folder is not None else None


def load_model(ckpt: str | Path, device="cpu"):
    """The engine's ANDREA with the weights of a file, checkpoint or run folder (weights_path)."""
    from ..engine.weights import load_weights
    return load_weights(weights_path(ckpt), device=device)


def load_pretrained(device="cpu"):
    """(model, tokenizer): the tiny ANDREA trained on the shipped stories."""
    from .tokenizer import load_tokenizer
    if not PRETRAINED_FILE.is_file():
        raise FileNotFoundError(f"{PRETRAINED_FILE} is missing: rebuild it with tools/train_shipped_model.py")
    return load_model(PRETRAINED_FILE, device=device), load_tokenizer()


class HFTokenizer:
    """A transformers tokenizer with what generate_text reads: encode, decode, eot_id, vocab_size."""

    def __init__(self, tok):
        self.tok, self.eot_id, self.vocab_size = tok, tok.eos_token_id, len(tok)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)


def load_hf(name: str):
    """(GPT2LMHeadModel in eval mode, HFTokenizer) of a hub name or a save_pretrained folder; one
    OSError line when neither the cache, the folder nor the internet has it."""
    from ..engine.hf import _transformers
    transformers = _transformers()
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)      # retries: the one line below says it
    try:
        hf_model = transformers.GPT2LMHeadModel.from_pretrained(name)
        tok = transformers.AutoTokenizer.from_pretrained(name)
    except OSError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OSError(f"--hf {name}: no GPT-2 model found ({first}). A hub name is downloaded once, "
                      f"which needs the internet; a folder needs what save_pretrained writes, "
                      f"the tokenizer's files included") from None
    return hf_model.eval(), HFTokenizer(tok)


def whose(ckpt) -> str:
    """Whose model a run's weights are, from the run's pieces.json: one line for the user."""
    from .record import read_pieces
    run = run_folder(ckpt)
    record = read_pieces(run) if run is not None else None
    if ckpt is None:
        return "the small ANDREA shipped with the course, trained by the engine"
    if record is None:
        return f"the weights in {ckpt} (no pieces.json beside them: whose pieces trained them is not recorded)"
    table = record.get("pieces", {})
    if not table:
        return f"the weights of {run}, trained by the engine's pieces alone"
    yours = [name for name, status in table.items() if status == "yours"]
    engine = [name for name in table if name not in yours]
    changed = f"; {len(record['changes'])} change(s) of pieces on resume (pieces.json)" if record.get("changes") else ""
    return (f"the weights of {run}, trained by your model: {len(yours)} of its {len(table)} pieces yours"
            + (f", the engine's for {', '.join(engine)}" if engine else "") + changed
            + " (here the engine's code runs them: it computes what yours does)")


def export_hf(model, tokenizer, out: str | Path) -> Path:
    """Write `model` and `tokenizer` as a Hugging Face folder (GPT2LMHeadModel in safetensors and
    a fast tokenizer) that transformers' AutoModelForCausalLM / AutoTokenizer.from_pretrained(out)
    read with nothing downloaded. Classic ANDREA only (andrea_course.engine.hf says why)."""
    from transformers import PreTrainedTokenizerFast

    from ..engine.hf import to_hf
    out = Path(out)
    hf_model = to_hf(model)
    hf_model.config.eos_token_id = hf_model.config.bos_token_id = tokenizer.eot_id
    hf_model.save_pretrained(out, safe_serialization=True)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tokenizer.hf, eos_token="<|endoftext|>",
                                     bos_token="<|endoftext|>", unk_token=None,
                                     model_max_length=model.cfg.context_length)
    hf_tok.save_pretrained(out)
    return out


def _top_k(text: str) -> int | None:
    import argparse
    if text.lower() == "none":
        return None
    try:
        from .cli import positive_int
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, or none for no limit, got {text!r}")


def build_parser():
    from .cli import Parser, natural_float, natural_int, positive_int, seed_int
    p = Parser("andrea-sample", __doc__, epilog="Exit status: 0 done, 1 the model or tokenizer could not "
               "be loaded or written, 2 a bad argument.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", help="a .safetensors file, a checkpoint folder or a run folder")
    src.add_argument("--pretrained", action="store_true", help="the small model shipped with the course")
    src.add_argument("--hf", metavar="NAME", help="a GPT-2 model of transformers: a hub name such as gpt2 "
                     "(downloaded on first use) or a folder written by save_pretrained")
    p.add_argument("--prompt", default="Once upon a time", help="the text to continue ('' starts a new story)")
    p.add_argument("--max-new-tokens", type=natural_int, default=100, help="tokens to generate")
    p.add_argument("--temperature", type=natural_float, default=0.8, help="0: always the most likely token")
    p.add_argument("--top-k", type=_top_k, default=40, help="sample among the k most likely tokens (none: all)")
    p.add_argument("--seed", type=seed_int, default=None, help="for the same text every time (default: random)")
    p.add_argument("--num-samples", type=positive_int, default=1, help="samples to print")
    p.add_argument("--tokenizer", help="a tokenizer.json (default: the run's, else the course's)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: the GPU if there is one, else the CPU)")
    p.add_argument("--export-hf", metavar="DIR", help="also write the model in Hugging Face format to DIR "
                   "(new, empty or an earlier export; default: no export)")
    return p


def main(argv=None) -> int:
    from .cli import run
    return run("andrea-sample", _main, argv)


def _check_export(model, out: Path) -> None:
    """Refuse an export that cannot be written, before any sampling."""
    from .cli import UsageError
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        raise ImportError("--export-hf needs the transformers package: pip install 'andrea-course[hf]'") from exc
    from ..engine.hf import check_gpt2_compatible
    try:
        check_gpt2_compatible(model.cfg)
    except ValueError as exc:
        raise UsageError(f"--export-hf: {exc}") from exc
    if out.exists() and not out.is_dir():
        raise UsageError(f"--export-hf {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "config.json").is_file():
        raise UsageError(f"--export-hf {out} is a folder with other files in it: give a new or empty folder")


def _engine_gpt2(args, hf_model):
    """(the engine's ANDREA with GPT-2's weights, whose it is)."""
    from ..engine.hf import from_hf
    return from_hf(hf_model), "GPT-2's weights in the engine's code"


def _load(args, device, build_hf):
    """(model, tokenizer, whose) for the source the arguments name."""
    from .cli import UsageError
    from .tokenizer import load_tokenizer
    if args.hf:
        if args.tokenizer:
            raise UsageError("--tokenizer is for ANDREA's own models: a GPT-2 model (--hf) brings its tokenizer")
        hf_model, tok = load_hf(args.hf)
        model, who = (build_hf or _engine_gpt2)(args, hf_model)
        return model.to(device).eval(), tok, f"{args.hf}: {who}"
    model = load_model(PRETRAINED_FILE if args.pretrained else args.ckpt, device=device)
    tok = load_tokenizer(args.tokenizer or run_tokenizer(args.ckpt))
    return model, tok, whose(None if args.pretrained else args.ckpt)


def _main(argv, parser=None, build_hf=None) -> int:
    """andrea-sample's work; andrea_course.capstone.sample passes a parser with --impl and
    build_hf(args, hf_model) -> (model, whose), which builds it from the learner's pieces."""
    from . import files
    from .cli import UsageError
    from .devices import parse_device
    args = (parser or build_parser()).parse_args(argv)
    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"--prompt is not valid UTF-8 text (a stray byte at character {exc.start})") from exc
    device = parse_device(args.device)
    if args.hf and args.export_hf:
        raise UsageError("--export-hf writes ANDREA's own models: a GPT-2 model (--hf) is one already")
    model, tok, who = _load(args, device, build_hf)
    if tok.vocab_size != model.cfg.vocab_size:
        raise UsageError(f"the tokenizer has V = {tok.vocab_size} tokens but the model V = {model.cfg.vocab_size}: "
                         f"give the tokenizer the model was trained with (--tokenizer)")
    export = Path(args.export_hf) if args.export_hf else None
    if export:
        _check_export(model, export)
    print(f"andrea-sample: sampling {who}", file=sys.stderr)
    for i in range(args.num_samples):
        seed = None if args.seed is None else args.seed + i
        text = generate_text(model, tok, args.prompt, args.max_new_tokens, args.temperature,
                             args.top_k, seed)
        print(args.prompt + text)
        if i < args.num_samples - 1:
            print("-" * 40)
    if export:
        new = files.staging(export)
        shutil.rmtree(new, ignore_errors=True)
        try:
            export_hf(model, tok, new)
            files.replace_folder(new, export)
        finally:
            shutil.rmtree(new, ignore_errors=True)
        print(f"wrote {export}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
