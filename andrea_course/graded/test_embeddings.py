"""Graded tests, activity 4 · Embeddings: table lookup, one-hot product, learned positions,
cosine similarity, the nearest tokens to a query, and the Embeddings module.
x_t = token_table[id_t] + position_table[t]."""
import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import Mismatch, expect_close, expect_true, graded
from andrea_course import pieces

V, D = 11, 6
CFG = ModelConfig(vocab_size=13, context_length=8, d_model=6, n_layers=1, n_heads=2, d_ff=24)


def _table_and_ids(seed=0):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(V, D, dtype=torch.float64, generator=g)              # (V, D)
    ids = torch.tensor([[0, 3, 3, 10, 7], [10, 1, 0, 5, 3]])                # (B, T), both ends of [0, V)
    return table, ids


@graded("embeddings.embed_lookup", points=1)
def test_embed_lookup_reads_one_row_per_id(student):
    table, ids = _table_and_ids()
    got = student.piece("embeddings", "embed_lookup")(table, ids)
    expect_close(got, F.embedding(ids, table), "embed_lookup(table, ids)",
                 mistakes={"ids shifted by one: token id i reads row i, no offset": table[(ids + 1) % V]},
                 hint="each id picks its own row of the table, and the output keeps the (B, T) layout of the ids")


@graded("embeddings.embed_onehot", points=1)
def test_embed_onehot_equals_the_lookup(student):
    table, ids = _table_and_ids(1)
    got = student.piece("embeddings", "embed_onehot")(table, ids)
    expect_close(got, F.embedding(ids, table), "embed_onehot(table, ids)",
                 hint="one-hot vectors as long as the vocabulary, (B, T, V) in the table's dtype, times the table")
    expect_true(got.dtype == table.dtype, "embed_onehot(table, ids).dtype",
                f"dtype {got.dtype}, expected the table's {table.dtype}",
                "cast the one-hot matrix to table.dtype before the product")


@graded("embeddings.embed_onehot", points=1)
def test_embed_onehot_when_the_last_ids_are_absent(student):
    """ids that never reach V - 1: the one-hot width must still be V, the table's row count."""
    table, _ = _table_and_ids(5)
    ids = torch.tensor([[0, 2, 4], [4, 1, 1]])                            # max id 4 < V - 1 = 10
    try:
        got = student.piece("embeddings", "embed_onehot")(table, ids)
    except RuntimeError as exc:
        if "shapes cannot be multiplied" not in str(exc) and "size" not in str(exc):
            raise
        raise Mismatch("embed_onehot(table, ids with max id 4, V = 11)", f"your code raised: {exc}",
                       "the one-hot vectors must be V = table.shape[0] wide whatever the ids",
                       mistake="F.one_hot(ids) without num_classes: its width is max(ids) + 1, not V; "
                               "pass num_classes=table.shape[0]") from None
    expect_close(got, F.embedding(ids, table), "embed_onehot(table, ids with max id 4, V = 11)",
                 hint="the one-hot vectors are as long as the vocabulary, whichever ids this batch happens to hold")


def _positions_case(start):
    g = torch.Generator().manual_seed(2)
    tok = torch.randn(2, 4, D, dtype=torch.float64, generator=g)              # (B, T, D)
    pos = torch.randn(10, D, dtype=torch.float64, generator=g)                # (T_max, D)
    T = tok.shape[1]
    mistakes = {
        "positions not added: return tok + position_table[start:start + T]": tok,
        "position_table indexed in reverse: position t reads row start + t, not the end of the slice":
            tok + pos[start:start + T].flip(0),
        "positions off by one: the first token sits at position `start`, so read rows start .. start + T - 1":
            tok + pos[start + 1:start + T + 1],
    }
    if start:
        mistakes["`start` ignored: with cached tokens the first new token sits at position start, "
                 "slice position_table[start:start + T]"] = tok + pos[:T]
        mistakes["positions off by one: read rows start .. start + T - 1"] = tok + pos[start - 1:start + T - 1]
    return tok, pos, tok + pos[start:start + T], mistakes


@graded("embeddings.add_positions", points=1)
def test_add_positions_from_zero(student):
    tok, pos, want, mistakes = _positions_case(0)
    got = student.piece("embeddings", "add_positions")(tok, pos)
    expect_close(got, want, "add_positions(tok, position_table)", mistakes=mistakes)


@graded("embeddings.add_positions", points=2)
def test_add_positions_after_cached_tokens(student):
    tok, pos, want, mistakes = _positions_case(3)
    got = student.piece("embeddings", "add_positions")(tok, pos, 3)
    expect_close(got, want, "add_positions(tok, position_table, start=3)", mistakes=mistakes)


@graded("embeddings.cosine_similarity", points=1)
def test_cosine_similarity(student):
    g = torch.Generator().manual_seed(3)
    u = torch.randn(3, 4, D, dtype=torch.float64, generator=g) * 3
    v = torch.randn(3, 4, D, dtype=torch.float64, generator=g)
    got = student.piece("embeddings", "cosine_similarity")(u, v)
    expect_close(got, F.cosine_similarity(u, v, dim=-1), "cosine_similarity(u, v)",
                 mistakes={"raw dot product: divide by ||u||·||v||": (u * v).sum(-1),
                           "divided by ||u||·||v|| squared: use the norms, not their squares":
                               (u * v).sum(-1) / ((u * u).sum(-1) * (v * v).sum(-1)),
                           "norms over the whole tensor: each pair of vectors needs its own two norms, taken over "
                           "the last axis (dim=-1) like the dot product":
                               (u * v).sum(-1) / (u.norm() * v.norm())})


# ----- nearest_tokens: the k rows most like a query -----

NEAREST_HINT = ("score every row against the query by its cosine (one score per row, V of them), then the "
                "k largest scores, the largest first")


def _nearest_case(seed, dtype=torch.float64):
    """A (V, D) = (40, 8) table whose row lengths range over a factor of about 1,000 (so the
    longest rows win a raw dot product), and a random (D,) query."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.randn(40, 8, dtype=torch.float64, generator=g)
    lengths = torch.exp(torch.linspace(-3.5, 3.5, 40, dtype=torch.float64))[torch.randperm(40, generator=g)]
    table = directions / directions.norm(dim=-1, keepdim=True) * lengths[:, None]     # (V, D)
    query = torch.randn(8, dtype=torch.float64, generator=g)                             # (D,)
    return table.to(dtype), query.to(dtype)


def _nearest_mistakes(table, query, k):
    """{typical mistake: the ids it returns} for nearest_tokens(table, query, k), in float64."""
    table, query = table.double(), query.double()
    cos = F.cosine_similarity(table, query[None], dim=-1)                                # (V,)
    return {
        "the k LEAST similar: take the largest cosines (torch.topk keeps the largest by default; "
        "argsort needs descending=True)": cos.topk(k, largest=False).indices,
        "a raw dot product: it favours long rows; divide by the lengths (a cosine) so that only the "
        "direction counts": (table @ query).topk(k).indices,
        "each row divided by a norm taken over the wrong axis (dim=0, one norm per column): a row's "
        "length is over its own D numbers, the last axis":
            ((table / table.norm(dim=0, keepdim=True)) @ query).topk(k).indices,
        "the cosine taken over the wrong axis (dim=0): that gives D scores, one per column, where "
        "each of the V rows needs its own; take it over the last axis":
            F.cosine_similarity(table, query.expand_as(table), dim=0).topk(k).indices,
    }


def _expect_ids(got, want, what, mistakes, scores):
    """got must equal the ids `want` (k,), in order. A failure shows both lists of ids and names a
    mistake when got is that mistake's ids, the right ids in another order, or the scores
    (`scores`, (k,)) returned instead of their ids."""
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, f"expected a tensor of {len(want)} ids, got {type(got).__name__}", NEAREST_HINT)
    if got.shape != want.shape:
        raise Mismatch(what, f"shape {tuple(got.shape)}, expected ({len(want)},): one id per neighbour",
                       NEAREST_HINT, shape_found=tuple(got.shape), shape_expected=tuple(want.shape))
    if got.is_floating_point():
        raise Mismatch(what, f"got {got.dtype} numbers, expected the integer ids of the rows", NEAREST_HINT,
                       mistake="the similarity scores returned (topk's .values), not the ids of their rows "
                               "(its .indices)" if torch.allclose(got.double(), scores, atol=1e-5) else None)
    if torch.equal(got.long(), want):
        return
    ids = got.long()
    if sorted(ids.tolist()) == sorted(want.tolist()):
        mistake = "the right k tokens, but not the most similar first: order them by their cosine, the largest first"
    else:
        mistake = next((name for name, wrong in mistakes.items()
                        if torch.equal(ids, wrong) and not torch.equal(wrong, want)), None)
    raise Mismatch(what, f"got the ids {ids.tolist()}, expected {want.tolist()}", NEAREST_HINT, mistake=mistake)


@graded("embeddings.nearest_tokens", points=2)
def test_nearest_tokens_by_cosine_not_by_length(student):
    table, query = _nearest_case(6)
    k = 5
    got = student.piece("embeddings", "nearest_tokens")(table, query, k)
    cos = F.cosine_similarity(table, query[None], dim=-1)                                # (V,)
    want = cos.topk(k)
    _expect_ids(got, want.indices, f"nearest_tokens(table (40, 8), query (8,), k={k})",
                _nearest_mistakes(table, query, k), want.values)


@graded("embeddings.nearest_tokens", points=1)
def test_nearest_tokens_of_a_row_starts_with_that_row(student):
    """float32, the query a multiple of row 17: row 17 first (cosine 1), whatever its length."""
    table, _ = _nearest_case(7, torch.float32)
    query = 0.01 * table[17]
    k = 4
    got = student.piece("embeddings", "nearest_tokens")(table, query, k)
    cos = F.cosine_similarity(table.double(), query.double()[None], dim=-1)
    want = cos.topk(k)
    _expect_ids(got, want.indices, f"nearest_tokens(table (40, 8) float32, query = 0.01·table[17], k={k})",
                _nearest_mistakes(table, query, k), want.values)





def _embeddings_case(seed=5):
    ref = pieces.module("embeddings").Embeddings(CFG).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g))
    ids = torch.randint(0, CFG.vocab_size, (2, 5), generator=g)
    return ref, ids


@graded("embeddings.Embeddings", points=2)
def test_embeddings_module_adds_token_and_position_vectors(student):
    ref, ids = _embeddings_case()
    m = student.piece("embeddings", "Embeddings")(CFG)
    m.double()
    m.load_state_dict(ref.state_dict())
    tok, pos = ref.token_table.detach(), ref.position_table.detach()
    for start in (0, 2):
        got = m(ids, start) if start else m(ids)
        expect_close(got, tok[ids] + pos[start:start + ids.shape[1]], f"Embeddings(cfg)(ids, start={start})",
                     mistakes={"positions not added: x = token_table[ids] + position_table[start:start + T]": tok[ids],
                               "`start` not passed on to add_positions": tok[ids] + pos[:ids.shape[1]]})
