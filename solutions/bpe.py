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
    ### BEGIN SOLUTION
    ### SUMMARY: Count every pair of neighbouring tokens, each word weighted by its count.
    ### HINT: A word that appears n times contributes each of its neighbouring pairs n times, not once. Slide a window of two along each word one step at a time, so that overlapping pairs (three equal tokens in a row hold two of them) all count, and add the word's count to the tally of every pair you see.
    ### API: Counter (collections.Counter) starts every key at 0 and adds up; zip(seq, seq[1:]) yields neighbouring pairs; dict(counter) gives a plain dict. `list(zip('abc', 'abc'[1:]))` gives `[('a', 'b'), ('b', 'c')]`; `c = Counter(); c['x'] += 3; c['x'] += 2; dict(c)` gives `{'x': 5}`
    ### LINE: counts = Counter(); for word, n in words.items(): for pair in zip(word, word[1:]): counts[pair] += n; return dict(counts)
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
    ### SUMMARY: The word with every occurrence of the pair replaced by the new id.
    ### HINT: Scan with a position that you move yourself. At each position, if this symbol and the next one form the pair, emit the new id and jump two ahead, so that a symbol a merge has used is not used again; otherwise emit the symbol and move one ahead. Make sure a next symbol exists before you look at it, and return a tuple, like the word you were given.
    ### API: A while loop over an index you advance by hand; list.append; tuple() of a list; two tuples compare with ==. `acc = []; acc.append(5); acc.append(6); tuple(acc)` gives `(5, 6)`; `('a', 'b') == tuple('ab')` gives `True`
    ### LINE: out, i = [], 0; while i < len(word): if i + 1 < len(word) and (word[i], word[i + 1]) == pair: out.append(new_id); i += 2; else: out.append(word[i]); i += 1; return tuple(out)
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
    ### SUMMARY: The most counted pair, ties broken by tie_key; None when there is none.
    ### HINT: Choosing the best pair is choosing the smallest value of one combined sort key: first the count, made negative so that the most frequent comes first, then the tie rule, which only decides among equal counts. An empty tally has no best pair at all, so answer nothing in that case.
    ### API: min(iterable, key=f) picks the item with the smallest f(item); tuples compare element by element, so a key of two parts sorts by the first, then the second; tie_key is given. `min(['bb', 'a', 'cc'], key=lambda w: (-len(w), w))` gives `'bb'`
    ### LINE: if not counts: return None; return min(counts, key=lambda p: (-counts[p], tie_key(p)))
    if not counts:
        return None
    return min(counts, key=lambda p: (-counts[p], tie_key(p)))
    ### END SOLUTION


def train_bpe(text: str, n_merges: int) -> list:
    """The first n_merges merges learned on `text`: [(a, b), ...], merge r makes token 256 + r.
    Stops early when no pair is left."""
    words = split_words(text)
    ### BEGIN SOLUTION
    ### SUMMARY: Learn up to n_merges merges: count, pick the best pair, merge it, repeat.
    ### HINT: Each round is your three functions in a row: tally the pairs of the current words, choose the winner, and rewrite every word with the winner replaced by a fresh id, 256 plus the number of merges learned so far. If the tally comes back empty, stop before n_merges. Distinct words stay distinct after a merge (the fresh id stands for that pair only), so each merged word keeps its count.
    ### API: pair_counts, most_frequent_pair and merge_pair are yours; a dict comprehension rebuilds a dict with new keys; len(list) counts the merges so far. `{k.upper(): v for k, v in {'ab': 2, 'c': 1}.items()}` gives `{'AB': 2, 'C': 1}`
    ### LINE: pair = most_frequent_pair(pair_counts(words)); stop if it is None; new_id = 256 + len(merges); merged[merge_pair(word, pair, new_id)] += n for every word and its count n; words = merged; merges.append(pair)
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
        ### SUMMARY: Merge the word's pairs, earliest-learned merge first, until no merge applies.
        ### HINT: A merge's rank is when it was learned, and encoding replays training's order: among the neighbouring pairs the word has right now, find those that were ever merged, apply the one with the lowest rank everywhere in the word, and look again, since a merge can create new pairs. Stop when no neighbouring pair has a rank, or a single token is left.
        ### API: zip(word, word[1:]) for neighbours; a list comprehension with an if keeps those found in the dict rank; min(pairs, key=rank.get) picks the lowest rank; merge r made token 256 + r; merge_pair is yours. `min([('a', 'b'), ('b', 'c')], key={('b', 'c'): 0, ('a', 'b'): 1}.get)` gives `('b', 'c')`
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
    ### SUMMARY: The text of a list of ids: every token's bytes, joined, decoded as UTF-8.
    ### HINT: Build the byte string of every token once: the first 256 tokens are single bytes, and merge r made token 256 + r out of two earlier tokens, so its bytes are theirs joined, which you can fill in order. Then glue the bytes of all the ids together and decode the whole at once, with broken sequences replaced rather than raising: one character can span several tokens.
    ### API: bytes([n]) is the one-byte string of n; + joins two byte strings and b''.join(list) many; .decode('utf-8', errors='replace'). `b''.join([bytes([104]), bytes([105])]).decode('utf-8')` gives `'hi'`; `bytes([255]).decode('utf-8', errors='replace') == chr(65533)` gives `True`
    ### LINE: table = [bytes([b]) for b in range(256)]; for a, b in merges: table.append(table[a] + table[b]); return b''.join(table[i] for i in ids).decode('utf-8', errors='replace')
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    ### END SOLUTION
