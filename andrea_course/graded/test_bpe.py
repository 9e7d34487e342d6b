"""Graded tests, activity 10 · The tokenizer: byte-level BPE from scratch, checked against
Hugging Face `tokenizers` (the library that makes ANDREA's real tokenizer)."""
from andrea_course.grading import Case, Second, expect_cases, expect_equal, expect_true, graded
from andrea_course import pieces
from andrea_course.train.tokenizer import train_tokenizer

REF = pieces.module("bpe")
TEXT = ("Once upon a time, there was a little cat named Tom. Tom liked to play in the garden. "
        "One day, Tom found a shiny red ball under the tree! \"Look!\" said Tom. "
        "Zażółć gęślą jaźń: naïve café, 1234 apples and 56 pears.\n\nThe end. aaa aaaa")


def _words(text=TEXT):
    return dict(REF.split_words(text))


def _counts(words, weighted=True, overlapping=True):
    """pair_counts written with the typical slips: each word counted once (not by its count); a pair
    that overlaps the same pair just counted skipped."""
    out = {}
    for word, n in words.items():
        previous = None
        for i, pair in enumerate(zip(word, word[1:])):
            if not overlapping and previous == (i - 1, pair):
                previous = None
                continue
            out[pair] = out.get(pair, 0) + (n if weighted else 1)
            previous = (i, pair)
    return out


EACH_WORD_ONCE = "each word counted once, not by its count: add the word's count for every pair in it"
OVERLAPS_SKIPPED = ("overlapping pairs skipped: (7, 7, 7) holds the pair (7, 7) twice, at positions 0-1 and 1-2, and "
                    "counting counts both (merging, later, uses each token once)")


def _counts_case(pair_counts, words):
    want = REF.pair_counts(words)
    mistakes = {EACH_WORD_ONCE: _counts(words, weighted=False), OVERLAPS_SKIPPED: _counts(words, overlapping=False)}
    return Case(f"pair_counts({words})", lambda: pair_counts(words), want,
                {name: wrong for name, wrong in mistakes.items() if wrong != want})


@graded("bpe.pair_counts", points=2)
def test_pair_counts_weights_each_word_by_its_count(student):
    pair_counts = student.piece("bpe", "pair_counts")
    expect_cases(_counts_case(pair_counts, {(1, 2, 3): 2, (2, 3): 5, (7,): 9}),
                 _counts_case(pair_counts, {(4, 5): 3, (5, 4, 5): 2}), exact=True,
                 hint="add the word's count for every neighbouring pair; a one-token word has no pair")


@graded("bpe.pair_counts", points=1)
def test_pair_counts_counts_overlapping_pairs(student):
    pair_counts = student.piece("bpe", "pair_counts")
    expect_cases(_counts_case(pair_counts, {(7, 7, 7): 2}), _counts_case(pair_counts, {(7, 7, 7, 7): 3, (5, 5, 5): 1}),
                 exact=True, hint="(7, 7, 7) has two neighbouring pairs (7, 7), both count")
    expect_equal(pair_counts(_words()), REF.pair_counts(_words()), "pair_counts of a paragraph's words")


def _merged_at_every_occurrence(word, pair, new):
    """The slip: every position where the pair starts becomes the new token, overlaps included."""
    return tuple(new for i in range(len(word) - 1) if tuple(word[i:i + 2]) == pair)


@graded("bpe.merge_pair", points=2)
def test_merge_pair_scans_left_to_right(student):
    merge_pair = student.piece("bpe", "merge_pair")
    expect_equal(tuple(merge_pair((1, 2, 3, 1, 2), (1, 2), 256)), (256, 3, 256), "merge_pair((1,2,3,1,2), (1,2), 256)")
    twice = "overlapping occurrences merged twice: after merging a pair, continue after it (each token is used once)"
    case = lambda word, new: Case(f"merge_pair({word}, (7, 7), {new})", lambda: tuple(merge_pair(word, (7, 7), new)),
                                  tuple(REF.merge_pair(word, (7, 7), new)),
                                  {twice: _merged_at_every_occurrence(word, (7, 7), new)})
    expect_cases(case((7, 7, 7), 256), case((7, 7, 7, 7, 7), 300), exact=True,
                 hint="after merging, continue after the merged pair: the middle 7 is used once")
    expect_equal(tuple(merge_pair((5,), (5, 6), 300)), (5,), "merge_pair((5,), (5,6), 300)")
    expect_equal(tuple(merge_pair((1, 2), (2, 1), 300)), (1, 2), "merge_pair((1,2), (2,1), 300): order matters")
    out = merge_pair((1, 2, 3), (1, 2), 256)
    expect_true(isinstance(out, tuple), "merge_pair((1,2,3), (1,2), 256)", f"returns a {type(out).__name__}, not a tuple",
                "return tuple(...) of what you built: train_bpe keeps its words as dict keys, and a list cannot be one",
                mistake=f"a {type(out).__name__} returned: a merged word must be a tuple, like the word it was given")


@graded("bpe.most_frequent_pair", points=1)
def test_most_frequent_pair_breaks_ties_like_the_library(student):
    most_frequent_pair = student.piece("bpe", "most_frequent_pair")
    expect_equal(most_frequent_pair({(1, 2): 3, (104, 101): 5, (300, 2): 4}), (104, 101), "the most frequent pair")
    expect_equal(most_frequent_pair({}), None, "most_frequent_pair({})", hint="no pair left: return None")
    by_id = ("ties broken by plain id order (the space byte 32 sorts after letters in the library's order): take "
             "min(tied, key=tie_key)")
    case = lambda tie: Case(f"most_frequent_pair of a tie {tie}", lambda: most_frequent_pair(tie), min(tie, key=REF.tie_key),
                            {by_id: min(tie)})
    expect_cases(case({(300, 101): 2, (104, 101): 2, (32, 116): 2}), case({(32, 97): 4, (97, 98): 4, (258, 32): 4}),
                 exact=True, hint="among equal counts take the pair with the smallest tie_key(pair)")


@graded("bpe.train_bpe", points=3)
def test_train_bpe_learns_the_librarys_merges(student):
    train_bpe = student.piece("bpe", "train_bpe")
    for n in (1, 20, 120):
        mine = [tuple(m) for m in train_bpe(TEXT, n)]
        library = train_tokenizer([TEXT], n_merges=n).merges
        expect_equal(mine, library, f"train_bpe(TEXT, {n}) against Hugging Face's BpeTrainer",
                     hint="count pairs over all words, pick the most frequent (ties: tie_key), merge it "
                          "in every word, new id = 256 + number of merges so far")


@graded("bpe.train_bpe", points=1)
def test_train_bpe_stops_when_no_pair_is_left(student):
    train_bpe = student.piece("bpe", "train_bpe")
    merges = [tuple(m) for m in train_bpe("ab ab", 50)]
    expect_equal(merges, [(97, 98), (32, 256)], "train_bpe('ab ab', 50)",
                 hint="the words are 'ab' and ' ab'; after two merges no word has two tokens: stop")


def _encode_with(text, merges, pick="lowest", offset=256):
    """encode as the engine does, or with a typical slip: pick the latest-learned merge ("latest") or
    the leftmost applicable pair ("leftmost") instead of the lowest-ranked; ids without the 256."""
    rank = {tuple(p): r for r, p in enumerate(merges)}
    ids = []
    for word in REF.words_in_order(text):
        while True:
            ranked = [rank[p] for p in zip(word, word[1:]) if p in rank]
            if not ranked:
                break
            r = {"lowest": min, "latest": max, "leftmost": lambda rs: rs[0]}[pick](ranked)
            word = REF.merge_pair(word, tuple(merges[r]), 256 + r)
        ids.extend(i - 256 + offset if i >= 256 else i for i in word)
    return ids


ENCODE_MISTAKES = {"the latest-learned merge applied first: merges apply in the order they were learned, the lowest "
                   "rank first": dict(pick="latest"),
                   "the leftmost mergeable pair merged first: within a word, always apply the merge of lowest "
                   "rank among its pairs, wherever it is": dict(pick="leftmost"),
                   "a merged token's id is its rank: merge r makes token 256 + r": dict(offset=0)}


@graded("bpe.encode", points=2)
def test_encode_matches_the_library(student):
    encode = student.piece("bpe", "encode")
    merges = REF.train_bpe(TEXT, 120)
    library = train_tokenizer([TEXT], n_merges=120)
    cases = [Case(f"encode({text[:30]!r}, merges)", lambda text=text: list(encode(text, merges)), library.encode(text),
                  {name: _encode_with(text, merges, **slip) for name, slip in ENCODE_MISTAKES.items()})
             for text in (TEXT, TEXT[len(TEXT) // 2:], "Tom found a red ball.", "unseen wörds ☕ and 99", "")]
    expect_cases(*cases, exact=True, hint="within each word, keep applying the merge of lowest rank among its pairs")


def _token_bytes(i, merges) -> bytes:
    """The bytes token i stands for: a byte below 256, else the bytes of its merge's two tokens."""
    if i < 256:
        return bytes([i])
    a, b = merges[i - 256]
    return _token_bytes(a, merges) + _token_bytes(b, merges)


@graded("bpe.decode", points=2)
def test_decode_inverts_encode(student):
    decode = student.piece("bpe", "decode")
    merges = REF.train_bpe(TEXT, 120)

    def case(text):
        ids = REF.encode(text, merges)
        raw = b"".join(_token_bytes(i, merges) for i in ids)
        return Case(f"decode(encode({text[:30]!r}))", lambda: decode(ids, merges), text, {
            "decoded per token (each token on its own): a character whose bytes lie in two tokens breaks; join "
            "every token's bytes first, then decode once": "".join(_token_bytes(i, merges).decode("utf-8", errors="replace")
                                                             for i in ids),
            "read as Latin-1, not UTF-8: ż, ö and ☕ are several bytes each": raw.decode("latin-1")})
    expect_cases(case(TEXT), case("unseen wörds ☕"), case(""), exact=True,
                 hint="the bytes of every token joined, then read once as UTF-8 (errors='replace')")
    expect_equal(decode([0xE2, 0x98], merges), "\ufffd", "decode of a cut UTF-8 character",
                 hint='bytes(...).decode("utf-8", errors="replace")')
    expect_equal(decode([256], merges), bytes(merges[0]).decode("utf-8", errors="replace"),
                 "decode([256]): token 256 is the two bytes of merge 0",
                 hint="build the table of every token's bytes: the 256 bytes, then table[a] + table[b] per merge")
