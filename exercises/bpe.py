# Your work for notebooks/09_capstone.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 10 · The tokenizer: byte-level BPE from scratch.

A text is bytes (UTF-8). Start with 256 tokens, one per byte; then, again and again, find the
pair of neighbouring tokens that occurs most often and make it a new token. ANDREA's tokenizer
does this 8,192 times: V = 256 + 8,192 + 1 (end of text) = 8,449.

    words = split_words(text)               # {(byte, byte, ...): how often that word occurs}
    merges = train_bpe(text, n_merges)      # [(a, b), ...]: merge r makes token 256 + r
    ids = encode(text, merges)              # apply the merges, earliest first
    decode(ids, merges) == text

Text is first cut into words (GPT-2's rule: a word keeps its leading space; letters, digits and
punctuation stay apart), so merges never cross a word: " the" can become one token, "e. T" never.
This is what Hugging Face `tokenizers` does; the graded test of train_bpe checks that your
merges are exactly the library's.
"""
from collections import Counter

# Given (the course's tokenizer module, andrea_course/train/tokenizer.py):
#   split_words(text) -> {word as a tuple of byte values: count}, cut with GPT-2's pattern
#   words_in_order(text) -> the same words in order, repeats kept
#   tie_key(pair)     -> which pair wins a tie in count: the one with the smaller tie_key
from andrea_course.train.tokenizer import split_words, tie_key, words_in_order  # noqa: F401


def pair_counts(words: dict) -> dict:
    """How often each pair of neighbouring tokens occurs, over all words, each word weighted
    by its count.  words: {(t0, t1, ...): count}  ->  {(a, b): count}

    Overlapping pairs all count: the word (7, 7, 7) seen twice gives {(7, 7): 4}.
    """
    # Hint: Count every pair of neighbouring tokens, each word weighted by its count.
    # More help: hint("bpe.pair_counts") in the notebook, one level at a time.
    raise NotImplementedError('bpe.pair_counts: not implemented yet. Hint: Count every pair of neighbouring tokens, each word weighted by its count.')


def merge_pair(word: tuple, pair: tuple, new_id: int) -> tuple:
    """Replace every occurrence of `pair` in `word` by new_id, scanning left to right.

    merge_pair((7, 7, 7), (7, 7), 256) == (256, 7): after a merge, scanning goes on after it.
    """
    # Hint: The word with every occurrence of the pair replaced by the new id.
    # More help: hint("bpe.merge_pair") in the notebook, one level at a time.
    raise NotImplementedError('bpe.merge_pair: not implemented yet. Hint: The word with every occurrence of the pair replaced by the new id.')


def most_frequent_pair(counts: dict):
    """The pair with the highest count; among equal counts, the one with the smallest tie_key.
    None when there is no pair left."""
    # Hint: The most counted pair, ties broken by tie_key; None when there is none.
    # More help: hint("bpe.most_frequent_pair") in the notebook, one level at a time.
    raise NotImplementedError('bpe.most_frequent_pair: not implemented yet. Hint: The most counted pair, ties broken by tie_key; None when there is none.')


def train_bpe(text: str, n_merges: int) -> list:
    """The first n_merges merges learned on `text`: [(a, b), ...], merge r makes token 256 + r.
    Stops early when no pair is left."""
    words = split_words(text)
    # Hint: Learn up to n_merges merges: count, pick the best pair, merge it, repeat.
    # More help: hint("bpe.train_bpe") in the notebook, one level at a time.
    raise NotImplementedError('bpe.train_bpe: not implemented yet. Hint: Learn up to n_merges merges: count, pick the best pair, merge it, repeat.')


def encode(text: str, merges: list) -> list:
    """Token ids of `text`: per word, its bytes, then the merges applied in the order they were
    learned (always the earliest merge that still applies), words concatenated."""
    rank = {tuple(pair): r for r, pair in enumerate(merges)}
    ids = []
    for word in words_in_order(text):
        # Hint: Merge the word's pairs, earliest-learned merge first, until no merge applies.
        # More help: hint("bpe.encode") in the notebook, one level at a time.
        raise NotImplementedError('bpe.encode: not implemented yet. Hint: Merge the word\'s pairs, earliest-learned merge first, until no merge applies.')
        ids.extend(word)
    return ids


def decode(ids: list, merges: list) -> str:
    """The text of token ids: every token's bytes, joined, read as UTF-8 (broken characters
    become U+FFFD)."""
    # Hint: The text of a list of ids: every token's bytes, joined, decoded as UTF-8.
    # More help: hint("bpe.decode") in the notebook, one level at a time.
    raise NotImplementedError('bpe.decode: not implemented yet. Hint: The text of a list of ids: every token\'s bytes, joined, decoded as UTF-8.')
