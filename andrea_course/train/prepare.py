"""andrea-prepare: text -> uint16 token shards + meta.json + a train/val split, in bounded memory.

    andrea-prepare books/ notes.txt --out data/mine                 # files and folders of text
    andrea-prepare old.txt --encoding cp1252 --out data/old         # text that is not UTF-8
    andrea-prepare --stories --out data/stories                     # the shipped stories
    andrea-prepare --hf-dataset roneneldan/TinyStories --out data/tinystories   # needs `datasets` and internet

Documents: every file is one document, cut at each line "<|endoftext|>" if it has them (.jsonl
files: one document per line, from its "text" field). Text is read byte-exact: UTF-8 (or the
--encoding given), refused with the file and byte offset when it is not; line ends stay as they
are (LF, CRLF or CR); only the line ends around a document (next to a separator line) are
dropped, and a blank document is skipped. "<|endoftext|>" inside a line is text like any other:
only the boundaries added here are end-of-text tokens. Documents are tokenized in batches (Hugging
Face tokenizers, in parallel), each followed by <|endoftext|>, and appended to the current shard;
a shard holds at most --shard-tokens tokens. Every 20th document goes to the validation split.
Memory stays bounded: a batch of documents and a part of a document at a time, never the corpus.
The folder is built beside --out and swapped in when complete: a failure at any point (bad
text, a full disk) leaves an existing --out as it was.
"""
from __future__ import annotations

import codecs
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np

from . import files
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
        self.sha256 = hashlib.sha256()       # of every token written, in order

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
            data = part.astype("<u2").tobytes()
            self.f.write(data)
            self.sha256.update(data)
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


def check_text(path: Path, encoding: str = "utf-8") -> bool:
    """Refuse a file that is not valid text in `encoding` (ValueError naming the byte offset);
    True if it holds anything but whitespace."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    offset, has_text = 0, False
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            try:
                text = decoder.decode(block)
            except UnicodeDecodeError as exc:
                at = offset + exc.start
                bad = block[exc.start:exc.start + 1].hex()
                hint = ("give its encoding with --encoding (latin-1, cp1252, utf-16, ...)" if encoding == "utf-8"
                        else "is --encoding right?")
                raise ValueError(f"{path} is not valid {encoding} text: byte {at} (0x{bad}) cannot be decoded; "
                                 f"{hint}") from exc
            except UnicodeError as exc:           # e.g. utf-16 and utf-32 want a byte-order mark first
                raise ValueError(f"{path} is not {encoding} text: {_unicode_problem(exc, encoding)}") from exc
            has_text = has_text or bool(text.strip())
            offset += len(block)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} is not valid {encoding} text: it ends inside a character "
                             f"(byte {offset}); truncated?") from exc
    return has_text


def _unicode_problem(exc: UnicodeError, encoding: str) -> str:
    """What a decoder's UnicodeError (not a bad byte: a missing byte-order mark) means, and what to do."""
    if "BOM" in str(exc):
        return (f"it does not start with the byte-order mark that {encoding} reads first; is --encoding "
                f"right? (for {encoding} without one: --encoding {encoding}-le or {encoding}-be)")
    return f"{exc}; is --encoding right?"


def _open_text(path: Path, encoding: str):
    """Lines with their own line ends (newline=""): CRLF and CR are kept, not made LF."""
    return io.TextIOWrapper(open(path, "rb"), encoding=encoding, errors="strict", newline="")


def documents_of_file(path: Path, progress=None, encoding: str = "utf-8"):
    """Yield (document number within the file, text piece, is the document's last piece)."""
    if path.suffix.lower() == ".jsonl":
        with _open_text(path, encoding) as f:
            for i, line in enumerate(f):
                if progress:
                    progress(len(line.encode(encoding)))
                if line.strip():
                    try:
                        text = json.loads(line)["text"]
                        if not isinstance(text, str):
                            raise TypeError
                    except (json.JSONDecodeError, KeyError, TypeError) as exc:
                        raise ValueError(f"{path}:{i + 1}: expected a JSON object with a \"text\" string") from exc
                    if text.strip():
                        yield i, text, True
        return
    ends = "\r\n"
    doc, buf, size, first = 0, [], 0, True

    def whole(text):           # a document's text without the line ends around it
        return (text.lstrip(ends) if first else text).rstrip(ends)

    with _open_text(path, encoding) as f:
        for line in f:
            if progress:
                progress(len(line.encode(encoding)))
            if line.strip() == EOT:
                text = whole("".join(buf))
                if text.strip() or not first:
                    yield doc, text, True
                    doc += 1
                buf, size, first = [], 0, True
                continue
            buf.append(line)
            size += len(line)
            if size >= PIECE_CHARS:           # a piece of a long document; its trailing line ends
                text = "".join(buf)           # wait for the next piece (a document's end drops them)
                body = text.rstrip(ends)
                yield doc, body.lstrip(ends) if first else body, False
                buf, first = [text[len(body):]], False
                size = len(buf[0])
    text = whole("".join(buf))
    if text.strip() or not first:
        yield doc, text, True


def _lazy_bar(items, **bar_args):
    """Iterate items with a progress bar that appears only once the first item has come:
    a source that fails at once (a missing package, no network) shows no empty bar."""
    from tqdm.auto import tqdm
    it = iter(items)
    try:
        first = next(it)
    except StopIteration:
        return
    with tqdm(**bar_args) as bar:
        yield first, bar
        for item in it:
            yield item, bar


def prepare(sources, out: str | os.PathLike, tokenizer=None, shard_tokens: int = 100_000_000,
            val_every: int = VAL_EVERY, batch_docs: int = 256, progress: bool = True) -> dict:
    """Tokenize documents into a data folder. sources: an iterable of (text, is_last_piece)
    pairs, or of plain strings (each one whole document). Returns the meta dict.

    The folder is written beside `out` and swapped in only when complete; an existing `out`
    must be a prepared data folder (or empty), and stays untouched if anything fails."""
    tok = tokenizer or load_tokenizer()
    if tok.vocab_size > np.iinfo(DTYPE).max + 1:
        raise ValueError(f"V = {tok.vocab_size} does not fit uint16 token files")
    if not (isinstance(shard_tokens, int) and shard_tokens >= 1):
        raise ValueError(f"shard_tokens must be a positive number of tokens, got {shard_tokens!r}")
    if not (isinstance(val_every, int) and val_every >= 0 and val_every != 1):
        raise ValueError(f"val_every must be 0 (no validation split) or >= 2, got {val_every!r}")
    out = Path(out)
    check_out(out)
    new = files.staging(out)
    shutil.rmtree(new, ignore_errors=True)
    try:
        new.mkdir(parents=True)
        meta = _write(sources, new, tok, shard_tokens, val_every, batch_docs, progress)
        files.replace_folder(new, out)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return meta


def check_out(out: Path) -> None:
    """--out must be new, empty or a prepared data folder: never someone's other files."""
    if out.exists() and not out.is_dir():
        raise files.NotAFolderError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / "meta.json").is_file():
        raise files.NotAFolderError(f"--out {out} is a folder with other files in it (no meta.json): "
                                    f"give a new or empty folder, or a data folder to replace")


def _write(sources, out: Path, tok, shard_tokens, val_every, batch_docs, progress) -> dict:
    writers = {"train": ShardWriter(out, "train", shard_tokens), "val": ShardWriter(out, "val", shard_tokens)}
    n_docs = {"train": 0, "val": 0}
    doc_index = 0
    pending: list[tuple[str, bool]] = []

    def flush():
        nonlocal doc_index
        encoded = tok.encode_ordinary_batch([t for t, _ in pending])
        for (text, last), ids in zip(pending, encoded):
            split = "val" if is_val(doc_index, val_every) else "train"
            writers[split].write(ids + [tok.eot_id] if last else ids)
            if last:
                n_docs[split] += 1
                doc_index += 1
        pending.clear()

    for item, bar in _lazy_bar(sources, desc="documents", unit="doc", disable=not progress):
        text, last = (item, True) if isinstance(item, str) else item
        pending.append((text, last))
        if last:
            bar.update(1)
        if len(pending) >= batch_docs:
            flush()
    if pending:
        flush()
    for w in writers.values():
        w.close()
    if n_docs["train"] == 0:
        raise ValueError("no text to train on: the inputs are empty or blank"
                         + (" (every document went to validation)" if doc_index else ""))
    tok.save(out / "tokenizer.json")          # the folder says how to read its ids
    meta = {"format": FORMAT, "dtype": "uint16", "vocab_size": tok.vocab_size, "eot_id": tok.eot_id,
            "tokenizer_hash": tok.hash, "val_every": val_every,
            "tokens": {k: w.total for k, w in writers.items()}, "documents": n_docs,
            "shards": {k: w.shards for k, w in writers.items()},
            "sha256": hashlib.sha256("".join(w.sha256.hexdigest() for w in writers.values()).encode()).hexdigest()}
    files.write_text(out / "meta.json", json.dumps(meta, indent=1))
    return meta


def file_sources(paths, progress: bool = True, encoding: str = "utf-8"):
    """The documents of text files and folders. Every file is checked first (it exists, it is
    text in `encoding`, something in all of them is not blank), so a bad one is refused before
    any work starts."""
    found = text_files(paths)
    has_text = [check_text(f, encoding) for f in found]
    for f in found:
        if f.suffix.lower() == ".jsonl":          # every line a {"text": ...} object
            for _ in documents_of_file(f, encoding=encoding):
                pass
    if not any(has_text):
        raise ValueError(f"no text in {', '.join(map(str, paths))}: the files are empty or blank")
    return _file_documents(found, progress, encoding)


def _file_documents(found, progress, encoding):
    from tqdm.auto import tqdm
    with tqdm(total=sum(f.stat().st_size for f in found), unit="B", unit_scale=True, desc="reading",
              disable=not progress) as bar:
        for path in found:
            for _, text, last in documents_of_file(path, bar.update, encoding):
                yield text, last


def hf_sources(name: str, split: str = "train", field: str = "text", config: str | None = None):
    """Stream a Hugging Face dataset (needs `pip install datasets` and internet; never in tests)."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise ImportError("--hf-dataset needs the `datasets` package: pip install datasets") from exc
    for row in load_dataset(name, config, split=split, streaming=True):
        yield row[field], True


def _val_every(text: str) -> int:
    import argparse
    n = int(text) if text.lstrip("-").isdigit() else None
    if n is None or n < 0 or n == 1:
        raise argparse.ArgumentTypeError(f"must be 0 (no validation split) or a whole number >= 2, got {text!r}")
    return n


def _encoding(text: str) -> str:
    import argparse
    try:
        return codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown encoding {text!r} (utf-8, latin-1, cp1252, utf-16, ...)")


def build_parser():
    from .cli import Parser, positive_int
    p = Parser("andrea-prepare", __doc__, epilog="Exit status: 0 done, 1 the inputs could not be "
               "prepared (bad text, a full disk), 2 a bad argument.")
    p.add_argument("inputs", nargs="*", help="text files (.txt, .md, .jsonl, ...) or folders of them")
    p.add_argument("--out", required=True, help="the data folder to write (new, empty, or one to replace)")
    p.add_argument("--stories", action="store_true", help="the stories shipped with the course")
    p.add_argument("--hf-dataset", help="a Hugging Face dataset name (streamed; needs `datasets` and internet)")
    p.add_argument("--hf-config", help="the dataset's configuration (default: none)")
    p.add_argument("--hf-split", default="train", help="the dataset's split")
    p.add_argument("--hf-field", default="text", help="the field that holds the text")
    p.add_argument("--encoding", type=_encoding, default="utf-8",
                   help="the text files' encoding; text not valid in it is refused")
    p.add_argument("--tokenizer", help="a tokenizer.json (default: the course's)")
    p.add_argument("--shard-tokens", type=positive_int, default=100_000_000, help="tokens per shard file at most")
    p.add_argument("--val-every", type=_val_every, default=VAL_EVERY,
                   help="every N-th document goes to validation (0: none)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def main(argv=None) -> int:
    from .cli import run
    return run("andrea-prepare", _main, argv)


def _main(argv) -> int:
    from .cli import UsageError
    p = build_parser()
    args = p.parse_args(argv)
    chosen = sum(map(bool, (args.inputs, args.stories, args.hf_dataset)))
    if chosen != 1:
        p.error("give text files or folders, or --stories, or --hf-dataset (exactly one)")
    out = Path(args.out)
    try:
        check_out(out)
    except files.NotAFolderError as exc:
        raise UsageError(str(exc)) from exc
    tok = load_tokenizer(args.tokenizer)
    if args.stories:
        from .corpus import load_corpus
        sources = iter(load_corpus())
    elif args.hf_dataset:
        sources = hf_sources(args.hf_dataset, args.hf_split, args.hf_field, args.hf_config)
    else:
        try:
            sources = file_sources(args.inputs, progress=not args.no_progress, encoding=args.encoding)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from exc
    meta = prepare(sources, out, tok, args.shard_tokens, args.val_every, progress=not args.no_progress)
    print(f"{args.out}: {meta['tokens']['train']:,} train and {meta['tokens']['val']:,} val tokens "
          f"from {sum(meta['documents'].values()):,} documents, V = {meta['vocab_size']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
