"""Activity 10 · Byte-level BPE from scratch, as the engine computes it (the shipped tokenizer
itself trains and encodes in Hugging Face `tokenizers`: train/tokenizer.py)."""
from collections import Counter

from ..train.tokenizer import split_words, tie_key, words_in_order
from ..lessons import lesson

__all__ = list(lesson("bpe").pieces)     # the pieces the learner writes (lessons.py)


def pair_counts(words: dict) -> dict:
    """{(a, b): occurrences of neighbours a, b over all words, weighted by each word's count}."""
    counts = Counter()
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += n
    return dict(counts)


def merge_pair(word: tuple, pair: tuple, new_id: int) -> tuple:
    """Every non-overlapping occurrence of `pair`, left to right, replaced by new_id."""
    out, i = [], 0
    while i < len(word):
        if tuple(word[i:i + 2]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def most_frequent_pair(counts: dict):
    """The pair with the highest count, ties to the smallest tie_key; None without pairs."""
    return min(counts, key=lambda p: (-counts[p], tie_key(p)), default=None)


def train_bpe(text: str, n_merges: int) -> list:
    words, merges = split_words(text), []
    for _ in range(n_merges):
        pair = most_frequent_pair(pair_counts(words))
        if pair is None:
            break
        new = Counter()
        for word, n in words.items():
            new[merge_pair(word, pair, 256 + len(merges))] += n
        words = new
        merges.append(pair)
    return merges


def encode(text: str, merges: list) -> list:
    """Per word: its bytes, then the lowest-ranked applicable merge until none applies."""
    rank = {tuple(p): r for r, p in enumerate(merges)}
    ids = []
    for word in words_in_order(text):
        while True:
            ranked = [rank[p] for p in zip(word, word[1:]) if p in rank]
            if not ranked:
                break
            r = min(ranked)
            word = merge_pair(word, tuple(merges[r]), 256 + r)
        ids.extend(word)
    return ids


def decode(ids: list, merges: list) -> str:
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
