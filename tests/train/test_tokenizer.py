"""The shipped tokenizer and corpus: sizes, numbering, byte-exact round trips."""
import pytest
from hypothesis import given, settings, strategies as st

from andrea_course.train import EOT, TokenizerError, load_corpus, load_tokenizer, train_tokenizer
from andrea_course.train import corpus as corpus_mod
from andrea_course.train.tokenizer import build, bytes_to_unicode


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_vocabulary_is_bytes_merges_and_end_of_text(tok):
    assert tok.vocab_size == 8449
    assert len(tok.merges) == 8192
    assert tok.eot_id == 8448
    assert tok.decode([tok.eot_id]) == EOT
    assert [tok.token_bytes(b) for b in range(256)] == [bytes([b]) for b in range(256)]
    # merge r makes token 256 + r out of two earlier tokens
    for r, (a, b) in enumerate(tok.merges[:500]):
        assert a < 256 + r and b < 256 + r
        assert tok.token_bytes(256 + r) == tok.token_bytes(a) + tok.token_bytes(b)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_round_trips(tok, text):
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.binary())
def test_any_bytes_round_trip(tok, data):
    ids = tok.encode_bytes(data)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode_bytes(ids) == data


def test_bpe_compresses_the_stories(tok):
    text = load_corpus()[0]
    ids = tok.encode(text)
    assert len(ids) < len(text.encode("utf-8")) / 3     # merges pay off on in-domain text
    assert tok.decode(ids) == text


def test_end_of_text_is_one_token(tok):
    ids = tok.encode(f"The end.{EOT}Once")
    assert ids.count(tok.eot_id) == 1


def test_bad_ids_and_inputs_are_refused(tok):
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([8449])
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="encode takes a str"):
        tok.encode(b"bytes")


def test_corrupt_tokenizer_file_is_refused(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model": ', encoding="utf-8")
    with pytest.raises(TokenizerError, match="not a readable tokenizer"):
        load_tokenizer(bad)
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "missing.json")


def test_save_load_keeps_the_hash(tok, tmp_path):
    again = load_tokenizer(tok.save(tmp_path / "tokenizer.json"))
    assert again.hash == tok.hash
    assert again.encode("Lily found a shiny key.") == tok.encode("Lily found a shiny key.")


def test_training_a_small_tokenizer():
    small = train_tokenizer(["the cat sat on the mat. the cat ate."] * 3, n_merges=10)
    assert small.vocab_size == 256 + 10 + 1
    assert small.decode(small.encode("the cat")) == "the cat"
    assert len(small.encode("the cat")) < len("the cat")


def test_build_numbers_merges_after_the_bytes():
    u = bytes_to_unicode()
    t = build([(u[ord("a")], u[ord("b")]), (u[ord("a")] + u[ord("b")], u[ord("c")])])
    assert t.encode("abc") == [257]
    assert t.merges == [(97, 98), (256, 99)]


def test_shipped_corpus_is_what_the_generator_writes():
    docs = load_corpus()
    assert docs == corpus_mod.generate()
    assert len(docs) == corpus_mod.N_STORIES
    assert all(EOT not in d for d in docs)


# ----------------------------------------------------------------------------- a run's own tokenizer
def test_a_runs_own_tokenizer_from_the_pieces_is_the_librarys():
    """TrainConfig.bpe_merges: the engine's plain-Python BPE (pieces/bpe.py, what a learner's
    correct pieces compute) and Hugging Face's learn the same merges on the run's slice of the
    stories: the same tokenizer (hash), the same ids for the stories, and decoding them gives
    the text back, end-of-text included."""
    import types

    from andrea_course.pieces import bpe
    from andrea_course.train.data import TokenData
    from andrea_course.train.tokenizer import PiecesTokenizer, run_tokenizer
    library = run_tokenizer(64)
    pieces = run_tokenizer(64, types.SimpleNamespace(train_bpe=bpe.train_bpe, encode=bpe.encode, decode=bpe.decode))
    assert isinstance(pieces, PiecesTokenizer) and pieces.vocab_size == library.vocab_size == 256 + 64 + 1
    assert pieces.merges == library.merges and pieces.hash == library.hash
    assert pieces.learned_in > 0
    a, b = TokenData.from_corpus(library, stories=200), TokenData.from_corpus(pieces, stories=200)
    assert a.fingerprint == b.fingerprint and a.source == "the first 200 shipped stories"
    text = f"Once upon a time, Tom found a key.{EOT}The end. Zażółć ☕"
    assert pieces.encode(text) == library.encode(text)
    assert pieces.decode(pieces.encode(text)) == text
    assert run_tokenizer(64) is library                          # made once per process


def test_a_runs_own_tokenizer_refuses_what_cannot_be():
    import types

    from andrea_course.train.tokenizer import PiecesTokenizer, from_merges, run_tokenizer
    with pytest.raises(TokenizerError, match="two merges make the same token"):
        from_merges([(97, 98), (256, 99), (97, 98)])
    with pytest.raises(TokenizerError, match="merge 1 joins ids 300 and 97"):
        from_merges([(97, 98), (300, 97)])
    few = types.SimpleNamespace(train_bpe=lambda text, n: [(97, 98)], encode=None, decode=None)
    with pytest.raises(TokenizerError, match="gave 1 merges, not the 5 asked for"):
        run_tokenizer(5, few)
    # an encode that looks across words (here: it merges nothing unless given a whole story)
    odd = PiecesTokenizer([(104, 101)], lambda text, merges: list(text.encode()) if len(text) < 9 else [0],
                          lambda ids, merges: "")
    with pytest.raises(TokenizerError, match="differs from encoding its words one at a time"):
        odd.encode_ordinary_batch(["the cat sat on the mat"])
