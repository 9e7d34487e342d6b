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
This is what Hugging Face `tokenizers` does; tests/test_bpe.py checks that your merges are exactly
the library's.
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
    ### BEGIN SOLUTION
    ### HINT: Every neighbouring pair inside a word occurs as often as the word does: walk each word's adjacent pairs and add the word's count to each pair's tally.
    ### API: collections.Counter, zip(word, word[1:])
    ### LINE: for word, n in words.items(): for pair in zip(word, word[1:]): counts[pair] += n
    counts = Counter()
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += n
    return dict(counts)
    ### END SOLUTION


def merge_pair(word: tuple, pair: tuple, new_id: int) -> tuple:
    """Replace every occurrence of `pair` in `word` by new_id, scanning left to right.

    merge_pair((7, 7, 7), (7, 7), 256) == (256, 7): after a merge, scanning goes on after it.
    """
    ### BEGIN SOLUTION
    ### HINT: Walk the word from left to right: where the pair starts, write the new id and step over both symbols; anywhere else copy the symbol and step over one. Going left to right, overlapping occurrences merge the leftmost first.
    ### API: a while loop over an index, list.append, tuple(list)
    ### LINE: if i + 1 < len(word) and (word[i], word[i + 1]) == pair: out.append(new_id); i += 2; else: out.append(word[i]); i += 1
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
    ### END SOLUTION


def most_frequent_pair(counts: dict):
    """The pair with the highest count; among equal counts, the one with the smallest tie_key.
    None when there is no pair left."""
    ### BEGIN SOLUTION
    ### HINT: The most frequent pair wins and, among pairs with the same count, the tie rule decides: one ordering key made of the count and the tie rule settles both. No counts, no pair.
    ### API: min with a key function, tie_key(p), -counts[p]
    ### LINE: return min(counts, key=lambda p: (-counts[p], tie_key(p))) if counts else None
    if not counts:
        return None
    return min(counts, key=lambda p: (-counts[p], tie_key(p)))
    ### END SOLUTION


def train_bpe(text: str, n_merges: int) -> list:
    """The first n_merges merges learned on `text`: [(a, b), ...], merge r makes token 256 + r.
    Stops early when no pair is left."""
    words = split_words(text)
    ### BEGIN SOLUTION
    ### HINT: Repeat: count the pairs, take the most frequent, give it the next free id (256 plus the merges so far) and merge it everywhere; stop early when nothing is left to merge. Two words can become the same word after a merge: add their counts.
    ### API: pair_counts, most_frequent_pair, merge_pair, collections.Counter
    ### LINE: pair = most_frequent_pair(pair_counts(words)); new_id = 256 + len(merges); merged[merge_pair(word, pair, new_id)] += n for every word; merges.append(pair)
    merges = []
    for _ in range(n_merges):
        pair = most_frequent_pair(pair_counts(words))
        if pair is None:
            break
        new_id = 256 + len(merges)
        merged = Counter()
        for word, n in words.items():
            merged[merge_pair(word, pair, new_id)] += n
        words = merged
        merges.append(pair)
    return merges
    ### END SOLUTION


def encode(text: str, merges: list) -> list:
    """Token ids of `text`: per word, its bytes, then the merges applied in the order they were
    learned (always the earliest merge that still applies), words concatenated."""
    rank = {tuple(pair): r for r, pair in enumerate(merges)}
    ids = []
    for word in words_in_order(text):
        ### BEGIN SOLUTION
        ### HINT: Apply the learned merges in the order they were learned: among the word's neighbouring pairs that have a rank, merge the one learned first, and repeat until no pair has a rank.
        ### API: zip(word, word[1:]), min with key=rank.__getitem__, merge_pair(word, pair, 256 + rank[pair])
        ### LINE: pairs = [p for p in zip(word, word[1:]) if p in rank]; stop if none; pair = min(pairs, key=rank.__getitem__); word = merge_pair(word, pair, 256 + rank[pair])
        while len(word) > 1:
            pairs = [p for p in zip(word, word[1:]) if p in rank]
            if not pairs:
                break
            pair = min(pairs, key=rank.__getitem__)
            word = merge_pair(word, pair, 256 + rank[pair])
        ### END SOLUTION
        ids.extend(word)
    return ids


def decode(ids: list, merges: list) -> str:
    """The text of token ids: every token's bytes, joined, read as UTF-8 (broken characters
    become U+FFFD)."""
    ### BEGIN SOLUTION
    ### HINT: Rebuild the bytes of every id: the 256 base ids are single bytes, and each merged id is the bytes of its two parts joined. Join the bytes of all the ids and decode them as UTF-8, replacing what does not decode.
    ### API: bytes([b]), list.append, b''.join, .decode('utf-8', errors='replace')
    ### LINE: table = [bytes([b]) for b in range(256)]; for a, b in merges: table.append(table[a] + table[b]); return b''.join(table[i] for i in ids).decode('utf-8', errors='replace')
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    ### END SOLUTION
