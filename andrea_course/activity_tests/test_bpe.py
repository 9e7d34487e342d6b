"""Graded tests, activity 10 · The tokenizer: byte-level BPE from scratch, checked against
Hugging Face `tokenizers` (the library that makes ANDREA's real tokenizer)."""
from collections import Counter

from andrea_course.grading import (Case, Mismatch, Second, expect_cases, expect_equal, expect_fresh_calls, expect_runs,
                                   expect_true, graded)
from andrea_course import pieces
from andrea_course.train.tokenizer import train_tokenizer, word_strings

REF = pieces.module("bpe")
TEXT = ("Once upon a time, there was a little cat named Tom. Tom liked to play in the garden. "
        "One day, Tom found a shiny red ball under the tree! \"Look!\" said Tom. "
        "Zażółć gęślą jaźń: naïve café, 1234 apples and 56 pears.\n\nThe end. aaa aaaa")


def _words(text=TEXT):
    return dict(REF.split_words(text))


def _counts(words, weighted=True, overlapping=True, once_per_word=False, last=True, gap=1, assign=False, step=1):
    """pair_counts written with the typical slips: each word counted once (not by its count); a pair
    that overlaps the same pair just counted skipped; a pair counted once per word however often the
    word holds it (a set of the word's pairs); each token paired with the one `gap` places on
    (zip(word, word[2:]) for gap 2); the count assigned (counts[pair] = n: the last word's kept); the
    word read `step` tokens at a time (zip(word[::2], word[1::2]) for step 2)."""
    out = {}
    for word, n in words.items():
        previous = None
        pairs = list(zip(word[::step], word[gap::step]))
        if not last:
            pairs = pairs[:-1]
        if once_per_word:
            pairs = list(dict.fromkeys(pairs))
        for i, pair in enumerate(pairs):
            if not overlapping and previous == (i - 1, pair):
                previous = None
                continue
            out[pair] = (0 if assign else out.get(pair, 0)) + (n if weighted else 1)
            previous = (i, pair)
    return out


EACH_WORD_ONCE = "each word counted once, not by its count: add the word's count for every pair in it"
OVERLAPS_SKIPPED = ("overlapping pairs skipped: (7, 7, 7) holds the pair (7, 7) twice, at positions 0-1 and 1-2, and "
                    "counting counts both (merging, later, uses each token once)")
ONCE_PER_WORD = ("a pair counted once per word even where the word holds it several times (as with a set of the "
                 "word's pairs): add the word's count at every position where the pair occurs")


class _Items(list):
    """(pair, count) items in any order, in a list or a tuple (list(counts.items()), counts.most_common(), ...):
    equal to any sequence that holds the same items, never to a dict."""

    def __eq__(self, other):
        if isinstance(other, (dict, str, bytes)):
            return False
        try:
            return sorted(self) == sorted(tuple(item) for item in other)
        except TypeError:
            return False

    def __ne__(self, other):
        return not self == other

    __hash__ = None


LIST_OF_ITEMS = ("a list of (pair, count) returned, not a dict: return the tally itself, a dict {(a, b): count} "
                 "(dict(counts)), which most_frequent_pair looks pairs up in")


LAST_PAIR_MISSED = ("each word's last pair never counted: a word of n tokens has n - 1 neighbouring pairs, at i = 0 .. "
                    "n - 2, so loop over range(len(word) - 1) (or zip(word, word[1:]))")


SKIPPED_ONE = ("each token paired with the one two places on (zip(word, word[2:])), not with its neighbour: the "
               "neighbouring pairs are (word[i], word[i + 1]), zip(word, word[1:])")
ASSIGNED = ("each count assigned (counts[pair] = n), not added, so a pair kept the count of the last word it was "
            "seen in: add the word's count, counts[pair] += n")
TWO_AT_A_TIME = ("the word read two tokens at a time (zip(word[::2], word[1::2])): only the pairs that start at an "
                 "even position are counted; every neighbouring pair counts, zip(word, word[1:])")
KEYS_UNPACKED = ("the loop ran over the dict itself (for word, n in words), which yields its keys, the words, and "
                 "unpacked each word into 'word' and 'n': loop over words.items() for (word, count) pairs")


def _counts_over_keys(words):
    """pair_counts looping over the dict itself, `for word, n in words:` (each key unpacked)."""
    counts = {}
    for word, n in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def _across_words(pair_counts, *inputs) -> str | None:
    """What the learner's counts show, when on every input they hold pairs that no word contains and
    each such pair is a word's last token followed by a word's first: pairs across word boundaries."""
    extra = []
    for words in inputs:
        try:
            got = pair_counts(words)
        except Exception:                                   # noqa: BLE001 - the box says what it raised
            return None
        inside = {pair for word in words for pair in zip(word, word[1:])}
        ends, starts = {w[-1] for w in words}, {w[0] for w in words}
        odd = [pair for pair in (got if isinstance(got, dict) else ()) if pair not in inside]
        if not odd or not all(isinstance(p, tuple) and len(p) == 2 and p[0] in ends and p[1] in starts for p in odd):
            return None
        extra += odd
    return (f"your counts hold pairs that no word contains ({', '.join(map(str, extra[:3]))}), each a word's last "
            f"token followed by a word's first: pairs across the boundary between two words were counted (the words "
            f"joined into one sequence?); a pair is counted inside a word only")


def _counts_case(pair_counts, words):
    want = REF.pair_counts(words)
    mistakes = {EACH_WORD_ONCE: _counts(words, weighted=False), OVERLAPS_SKIPPED: _counts(words, overlapping=False),
                ONCE_PER_WORD: _counts(words, once_per_word=True), LIST_OF_ITEMS: _Items(want.items()),
                LAST_PAIR_MISSED: _counts(words, last=False), SKIPPED_ONE: _counts(words, gap=2),
                ASSIGNED: _counts(words, assign=True), TWO_AT_A_TIME: _counts(words, step=2)}
    return Case(f"pair_counts({words})", lambda: pair_counts(words), want,
                {name: wrong for name, wrong in mistakes.items() if wrong != want})


@graded("bpe.pair_counts", points=2)
def test_pair_counts_weights_each_word_by_its_count(student):
    pair_counts = student.piece("bpe", "pair_counts")
    words, words2 = {(1, 2, 3): 2, (2, 3): 5, (7,): 9}, {(4, 5): 3, (5, 4, 5): 2}
    expect_runs(lambda: pair_counts(words), f"pair_counts({words})",
                mistakes={KEYS_UNPACKED: lambda: _counts_over_keys(words)},
                second=Second(lambda: pair_counts(words2), None, {KEYS_UNPACKED: lambda: _counts_over_keys(words2)}),
                hint="loop over words.items(): each word with its count")
    try:
        expect_cases(_counts_case(pair_counts, words2),              # skipped overlaps and assigned counts differ here
                     _counts_case(pair_counts, words), exact=True,
                     hint="add the word's count for every neighbouring pair; a one-token word has no pair")
    except Mismatch as failed:
        seen = None if failed.mistake or failed.relation else _across_words(pair_counts, words2, words)
        if seen is None:
            raise
        raise Mismatch(failed.what, failed.problem, "count the pairs inside each word, zip(word, word[1:]), "
                       "word by word", mistake=seen, differences=failed.differences) from None


@graded("bpe.pair_counts", points=1)
def test_pair_counts_counts_overlapping_pairs(student):
    pair_counts = student.piece("bpe", "pair_counts")
    # (7, 7) also a word of its own: writing counts[pair] = n (the last count kept, not added) is no set of pairs
    expect_cases(_counts_case(pair_counts, {(7, 7, 7): 2}),
                 _counts_case(pair_counts, {(7, 7, 7, 7): 3, (5, 5, 5): 1, (7, 7): 2, (1, 2, 3, 4): 1}), exact=True,
                 hint="(7, 7, 7) has two neighbouring pairs (7, 7), both count")
    expect_equal(pair_counts(_words()), REF.pair_counts(_words()), "pair_counts of a paragraph's words")


def _merged_at_every_occurrence(word, pair, new):
    """The slip: every position where the pair starts becomes the new token, overlaps included."""
    return tuple(new for i in range(len(word) - 1) if tuple(word[i:i + 2]) == pair)


def _merged_stepping_by_one(word, pair, new):
    """The slip: after a merge, the scan moves on by one, so the pair's second symbol is read again
    (kept as it is, or merged once more with the symbol after it)."""
    out = []
    for i in range(len(word)):
        out.append(new if tuple(word[i:i + 2]) == pair else word[i])
    return tuple(out)


MERGE_TWICE = "overlapping occurrences merged twice: after merging a pair, continue after it (each token is used once)"
LAST_PAIR = ("a pair at the end of the word never merged: the scan stops one symbol early; the pair (word[i], "
             "word[i + 1]) exists while i + 1 < len(word), the last one at i = len(word) - 2")
STEP_BY_ONE = ("after a merge, moved on by one symbol instead of two, so the pair's second symbol was used again: "
               "after emitting the new id, jump two ahead (i += 2)")
NOTHING_MERGED = ("nothing merged: the word came back as it was, although it holds the pair. Compare the two symbols "
                  "with the pair by value, (word[i], word[i + 1]) == pair; `is` asks whether they are the same object, "
                  "and a tuple built from the word never is the pair object")
PAIR_APPENDED = ("the pair itself put into the word where the new token belongs (out.append(pair)): append new_id, the "
                 "one id that stands for the pair")
RIGHT_TO_LEFT = ("scanned right to left, so overlapping pairs were merged from the end: (7, 7, 7) gave (7, 256); scan "
                 "left to right, from i = 0, and after a merge go on after it")


def _merged_right_to_left(word, pair, new):
    """The slip: the scan starts at the word's end, so of overlapping pairs the last is merged."""
    return tuple(reversed(REF.merge_pair(tuple(reversed(word)), tuple(reversed(pair)), new)))


@graded("bpe.merge_pair", points=2)
def test_merge_pair_scans_left_to_right(student):
    merge_pair = student.piece("bpe", "merge_pair")

    def case(word, pair, new):
        want = tuple(REF.merge_pair(word, pair, new))
        overlapping = pair[0] == pair[1] and any(word[i:i + 3] == pair[:1] * 3 for i in range(len(word)))  # (7, 7, 7)
        mistakes = {MERGE_TWICE: _merged_at_every_occurrence(word, pair, new) if overlapping else None,
                    STEP_BY_ONE: _merged_stepping_by_one(word, pair, new),
                    LAST_PAIR: tuple(REF.merge_pair(word[:-1], pair, new)) + word[-1:],
                    NOTHING_MERGED: tuple(word), PAIR_APPENDED: tuple(REF.merge_pair(word, pair, pair)),
                    RIGHT_TO_LEFT: _merged_right_to_left(word, pair, new)}
        return Case(f"merge_pair({word}, {pair}, {new})", lambda: tuple(merge_pair(word, pair, new)), want,
                    {name: wrong for name, wrong in mistakes.items() if wrong != want})
    expect_cases(case((1, 2, 3, 1, 2), (1, 2), 256), case((7, 7, 7), (7, 7), 256), case((7, 7, 7, 7, 7), (7, 7), 300),
                 case((5, 7, 1, 7, 1), (7, 1), 257), exact=True, hint="after merging, continue after the merged pair: each symbol is used once "
                                  "(in (7, 7, 7) the middle 7 is used once)")
    expect_equal(tuple(merge_pair((5,), (5, 6), 300)), (5,), "merge_pair((5,), (5,6), 300)")
    expect_equal(tuple(merge_pair((1, 2), (2, 1), 300)), (1, 2), "merge_pair((1,2), (2,1), 300): order matters")
    out = merge_pair((1, 2, 3), (1, 2), 256)
    expect_true(isinstance(out, tuple), "merge_pair((1,2,3), (1,2), 256)", f"returns a {type(out).__name__}, not a tuple",
                "return tuple(...) of what you built: train_bpe keeps its words as dict keys, and a list cannot be one",
                mistake=f"a {type(out).__name__} returned: a merged word must be a tuple, like the word it was given")


def _most_frequent_with(counts, slip=None):
    """most_frequent_pair, or with a typical slip: "largest" (a tie to the largest tie_key), "first"
    (tie_key ignored: a tie to the pair counted first), "by_id" (a tie to the smallest ids), "least"
    (the least frequent pair, ties to the smallest tie_key), "tie_first" (min's key (tie_key(p), -counts[p]):
    the smallest tie_key whatever its count)."""
    if slip == "tie_first":
        return min(counts, key=lambda p: (REF.tie_key(p), -counts[p]))
    top = min(counts.values()) if slip == "least" else max(counts.values())
    tied = [p for p in counts if counts[p] == top]
    return {None: lambda: min(tied, key=REF.tie_key), "least": lambda: min(tied, key=REF.tie_key),
            "largest": lambda: max(tied, key=REF.tie_key), "first": lambda: tied[0], "by_id": lambda: min(tied)}[slip]()


LARGEST_KEY = ("max(counts) compares the pairs themselves (a dict iterates over its keys), not their counts: pick by "
               "count, max(counts, key=counts.get), or min with the key (-counts[p], tie_key(p))")
MOST_FREQUENT_MISTAKES = {
    "the least frequent pair picked: the most frequent one wins, so negate the count in min's key (-counts[p]) "
    "or use max": "least",
    "a tie went to the pair with the largest tie_key: among equal counts take the one with the smallest "
    "tie_key(pair)": "largest",
    "tie_key ignored, so a tie went to the pair counted first: among equal counts take the one with the smallest "
    "tie_key(pair)": "first",
    "ties broken by plain id order (the space byte 32 sorts after letters in the library's order): take "
    "min(tied, key=tie_key)": "by_id",
    "tie_key first in min's key, (tie_key(p), -counts[p]), so the tie rule decided before the count and a rarer "
    "pair won: the count comes first, (-counts[p], tie_key(p)), and tie_key only breaks ties": "tie_first"}
EMPTY_COUNTS = {  # no None for an empty tally: how each way of picking the best pair raises then
    "no None for an empty tally: min() of no pairs raised ValueError; return None when counts is empty": min,
    "no None for an empty tally: max() of no pairs raised ValueError; return None when counts is empty": max,
    "no None for an empty tally: taking the first of an empty list raised IndexError; return None when counts is "
    "empty": lambda pairs, key: sorted(pairs, key=key)[0]}


WITH_COUNT = ("(pair, count) returned, not the pair: return only the winning pair (a, b), which train_bpe "
              "merges; its count only decides which pair wins")

LAST_OF_TALLY = ("the last pair of the tally returned, whatever its count: the best count so far is never updated in "
                 "the loop (best_n = n when a pair beats it), so every pair beats the starting one; keep the pair "
                 "and its count together, or use min(counts, key=lambda p: (-counts[p], tie_key(p)))")


def _most_frequent_case(most_frequent_pair, counts, what):
    want = _most_frequent_with(counts)
    mistakes = {name: _most_frequent_with(counts, slip) for name, slip in MOST_FREQUENT_MISTAKES.items()}
    mistakes[WITH_COUNT] = (want, counts[want])
    if max(counts) not in mistakes.values():
        mistakes[LARGEST_KEY] = max(counts)
    if list(counts)[-1] not in mistakes.values():
        mistakes[LAST_OF_TALLY] = list(counts)[-1]
    return Case(f"most_frequent_pair({counts}){what}", lambda: most_frequent_pair(counts), want,
                {name: wrong for name, wrong in mistakes.items() if wrong != want})


@graded("bpe.most_frequent_pair", points=1)
def test_most_frequent_pair_breaks_ties_like_the_library(student):
    most_frequent_pair = student.piece("bpe", "most_frequent_pair")
    case = lambda counts, what="": _most_frequent_case(most_frequent_pair, counts, what)
    expect_cases(case({(300, 2): 4, (1, 2): 3, (104, 101): 5, (7, 9): 4}, ": the most frequent pair"),
                 case({(97, 98): 2, (32, 116): 7, (116, 104): 1, (101, 32): 6}, ": the most frequent pair"),
                 case({(200, 1): 2, (10, 20): 9, (30, 5): 1, (101, 114): 4}, ": the most frequent pair"), exact=True,
                 hint="the pair with the highest count wins")
    raising = lambda counts: {name: lambda pick=pick: pick(counts, key=lambda p: (-counts[p], REF.tie_key(p)))
                              for name, pick in EMPTY_COUNTS.items()}
    one_token_words = REF.pair_counts({(7,): 3, (104,): 1})             # {}: words of one token hold no pair
    got = expect_runs(lambda: most_frequent_pair({}), "most_frequent_pair({})", mistakes=raising({}),
                      second=Second(lambda: most_frequent_pair(one_token_words), None, raising(one_token_words)),
                      hint="no pair left: return None")
    expect_equal(got, None, "most_frequent_pair({})", hint="no pair left: return None")
    expect_cases(case({(116, 104): 3, (300, 101): 3, (104, 101): 3, (32, 116): 3}, ": a tie"),
                 case({(300, 101): 2, (104, 101): 2, (32, 116): 2}, ": a tie"),
                 case({(32, 97): 4, (97, 98): 4, (258, 32): 4}, ": a tie"),
                 exact=True, hint="among equal counts take the pair with the smallest tie_key(pair)")


def _trained_with(text, n_merges, first_id=256, update=True, stop=True, merge_none=False, advance=True, fewer=0,
                  whole=False, recount=True, weighted=True, past_max=False, added=False):
    """train_bpe as the engine writes it, or with a typical slip: new ids from first_id (257), the
    words never updated after a merge, no stop when no pair is left (None appended then; with
    merge_none, merge_pair called with None, which raises as the engine's merge_pair does when a
    graded test runs the learner's train_bpe), every merge making the same id (not advance), `fewer`
    merges than asked (range(n_merges - 1)), the text's bytes one word (whole: not cut into words),
    the pairs counted once before the first merge (not recount: each winner dropped from that tally),
    every merged word counted once whatever its count (not weighted), each new id one past the largest id
    in the words (past_max: max(max(w) for w in words) + 1), the merged words added to the old ones (added:
    words.update(merged))."""
    words, merges = REF.split_words(text), []
    if whole:
        words = Counter([tuple(text.encode("utf-8"))])
    counts = REF.pair_counts(words)
    for _ in range(max(0, n_merges - fewer)):
        pair = REF.most_frequent_pair(REF.pair_counts(words) if recount else counts)
        counts.pop(pair, None)
        if pair is None and stop:
            break
        merged = Counter()
        for word, n in words.items():
            new_id = first_id + (len(merges) if advance else 0)
            if past_max:
                new_id = max(max(w) for w in words) + 1
            merged[word if pair is None and not merge_none else REF.merge_pair(word, pair, new_id)] += n if weighted else 1
        if added:
            words.update(merged)
        elif update:
            words = merged
        merges.append(pair)
    return merges


TRAIN_MISTAKES = {
    "the new tokens numbered from 257, not 256: merge r makes token 256 + r, so the first merge's token is 256 "
    "(256 + len(merges) before appending the pair)": dict(first_id=257),
    "the same pair won every round: after a merge the pairs were counted on words that had not changed (the words "
    "not replaced by the merged words, or the pairs not counted again); before each round, words = merged and "
    "count the pairs of those words": dict(update=False),
    "no stop when no pair is left: most_frequent_pair gave None and it was added to the merges; break out of the "
    "loop when the pair is None": dict(stop=False),
    "the pairs counted once, before the first merge, and never again: a merge changes the words and so their "
    "pairs; count the pairs of the current words in every round": dict(recount=False),
    "each merged word counted once (+= 1) instead of as often as it occurs: a word seen n times keeps its count n "
    "after a merge (merged[new_word] += n)": dict(weighted=False),
    "every merge made token 256, so later merges reused the first one's id: merge r makes token 256 + r, so "
    "compute the new id as 256 + len(merges) in each round": dict(advance=False),
    "one merge fewer than asked (off by one): loop n_merges times, for _ in range(n_merges), stopping early "
    "only when no pair is left": dict(fewer=1),
    "the text not cut into words, so merges crossed word boundaries (a word's last letter with the next space): "
    "count pairs within the words of split_words(text), each word weighted by its count": dict(whole=True),
    "each new token numbered one past the largest id in the words (max(...) + 1): before the first merge that is "
    "one past the text's largest byte, not 256, so a merged token took the id of a byte; merge r makes token "
    "256 + r, 256 + len(merges)": dict(past_max=True),
    "the merged words added next to the old ones (words.update(merged), a Counter's update adds counts) instead of "
    "replacing them: the old words keep their pairs, so a pair already merged keeps being counted; words = merged":
        dict(added=True)}
NO_STOP_MERGING_NONE = ("no stop when no pair is left: most_frequent_pair gave None and merge_pair was called with "
                        "it; break out of the loop when the pair is None")


def _pairs(merges):
    return [m if m is None else tuple(m) for m in merges]


def _train_case(train_bpe, text, n, want, what):
    mistakes = {name: _trained_with(text, n, **slip) for name, slip in TRAIN_MISTAKES.items()}
    return Case(what, lambda: _pairs(train_bpe(text, n)), want,
                {name: wrong for name, wrong in mistakes.items() if wrong != want})


@graded("bpe.train_bpe", points=3)
def test_train_bpe_learns_the_librarys_merges(student):
    train_bpe = student.piece("bpe", "train_bpe")
    expect_cases(*(_train_case(train_bpe, TEXT, n, [tuple(m) for m in train_tokenizer([TEXT], n_merges=n).merges],
                               f"train_bpe(TEXT, {n}) against Hugging Face's BpeTrainer") for n in (1, 20, 120)),
                 exact=True, hint="count pairs over all words, pick the most frequent (ties: tie_key), merge it "
                                  "in every word, new id = 256 + number of merges so far")


@graded("bpe.train_bpe", points=1)
def test_train_bpe_stops_when_no_pair_is_left(student):
    train_bpe = student.piece("bpe", "train_bpe")
    hint = "after the last merge no word has two tokens, so no pair is left: stop"
    raising = lambda text, n: {NO_STOP_MERGING_NONE: lambda: _trained_with(text, n, stop=False, merge_none=True)}
    expect_runs(lambda: train_bpe("ab ab", 50), "train_bpe('ab ab', 50)", mistakes=raising("ab ab", 50),
                second=Second(lambda: train_bpe("abc abc", 10), None,
                              raising("abc abc", 10)), hint=hint)
    expect_cases(_train_case(train_bpe, "ab ab", 50, [(97, 98), (32, 256)], "train_bpe('ab ab', 50)"),
                 _train_case(train_bpe, "abc abc", 10, [(97, 98), (256, 99), (32, 257)], "train_bpe('abc abc', 10)"),
                 _train_case(train_bpe, "abcd abcd", 10, [(97, 98), (99, 100), (256, 257), (32, 258)],
                             "train_bpe('abcd abcd', 10)"),
                 exact=True, hint=hint)


def _latin1_words(text, how):
    """The words' bytes when the text's UTF-8 bytes are read through Latin-1 (one character per byte):
    "cut" the Latin-1 string cut into words, each character's byte kept; "twice" the Latin-1 string cut
    into words and encoded to UTF-8 again; "per_word" each word's bytes read as Latin-1 and encoded again."""
    read = text.encode("utf-8").decode("latin-1")
    if how == "cut":
        return [tuple(word.encode("latin-1")) for word in word_strings(read)]
    if how == "twice":
        return [tuple(word.encode("utf-8")) for word in word_strings(read)]
    return [tuple(bytes(word).decode("latin-1").encode("utf-8")) for word in REF.words_in_order(text)]


def _encode_with(text, merges, pick="lowest", offset=256, latin1=None, distinct=False):
    """encode as the engine does, or with a typical slip: pick the latest-learned merge ("latest") or
    the leftmost applicable pair ("leftmost") or the pair of smallest ids (min(pairs): "smallest") instead of
    the lowest-ranked, stop after one merge per
    word ("single"), or merge only the pairs
    the word had before its first merge, in rank order ("once"); merged tokens numbered from
    `offset` (0: the rank itself); the text's bytes read through Latin-1 (latin1: how, _latin1_words); each
    distinct word once, in the order first seen (distinct: as iterating over split_words(text) gives them)."""
    rank = {tuple(p): r for r, p in enumerate(merges)}
    ids = []
    words = REF.words_in_order(text) if latin1 is None else _latin1_words(text, latin1)
    for word in (dict.fromkeys(words) if distinct else words):
        if pick == "once":
            for r in sorted(rank[p] for p in zip(word, word[1:]) if p in rank):
                word = REF.merge_pair(word, tuple(merges[r]), offset + r)
        while pick != "once":
            ranked = [rank[p] for p in zip(word, word[1:]) if p in rank]
            if not ranked:
                break
            if pick == "smallest":                    # min(pairs): the pair of smallest ids, whatever its rank
                r = rank[min(p for p in zip(word, word[1:]) if p in rank)]
            else:
                r = {"lowest": min, "latest": max, "leftmost": lambda rs: rs[0], "single": min}[pick](ranked)
            word = REF.merge_pair(word, tuple(merges[r]), offset + r)
            if pick == "single":
                break
        ids.extend(word)
    return ids


ENCODE_MISTAKES = {"the latest-learned merge applied first: merges apply in the order they were learned, the lowest "
                   "rank first": dict(pick="latest"),
                   "the leftmost mergeable pair merged first: within a word, always apply the merge of lowest "
                   "rank among its pairs, wherever it is": dict(pick="leftmost"),
                   "a merged token's id is its rank: merge r makes token 256 + r": dict(offset=0),
                   "the pair with the smallest ids merged first (min(pairs) compares the pairs themselves): apply "
                   "the merge of lowest rank, min(pairs, key=rank.get), the one learned earliest": dict(pick="smallest"),
                   "one merge per word: after merging the lowest-ranked pair, look again, and go on until no pair of "
                   "the word has a rank": dict(pick="single"),
                   "each word's pairs looked up once, before its first merge: a merge makes new pairs (with the "
                   "merged token), so look again after every merge until no pair of the word has a rank":
                       dict(pick="once"),
                   "each distinct word encoded once, in the order first seen (as iterating over split_words(text), "
                   "a count of the words, gives them): a repeated word is left out again and again; encode every word "
                   "of the text in its order, words_in_order(text)": dict(distinct=True),
                   "the text's UTF-8 bytes read as Latin-1 before cutting it into words, so the bytes of a non-ASCII "
                   "character were cut apart as if each were a character: cut the text itself into words "
                   "(words_in_order(text))": dict(latin1="cut"),
                   "the text's UTF-8 bytes read as Latin-1 and encoded to UTF-8 again, so each byte of a non-ASCII "
                   "character became two bytes: encode the text to UTF-8 once (words_in_order(text) does)":
                       dict(latin1="twice"),
                   "each word's bytes read as Latin-1 and encoded to UTF-8 again, so each byte of a non-ASCII "
                   "character became two bytes: words_in_order(text) already gives each word's UTF-8 bytes, "
                   "use them as they are": dict(latin1="per_word")}


@graded("bpe.encode", points=2)
def test_encode_matches_the_library(student):
    encode = student.piece("bpe", "encode")
    merges = REF.train_bpe(TEXT, 120)
    library = train_tokenizer([TEXT], n_merges=120)

    def case(text):
        want = library.encode(text)
        mistakes = {name: _encode_with(text, merges, **slip) for name, slip in ENCODE_MISTAKES.items()}
        return Case(f"encode({text[:30]!r}, merges)", lambda: list(encode(text, merges)), want,
                    {name: wrong for name, wrong in mistakes.items() if wrong != want})
    cases = [case(text) for text in (TEXT, TEXT[len(TEXT) // 2:], "Tom found a red ball.", "unseen wörds ☕ and 99", "")]
    expect_cases(*cases, exact=True, hint="within each word, keep applying the merge of lowest rank among its pairs")


OTHER_TEXT = "the quick brown fox jumps over the lazy dog; a dog, a fox and a hen " * 3


@graded("bpe.encode", points=1)
def test_encode_keeps_nothing_between_calls(student):
    """The same text under two lists of merges, one call after the other: each call's own tokens."""
    encode = student.piece("bpe", "encode")
    lists = (REF.train_bpe(TEXT, 60), REF.train_bpe(OTHER_TEXT, 60), REF.train_bpe(TEXT, 30))
    expect_fresh_calls(*(Case(f"encode(text, merges {i + 1}: {len(m)} merges learned from "
                              f"{'another text' if i == 1 else 'this text'})", lambda m=m: list(encode(OTHER_TEXT, m)),
                              REF.encode(OTHER_TEXT, m)) for i, m in enumerate(lists)), exact=True)


def _token_bytes(i, merges) -> bytes:
    """The bytes token i stands for: a byte below 256, else the bytes of its merge's two tokens."""
    if i < 256:
        return bytes([i])
    a, b = merges[i - 256]
    return _token_bytes(a, merges) + _token_bytes(b, merges)


def _decoded_with_zero_bytes(ids, merges) -> str:
    """decode with the base table built as bytes(i): i zero bytes where the byte i belongs."""
    table = [bytes(b) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


def _decoded_swapped(ids, merges) -> str:
    """decode with each merge's two parts joined the wrong way round (table[b] + table[a])."""
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[b] + table[a])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


def _decoded_alone(decode, merges) -> str | None:
    """What decode([t]) shows, token by token, when the byte tokens decode right alone and some
    merged ones do not: which merges are wrong (those of two bytes or those with a merged part),
    with one of them. None when a byte token is wrong alone or every token is right."""
    def wrong(t):
        want = _token_bytes(t, merges).decode("utf-8", errors="replace")
        try:
            got = decode([t], merges)
        except Exception as exc:                            # noqa: BLE001 - the learner's error, shown
            got = f"{type(exc).__name__}: {exc}"
        return None if got == want else (got, want)
    if any(wrong(t) for t in range(256)):
        return None
    bad = {t: w for t in range(256, 256 + len(merges)) if (w := wrong(t))}
    if not bad:
        return None
    deep = [t for t in range(256, 256 + len(merges)) if max(merges[t - 256]) >= 256]
    t = next(iter(bad))
    a, b = merges[t - 256]
    one = f"token {t} = merge ({a}, {b}): got {bad[t][0]!r}, expected {bad[t][1]!r}"
    if set(bad) == set(deep):
        return (f"every byte token and every merge of two bytes decodes right on its own, and each of the {len(bad)} "
                f"merges with a merged part is wrong ({one}): the bytes of merge (a, b) are table[a] + table[b], the "
                f"bytes tokens a and b stand for, which for a merged token are not bytes([a])")
    return (f"each of the 256 byte tokens decodes right on its own, and {len(bad)} of the {len(merges)} merged tokens "
            f"do not ({one}): the bytes of merge (a, b) are table[a] + table[b], filled in merge order")


STRIPPED = ("the decoded text stripped (.strip()): its leading and trailing spaces and newlines were lost; return "
            "the decoded text as it is")
IGNORED = ("errors='ignore' dropped the broken character silently: with errors='replace' each broken byte sequence "
           "becomes U+FFFD (the replacement character), as the library's decode does")

BASE_OF_255 = ("the table of bytes built over range(255), one short: byte 255 is missing, so every merged token sits "
               "one place early and a merge whose part is a later token finds no entry; the 256 bytes are "
               "range(256), then table[a] + table[b] per merge")


def _short_tables(ids, merges):
    """{typical mistake: a function that raises as it does} for decode(ids, merges)."""
    def base_of_255():
        table = [bytes([b]) for b in range(255)]
        for a, b in merges:
            table.append(table[a] + table[b])
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
    return {BASE_OF_255: base_of_255}


@graded("bpe.decode", points=2)
def test_decode_inverts_encode(student):
    decode = student.piece("bpe", "decode")
    merges = REF.train_bpe(TEXT, 120)
    ids, ids2 = REF.encode(TEXT, merges), REF.encode("Tom found a red ball.", merges)
    expect_runs(lambda: decode(ids, merges), f"decode(encode({TEXT[:30]!r}))", mistakes=_short_tables(ids, merges),
                second=Second(lambda: decode(ids2, merges), None, _short_tables(ids2, merges)),
                hint="build the table of every token's bytes: the 256 bytes, then table[a] + table[b] per merge")

    def case(text):
        ids = REF.encode(text, merges)
        raw = b"".join(_token_bytes(i, merges) for i in ids)
        mistakes = {
            "decoded per token (each token on its own): a character whose bytes lie in two tokens breaks; join "
            "every token's bytes first, then decode once": "".join(_token_bytes(i, merges).decode("utf-8", errors="replace")
                                                             for i in ids),
            "read as Latin-1, not UTF-8: ż, ö and ☕ are several bytes each": raw.decode("latin-1"),
            "bytes(i) makes i zero bytes, not the byte i: the 256 base tokens are bytes([i]) (a list of one int)":
                _decoded_with_zero_bytes(ids, merges),
            "a merge's two parts joined the wrong way round (table[b] + table[a]): merge (a, b) makes the bytes "
            "of a followed by those of b, table[a] + table[b]": _decoded_swapped(ids, merges),
            STRIPPED: text.strip()}
        return Case(f"decode(encode({text[:30]!r}))", lambda: decode(ids, merges), text,
                    {name: wrong for name, wrong in mistakes.items() if wrong != text})
    try:
        expect_cases(case(TEXT), case("unseen wörds ☕"), case("Tom found a red ball."), case(""),
                     case(" the end, and a new line\n"), case("\n\n  Zażółć ☕ "), exact=True,
                     hint="the bytes of every token joined, then read once as UTF-8 (errors='replace')")
    except Mismatch as failed:
        seen = None if failed.mistake or failed.relation else _decoded_alone(decode, merges)
        if seen is None:
            raise
        raise Mismatch(failed.what, failed.problem, "the 256 bytes, then table[a] + table[b] per merge, in merge order",
                       mistake=seen, differences=failed.differences) from None

    def cut(ids):            # bytes of a character cut short: each broken sequence becomes U+FFFD
        raw = bytes(ids)
        return Case(f"decode({ids}): a cut UTF-8 character", lambda: decode(ids, merges),
                    raw.decode("utf-8", errors="replace"), {IGNORED: raw.decode("utf-8", errors="ignore")})
    expect_cases(cut([0xE2, 0x98]), cut([104, 0xE2, 0x98, 105]), exact=True,
                 hint='bytes(...).decode("utf-8", errors="replace")')
    expect_equal(decode([256], merges), bytes(merges[0]).decode("utf-8", errors="replace"),
                 "decode([256]): token 256 is the two bytes of merge 0",
                 hint="build the table of every token's bytes: the 256 bytes, then table[a] + table[b] per merge")


@graded("bpe.decode", points=1)
def test_decode_keeps_nothing_between_calls(student):
    """The same ids under two lists of as many merges, one call after the other: each list's own text."""
    decode = student.piece("bpe", "decode")
    lists = (REF.train_bpe(TEXT, 30), REF.train_bpe(OTHER_TEXT, 30))          # as many merges, other pairs
    ids = REF.encode(OTHER_TEXT, lists[1])
    expect_fresh_calls(*(Case(f"decode(ids, merges {i + 1}: {len(m)} merges learned from "
                              f"{'another text' if i else 'this text'})", lambda m=m: decode(ids, m), REF.decode(ids, m))
                         for i, m in enumerate(lists)), exact=True)
