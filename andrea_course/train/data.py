"""Token data for training: shards of uint16 ids on disk (or the shipped stories in memory), cut
into chunks of T + 1 tokens, served in a seeded order that a checkpoint can resume exactly.

A prepared data folder (written by andrea-prepare, see prepare.py):

    meta.json          {"format", "vocab_size", "eot_id", "tokenizer_hash", "tokens": {"train", "val"},
                        "shards": {"train": [...], "val": [...]}, "documents": {...}}
    train_000000.bin   raw little-endian uint16 token ids, documents separated by <|endoftext|>
    val_000000.bin     ...

uint16 holds ids up to 65,535, plenty for V = 8,449, and halves the disk and memory of int32.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

FORMAT = "andrea-tokens/1"
DTYPE = np.uint16
VAL_EVERY = 20          # document i goes to the validation split when i % VAL_EVERY == VAL_EVERY - 1


class DataError(ValueError):
    """A data folder that is missing, corrupt, or made for another tokenizer."""


def is_val(doc_index: int, val_every: int = VAL_EVERY) -> bool:
    """The train/val split rule, by document: deterministic and streaming (no shuffle needed)."""
    return val_every > 0 and doc_index % val_every == val_every - 1


@dataclass
class Split:
    """One split's tokens: a list of arrays (memory-mapped shards) read as one sequence."""
    parts: list

    def __post_init__(self):
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def read(self, start: int, n: int) -> np.ndarray:
        """tokens[start : start + n], across shard boundaries."""
        out, pos = [], start
        while n > 0:
            k = int(np.searchsorted(self.offsets, pos, side="right")) - 1
            part = self.parts[k]
            lo = pos - int(self.offsets[k])
            take = min(n, len(part) - lo)
            out.append(np.asarray(part[lo:lo + take]))
            pos, n = pos + take, n - take
        return out[0] if len(out) == 1 else np.concatenate(out)


_CORPUS_TOKENS: dict[str, tuple] = {}     # tokenizer hash -> (train, val) token arrays of the stories


class TokenData:
    """Train and val tokens, from a prepared folder or from arrays."""

    def __init__(self, train: Split, val: Split, vocab_size: int, eot_id: int, tokenizer_hash: str,
                 source: str, fingerprint: str, tokenizer_file: Path | None = None):
        self.train, self.val = train, val
        self.vocab_size, self.eot_id, self.tokenizer_hash, self.source = vocab_size, eot_id, tokenizer_hash, source
        self.fingerprint = fingerprint      # the same tokens give the same string, wherever the folder is
        self.tokenizer_file = tokenizer_file    # the tokenizer.json that reads these ids (None: one given in memory)

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> "TokenData":
        folder = Path(folder)
        meta_path = folder / "meta.json"
        if not folder.is_dir():
            raise DataError(_not_a_folder(folder))
        if not meta_path.is_file():
            raise DataError(f"{folder} has no meta.json: prepare it with `andrea-prepare TEXT... --out {folder}`")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"{meta_path} is not valid JSON: {exc}") from exc
        _check_meta(meta, meta_path)
        splits = {}
        for name in ("train", "val"):
            parts = []
            for shard in meta["shards"][name]:
                path = folder / shard["file"]
                if not path.is_file():
                    raise DataError(f"{path} is missing (listed in {meta_path})")
                size = path.stat().st_size
                if size != 2 * shard["tokens"]:
                    raise DataError(f"{path} holds {size} bytes but meta.json says {shard['tokens']} tokens "
                                    f"({2 * shard['tokens']} bytes): truncated or from another preparation")
                parts.append(np.memmap(path, dtype=DTYPE, mode="r") if size else np.zeros(0, DTYPE))
            splits[name] = Split(parts)
        from .tokenizer import TOKENIZER_FILE, load_tokenizer
        own = folder / "tokenizer.json"
        if own.is_file():
            if load_tokenizer(own).hash != meta["tokenizer_hash"]:
                raise DataError(f"{own} is not the tokenizer {meta_path} was made with "
                                f"(hash {meta['tokenizer_hash']}): prepare the folder again")
        elif meta["tokenizer_hash"] != (course := load_tokenizer()).hash:
            # Without its own tokenizer.json the ids can only be read with the course's tokenizer:
            # a run would keep that one, and sample with a tokenizer that is not its data's.
            raise DataError(f"{folder} was made with tokenizer {meta['tokenizer_hash']} (V = {meta['vocab_size']}), "
                            f"which it does not hold (no tokenizer.json), and it is not the course's "
                            f"({course.hash}, V = {course.vocab_size}): prepare the folder again with andrea-prepare")
        fingerprint = meta.get("sha256") or _sha256_json({k: meta[k] for k in ("tokenizer_hash", "tokens", "shards")})
        return cls(splits["train"], splits["val"], meta["vocab_size"], meta["eot_id"],
                   meta["tokenizer_hash"], str(folder), fingerprint,
                   tokenizer_file=own if own.is_file() else TOKENIZER_FILE)

    @classmethod
    def from_corpus(cls, tokenizer=None, stories: int | None = None) -> "TokenData":
        """The shipped stories (the first `stories` of them, or all), tokenized in memory (a
        second or two, once per process), split by the same rule as prepare."""
        from .corpus import load_corpus
        from .tokenizer import TOKENIZER_FILE, load_tokenizer
        tok = tokenizer or load_tokenizer()
        key = getattr(tok, "corpus_key", tok.hash)    # None: a tokenizer whose tokens are never shared
        key = key if key is None or stories is None else (key, stories)
        if key is None or key not in _CORPUS_TOKENS:
            encoded = tok.encode_ordinary_batch(load_corpus()[:stories])
            train, val = [], []
            for i, ids in enumerate(encoded):
                (val if is_val(i) else train).append(ids + [tok.eot_id])
            arr = lambda seqs: np.fromiter((t for s in seqs for t in s), dtype=DTYPE)
            train, val = arr(train), arr(val)
            digest = {k: hashlib.sha256(a.astype("<u2").tobytes()).hexdigest() for k, a in (("train", train), ("val", val))}
            tokens = train, val, _sha256_json(digest)
            if key is None:
                train, val, fingerprint = tokens
            else:
                _CORPUS_TOKENS[key] = tokens
        if key is not None:
            train, val, fingerprint = _CORPUS_TOKENS[key]
        source = "the shipped stories" if stories is None else f"the first {stories} shipped stories"
        return cls(Split([train]), Split([val]), tok.vocab_size, tok.eot_id, tok.hash, source, fingerprint,
                   tokenizer_file=None if tokenizer else TOKENIZER_FILE)

    def check_vocab(self, vocab_size: int) -> None:
        """Refuse data whose tokenizer is not the model's: a model reads ids 0..V-1 of one
        tokenizer, and its run keeps the data's tokenizer to sample with (andrea-sample), so the
        two V must be equal. A bigger V cannot be read; a smaller one trains rows of the
        embedding that no id reaches, and leaves a run whose own tokenizer cannot sample it."""
        if self.vocab_size != vocab_size:
            raise DataError(f"the data ({self.source}) was made with tokenizer {self.tokenizer_hash} of "
                            f"V = {self.vocab_size}, but the model's vocabulary is V = {vocab_size}: prepare "
                            f"the data with a tokenizer of V = {vocab_size} (andrea-prepare --tokenizer FILE; "
                            f"the course's by default), or give the model vocab_size {self.vocab_size}")


def _not_a_folder(folder: Path) -> str:
    """Why `folder` is no data folder (missing, a file, a broken link, a loop of links), and what to do."""
    prepare = f": prepare one with `andrea-prepare TEXT... --out {folder}`"
    try:
        os.stat(folder)
    except OSError as exc:
        point = ": point --data at a folder written by andrea-prepare"
        if exc.errno == errno.ELOOP:
            return f"no data folder {folder}: it is a symbolic link that leads back to itself (a loop of links){point}"
        if folder.is_symlink():
            return f"no data folder {folder}: it is a symbolic link to {os.readlink(folder)}, which does not exist{point}"
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            return f"no data folder {folder}: {(exc.strerror or str(exc)).lower()}{point}"
        return f"no data folder {folder}{prepare}"
    return f"no data folder {folder} (it is a file){prepare}"


def _sha256_json(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()


def _check_meta(meta, path: Path) -> None:
    """Refuse a meta.json that is not what andrea-prepare writes, naming the key and the rule."""
    def bad(what):
        return DataError(f"{path}: {what}; prepare the folder again with andrea-prepare")
    if not isinstance(meta, dict):
        raise bad(f"expected a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise DataError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    for key in ("vocab_size", "eot_id", "tokenizer_hash", "shards"):
        if key not in meta:
            raise bad(f"no {key!r}")
    if meta.get("dtype", "uint16") != "uint16":
        raise bad(f"dtype {meta['dtype']!r}: token files must be uint16 (ids up to 65,535), "
                  f"the only kind andrea-train reads")
    V = meta["vocab_size"]
    if not isinstance(V, int) or not 0 < V <= np.iinfo(DTYPE).max + 1:
        raise bad(f"vocab_size {V!r} must be an integer in 1..65536 (uint16 ids)")
    if not isinstance(meta["eot_id"], int) or not 0 <= meta["eot_id"] < V:
        raise bad(f"eot_id {meta['eot_id']!r} must be an id in 0..{V - 1}")
    shards = meta["shards"]
    if not isinstance(shards, dict) or set(shards) != {"train", "val"}:
        raise bad("shards must be an object with the lists \"train\" and \"val\"")
    for split, items in shards.items():
        for item in items if isinstance(items, list) else [None]:
            ok = (isinstance(item, dict) and isinstance(item.get("file"), str)
                  and Path(item["file"]).name == item["file"] and isinstance(item.get("tokens"), int)
                  and item["tokens"] >= 0)
            if not ok:
                raise bad(f"shards.{split} must list {{\"file\": NAME in the folder, \"tokens\": N >= 0}}, "
                          f"got {item!r}")


class Batches:
    """Batches of (B, T) inputs and targets, chunk by chunk, in a seeded order.

    The split is cut into n = (tokens - 1) // T chunks of T + 1 tokens (inputs and targets,
    shifted by one). Epoch e visits the chunks in the order permutation(seed + e). One
    optimizer step takes the next B·A·W chunks (B per micro-step, A micro-steps, W ranks):
    micro-step a of rank r reads chunks (a·W + r)·B ... + B. So the whole run's data depends
    only on (seed, B·A·W, T), not on how the global batch is split over ranks, and the state
    is two integers (epoch, index), saved in every checkpoint.
    """

    def __init__(self, split: Split, T: int, B: int, accum: int = 1, rank: int = 0, world: int = 1,
                 seed: int = 0):
        self.split, self.T, self.B, self.accum, self.rank, self.world, self.seed = split, T, B, accum, rank, world, seed
        self.n_chunks = (len(split) - 1) // T
        self.per_step = B * accum * world
        if self.n_chunks < self.per_step:
            raise DataError(f"too little data: {len(split):,} tokens make {self.n_chunks} chunks of T + 1 = {T + 1} "
                            f"tokens, fewer than one step's global batch of {self.per_step} sequences")
        self.epoch, self.index = 0, 0
        self._order_epoch, self._order = None, None

    def order(self, epoch: int) -> np.ndarray:
        if self._order_epoch != epoch:
            self._order = np.random.default_rng(self.seed + epoch).permutation(self.n_chunks)
            self._order_epoch = epoch
        return self._order

    def _chunk(self, c: int) -> np.ndarray:
        return self.split.read(int(c) * self.T, self.T + 1).astype(np.int64)

    def next_step(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's `accum` micro-batches for the next optimizer step: [(x, y), ...], each (B, T)."""
        if self.index + self.per_step > self.n_chunks:      # the remainder of an epoch is skipped
            self.epoch, self.index = self.epoch + 1, 0
        order = self.order(self.epoch)
        out = []
        for a in range(self.accum):
            first = self.index + (a * self.world + self.rank) * self.B
            rows = np.stack([self._chunk(c) for c in order[first:first + self.B]])
            t = torch.from_numpy(rows)
            out.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
        self.index += self.per_step
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index, "seed": self.seed, "per_step": self.per_step, "T": self.T}

    def load_state_dict(self, state: dict) -> None:
        names = {"seed": "seed", "per_step": "global batch B·A·W", "T": "T (seq_len)"}
        for key, name in names.items():
            if state[key] != getattr(self, key):
                raise DataError(f"the checkpoint's data position was saved with {name} = {state[key]}, "
                                f"this run has {getattr(self, key)}: resume with the same global batch "
                                f"(per_step: batch size x grad accum x processes), T and seed")
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


def eval_batches(split: Split, T: int, B: int, n_batches: int, rank: int = 0, world: int = 1):
    """A fixed validation set: the first n_batches·B·W chunks, in order, in global batches of B·W
    of which this rank takes its B rows. The set depends only on the global batch B·W, so one
    process and many see the same sequences."""
    n_chunks = (len(split) - 1) // T
    n_batches = min(n_batches, n_chunks // (B * world))
    for i in range(n_batches):
        first = (i * world + rank) * B
        rows = np.stack([split.read((first + j) * T, T + 1).astype(np.int64) for j in range(B)])
        t = torch.from_numpy(rows)
        yield t[:, :-1].contiguous(), t[:, 1:].contiguous()
