"""andrea-sample: text from a trained ANDREA, and the small model that ships with the course.

    andrea-sample --ckpt runs/tiny --prompt "Once upon a time" --max-new-tokens 100 --seed 1
    andrea-sample --ckpt runs/tiny/checkpoints/step_0000200 --temperature 0.7 --top-k 40
    andrea-sample --pretrained --prompt "Lily found"
    andrea-sample --ckpt runs/120m --export-hf exports/andrea-120m     # Hugging Face format

--ckpt takes a weights file, a checkpoint folder or a run folder (its model.safetensors, else
its latest checkpoint).
"""
from __future__ import annotations

import argparse
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
    """A weights file from a file, a checkpoint folder or a run folder."""
    from .checkpoint import CheckpointError, find
    path = Path(ckpt)
    if path.is_file():
        return path
    if (path / "model.safetensors").is_file():
        return path / "model.safetensors"
    try:
        return find(path) / "model.safetensors"
    except CheckpointError as exc:
        raise FileNotFoundError(f"no weights at {path}: give a .safetensors file, a checkpoint folder "
                                f"or a run folder ({exc})") from exc


def run_tokenizer(ckpt) -> Path | None:
    """The tokenizer.json a run folder keeps (andrea-train copies its data's), if any."""
    if ckpt is None:
        return None
    path = Path(ckpt)
    for folder in (path, path.parent, path.parent.parent, path.parent.parent.parent):
        if (folder / "tokenizer.json").is_file() and (folder / "log.jsonl").is_file():
            return folder / "tokenizer.json"
    return None


def load_model(ckpt: str | Path, impl=None, device="cpu"):
    from ..weights import load_weights
    return load_weights(weights_path(ckpt), impl=impl, device=device)


def load_pretrained(impl=None, device="cpu"):
    """(model, tokenizer): the tiny ANDREA trained on the shipped stories."""
    from .tokenizer import load_tokenizer
    if not PRETRAINED_FILE.is_file():
        raise FileNotFoundError(f"{PRETRAINED_FILE} is missing: rebuild it with tools/train_shipped_model.py")
    return load_model(PRETRAINED_FILE, impl=impl, device=device), load_tokenizer()


def export_hf(model, tokenizer, out: str | Path) -> Path:
    """Write `model` and `tokenizer` as a Hugging Face folder (GPT2LMHeadModel in safetensors and
    a fast tokenizer) that transformers' AutoModelForCausalLM / AutoTokenizer.from_pretrained(out)
    read with nothing downloaded. Classic ANDREA only (andrea_course.hf says why)."""
    from transformers import PreTrainedTokenizerFast

    from ..hf import to_hf
    out = Path(out)
    hf_model = to_hf(model)
    hf_model.config.eos_token_id = hf_model.config.bos_token_id = tokenizer.eot_id
    hf_model.save_pretrained(out, safe_serialization=True)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tokenizer.hf, eos_token="<|endoftext|>",
                                     bos_token="<|endoftext|>", unk_token=None,
                                     model_max_length=model.cfg.context_length)
    hf_tok.save_pretrained(out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="andrea-sample", description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", help="a .safetensors file, a checkpoint folder or a run folder")
    src.add_argument("--pretrained", action="store_true", help="the small model shipped with the course")
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--num-samples", type=int, default=1)
    p.add_argument("--tokenizer", help="a tokenizer.json (default: the course's)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--export-hf", metavar="DIR", help="also write the model in Hugging Face format to DIR")
    args = p.parse_args(argv)
    from ..weights import WeightsError
    from .tokenizer import load_tokenizer
    try:
        model = load_model(PRETRAINED_FILE if args.pretrained else args.ckpt, device=args.device)
        tok = load_tokenizer(args.tokenizer or run_tokenizer(args.ckpt))
    except (FileNotFoundError, WeightsError, ValueError) as exc:
        print(f"andrea-sample: {exc}", file=sys.stderr)
        return 1
    if args.temperature < 0:
        print("andrea-sample: --temperature must be >= 0", file=sys.stderr)
        return 1
    for i in range(args.num_samples):
        seed = None if args.seed is None else args.seed + i
        text = generate_text(model, tok, args.prompt, args.max_new_tokens, args.temperature,
                             args.top_k, seed)
        print(args.prompt + text)
        if i < args.num_samples - 1:
            print("-" * 40)
    if args.export_hf:
        print(f"wrote {export_hf(model, tok, args.export_hf)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
