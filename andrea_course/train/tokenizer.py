"""ANDREA's tokenizer: byte-level BPE with V = 8,449 = 256 bytes + 8,192 merges + <|endoftext|>.

    tok = load_tokenizer()                 # the one shipped in andrea_course/data/tokenizer.json
    ids = tok.encode("Once upon a time")   # list[int]
    tok.decode(ids)                        # "Once upon a time"
    tok.eot_id                             # 8448

Numbering (the same as the from-scratch exercise, solutions/bpe.py): id b < 256 is the single
byte b; id 256 + r is the token made by merge number r; the end-of-text token comes last.
Text is first cut into words with GPT-2's pattern (Hugging Face's ByteLevel pre-tokenizer), so
no merge crosses a word boundary; merges are then applied by rank. Every byte has a token, so
every text and every byte string round-trips: decode(encode(s)) == s.

Training and encoding run in Hugging Face `tokenizers` (Rust, fast); this module only fixes the
numbering, adds the end-of-text token and gives byte-exact encode_bytes/decode_bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"
TOKENIZER_FILE = DATA / "tokenizer.json"
EOT = "<|endoftext|>"
N_BYTES = 256
N_MERGES = 8192
# A run's own tokenizer (TrainConfig.bpe_merges) learns its merges on the first BPE_STORIES shipped
# stories: enough text for the commonest words of all the stories, little enough for plain-Python
# BPE (the learner's train_bpe) to learn a few hundred merges in seconds (bench/tokenizer.py).
BPE_STORIES = 300


class TokenizerError(ValueError):
    """A tokenizer file that cannot be read, or ids a tokenizer cannot decode."""


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte: Hugging Face's ByteLevel writes tokens with it
    (a space is 'Ġ', a newline 'Ċ'). Printable bytes stand for themselves."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _hf():
    try:
        import tokenizers
    except ImportError as exc:   # pragma: no cover - depends on the install
        raise ImportError("the tokenizer needs Hugging Face `tokenizers`: pip install 'andrea-course[train]'") from exc
    return tokenizers


class Tokenizer:
    """Byte-level BPE. ids b < 256 are bytes, 256 + r is merge r, eot_id is <|endoftext|>."""

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        vocab = hf_tokenizer.get_vocab(with_added_tokens=True)
        self.vocab_size = len(vocab)
        if EOT not in vocab or vocab[EOT] != self.vocab_size - 1:
            raise TokenizerError(f"the tokenizer must end with {EOT!r} as its last id")
        self.eot_id = vocab[EOT]
        char_to_byte = {c: b for b, c in bytes_to_unicode().items()}
        table: list[bytes] = [b""] * self.vocab_size
        for token, i in vocab.items():
            table[i] = token.encode("utf-8") if i == self.eot_id else bytes(char_to_byte[c] for c in token)
        if any(table[b] != bytes([b]) for b in range(N_BYTES)):
            raise TokenizerError("ids 0..255 must be the 256 single bytes in byte order")
        self.token_bytes_table = table
        model = json.loads(hf_tokenizer.to_str())["model"]
        merges = [m.split(" ") if isinstance(m, str) else m for m in model["merges"]]
        self.merges = [(vocab[a], vocab[b]) for a, b in merges]    # rank r: pair of ids -> 256 + r
        self.hash = hashlib.sha256(hf_tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
        self._ordinary = None

    # ----- encoding -----
    def encode(self, text: str) -> list[int]:
        """Token ids of a text. The literal text <|endoftext|> becomes eot_id."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}; for bytes use encode_bytes")
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Many texts at once (in parallel threads). The literal text <|endoftext|> becomes eot_id."""
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def encode_ordinary_batch(self, texts: list[str]) -> list[list[int]]:
        """Many texts at once, every character as text: a literal "<|endoftext|>" inside a text
        is spelled with ordinary tokens, never eot_id. What data preparation uses, so only the
        document boundaries that prepare adds are end-of-text tokens."""
        if self._ordinary is None:
            self._ordinary = _hf().Tokenizer.from_str(self.hf.to_str())
            self._ordinary.encode_special_tokens = True
        return [e.ids for e in self._ordinary.encode_batch(list(texts), add_special_tokens=False)]

    def encode_bytes(self, data: bytes) -> list[int]:
        """Token ids of any byte string, valid UTF-8 or not: stray bytes get their byte's id."""
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"encode_bytes takes bytes, got {type(data).__name__}")
        text = bytes(data).decode("utf-8", errors="surrogateescape")
        ids, run = [], []
        for ch in text:
            if "\udc80" <= ch <= "\udcff":          # a byte that is not valid UTF-8
                if run:
                    ids += self.encode("".join(run))
                    run = []
                ids.append(ord(ch) - 0xDC00)
            else:
                run.append(ch)
        if run:
            ids += self.encode("".join(run))
        return ids

    # ----- decoding -----
    def decode_bytes(self, ids) -> bytes:
        """The exact bytes of a list of ids."""
        table, V = self.token_bytes_table, self.vocab_size
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < V:
                raise TokenizerError(f"token id {i!r} is outside the vocabulary [0, {V})")
        return b"".join(table[i] for i in ids)

    def decode(self, ids) -> str:
        """Text of a list of ids; bytes that do not form UTF-8 (a cut character) become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        return self.decode_bytes([i])

    # ----- files -----
    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        self.hf.save(str(tmp))
        os.replace(tmp, path)
        return path

    def __repr__(self) -> str:
        return f"Tokenizer(V={self.vocab_size}, merges={len(self.merges)}, hash={self.hash})"


def build(merges: list[tuple[str, str]]) -> Tokenizer:
    """A Tokenizer from merges written in ByteLevel characters (rank order), bytes in byte order."""
    tk = _hf()
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(N_BYTES)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    hf = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=[tuple(m) for m in merges]))
    hf.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = tk.decoders.ByteLevel()
    hf.add_special_tokens([tk.AddedToken(EOT, special=True, normalized=False)])
    return Tokenizer(hf)


def from_merges(merges: list[tuple[int, int]]) -> Tokenizer:
    """The Tokenizer of merges given as pairs of ids (merge r makes id 256 + r, exercises/bpe.py's
    numbering); the same merges give the same tokenizer, hash included, as train_tokenizer."""
    table = [bytes([b]) for b in range(N_BYTES)]
    for r, pair in enumerate(merges):
        a, b = pair
        if not (0 <= a < len(table) and 0 <= b < len(table)):
            raise TokenizerError(f"merge {r} joins ids {a} and {b}, but only ids below {len(table)} exist by then")
        table.append(table[a] + table[b])
    b2u = bytes_to_unicode()
    text = lambda i: "".join(b2u[byte] for byte in table[i])
    tok = build([(text(a), text(b)) for a, b in merges])
    if tok.merges != [tuple(m) for m in merges]:
        raise TokenizerError("two merges make the same token: a byte-level BPE's merges each make a new one")
    return tok


class PiecesTokenizer(Tokenizer):
    """A byte-level BPE run by functions handed in: merges learned by someone's train_bpe, text
    encoded by their encode(text, merges) and decoded by their decode(ids, merges) (exercises/
    bpe.py's pieces). Numbered as Tokenizer, whose Hugging Face twin of the same merges it keeps
    for saving (andrea-sample reads RUN/tokenizer.json) and for its hash.

    Text is encoded word by word (GPT-2's pattern, as encode itself cuts it), each distinct word
    once: a corpus of 3 MB has only about 5,000 of them."""

    corpus_key = None           # its tokens are its own: never shared with the library's (data.py)

    def __init__(self, merges, encode, decode):
        merges = [(int(a), int(b)) for a, b in merges]
        super().__init__(from_merges(merges).hf)
        self._encode, self._decode = encode, decode
        self._words: dict[str, list[int]] = {}
        self._checked = False

    def _words_encoded(self, text: str) -> list[int]:
        out = []
        for word in word_strings(text):
            ids = self._words.get(word)
            if ids is None:
                ids = self._words[word] = [int(i) for i in self._encode(word, self.merges)]
            out.extend(ids)
        if not self._checked and text:
            whole = [int(i) for i in self._encode(text, self.merges)]
            if whole != out:
                raise TokenizerError("encode(text) differs from encoding its words one at a time: a byte-level "
                                     "BPE merges only inside words (cut with split_words' pattern)")
            self._checked = True
        return out

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}; for bytes use encode_bytes")
        parts = text.split(EOT)
        out = self._words_encoded(parts[0])
        for part in parts[1:]:
            out += [self.eot_id] + self._words_encoded(part)
        return out

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_ordinary_batch(self, texts: list[str]) -> list[list[int]]:
        return [self._words_encoded(t) for t in texts]

    def decode(self, ids) -> str:
        ids = ids.tolist() if hasattr(ids, "tolist") else [int(i) for i in ids]
        self.decode_bytes(ids)                        # every id in the vocabulary, or TokenizerError
        parts, run = [], []
        for i in ids + [self.eot_id]:
            if i == self.eot_id:
                parts.append(self._decode(run, self.merges) if run else "")
                run = []
            else:
                run.append(i)
        return EOT.join(parts)

    def __repr__(self) -> str:
        return f"PiecesTokenizer(V={self.vocab_size}, merges={len(self.merges)}, hash={self.hash})"


def bpe_text(stories: list[str]) -> str:
    """The text a run's own BPE learns from: the stories, each ending in a newline."""
    return "".join(story + "\n" for story in stories)


_RUN_TOKENIZERS: dict[tuple, Tokenizer] = {}     # (n_merges, the BPE's functions) -> its tokenizer


def run_tokenizer(n_merges: int, bpe=None) -> Tokenizer:
    """A run's own tokenizer (TrainConfig.bpe_merges): n_merges merges learned on the first
    BPE_STORIES shipped stories by `bpe`, an object with exercises/bpe.py's train_bpe(text,
    n_merges), encode(text, merges) and decode(ids, merges), which then also encode and decode;
    with bpe None, by Hugging Face tokenizers (the same merges: tests/train/test_tokenizer.py).

    Made once per process for the same functions (a resumed run, the engine's run beside
    yours), and its tokens of the shipped stories with it (data.py caches them by corpus_key)."""
    from .corpus import load_corpus
    fns = (bpe.train_bpe, bpe.encode, bpe.decode) if bpe is not None else ()
    key = (n_merges, *fns)
    if key in _RUN_TOKENIZERS:
        return _RUN_TOKENIZERS[key]
    text = bpe_text(load_corpus()[:BPE_STORIES])
    start = time.perf_counter()
    if bpe is None:
        tok = train_tokenizer([text], n_merges)
    else:
        tok = PiecesTokenizer(bpe.train_bpe(text, n_merges), *fns[1:])
        tok.corpus_key = (tok.hash, "pieces", len(_RUN_TOKENIZERS))    # kept below: never another's
    tok.learned_in = time.perf_counter() - start                      # seconds
    if len(tok.merges) != n_merges:
        raise TokenizerError(f"the first {BPE_STORIES} stories gave {len(tok.merges)} merges, not the "
                             f"{n_merges} asked for (bpe_merges): ask for fewer")
    _RUN_TOKENIZERS[key] = tok
    return tok


def train_tokenizer(texts, n_merges: int = N_MERGES) -> Tokenizer:
    """Train byte-level BPE on an iterable of documents with Hugging Face's BpeTrainer."""
    tk = _hf()
    hf = tk.Tokenizer(tk.models.BPE())
    hf.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = tk.trainers.BpeTrainer(vocab_size=N_BYTES + n_merges, show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
                                     special_tokens=[])
    hf.train_from_iterator(texts, trainer)
    model = json.loads(hf.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return build(merges)


def load_tokenizer(path: str | os.PathLike | None = None) -> Tokenizer:
    """The shipped tokenizer (andrea_course/data/tokenizer.json), or one saved at `path`."""
    path = Path(path) if path is not None else TOKENIZER_FILE
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer at {path}")
    try:
        hf = _hf().Tokenizer.from_file(str(path))
    except Exception as exc:
        raise TokenizerError(f"{path} is not a readable tokenizer file: {exc}") from exc
    return Tokenizer(hf)


def main(argv=None) -> int:
    """Retrain the shipped tokenizer on the shipped corpus (python -m andrea_course.train.tokenizer)."""
    from .corpus import load_corpus
    tok = train_tokenizer(load_corpus())
    if tok.vocab_size != N_BYTES + N_MERGES + 1:
        raise SystemExit(f"the corpus gave only {len(tok.merges)} merges, not {N_MERGES}")
    tok.save(TOKENIZER_FILE)
    print(f"wrote {TOKENIZER_FILE}: {tok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# ----- the from-scratch BPE's given rules (exercises/bpe.py uses them) -----
def word_strings(text: str) -> list[str]:
    """The words of `text` in order, cut with GPT-2's pattern (Hugging Face's ByteLevel
    pre-tokenizer): a word keeps its leading space; letters, digits and punctuation stay apart."""
    return [text[a:b] for _, (a, b) in _pre_tokenizer().pre_tokenize_str(text)]


@lru_cache(maxsize=1)
def _pre_tokenizer():
    return _hf().pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def words_in_order(text: str) -> list[tuple[int, ...]]:
    """The words of `text` in order, each a tuple of byte values, cut with GPT-2's pattern
    (word_strings), so no merge ever crosses a word."""
    return [tuple(word.encode("utf-8")) for word in word_strings(text)]


def split_words(text: str):
    """{word as a tuple of byte values: how often it occurs in `text`}."""
    from collections import Counter

    return Counter(words_in_order(text))


@lru_cache(maxsize=1)
def byte_order() -> tuple[int, ...]:
    """The rank of each byte in Hugging Face's trainer: bytes sorted by their printable stand-in."""
    stand_in = bytes_to_unicode()
    order = sorted(range(256), key=lambda b: stand_in[b])
    return tuple(order.index(b) for b in range(256))


def tie_key(pair: tuple[int, int]) -> tuple:
    """Which pair wins a tie in count: the smaller tie_key. Bytes rank in the library's order
    (byte_order), merged tokens after them, oldest first."""
    order = byte_order()
    return tuple(order[t] if t < 256 else t for t in pair)
