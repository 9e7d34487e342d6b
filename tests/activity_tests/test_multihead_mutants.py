"""Mutation tests of andrea_course/activity_tests/test_multihead.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
GAPS: mistakes that once went unnamed (issue 15), the same rows.
The tests over each table are written once, in mutant_checks.py (README.md)."""
import math

import torch
import torch.nn.functional as F

from andrea_course.grading.student import InProcessStudent
from andrea_course import pieces

from mutant_checks import MODULES, the_graded_test_names_the_mistake, the_gaps_are_named

mh = pieces.module("multihead")


# ----- the mutants: what a learner typically writes instead -----

class MHAWithoutWO(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, K = self.n_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, H * K, H * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, H), mh.split_heads(v, H)
        return mh.merge_heads(self.attention(q, k, v))


class MHAReshapeSplit(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        (B, T, D), H, K = x.shape, self.n_heads, self.d_head
        q, k, v = (t.reshape(B, H, T, K) for t in self.qkv(x).split(D, dim=-1))
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class MHAIgnoringTheCache(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        return super().forward(x)


class MHAPerHeadTriples(mh.MultiHeadAttention):
    """The fused projection read as per-head [q | k | v] triples."""
    def forward(self, x, cache=None):
        B_, T_, _ = x.shape
        q, k, v = self.qkv(x).view(B_, T_, self.n_heads, 3 * self.d_head).transpose(1, 2).split(self.d_head, dim=-1)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class MHAQueriesInGHeads(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, G), mh.split_heads(k, G), mh.split_heads(v, G)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class MHACallingSDPAItself(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))


class MHASkippingCacheAndShare(mh.MultiHeadAttention):
    """Notebook 03's forward without the one given call: right while there is no cache and G = H."""
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


def _head_entropy(plogp=lambda w: torch.special.entr(w), over=-1, reduce_keys="sum", sign=1, log_base=math.e,
                  per_head=True):
    """A head_entropy written with one typical mistake, chosen by the switches."""
    def head_entropy(weights):
        terms = plogp(weights)
        per_row = terms.sum(dim=over) if reduce_keys == "sum" else terms.mean(dim=over)
        out = sign * per_row / math.log(log_base)
        return out.mean(dim=(0, 2)) if per_head else out.mean()
    return head_entropy


# ----- the twelfth fresh set's mutants -----

def _merge_unpacked_as_bthk(y):
    B, T, H, K = y.shape
    return y.transpose(1, 2).reshape(B, T, H * K)


class MHAAddingX(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        return x + super().forward(x, cache)


class MHASharingBeforeTheSplit(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        k, v = self.cache_and_share(k, v, cache)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_multihead.py", "test_split_heads",
     {("multihead", "split_heads"): lambda x, H: x.reshape(x.shape[0], H, x.shape[1], x.shape[2] // H)},
     "mixes positions and heads"),
    ("test_multihead.py", "test_merge_heads",
     {("multihead", "merge_heads"): lambda y: y.reshape(y.shape[0], y.shape[2], -1)}, "mixes positions and heads"),
    ("test_multihead.py", "test_multihead_attention", {("multihead", "MultiHeadAttention"): MHAWithoutWO},
     "W_O forgotten"),
    ("test_multihead.py", "test_multihead_attention", {("multihead", "MultiHeadAttention"): MHAReshapeSplit},
     "mixes positions and heads"),
    # issue 13's eight mistakes that once got full marks
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHAIgnoringTheCache}, "not what cache_and_share returns"),
    ("test_multihead.py", "test_multihead_attention",
     {("multihead", "MultiHeadAttention"): MHAPerHeadTriples}, "one [q | k | v] triple per head"),
    # issue 15, notebook 03: the cache and grouped heads in one given call; head_entropy
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare}, "not what cache_and_share returns"),
    ("test_multihead.py", "test_head_entropy",
     {("multihead", "head_entropy"): _head_entropy(plogp=lambda w: -w * w.log())}, "NaN from 0·log 0"),
    ("test_multihead.py", "test_head_entropy_of_a_sharp_and_an_even_head",
     {("multihead", "head_entropy"): _head_entropy(plogp=lambda w: -w * w.log())}, "NaN from 0·log 0"),
    ("test_multihead.py", "test_head_entropy", {("multihead", "head_entropy"): _head_entropy(over=-2)},
     "summed over the queries"),
    ("test_multihead.py", "test_head_entropy", {("multihead", "head_entropy"): _head_entropy(reduce_keys="mean")},
     "averaged over the keys"),
    ("test_multihead.py", "test_head_entropy", {("multihead", "head_entropy"): _head_entropy(sign=-1)},
     "the sign forgotten"),
    ("test_multihead.py", "test_head_entropy", {("multihead", "head_entropy"): _head_entropy(log_base=2)},
     "log base 2"),
    ("test_multihead.py", "test_head_entropy_of_a_sharp_and_an_even_head",
     {("multihead", "head_entropy"): _head_entropy(log_base=2)}, "log base 2"),
    ("test_multihead.py", "test_head_entropy", {("multihead", "head_entropy"): _head_entropy(per_head=False)},
     "averaged over the heads too"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_multihead.py", "test_multihead_attention_calls_its_attention_slot",
     {("multihead", "MultiHeadAttention"): MHACallingSDPAItself}, "self.attention never called"),
    # the twelfth fresh set's classes
    ("test_multihead.py", "test_split_heads",
     {("multihead", "split_heads"): lambda x, H: torch.stack(x.split(H, dim=-1), dim=1)}, "x.split(n_heads, dim=-1)"),
    ("test_multihead.py", "test_merge_heads", {("multihead", "merge_heads"): _merge_unpacked_as_bthk},
     "T and H swap names"),
    ("test_multihead.py", "test_merge_heads", {("multihead", "merge_heads"): lambda y: y.sum(dim=1)},
     "the heads' outputs added up"),
    ("test_multihead.py", "test_multihead_attention", {("multihead", "MultiHeadAttention"): MHAAddingX},
     "a residual connection inside the attention"),
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache", {("multihead", "MultiHeadAttention"): MHAAddingX},
     "a residual connection inside the attention"),
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASharingBeforeTheSplit}, "called before split_heads"),
    ("test_multihead.py", "test_grouped_kv_heads", {("multihead", "MultiHeadAttention"): MHASharingBeforeTheSplit},
     "or made before split_heads"),
    # the thirteenth and fourteenth fresh sets' classes
    ("test_multihead.py", "test_grouped_kv_heads", {("multihead", "MultiHeadAttention"): MHAQueriesInGHeads},
     "the queries split into G heads"),
    # the nineteenth fresh set's classes
    ("test_multihead.py", "test_split_heads",
     {("multihead", "split_heads"): lambda x, H: torch.stack([x[..., h * H:(h + 1) * H] for h in range(H)], dim=1)},
     "a slice of width H"),
    ("test_multihead.py", "test_merge_heads",
     {("multihead", "merge_heads"): lambda y: torch.cat([y[:, h] for h in range(y.shape[1])], dim=1)},
     "the heads joined along the positions"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)


def test_skipping_cache_and_share_passes_notebook_03s_own_test():
    """Without the one given call, MultiHeadAttention is right in notebook 03 (no cache, G = H): its
    own graded test passes; the tests taught later (above) name the call that was skipped."""
    student = InProcessStudent("solutions", overrides={("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare})
    MODULES["test_multihead.py"].test_multihead_attention(student)


# ----- issue 15's gaps: mistakes that were never named -----

GAPS = [
    ("test_multihead.py", "test_grouped_kv_heads", {("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare},
     "not what cache_and_share returns"),
]


test_the_gaps_are_named = the_gaps_are_named(GAPS)
