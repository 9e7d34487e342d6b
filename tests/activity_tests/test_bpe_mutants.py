"""Mutation tests of andrea_course/activity_tests/test_bpe.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import importlib
from collections import Counter

from andrea_course import pieces

from mutant_checks import the_graded_test_names_the_mistake


# ----- the mutants: what a learner typically writes instead -----

def _merge_sparing_the_last_pair(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 2 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _train_bpe_slipping(weighted=True, replaced=True):
    """train_bpe with one slip: each merged word counted once (+= 1) whatever its count (not weighted),
    or the merged words added to the old ones, words.update(merged), instead of replacing them."""
    def train_bpe(text, n_merges):
        bpe = pieces.module("bpe")
        words, merges = bpe.split_words(text), []
        for _ in range(n_merges):
            pair = bpe.most_frequent_pair(bpe.pair_counts(words))
            if pair is None:
                break
            merged = Counter()
            for w, n in words.items():
                merged[bpe.merge_pair(w, pair, 256 + len(merges))] += n if weighted else 1
            if replaced:
                words = merged
            else:
                words.update(merged)
            merges.append(pair)
        return merges
    return train_bpe


def _encode_looking_once(text, merges):
    """Each word's pairs looked up once, before its first merge, then merged in rank order."""
    bpe = pieces.module("bpe")
    rank = {tuple(p): r for r, p in enumerate(merges)}
    ids = []
    for word in bpe.words_in_order(text):
        for r in sorted(rank[p] for p in zip(word, word[1:]) if p in rank):
            word = bpe.merge_pair(word, tuple(merges[r]), 256 + r)
        ids.extend(word)
    return ids


def _encode_each_word_once(text, merges):
    """encode over split_words(text): each distinct word once, in the order first seen."""
    bpe, solved = pieces.module("bpe"), importlib.import_module("solutions.bpe")
    return [i for word in bpe.split_words(text) for i in solved.encode(bytes(word).decode("utf-8"), merges)]


def _train_bpe_counting_once(text, n_merges):
    """The pairs counted before the first merge only, each winner then dropped from that tally."""
    bpe = pieces.module("bpe")
    words, merges = bpe.split_words(text), []
    counts = bpe.pair_counts(words)
    for _ in range(n_merges):
        pair = bpe.most_frequent_pair(counts)
        if pair is None:
            break
        counts.pop(pair)
        words = Counter({bpe.merge_pair(w, pair, 256 + len(merges)): n for w, n in words.items()})
        merges.append(pair)
    return merges


def _counts_across_words(words):
    """pair_counts over every word occurrence joined into one sequence: pairs across words counted."""
    seq = [t for word, n in words.items() for _ in range(n) for t in word]
    counts = {}
    for pair in zip(seq, seq[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


# ----- the twelfth fresh set's mutants -----

def _pairs_two_apart(words):
    counts = Counter()
    for word, n in words.items():
        for pair in zip(word, word[2:]):
            counts[pair] += n
    return dict(counts)


def _pairs_assigned(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = n
    return counts


def _pairs_over_keys(words):
    counts = Counter()
    for word, n in words:
        for pair in zip(word, word[1:]):
            counts[pair] += n
    return dict(counts)


def _merge_by_identity(word, pair, new_id):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) is pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def _merge_appending_the_pair(word, pair, new_id):
    return pieces.module("bpe").merge_pair(word, pair, pair)


def _merge_right_to_left(word, pair, new_id):
    out, i = [], len(word) - 1
    while i >= 0:
        if i >= 1 and (word[i - 1], word[i]) == pair:
            out.append(new_id)
            i -= 2
        else:
            out.append(word[i])
            i -= 1
    return tuple(reversed(out))


def _best_by_tie_key_first(counts):
    return min(counts, key=lambda p: (pieces.module("bpe").tie_key(p), -counts[p])) if counts else None


def _train_numbering_past_the_max(text, n_merges):
    bpe = pieces.module("bpe")
    words, merges = bpe.split_words(text), []
    for _ in range(n_merges):
        pair = bpe.most_frequent_pair(bpe.pair_counts(words))
        if pair is None:
            break
        new_id = max(max(w) for w in words) + 1
        merged = Counter()
        for word, n in words.items():
            merged[bpe.merge_pair(word, pair, new_id)] += n
        words = merged
        merges.append(pair)
    return merges


def _encode_smallest_pair_first(text, merges):
    bpe = pieces.module("bpe")
    rank = {tuple(pair): r for r, pair in enumerate(merges)}
    ids = []
    for word in bpe.words_in_order(text):
        while len(word) > 1:
            pairs = [p for p in zip(word, word[1:]) if p in rank]
            if not pairs:
                break
            pair = min(pairs)
            word = bpe.merge_pair(word, pair, 256 + rank[pair])
        ids.extend(word)
    return ids


def _decode_with(errors="replace", strip=False, part=lambda table, i: table[i], base=256):
    """decode with the errors mode, stripped or not, each merge's part i taken as part(table, i), the
    table's first `base` bytes."""
    def decode(ids, merges):
        table = [bytes([b]) for b in range(base)]
        for a, b in merges:
            table.append(part(table, a) + part(table, b))
        text = b"".join(table[i] for i in ids).decode("utf-8", errors=errors)
        return text.strip() if strip else text
    return decode


def _kept_between_calls(name, key):
    """The engine's `name`, its answers kept in a dict under key(*args): a cache keyed on too little."""
    kept = {}

    def piece(*args):
        k = key(*args)
        if k not in kept:
            kept[k] = pieces.get("bpe", name)(*args)
        return kept[k]
    return piece


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    # answers kept from an earlier call, under a key of fewer arguments than they depend on
    ("test_bpe.py", "test_encode_keeps_nothing_between_calls",
     {("bpe", "encode"): _kept_between_calls("encode", lambda text, merges: text)}, "an answer kept from an earlier call"),
    ("test_bpe.py", "test_decode_keeps_nothing_between_calls",
     {("bpe", "decode"): _kept_between_calls("decode", lambda ids, merges: len(merges))},
     "an answer kept from an earlier call"),
    # a merged word as a list (notebook 09)
    ("test_bpe.py", "test_merge_pair_scans_left_to_right",
     {("bpe", "merge_pair"): lambda word, pair, new_id: list(pieces.get("bpe", "merge_pair")(word, pair, new_id))},
     "a list returned"),
    ("test_bpe.py", "test_train_bpe_learns_the_librarys_merges", {("bpe", "train_bpe"): _train_bpe_counting_once},
     "the pairs counted once"),
    ("test_bpe.py", "test_train_bpe_learns_the_librarys_merges", {("bpe", "train_bpe"): _train_bpe_slipping(weighted=False)},
     "each merged word counted once"),
    ("test_bpe.py", "test_encode_matches_the_library", {("bpe", "encode"): _encode_looking_once},
     "each word's pairs looked up once"),
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count", {("bpe", "pair_counts"): _counts_across_words},
     "pairs across the boundary between two words"),
    # the twelfth fresh set's classes
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count",
     {("bpe", "pair_counts"): lambda words: dict(Counter(p for w, n in words.items()
                                                         for p in zip(w[::2], w[1::2]) for _ in range(n)))},
     "two tokens at a time"),
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count", {("bpe", "pair_counts"): _pairs_two_apart},
     "two places on"),
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count", {("bpe", "pair_counts"): _pairs_assigned},
     "each count assigned"),
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count", {("bpe", "pair_counts"): _pairs_over_keys},
     "the loop ran over the dict itself"),
    ("test_bpe.py", "test_merge_pair_scans_left_to_right", {("bpe", "merge_pair"): _merge_by_identity}, "nothing merged"),
    ("test_bpe.py", "test_merge_pair_scans_left_to_right", {("bpe", "merge_pair"): _merge_appending_the_pair},
     "the pair itself put into the word"),
    ("test_bpe.py", "test_merge_pair_scans_left_to_right", {("bpe", "merge_pair"): _merge_right_to_left},
     "scanned right to left"),
    ("test_bpe.py", "test_most_frequent_pair_breaks_ties_like_the_library",
     {("bpe", "most_frequent_pair"): _best_by_tie_key_first}, "tie_key first in min's key"),
    ("test_bpe.py", "test_train_bpe_learns_the_librarys_merges", {("bpe", "train_bpe"): _train_numbering_past_the_max},
     "one past the largest id"),
    ("test_bpe.py", "test_encode_matches_the_library", {("bpe", "encode"): _encode_smallest_pair_first},
     "the pair with the smallest ids merged first"),
    ("test_bpe.py", "test_encode_matches_the_library", {("bpe", "encode"): _encode_each_word_once},
     "each distinct word encoded once"),
    ("test_bpe.py", "test_decode_inverts_encode", {("bpe", "decode"): _decode_with(errors="ignore")}, "errors='ignore'"),
    ("test_bpe.py", "test_decode_inverts_encode", {("bpe", "decode"): _decode_with(strip=True)}, "stripped"),
    ("test_bpe.py", "test_decode_inverts_encode",                 # a part's id taken as its byte
     {("bpe", "decode"): _decode_with(part=lambda table, i: bytes([i % 256]))}, "each of the 73 merges with a merged part"),
    ("test_bpe.py", "test_decode_inverts_encode",                 # a part's bytes one token off
     {("bpe", "decode"): _decode_with(part=lambda table, i: table[i - (i >= 257)])}, "72 of the 120 merged tokens do not"),
    # the eleventh fresh set's classes
    ("test_bpe.py", "test_merge_pair_scans_left_to_right", {("bpe", "merge_pair"): _merge_sparing_the_last_pair},
     "never merged"),
    # the nineteenth fresh set's classes
    ("test_bpe.py", "test_decode_inverts_encode", {("bpe", "decode"): _decode_with(base=255)}, "built over range(255)"),
    ("test_bpe.py", "test_most_frequent_pair_breaks_ties_like_the_library",
     {("bpe", "most_frequent_pair"): lambda counts: list(counts)[-1] if counts else None}, "the last pair of the tally"),
    # the twenty-first fresh set's classes
    ("test_bpe.py", "test_train_bpe_learns_the_librarys_merges", {("bpe", "train_bpe"): _train_bpe_slipping(replaced=False)},
     "the merged words added next to the old ones"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
