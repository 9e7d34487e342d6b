"""andrea-prepare and the token data: shards, the split, resumable batches, bad folders refused;
and the small pretrained model that ships with the course."""
import json

import numpy as np
import pytest
import torch

from andrea_course.train import EOT, load_tokenizer, pretrained
from andrea_course.train import prepare as prep
from andrea_course.train.data import Batches, DataError, Split, TokenData, eval_batches, is_val
from andrea_course.train.prepare import main as prepare_main, prepare

DOCS = [f"Story {i}: {'Lily found a red ball. ' * (1 + i % 5)}The end." for i in range(60)]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def _all_tokens(split: Split) -> list:
    return split.read(0, len(split)).tolist()


def test_prepare_round_trips_every_document(tmp_path, tok):
    meta = prepare(DOCS, tmp_path, tok, shard_tokens=97, progress=False)
    data = TokenData.from_folder(tmp_path)
    want_train = [t for i, d in enumerate(DOCS) if not is_val(i) for t in tok.encode(d) + [tok.eot_id]]
    want_val = [t for i, d in enumerate(DOCS) if is_val(i) for t in tok.encode(d) + [tok.eot_id]]
    assert _all_tokens(data.train) == want_train and _all_tokens(data.val) == want_val
    assert meta["tokens"] == {"train": len(want_train), "val": len(want_val)}
    assert meta["documents"] == {"train": 57, "val": 3}
    assert len(meta["shards"]["train"]) == -(-len(want_train) // 97)        # shards of at most 97 tokens
    assert all(s["tokens"] <= 97 for s in meta["shards"]["train"])
    assert meta["vocab_size"] == 8449 and meta["eot_id"] == 8448 and meta["tokenizer_hash"] == tok.hash
    assert load_tokenizer(tmp_path).hash == tok.hash                           # the folder carries its tokenizer
    # a read across shard boundaries
    assert data.train.read(90, 20).tolist() == want_train[90:110]


def test_prepare_from_files_and_folders(tmp_path, tok):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text(f"First doc.\n{EOT}\nSecond doc.\n", encoding="utf-8")
    (src / "sub" / "b.jsonl").write_text('{"text": "json one"}\n\n{"text": "json two"}\n', encoding="utf-8")
    (src / "picture.png").write_bytes(b"\x89PNG")                            # not text: skipped
    assert prepare_main([str(src), "--out", str(tmp_path / "out"), "--val-every", "0", "--no-progress"]) == 0
    data = TokenData.from_folder(tmp_path / "out")
    assert tok.decode(_all_tokens(data.train)) == f"First doc.{EOT}Second doc.{EOT}json one{EOT}json two{EOT}"
    assert len(data.val) == 0


def test_long_documents_are_read_in_pieces(tmp_path, tok, monkeypatch):
    monkeypatch.setattr(prep, "PIECE_CHARS", 100)
    text = "".join(f"Line {i} of a long book.\n" for i in range(200))
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    pieces = list(prep.documents_of_file(tmp_path / "book.txt"))
    assert len(pieces) > 10 and [last for _, _, last in pieces].count(True) == 1
    assert "".join(t for _, t, _ in pieces).strip("\n") == text.strip("\n")
    prepare(prep.file_sources([tmp_path / "book.txt"], progress=False), tmp_path / "out", tok,
            val_every=0, progress=False)
    data = TokenData.from_folder(tmp_path / "out")
    assert tok.decode(_all_tokens(data.train)) == text.strip("\n") + EOT


def test_bad_inputs_and_folders_are_refused(tmp_path, tok):
    assert prepare_main(["--out", str(tmp_path / "x"), str(tmp_path / "missing.txt"), "--no-progress"]) == 2
    (tmp_path / "bad.jsonl").write_text('{"body": "no text field"}\n', encoding="utf-8")
    assert prepare_main([str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "y"), "--no-progress"]) == 1
    with pytest.raises(DataError, match="no data folder"):
        TokenData.from_folder(tmp_path / "nothing")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(DataError, match="no meta.json"):
        TokenData.from_folder(tmp_path / "nothing")
    prepare(DOCS, tmp_path / "ok", tok, progress=False)
    shard = tmp_path / "ok" / "train_000000.bin"
    shard.write_bytes(shard.read_bytes()[:-6])
    with pytest.raises(DataError, match="truncated"):
        TokenData.from_folder(tmp_path / "ok")
    meta = tmp_path / "ok" / "meta.json"
    meta.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match="not valid JSON"):
        TokenData.from_folder(tmp_path / "ok")
    meta.write_text(json.dumps({"format": "something-else"}), encoding="utf-8")
    with pytest.raises(DataError, match="format"):
        TokenData.from_folder(tmp_path / "ok")


def test_data_for_a_bigger_vocabulary_is_refused(tmp_path, tok):
    prepare(DOCS, tmp_path, tok, progress=False)
    with pytest.raises(DataError, match="V = 8449"):
        TokenData.from_folder(tmp_path).check_vocab(1000)


def _split(n=1000):
    return Split([np.arange(n, dtype=np.uint16)])


def test_batches_shift_targets_and_cover_an_epoch_once():
    b = Batches(_split(), T=10, B=3, seed=1)
    seen = []
    for _ in range(b.n_chunks // 3):
        (x, y), = b.next_step()
        assert x.shape == y.shape == (3, 10) and torch.equal(x[:, 1:], y[:, :-1]) and torch.equal(y - x, torch.ones_like(x))
        seen += (x[:, 0] // 10).tolist()
    assert sorted(seen) == list(range(b.n_chunks - b.n_chunks % 3))
    assert b.epoch == 0
    b.next_step()
    assert b.epoch == 1                                              # a new epoch, a new order


def test_batches_resume_from_their_state():
    a = Batches(_split(), T=8, B=2, accum=2, seed=5)
    for _ in range(30):
        a.next_step()
    b = Batches(_split(), T=8, B=2, accum=2, seed=5)
    b.load_state_dict(a.state_dict())
    for _ in range(40):
        for (xa, ya), (xb, yb) in zip(a.next_step(), b.next_step()):
            assert torch.equal(xa, xb) and torch.equal(ya, yb)
    with pytest.raises(DataError, match="same global batch"):
        Batches(_split(), T=8, B=4, accum=1, seed=5).load_state_dict({**a.state_dict(), "per_step": 2})


def test_ranks_share_out_the_same_global_batch():
    one = Batches(_split(), T=8, B=4, seed=2)
    ranks = [Batches(_split(), T=8, B=2, rank=r, world=2, seed=2) for r in range(2)]
    for _ in range(5):
        (x, _), = one.next_step()
        parts = [r.next_step()[0][0] for r in ranks]
        assert torch.equal(torch.cat(parts), x)
    ev_one = torch.cat([x for x, _ in eval_batches(_split(), 8, 4, 3)])
    ev_two = [torch.cat([x for x, _ in eval_batches(_split(), 8, 2, 3, rank=r, world=2)]) for r in range(2)]
    assert sorted(ev_one[:, 0].tolist()) == sorted(torch.cat(ev_two)[:, 0].tolist())


def test_too_little_data_is_refused():
    with pytest.raises(DataError, match="too little data"):
        Batches(_split(50), T=16, B=4)


def test_shipped_pretrained_model_tells_stories(tok):
    model, tok2 = pretrained()
    assert tok2.hash == tok.hash and model.cfg.vocab_size == tok.vocab_size
    assert not model.training and next(model.parameters()).dtype == torch.float32
    from andrea_course.train.sample import generate_text
    text = generate_text(model, tok, "Once upon a time", 30, temperature=0)
    assert text.startswith(", there was a little"), text
    # it has learned the stories: far below ln V = 9.04 nats on a held-out story
    from andrea_course.train import load_corpus
    story = load_corpus()[19]                                            # document 19: validation split
    assert is_val(19)
    ids = torch.tensor([tok.encode(story)[:256]])
    with torch.no_grad():
        _, loss = model(ids[:, :-1], ids[:, 1:])
    assert float(loss) < 2.0


def test_prepare_the_shipped_stories_and_refuse_ambiguous_sources(tmp_path, tok, capsys):
    assert prepare_main(["--stories", "--out", str(tmp_path / "stories"), "--no-progress"]) == 0
    meta = json.loads((tmp_path / "stories" / "meta.json").read_text())
    assert meta["documents"] == {"train": 5700, "val": 300}
    assert len(TokenData.from_corpus(tok).train) == meta["tokens"]["train"]      # the same split in memory
    with pytest.raises(SystemExit):
        prepare_main(["--stories", str(tmp_path), "--out", str(tmp_path / "x")])   # two sources at once
    try:
        import datasets  # noqa: F401
    except ImportError:     # without the optional package: a clear message, no traceback
        assert prepare_main(["--hf-dataset", "some/name", "--out", str(tmp_path / "hf"), "--no-progress"]) == 1
        assert "pip install datasets" in capsys.readouterr().err
