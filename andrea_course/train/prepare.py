"""andrea-prepare: text -> uint16 token shards + meta.json + a train/val split, in bounded memory.

    andrea-prepare books/ notes.txt --out data/mine                 # files and folders of text
    andrea-prepare --stories --out data/stories                     # the shipped stories
    andrea-prepare --hf-dataset roneneldan/TinyStories --out data/tinystories   # needs `datasets` and internet

Documents: every file is one document, cut at each line "<|endoftext|>" if it has them (.jsonl
files: one document per line, from its "text" field). Documents are tokenized in batches (Hugging
Face tokenizers, in parallel), each followed by <|endoftext|>, and appended to the current shard;
a shard holds at most --shard-tokens tokens. Every 20th document goes to the validation split.
Memory stays bounded: a batch of documents and a part of a document at a time, never the corpus.
meta.json is written last (write and rename), so a folder with a meta.json is complete.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from .data import DTYPE, FORMAT, VAL_EVERY, is_val
from .tokenizer import EOT, load_tokenizer

TEXT_SUFFIXES = {".txt", ".md", ".text", ".rst", ".jsonl", ""}
PIECE_CHARS = 1 << 20        # a long document is read (and tokenized) a megabyte of text at a time


class ShardWriter:
    def __init__(self, out: Path, split: str, shard_tokens: int):
        self.out, self.split, self.shard_tokens = out, split, shard_tokens
        self.shards: list[dict] = []
        self.f = None
        self.total = 0

    def _open(self):
        name = f"{self.split}_{len(self.shards):06d}.bin"
        self.f = open(self.out / name, "wb")
        self.shards.append({"file": name, "tokens": 0})

    def write(self, ids) -> None:
        arr = np.asarray(ids, dtype=DTYPE)
        while len(arr):
            if self.f is None or self.shards[-1]["tokens"] >= self.shard_tokens:
                self.close()
                self._open()
            room = self.shard_tokens - self.shards[-1]["tokens"]
            part, arr = arr[:room], arr[room:]
            self.f.write(part.astype("<u2").tobytes())
            self.shards[-1]["tokens"] += len(part)
            self.total += len(part)

    def close(self) -> None:
        if self.f is not None:
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
            self.f = None


def text_files(paths) -> list[Path]:
    """Every text file under the given files and folders, in a fixed (sorted) order."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES
                          and not f.name.startswith("."))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no file or folder {p}")
    if not out:
        raise FileNotFoundError(f"no text files in {', '.join(map(str, paths))}")
    return out


def documents_of_file(path: Path, progress=None):
    """Yield (document number within the file, text piece, is the document's last piece)."""
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if progress:
                    progress(len(line.encode("utf-8")))
                if line.strip():
                    try:
                        yield i, json.loads(line)["text"], True
                    except (json.JSONDecodeError, KeyError, TypeError) as exc:
                        raise ValueError(f"{path}:{i + 1}: expected a JSON object with a \"text\" field") from exc
        return
    doc, buf, size, first = 0, [], 0, True
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if progress:
                progress(len(line.encode("utf-8", errors="replace")))
            if line.strip() == EOT:
                text = "".join(buf)
                yield doc, (text.lstrip("\n") if first else text).rstrip("\n"), True
                doc, buf, size, first = doc + 1, [], 0, True
                continue
            buf.append(line)
            size += len(line)
            if size >= PIECE_CHARS:           # a piece of a long document; its trailing newlines
                text = "".join(buf)           # wait for the next piece (a document's end drops them)
                body = text.rstrip("\n")
                yield doc, body.lstrip("\n") if first else body, False
                buf, first = [text[len(body):]], False
                size = len(buf[0])
    if buf or doc == 0:
        text = "".join(buf)
        yield doc, (text.lstrip("\n") if first else text).rstrip("\n"), True


def prepare(sources, out: str | os.PathLike, tokenizer=None, shard_tokens: int = 100_000_000,
            val_every: int = VAL_EVERY, batch_docs: int = 256, progress: bool = True) -> dict:
    """Tokenize documents into a data folder. sources: an iterable of (text, is_last_piece)
    pairs, or of plain strings (each one whole document). Returns the meta dict."""
    from tqdm.auto import tqdm
    tok = tokenizer or load_tokenizer()
    if tok.vocab_size > np.iinfo(DTYPE).max + 1:
        raise ValueError(f"V = {tok.vocab_size} does not fit uint16 token files")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)          # incomplete until written again
    for old in list(out.glob("train_*.bin")) + list(out.glob("val_*.bin")):
        old.unlink()
    writers = {"train": ShardWriter(out, "train", shard_tokens), "val": ShardWriter(out, "val", shard_tokens)}
    n_docs = {"train": 0, "val": 0}
    doc_index = 0
    pending: list[tuple[str, bool]] = []

    def flush():
        nonlocal doc_index
        encoded = tok.encode_batch([t for t, _ in pending])
        for (text, last), ids in zip(pending, encoded):
            split = "val" if is_val(doc_index, val_every) else "train"
            writers[split].write(ids + [tok.eot_id] if last else ids)
            if last:
                n_docs[split] += 1
                doc_index += 1
        pending.clear()

    bar = tqdm(desc="documents", unit="doc", disable=not progress)
    for item in sources:
        text, last = (item, True) if isinstance(item, str) else item
        pending.append((text, last))
        if last:
            bar.update(1)
        if len(pending) >= batch_docs:
            flush()
    if pending:
        flush()
    bar.close()
    for w in writers.values():
        w.close()
    tok.save(out / "tokenizer.json")          # the folder says how to read its ids
    meta = {"format": FORMAT, "dtype": "uint16", "vocab_size": tok.vocab_size, "eot_id": tok.eot_id,
            "tokenizer_hash": tok.hash, "val_every": val_every,
            "tokens": {k: w.total for k, w in writers.items()}, "documents": n_docs,
            "shards": {k: w.shards for k, w in writers.items()}}
    tmp = out / "meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, out / "meta.json")
    return meta


def file_sources(paths, progress: bool = True):
    from tqdm.auto import tqdm
    files = text_files(paths)
    bar = tqdm(total=sum(f.stat().st_size for f in files), unit="B", unit_scale=True, desc="reading",
               disable=not progress)
    for path in files:
        for _, text, last in documents_of_file(path, bar.update):
            yield text, last
    bar.close()


def hf_sources(name: str, split: str = "train", field: str = "text", config: str | None = None):
    """Stream a Hugging Face dataset (needs `pip install datasets` and internet; never in tests)."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise ImportError("--hf-dataset needs the `datasets` package: pip install datasets") from exc
    for row in load_dataset(name, config, split=split, streaming=True):
        yield row[field], True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="andrea-prepare", description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="*", help="text files or folders")
    p.add_argument("--out", required=True)
    p.add_argument("--stories", action="store_true", help="the stories shipped with the course")
    p.add_argument("--hf-dataset", help="a Hugging Face dataset name (streamed; needs `datasets` and internet)")
    p.add_argument("--hf-config")
    p.add_argument("--hf-split", default="train")
    p.add_argument("--hf-field", default="text")
    p.add_argument("--tokenizer", help="a tokenizer.json (default: the course's)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000)
    p.add_argument("--val-every", type=int, default=VAL_EVERY, help="every N-th document goes to validation")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    chosen = sum(map(bool, (args.inputs, args.stories, args.hf_dataset)))
    if chosen != 1:
        p.error("give text files or folders, or --stories, or --hf-dataset (exactly one)")
    try:
        if args.stories:
            from .corpus import load_corpus
            sources = iter(load_corpus())
        elif args.hf_dataset:
            sources = hf_sources(args.hf_dataset, args.hf_split, args.hf_field, args.hf_config)
        else:
            sources = file_sources(args.inputs, progress=not args.no_progress)
        meta = prepare(sources, args.out, load_tokenizer(args.tokenizer), args.shard_tokens, args.val_every,
                       progress=not args.no_progress)
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"andrea-prepare: {exc}", file=sys.stderr)
        return 1
    print(f"{args.out}: {meta['tokens']['train']:,} train and {meta['tokens']['val']:,} val tokens "
          f"from {sum(meta['documents'].values()):,} documents, V = {meta['vocab_size']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
