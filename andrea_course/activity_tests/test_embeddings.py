"""Graded tests, activity 4 · Embeddings: table lookup, one-hot product, learned positions,
cosine similarity, the nearest tokens to a query, and the Embeddings module.
x_t = token_table[id_t] + position_table[t]."""
import math

import torch
import torch.nn.functional as F

from andrea_course import ModelConfig
from andrea_course.grading import (type_name, Case, Mismatch, Second, expect_cases, expect_close, expect_runs, expect_true,
                                   graded, load_weights)
from andrea_course import pieces
from andrea_course.activity_tests import expect_trainable, randn64

V, D = 11, 6
CFG = ModelConfig(vocab_size=13, context_length=8, d_model=6, n_layers=1, n_heads=2, d_ff=24)


def _table(seed=0, dtype=torch.float64):
    return torch.randn(V, D, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).to(dtype)  # (V, D)


def _table_and_ids(seed=0):
    ids = torch.tensor([[0, 3, 3, 10, 7], [10, 1, 0, 5, 3]])                # (B, T), both ends of [0, V)
    return _table(seed), ids


LOOKUP_HINT = "each id picks its own row of the table, and the output keeps the layout of the ids: (B, T) -> (B, T, D)"


COLUMNS = ("the table's columns indexed (table[:, ids]): each id names a row, the vector of that token; "
           "index the rows, table[ids]")
SWAPPED_EMBEDDING = ("F.embedding's arguments swapped: it takes the ids first, then the table, F.embedding(ids, table) "
                     "(or simply table[ids])")


UNPACKED_B_T = ("ids.shape unpacked as (B, T) (B, T = ids.shape): one sequence of ids, (T,), has a single axis; "
                "index the table with the ids as they are, table[ids], which works for ids of any shape")


def _unpack_b_t(ids):
    B, T = ids.shape                                    # what raises for ids of another rank
    return B, T


def _raising_lookups(table, ids):
    """{typical mistake: a function that raises its error} of embed_lookup on these inputs."""
    return {COLUMNS: lambda: table[:, ids], SWAPPED_EMBEDDING: lambda: F.embedding(table, ids),
            UNPACKED_B_T: lambda: _unpack_b_t(ids)}


def _expect_runs_on(first: Case, second: Case, raising, raising2, hint=""):
    """The learner's code on the first case must not raise a typical mistake's error ({description: a
    function raising it} here and, confirming it, raising2 on the second case)."""
    expect_runs(first.got, first.what, mistakes=raising, second=Second(second.got, None, raising2), hint=hint)


def _lookup_case(lookup, table, ids):
    what = f"embed_lookup(table ({V}, {D}) {str(table.dtype)[6:]}, ids of shape {tuple(ids.shape)})"
    return Case(what, lambda: lookup(table, ids), F.embedding(ids, table),
                {"ids shifted by one (row i + 1 read for id i): token id i reads row i, no offset": table[(ids + 1) % V],
                 "ids shifted by one (row i - 1 read for id i, as table[ids - 1] does): token id i reads row i, "
                 "no offset": table[(ids - 1) % V],
                 "torch.take(table, ids), which reads one number of the flattened table per id, not a row (it "
                 "has no axis= as np.take does): index the rows, table[ids]": torch.take(table, ids)})


@graded("embeddings.embed_lookup", points=1)
def test_embed_lookup_reads_one_row_per_id(student):
    lookup = student.piece("embeddings", "embed_lookup")
    table, ids = _table_and_ids()
    table2, ids2 = _table(9, torch.float32), torch.tensor([[4, 10, 0], [2, 2, 9]])
    cases = _lookup_case(lookup, table, ids), _lookup_case(lookup, table2, ids2)
    _expect_runs_on(*cases, _raising_lookups(table, ids), _raising_lookups(table2, ids2), hint=LOOKUP_HINT)
    expect_cases(*cases, hint=LOOKUP_HINT)
    expect_trainable(lookup, (table, ids), f"embed_lookup(table ({V}, {D}), ids of shape {tuple(ids.shape)})")


SQUEEZED = ("axes of size one dropped (.squeeze()): a batch of one sequence, or a sequence of one token, keeps its "
            "axis, ids (1, 1) give (1, 1, D)")


@graded("embeddings.embed_lookup", points=1)
def test_embed_lookup_of_one_sequence(student):
    """ids of one sequence, shape (T,), as notebook 01 looks up a sentence: (T, D) back."""
    lookup = student.piece("embeddings", "embed_lookup")
    hint = "ids of any shape: indexing the table with the ids keeps their shape and adds D, (T,) -> (T, D)"
    (table, ids), (table2, ids2) = (_table(3, torch.float32), torch.tensor([0, 3, 3, 10, 7, 1])), \
        (_table(4), torch.tensor([9, 0, 10]))
    cases = _lookup_case(lookup, table, ids), _lookup_case(lookup, table2, ids2)
    _expect_runs_on(*cases, _raising_lookups(table, ids), _raising_lookups(table2, ids2), hint=hint)
    expect_cases(*cases, hint=hint)
    expect_cases(*(Case(f"embed_lookup(table, ids of shape {tuple(ones.shape)})", lambda ones=ones: lookup(table, ones),
                        F.embedding(ones, table), {SQUEEZED: F.embedding(ones, table).squeeze()})
                   for ones in (torch.tensor([5]), torch.tensor([[2]]), torch.tensor([[3], [0]]))),   # axes of size one stay
                 hint=hint)
    expect_runs(lambda: lookup(table.clone().requires_grad_(), ids), "embed_lookup(a table that requires grad, ids)",
                hint="training reaches the table through the rows looked up: index the table itself, table[ids]")


ONEHOT_TRANSPOSED = ("the one-hot vectors times the transposed table (@ table.T): a (B, T, V) one-hot times the "
                     "(V, D) table as it is gives (B, T, D)")
ONEHOT_LONG = ("the one-hot vectors kept as integers: F.one_hot gives int64, and a matmul of long by float raises; "
               "convert them first, .to(table.dtype)")
ONEHOT_MM = ("torch.mm, which multiplies 2-D matrices only: the one-hot vectors of a batch are (B, T, V), three axes; "
             "@ (torch.matmul) multiplies them batch-wise, one_hot @ table gives (B, T, D)")


def _raising_onehots(table, ids):
    """{typical mistake: a function that raises its error} of embed_onehot on these inputs."""
    one_hot = F.one_hot(ids, num_classes=table.shape[0])
    return {ONEHOT_TRANSPOSED: lambda: one_hot.to(table.dtype) @ table.T, ONEHOT_LONG: lambda: one_hot @ table,
            ONEHOT_MM: lambda: torch.mm(one_hot.to(table.dtype), table)}


LAST_ID_ZERO = ("the tokens of id V - 1 came out as zero vectors: their one-hot vector has no 1 (a loop over "
                "range(V - 1), or a width of V - 1, leaves the last id out); ids run 0 .. V - 1, F.one_hot(ids, "
                "num_classes=V)")


def _last_row_zero(table):
    """The table with its last row zeroed: what a one-hot without id V - 1 reads."""
    return torch.cat([table[:-1], torch.zeros_like(table[-1:])])


@graded("embeddings.embed_onehot", points=1)
def test_embed_onehot_equals_the_lookup(student):
    onehot = student.piece("embeddings", "embed_onehot")
    inputs = (_table_and_ids(1), (_table(2, torch.float32), torch.randint(0, V, (4, 7),
                                                                          generator=torch.Generator().manual_seed(2))))
    (table, ids), (table2, ids2) = inputs
    expect_runs(lambda: onehot(table, ids), f"embed_onehot(table ({V}, {D}) float64, ids of shape {tuple(ids.shape)})",
                mistakes=_raising_onehots(table, ids),
                second=Second(lambda: onehot(table2, ids2), None, _raising_onehots(table2, ids2)),
                hint="one-hot vectors as long as the vocabulary, (B, T, V) in the table's dtype, times the table")
    for i, (table, ids) in enumerate(inputs):
        what = f"embed_onehot(table ({V}, {D}) {str(table.dtype)[6:]}, ids of shape {tuple(ids.shape)})"
        got, (table2, ids2) = onehot(table, ids), inputs[1 - i]
        expect_close(got, F.embedding(ids, table), what,
                     mistakes={LAST_ID_ZERO: F.embedding(ids, _last_row_zero(table)),
                               ONEHOT_ALONE: F.one_hot(ids, V).to(table.dtype)},
                     second=Second(lambda: onehot(table2, ids2), F.embedding(ids2, table2),
                                   {LAST_ID_ZERO: F.embedding(ids2, _last_row_zero(table2)),
                                    ONEHOT_ALONE: F.one_hot(ids2, V).to(table2.dtype)}),
                     hint="one-hot vectors as long as the vocabulary, (B, T, V) in the table's dtype, times the table")
        expect_true(got.dtype == table.dtype, f"{what}.dtype", f"dtype {got.dtype}, expected the table's {table.dtype}",
                    "cast the one-hot matrix to table.dtype before the product")
    expect_trainable(onehot, inputs[0], f"embed_onehot(table ({V}, {D}), ids of shape {tuple(inputs[0][1].shape)})")


ONEHOT_ALONE = ("the one-hot vectors themselves returned, (B, T, V), without their product with the table: "
                "return one_hot @ table, (B, T, D)")
NO_NUM_CLASSES = ("F.one_hot(ids) without num_classes: its width is max(ids) + 1, not V; "
                  "pass num_classes=table.shape[0]")


@graded("embeddings.embed_onehot", points=1)
def test_embed_onehot_when_the_last_ids_are_absent(student):
    """ids that never reach V - 1: the one-hot width must still be V, the table's row count."""
    onehot = student.piece("embeddings", "embed_onehot")
    table, table2 = _table(5), _table(6)
    ids, ids2 = torch.tensor([[0, 2, 4], [4, 1, 1]]), torch.tensor([[6, 0], [3, 3]])   # max ids 4 and 6 < V - 1 = 10
    short = lambda t, i: lambda: F.one_hot(i).to(t.dtype) @ t
    what = "embed_onehot(table, ids with max id 4, V = 11)"
    got = expect_runs(lambda: onehot(table, ids), what,
                      mistakes={NO_NUM_CLASSES: short(table, ids), **_raising_onehots(table, ids)},
                      second=Second(lambda: onehot(table2, ids2), None,
                                    {NO_NUM_CLASSES: short(table2, ids2), **_raising_onehots(table2, ids2)}),
                      hint="the one-hot vectors must be V = table.shape[0] wide whatever the ids")
    expect_close(got, F.embedding(ids, table), what,
                 hint="the one-hot vectors are as long as the vocabulary, whichever ids this batch happens to hold")


BATCH_AXIS = ("T taken from the batch axis (tok.shape[0]): tok is (B, T, D), so the number of positions "
              "is tok.shape[1]")
UNSQUEEZED = ("the position rows unsqueezed to (T, 1, D) (.unsqueeze(1)): against tok (B, T, D) their position axis "
              "meets the batch axis, so position t goes to sequence t; the (T, D) rows broadcast over B as they are, "
              "tok + position_table[start:start + T]")


def _positions_inputs(seed, T, dtype):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randn(2, T, D, dtype=torch.float64, generator=g).to(dtype)    # (B, T, D)
    pos = torch.randn(10, D, dtype=torch.float64, generator=g).to(dtype)      # (T_max, D)
    return tok, pos


def _raising_positions(start, seed=2, T=4, dtype=torch.float64):
    """{typical mistake: a function that raises its error} of add_positions on _positions_case's inputs."""
    tok, pos = _positions_inputs(seed, T, dtype)
    return {BATCH_AXIS: lambda: tok + pos[start:start + tok.shape[0]],
            UNSQUEEZED: lambda: tok + pos[start:start + T].unsqueeze(1)}


def _sinusoids(start, T, D, like):
    """(T, D) the 2017 paper's fixed encoding of positions start .. start + T - 1."""
    pos = torch.arange(start, start + T, dtype=torch.float64)[:, None]
    rate = torch.exp(torch.arange(0, D, 2, dtype=torch.float64) * (-math.log(10000.0) / D))
    pe = torch.zeros(T, D, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * rate), torch.cos(pos * rate)
    return pe.to(like.dtype)


def _positions_case(add_positions, start, seed=2, T=4, dtype=torch.float64):
    tok, pos = _positions_inputs(seed, T, dtype)
    mistakes = {
        "positions not added: return tok + position_table[start:start + T]": tok,
        "position_table indexed in reverse: position t reads row start + t, not the end of the slice":
            tok + pos[start:start + T].flip(0),
        "positions off by one: the first token sits at position `start`, so read rows start .. start + T - 1":
            tok + pos[start + 1:start + T + 1],
        "only the row of position `start` added to every token (position_table[start], or a slice that ends at "
        "T, position_table[start:T], one row when start = T - 1): token t needs row start + t, so slice "
        "position_table[start:start + T]": tok + pos[start],
    }
    mistakes["the original paper's fixed sin/cos encoding added where this model learns its positions: add the "
             "rows of position_table, position_table[start:start + T]"] = tok + _sinusoids(start, T, tok.shape[-1], tok)
    if start:
        mistakes["`start` ignored: with cached tokens the first new token sits at position start, "
                 "slice position_table[start:start + T]"] = tok + pos[:T]
        mistakes["positions off by one: read rows start .. start + T - 1"] = tok + pos[start - 1:start + T - 1]
    call = (lambda: add_positions(tok, pos, start)) if start else (lambda: add_positions(tok, pos))
    what = f"add_positions(tok of shape {tuple(tok.shape)}, position_table{f', start={start}' if start else ''})"
    return Case(what, call, tok + pos[start:start + T], mistakes)


@graded("embeddings.add_positions", points=1)
def test_add_positions_from_zero(student):
    add_positions = student.piece("embeddings", "add_positions")
    cases = (_positions_case(add_positions, 0), _positions_case(add_positions, 0, seed=12, T=3),
             _positions_case(add_positions, 0, seed=15, T=5, dtype=torch.float32))
    _expect_runs_on(cases[0], cases[1], _raising_positions(0), _raising_positions(0, seed=12, T=3))
    expect_cases(*cases)
    tok = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(17))                  # (B, T, D)
    table = torch.randn(8, 6, generator=torch.Generator().manual_seed(18)).requires_grad_()  # (T_max, D), learned
    out = add_positions(tok, table)
    expect_true(isinstance(out, torch.Tensor) and out.requires_grad, "add_positions(tok, position_table that requires "
                "grad)", "the output does not require grad: no gradient reaches the position table, so the positions "
                "never learn", "add the rows as they are (no .detach(), .data or torch.no_grad())")
    expect_trainable(add_positions, (tok.double(), table.detach().double()),
                     "add_positions(tok (2, 4, 6), position_table (8, 6))")


@graded("embeddings.add_positions", points=2)
def test_add_positions_after_cached_tokens(student):
    add_positions = student.piece("embeddings", "add_positions")
    cases = (_positions_case(add_positions, 3), _positions_case(add_positions, 2, seed=13, T=5),
             _positions_case(add_positions, 4, seed=14, T=2, dtype=torch.float32),       # float32, as the model
             _positions_case(add_positions, 4, seed=16, T=5))
    _expect_runs_on(cases[0], cases[1], _raising_positions(3), _raising_positions(2, seed=13, T=5))
    expect_cases(*cases)


FIRST_AXIS = ("summed over the first axis (dim=0) instead of the last: the D numbers of each vector lie along the "
              "last axis, so reduce over dim=-1")
SUM_ALL = ("the dot product summed over every axis (.sum() with no dim), one number for the whole batch: each pair "
           "needs its own, summed over the last axis, .sum(dim=-1)")
SUM_ALL_NORMS = ("the dot product and the norms taken over the whole tensor (no dim), one number in all: each pair "
                 "needs its own cosine, every reduction over the last axis (dim=-1)")
ONE_NORM_TWICE = ("divided by ||{w}||·||{w}||: the same vector's length twice; the cosine divides by the lengths "
                  "of both vectors, ||u||·||v||")
U_ONLY = "divided by ||u|| only: the cosine divides the dot product by both lengths, ||u||·||v||"
TIMES_V = ("dot / ||u|| * ||v||: / and * go left to right, so this divides by ||u|| and then multiplies by ||v||; "
           "put the product of the norms in parentheses, dot / (||u|| * ||v||)")
TORCH_DOT = ("torch.dot, which takes two 1-D vectors only: a batch of pairs (..., D), or the (V, D) rows against "
             "one query, raises; multiply elementwise and sum over the last axis, (u * v).sum(dim=-1), one dot "
             "product per pair")
L1_NORMS = ("divided by the L1 norms (p=1, the sums of absolute values) instead of the lengths: the cosine divides by "
            "the Euclidean (L2) norms, u.norm(dim=-1), the square root of the sum of squares")
KEEPDIM_NORMS = ("the norms kept (..., 1) with keepdim=True while the dot products are (...): the division broadcasts "
                 "them into a table (B pairs give (B, B)) or raises; take the norms without keepdim, like the dot "
                 "product, u.norm(dim=-1)")


def _keepdim_norms(u, v, eps=1e-8):
    """What the cosine with (..., 1) norms gives, or None where that division raises."""
    try:
        return (u * v).sum(-1) / (u.norm(dim=-1, keepdim=True) * v.norm(dim=-1, keepdim=True)).clamp_min(eps)
    except RuntimeError:
        return None


def _raising_cosines(u, v):
    """{typical mistake: a function that raises its error} of cosine_similarity on these inputs."""
    return {FIRST_AXIS: lambda: (u * v).sum(0) / (u.norm(dim=-1) * v.norm(dim=-1)),
            TORCH_DOT: lambda: torch.dot(u, v),
            KEEPDIM_NORMS: lambda: (u * v).sum(-1) / (u.norm(dim=-1, keepdim=True) * v.norm(dim=-1, keepdim=True))}


LAST_FEATURE_ONLY = ("the dot product is the last feature's product alone, u[..., D-1]·v[..., D-1]: a sum written "
                     "in a loop that assigns (dot = ...) instead of adding (dot = dot + ...), or a [-1] in place "
                     "of the sum; u·v = Σ_d u_d·v_d, (u * v).sum(-1)")


CAPPED = ("the lengths' product capped at eps (clamp(max=eps), or torch.min) instead of held at least eps: every "
          "cosine is then divided by eps; clamp_min(eps), or clamp(min=eps), puts the floor under it")


def _cosine_case(cosine, u, v):
    dot = (u * v).sum(-1)
    mistakes = {"raw dot product: divide by ||u||·||v||": dot,
                "divided by ||u||·||v|| squared: use the norms, not their squares":
                    dot / ((u * u).sum(-1) * (v * v).sum(-1)),
                U_ONLY: dot / u.norm(dim=-1), TIMES_V: dot / u.norm(dim=-1) * v.norm(dim=-1),
                ONE_NORM_TWICE.format(w="u"): dot / (u.norm(dim=-1) * u.norm(dim=-1)),
                ONE_NORM_TWICE.format(w="v"): dot / (v.norm(dim=-1) * v.norm(dim=-1)),
                L1_NORMS: dot / (u.norm(p=1, dim=-1) * v.norm(p=1, dim=-1)),
                LAST_FEATURE_ONLY: (u * v)[..., -1] / (u.norm(dim=-1) * v.norm(dim=-1)),
                CAPPED: dot / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(max=1e-8)}
    if u.dim() > 1 or v.dim() > 1:
        mistakes["norms over the whole tensor: each pair of vectors needs its own two norms, taken over "
                 "the last axis (dim=-1) like the dot product"] = dot / (u.norm() * v.norm())
        mistakes[SUM_ALL] = (u * v).sum() / (u.norm(dim=-1) * v.norm(dim=-1))
        mistakes[SUM_ALL_NORMS] = (u * v).sum() / (u.norm() * v.norm())
        mistakes[FIRST_AXIS] = (u * v).sum(0) / (u.norm(dim=0) * v.norm(dim=0))
    what = f"cosine_similarity(u of shape {tuple(u.shape)}, v of shape {tuple(v.shape)}, {str(u.dtype)[6:]})"
    return Case(what, lambda: cosine(u, v), F.cosine_similarity(u, v, dim=-1), mistakes)


@graded("embeddings.cosine_similarity", points=1)
def test_cosine_similarity(student):
    """Pairs of vectors along a batch, every row of a table against one query (broadcast), and
    two single vectors, as notebook 01 compares them."""
    cosine = student.piece("embeddings", "cosine_similarity")
    g = torch.Generator().manual_seed(3)
    u = torch.randn(3, 4, D, dtype=torch.float64, generator=g) * 3
    v = torch.randn(3, 4, D, dtype=torch.float64, generator=g)
    rows, query = torch.randn(7, D, generator=g) * torch.linspace(0.5, 4, 7)[:, None], torch.randn(D, generator=g)
    a, b = torch.randn(D, generator=g) * 2, torch.randn(D, generator=g)
    pairs = torch.randn(2, 5, D, generator=g), torch.randn(2, 5, D, generator=g) * 4          # float32 (B, T, D)
    hint = "the dot product over the last axis divided by the two vectors' lengths, one number per pair"
    cases = (_cosine_case(cosine, u, v), _cosine_case(cosine, rows, query), _cosine_case(cosine, a, b),
             _cosine_case(cosine, *pairs))
    _expect_runs_on(cases[0], cases[3], _raising_cosines(u, v), _raising_cosines(*pairs), hint=hint)
    expect_cases(*cases, hint=hint)
    expect_trainable(cosine, (randn64(3, 4, D, seed=78), randn64(3, 4, D, seed=79)),
                     f"cosine_similarity(u, v of shape (3, 4, {D}))")


NO_EPS = ("no guard against a zero vector: its length is 0, so u·v / (||u||·||v||) is 0/0 = NaN; divide by "
          "(||u||·||v||).clamp_min(eps), which leaves every other pair as it was")


def _zero_case(cosine, u, v):
    what = f"cosine_similarity with a zero vector among {tuple(u.shape)} and {tuple(v.shape)}"
    raw = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
    eps = 1e-8                                          # the signature's
    return Case(what, lambda: cosine(u, v), F.cosine_similarity(u, v, dim=-1),
                {NO_EPS: raw, U_ONLY: (u * v).sum(-1) / u.norm(dim=-1).clamp_min(eps),
                 CAPPED: (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(max=eps),
                 ONE_NORM_TWICE.format(w="u"): (u * v).sum(-1) / (u.norm(dim=-1) * u.norm(dim=-1)).clamp_min(eps),
                 TIMES_V: (u * v).sum(-1) / u.norm(dim=-1).clamp_min(eps) * v.norm(dim=-1).clamp_min(eps),
                 SUM_ALL: (u * v).sum() / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps),
                 L1_NORMS: (u * v).sum(-1) / (u.norm(p=1, dim=-1) * v.norm(p=1, dim=-1)).clamp_min(eps),
                 KEEPDIM_NORMS: _keepdim_norms(u, v, eps),
                 SUM_ALL_NORMS: (u * v).sum() / (u.norm() * v.norm()).clamp_min(eps),
                 FIRST_AXIS: (u * v).sum(0) / (u.norm(dim=0) * v.norm(dim=0)).clamp_min(eps)})


@graded("embeddings.cosine_similarity", points=1)
def test_cosine_similarity_of_a_zero_vector_is_zero(student):
    """A zero vector points nowhere: its cosine with anything is 0, never NaN (the eps of the signature)."""
    cosine = student.piece("embeddings", "cosine_similarity")
    g = torch.Generator().manual_seed(4)
    u, v = torch.randn(3, D, dtype=torch.float64, generator=g), torch.randn(3, D, dtype=torch.float64, generator=g)
    u[1] = 0.0
    rows, query = torch.randn(5, D, generator=g), torch.randn(D, generator=g)
    rows[0] = rows[3] = 0.0
    hint = "keep the division away from a zero length: clamp the product of the norms to at least eps"
    cases = _zero_case(cosine, u, v), _zero_case(cosine, rows, query)
    _expect_runs_on(*cases, _raising_cosines(u, v), _raising_cosines(rows, query), hint=hint)
    expect_cases(*cases, hint=hint)


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
        "the best match dropped (topk(k + 1) and then [1:]), as if it were the query itself: the query is any "
        "vector, not a row of the table, so the most similar row belongs in the answer; torch.topk(scores, k)":
            cos.topk(k + 1).indices[1:],
        "ranked by the absolute cosine (.abs()): a row pointing the opposite way, cosine near -1, is the least "
        "similar, not among the most; rank by the cosine itself": cos.abs().topk(k).indices,
        "the best row k times: the argmax taken again and again without setting the rows already chosen aside "
        "(to -inf); torch.topk(scores, k) gives the k largest at once": cos.argmax().repeat(k),
        **{f"k never used: always the {n} most similar (a fixed {n} where k belongs), whatever k is asked for":
           cos.topk(n).indices for n in (5, 10) if n != k and n <= cos.numel()},
    }


def _nearest_want(table, query, k):
    cos = F.cosine_similarity(table.double(), query.double()[None], dim=-1)             # (V,)
    return cos.topk(k)


def _nearest_second(nearest, seed, k, dtype=torch.float64):
    """The same piece on another table, query and k: what confirms a typical mistake."""
    table, query = _nearest_case(seed, dtype)
    return Second(lambda: nearest(table, query, k), _nearest_want(table, query, k).indices,
                  _nearest_mistakes(table, query, k))


def _expect_ids(got, want, what, mistakes, scores, second):
    """got must equal the ids `want` (k,), in order. A failure shows both lists of ids and names a
    mistake when got is that mistake's ids (here and on the second input), the right ids in
    another order, or the scores (`scores`, (k,)) returned instead of their ids."""
    if not isinstance(got, torch.Tensor):
        raise Mismatch(what, f"expected a tensor of {len(want)} ids, got {type_name(got)}", NEAREST_HINT)
    if got.shape != want.shape:
        short = got.dim() == 1 and len(got) == len(want) - 1 and torch.equal(got.long(), want[:-1])
        sized = [name for name, ids in mistakes.items() if ids.shape == got.shape and torch.equal(got.long(), ids)]
        raise Mismatch(what, f"shape {tuple(got.shape)}, expected ({len(want)},): one id per neighbour",
                       NEAREST_HINT, shape_found=tuple(got.shape), shape_expected=tuple(want.shape),
                       mistake=f"the first {len(got)} of the {len(want)} nearest ids, the last one missing: "
                               f"one neighbour short (range(k - 1), or topk(k - 1)); torch.topk(scores, k)"
                       if short else sized[0] if len(sized) == 1 else None)
    if got.is_floating_point():
        raise Mismatch(what, f"got {got.dtype} numbers, expected the integer ids of the rows", NEAREST_HINT,
                       mistake="the similarity scores returned (topk's .values), not the ids of their rows "
                               "(its .indices)" if torch.allclose(got.double(), scores, atol=1e-5) else None)
    if torch.equal(got.long(), want):
        return
    ids = got.long()
    if torch.equal(ids, scores.long()):
        raise Mismatch(what, f"got the ids {ids.tolist()}, expected {want.tolist()}", NEAREST_HINT,
                       mistake="the similarity scores returned (topk's .values, made integers), not the ids of "
                               "their rows (its .indices)")
    if sorted(ids.tolist()) == sorted(want.tolist()):
        raise Mismatch(what, f"got the ids {ids.tolist()}, expected {want.tolist()}", NEAREST_HINT,
                       mistake="the right k tokens, but not the most similar first: order them by their cosine, "
                               "the largest first")
    from andrea_course.grading.expect import _name, _same
    from andrea_course.grading.relations import relate
    mistake = _name(ids, want, mistakes, second._replace(got=lambda: second.got().long()), _same)
    raise Mismatch(what, f"got the ids {ids.tolist()}, expected {want.tolist()}", NEAREST_HINT, mistake=mistake,
                   unmatched=True, relation=None if mistake else relate(ids, want, {}, ()))


@graded("embeddings.nearest_tokens", points=2)
def test_nearest_tokens_by_cosine_not_by_length(student):
    nearest = student.piece("embeddings", "nearest_tokens")
    table, query = _nearest_case(6)
    k = 5
    want = _nearest_want(table, query, k)
    _expect_ids(nearest(table, query, k), want.indices, f"nearest_tokens(table (40, 8), query (8,), k={k})",
                _nearest_mistakes(table, query, k), want.values, _nearest_second(nearest, 8, 6))


@graded("embeddings.nearest_tokens", points=1)
def test_nearest_tokens_of_a_row_starts_with_that_row(student):
    """float32, the query a multiple of row 17: row 17 first (cosine 1), whatever its length."""
    nearest = student.piece("embeddings", "nearest_tokens")
    table, _ = _nearest_case(7, torch.float32)
    query = 0.01 * table[17]
    k = 4
    want = _nearest_want(table, query, k)
    _expect_ids(nearest(table, query, k), want.indices, f"nearest_tokens(table (40, 8) float32, query = 0.01·table[17], k={k})",
                _nearest_mistakes(table, query, k), want.values, _nearest_second(nearest, 9, 3, torch.float32))


def _embeddings_case(seed=5):
    ref = pieces.module("embeddings").Embeddings(CFG).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g))
    ids = torch.randint(0, CFG.vocab_size, (2, 5), generator=g)
    return ref, ids


FROM_START_TO_T = ("only the tokens start .. T - 1 came out, each with the position row of its own index (a loop over "
                   "range(start, T)): every one of the T tokens is embedded, token t at position start + t, "
                   "position_table[start + t]")


ID_0_ZEROED = ("the tokens of id 0 given a zero vector, as Keras' mask_zero treats id 0 as padding: here 0 is an "
               "ordinary token with its own learned row, token_table[0]")


def _module_case(m, ref, ids, start):
    tok, pos = ref.token_table.detach(), ref.position_table.detach()
    T = ids.shape[-1]
    mistakes = {"positions not added: x = token_table[ids] + position_table[start:start + T]": tok[ids],
                "the token vectors scaled by sqrt(D), as the 2017 paper's embedding layer does: this model adds the "
                "rows of its two tables as they are, token_table[ids] + position_table[start:start + T]":
                    tok[ids] * tok.shape[-1] ** 0.5 + pos[start:start + T]}
    if T > 1:
        mistakes["one position row, position_table[start], added to every token: each position t needs its own "
                 "row, position_table[start + t], for t = 0 .. T - 1"] = tok[ids] + pos[start]
    if bool((ids == 0).any()):
        mistakes[ID_0_ZEROED] = tok[ids] * (ids != 0)[..., None] + pos[start:start + T]
    if tok.shape[0] >= start + T:
        mistakes[POSITIONS_FROM_TOKENS] = tok[ids] + tok[start:start + T]
    if start:
        mistakes["`start` not passed on to add_positions"] = tok[ids] + pos[:T]
        mistakes[FROM_START_TO_T] = tok[ids[:, start:]] + pos[start:T] if start < T else None
    call = (lambda: m(ids, start)) if start else (lambda: m(ids))
    return Case(f"Embeddings(cfg)(ids of shape {tuple(ids.shape)}, start={start})", call,
                tok[ids] + pos[start:start + T], mistakes)


POSITIONS_FROM_TOKENS = ("the position vectors read from the token table (self.token_table passed where "
                         "self.position_table belongs): position t got token t's vector, and the position table is "
                         "never used")
MODULE_HINT = "add_positions(embed_lookup(self.token_table, ids), self.position_table, start)"
TABLES_SWAPPED = ("token ids looked up in the position table (the two tables swapped, or position_table[ids]): the "
                  "ids go to the token table, self.token_table, and the positions start .. start + T - 1 to "
                  "self.position_table")


def _raising_modules(ref, ids, start):
    """{typical mistake: a function that raises its error} of Embeddings(ids, start): the ids looked up in the
    position table (its T_max rows end before the vocabulary's V), with the engine's two steps, which the
    learner's module calls when it is graded on its own."""
    engine = pieces.module("embeddings")
    tok, pos = ref.token_table.detach(), ref.position_table.detach()
    return {TABLES_SWAPPED: lambda: engine.add_positions(engine.embed_lookup(pos, ids), tok, start)}


@graded("embeddings.Embeddings", points=2)
def test_embeddings_module_adds_token_and_position_vectors(student):
    ref, ids = _embeddings_case()
    m = student.piece("embeddings", "Embeddings")(CFG)
    m.double()
    load_weights(m, ref.state_dict(), "Embeddings(cfg)")
    cases = _module_case(m, ref, ids, 0), _module_case(m, ref, ids, 2), _module_case(m, ref, ids[:, :3], 1)
    with torch.no_grad():
        _expect_runs_on(cases[0], cases[2], _raising_modules(ref, ids, 0), _raising_modules(ref, ids[:, :3], 1),
                        hint=MODULE_HINT)
    expect_cases(*cases)


NO_EMBEDDING_DROPOUT = "no dropout: forward returns x without passing it through self.drop (an nn.Dropout of p)"
DROPOUT_HINT = "return self.drop(x): the module's nn.Dropout(dropout), which drops in training mode only"


@graded("embeddings.Embeddings", points=1)
def test_embeddings_module_applies_its_dropout(student):
    """Embeddings(cfg, dropout=p) in training mode: each element of x is 0 with probability p, the rest
    x / (1 - p); for p = 0.5 and 0.25. In eval mode x as it is."""
    ref, _ = _embeddings_case(seed=8)
    ids = torch.randint(0, CFG.vocab_size, (4, 8), generator=torch.Generator().manual_seed(9))   # 192 elements
    want = ref.token_table.detach()[ids] + ref.position_table.detach()[:8]                      # (B, T, D)
    m = student.piece("embeddings", "Embeddings")(CFG, dropout=0.5)
    m.double()
    load_weights(m, ref.state_dict(), "Embeddings(cfg, dropout=0.5)")
    m.eval()
    with torch.no_grad():                               # first: the ids in the right table
        expect_runs(lambda: m(ids), f"Embeddings(cfg, dropout=0.5) in eval mode (ids of shape {tuple(ids.shape)})",
                    mistakes=_raising_modules(ref, ids, 0),
                    second=Second(lambda: m(ids[2:, :6]), None, _raising_modules(ref, ids[2:, :6], 0)),
                    hint=MODULE_HINT)
    for p in (0.5, 0.25):
        what = f"Embeddings(cfg, dropout={p}) in training mode (ids of shape {tuple(ids.shape)})"
        m = student.piece("embeddings", "Embeddings")(CFG, dropout=p)
        m.double()
        load_weights(m, ref.state_dict(), f"Embeddings(cfg, dropout={p})")
        m.train()
        torch.manual_seed(0)
        with torch.no_grad():
            out = m(ids)
        expect_true(isinstance(out, torch.Tensor) and out.shape == want.shape, what,
                    f"expected a tensor of shape {tuple(want.shape)}", DROPOUT_HINT)
        zero = out == 0
        share = zero.double().mean().item()
        expect_true(share > 0 or not torch.allclose(out, want), what, "no element is 0: nothing was dropped out",
                    DROPOUT_HINT, mistake=NO_EMBEDDING_DROPOUT)
        expect_true(abs(share - p) < 0.15, what, f"{share:.0%} of the elements are 0, where dropout={p} zeroes about "
                                                f"{p:.0%}", "the module's dropout takes its p from the argument")
        expect_close(out[~zero], (want / (1 - p))[~zero], f"{what}: the elements kept",
                     hint="the elements kept are divided by 1 - p (nn.Dropout does it)")
        m.eval()
        with torch.no_grad():
            expect_close(m(ids), want, f"Embeddings(cfg, dropout={p}) in eval mode", hint=DROPOUT_HINT)
