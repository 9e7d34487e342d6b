"""Mutation tests of andrea_course/activity_tests/test_embeddings.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
GAPS: mistakes that once went unnamed (issue 15), the same rows.
UNKNOWN: wrong pieces no catalogue knows; the failure shows where the values differ.
WRONG: wrong pieces no name fits; each must still fail its graded test.
The tests over each table are written once, in mutant_checks.py (README.md)."""
import torch
import torch.nn.functional as F

from andrea_course import pieces

from mutant_checks import (the_graded_test_names_the_mistake, the_gaps_are_named,
                           an_unknown_mistake_shows_where_the_values_differ, a_wrong_piece_fails_its_graded_test)

emb = pieces.module("embeddings")


# ----- the mutants: what a learner typically writes instead -----

class EmbeddingsWithoutPositions(emb.Embeddings):
    def forward(self, ids, start=0):
        return emb.embed_lookup(self.token_table, ids)


class EmbeddingsWithOnePositionRow(emb.Embeddings):
    def forward(self, ids, start=0):
        return self.drop(self.token_table[ids] + self.position_table[start])


class EmbeddingsWithoutDropout(emb.Embeddings):
    def forward(self, ids, start=0):
        return emb.add_positions(emb.embed_lookup(self.token_table, ids), self.position_table, start)


class EmbeddingsWithAFixedDropout(emb.Embeddings):
    def __init__(self, cfg, dropout=0.0):
        super().__init__(cfg, dropout)
        self.drop = torch.nn.Dropout(0.1)


class _embeddings_from_start_to_T(emb.Embeddings):
    """Embeddings whose loop runs over range(start, T), position t for token t."""
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids)
        return self.drop(torch.stack([tok[:, t] + self.position_table[t] for t in range(start, ids.shape[1])], dim=1))


def _nearest(score=lambda t, q: F.cosine_similarity(t, q[None], dim=-1), pick=lambda s, k: s.topk(k).indices):
    """A nearest_tokens written with one typical mistake: in how it scores the rows or picks k of them."""
    return lambda table, query, k: pick(score(table, query), k)


# ----- the twelfth fresh set's mutants -----

def _lookup_assuming_b_t(table, ids):
    B, T = ids.shape
    return table[ids.reshape(-1)].view(B, T, table.shape[1])


class EmbeddingsScaledBySqrtD(emb.Embeddings):
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids) * self.token_table.shape[1] ** 0.5
        return self.drop(emb.add_positions(tok, self.position_table, start))


# ----- the twenty-first fresh set's mutants -----

class _EmbeddingsMaskingId0(emb.Embeddings):
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids) * (ids != 0)[..., None]
        return self.drop(emb.add_positions(tok, self.position_table, start))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_embeddings.py", "test_embed_lookup_reads_one_row_per_id",
     {("embeddings", "embed_lookup"): lambda table, ids: table[(ids + 1) % table.shape[0]]}, "shifted by one"),
    ("test_embeddings.py", "test_add_positions_from_zero",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok}, "positions not added"),
    ("test_embeddings.py", "test_add_positions_after_cached_tokens",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + pos[:tok.shape[1]]}, "`start` ignored"),
    ("test_embeddings.py", "test_add_positions_after_cached_tokens",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + pos[start:start + tok.shape[1]].flip(0)},
     "in reverse"),
    ("test_embeddings.py", "test_add_positions_after_cached_tokens",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + pos[start + 1:start + 1 + tok.shape[1]]},
     "off by one"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1)}, "raw dot product"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): EmbeddingsWithoutPositions}, "positions not added"),
    # issue 13's eight mistakes that once got full marks
    ("test_embeddings.py", "test_embed_onehot_when_the_last_ids_are_absent",
     {("embeddings", "embed_onehot"): lambda table, ids: F.one_hot(ids).to(table.dtype) @ table}, "without num_classes"),
    # issue 15 item 6: nearest_tokens (notebook 01), gelu_grad (notebook 04)
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k, largest=False).indices)}, "LEAST similar"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.argsort()[:k])}, "LEAST similar"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(score=lambda t, q: t @ q)}, "raw dot product"),
    ("test_embeddings.py", "test_nearest_tokens_of_a_row_starts_with_that_row",
     {("embeddings", "nearest_tokens"): _nearest(score=lambda t, q: t @ q)}, "raw dot product"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(score=lambda t, q: t / t.norm(dim=0) @ q / q.norm())},
     "norm taken over the wrong axis"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(score=lambda t, q: F.cosine_similarity(t, q.expand_as(t), dim=0))},
     "cosine taken over the wrong axis"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k).indices.sort().values)},
     "not the most similar first"),
    ("test_embeddings.py", "test_nearest_tokens_of_a_row_starts_with_that_row",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k).values)}, "scores returned"),
    # issue 23: mistakes no test caught
    ("test_embeddings.py", "test_cosine_similarity_of_a_zero_vector_is_zero",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))},
     "no guard against a zero vector"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_embeddings.py", "test_embeddings_module_applies_its_dropout",
     {("embeddings", "Embeddings"): EmbeddingsWithoutDropout}, "no dropout"),
    # the twelfth fresh set's classes
    ("test_embeddings.py", "test_embed_lookup_of_one_sequence",
     {("embeddings", "embed_lookup"): _lookup_assuming_b_t}, "B, T = ids.shape"),
    ("test_embeddings.py", "test_embed_onehot_equals_the_lookup",
     {("embeddings", "embed_onehot"): lambda table, ids: torch.mm(F.one_hot(ids, table.shape[0]).to(table.dtype), table)},
     "torch.mm"),
    ("test_embeddings.py", "test_add_positions_from_zero",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + pos[start:start + tok.shape[1]].unsqueeze(1)},
     "unsqueezed to (T, 1, D)"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: torch.dot(u, v) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)},
     "torch.dot"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"):
      lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(p=1, dim=-1) * v.norm(p=1, dim=-1)).clamp_min(eps)}, "L1 norms"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (
         u.norm(dim=-1, keepdim=True) * v.norm(dim=-1, keepdim=True)).clamp_min(eps)}, "keepdim=True"),
    ("test_embeddings.py", "test_cosine_similarity_of_a_zero_vector_is_zero",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (
         u.norm(dim=-1, keepdim=True) * v.norm(dim=-1, keepdim=True)).clamp_min(eps)}, "keepdim=True"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k + 1).indices[1:])}, "the best match dropped"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(score=lambda t, q: F.cosine_similarity(t, q[None], dim=-1).abs())},
     "absolute cosine"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): EmbeddingsScaledBySqrtD}, "scaled by sqrt(D)"),
    # the eleventh fresh set's classes
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) ** 2).clamp_min(eps)},
     "the same vector's length twice"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k).values.long())}, "made integers"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): EmbeddingsWithOnePositionRow}, "one position row"),
    # the nineteenth fresh set's classes
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): _embeddings_from_start_to_T}, "only the tokens start .. T - 1 came out"),
    ("test_embeddings.py", "test_embed_onehot_equals_the_lookup",
     {("embeddings", "embed_onehot"): lambda table, ids: F.one_hot(ids, table.shape[0]).to(table.dtype)[..., :-1] @ table[:-1]},
     "the tokens of id V - 1 came out as zero vectors"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v)[..., -1] / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(eps)},
     "the last feature's product alone"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.argmax().repeat(k))}, "the best row k times"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k - 1).indices)}, "the last one missing"),
    # the twentieth fresh set's classes
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(max=eps)},
     "capped at eps"),
    # the twenty-first fresh set's classes
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): _EmbeddingsMaskingId0}, "the tokens of id 0 given a zero vector"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)


# ----- issue 15's gaps: mistakes that were never named -----

GAPS = [
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm() * v.norm())},
     "norms over the whole tensor"),
]


test_the_gaps_are_named = the_gaps_are_named(GAPS)


# ----- issue 23: a mistake no catalogue knows -----

UNKNOWN = [  # a wrong piece no catalogue knows: the failure shows where the values differ, with positions
    ("test_embeddings.py", "test_add_positions_from_zero",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + 2 * pos[start:start + tok.shape[1]]}),
]


test_an_unknown_mistake_shows_where_the_values_differ = an_unknown_mistake_shows_where_the_values_differ(UNKNOWN)


# ----- issue 30 item 4: wrong pieces no name fits still fail -----

def _positions_detached(tok, position_table, start=0):
    return tok + position_table[start:start + tok.shape[-2]].detach()


WRONG = [  # (graded file, graded test, the wrong piece): it must fail, whatever the failure names
    ("test_embeddings.py", "test_embeddings_module_applies_its_dropout",
     {("embeddings", "Embeddings"): EmbeddingsWithAFixedDropout}),
    ("test_embeddings.py", "test_add_positions_from_zero", {("embeddings", "add_positions"): _positions_detached}),
]


test_a_wrong_piece_fails_its_graded_test = a_wrong_piece_fails_its_graded_test(WRONG)
