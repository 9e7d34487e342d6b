"""Mutation tests of the graded tests: every typical mistake, written as a small wrong
implementation (a mutant), must make its graded test fail with a Mismatch that names it.
Also: the reference passes every graded test, and the untouched exercises fail every one
with "not implemented yet" and the exercise's name, without an error at collection."""
import functools
from collections import Counter
import importlib.util
import math
import os
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from andrea_course.grading import Mismatch
from andrea_course.grading.student import InProcessStudent
from andrea_course.exercises import exercise_pieces
from andrea_course import pieces
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.paths import ROOT, STUB_MARK

GRADED_FILES = ["test_embeddings.py", "test_attention.py", "test_multihead.py", "test_mlp.py",
                "test_block.py", "test_model.py", "test_modern.py", "test_optim.py", "test_inside.py"]
TESTS = ACTIVITY_TESTS
emb, att, mh, mlp, blk, mdl = (pieces.module(a) for a in ("embeddings", "attention", "multihead", "mlp", "block", "model"))
NEG_INF = float("-inf")


HIDDEN = ROOT / "instructor" / "hidden_tests"     # the instructor's hidden tests, when this checkout has them


def _load(file):
    """An activity's graded tests, with its hidden ones when present, as one namespace (its tests
    are then plain functions of `student`)."""
    found = {}
    for path in (TESTS / file, HIDDEN / file.replace("test_", "test_hidden_", 1)):
        if path.exists():
            spec = importlib.util.spec_from_file_location(f"_graded_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.update(vars(module))
    return types.SimpleNamespace(**found)


MODULES = {f: _load(f) for f in GRADED_FILES}


@functools.cache
def _module(file):
    """A graded file's tests: GRADED_FILES loaded above; test_kernels.py, which needs Triton, on first use."""
    if file not in MODULES and importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed")
    return MODULES[file] if file in MODULES else _load(file)


def _graded_tests():
    """[(file, test name, exercise)] of every graded test in GRADED_FILES."""
    out = []
    for file, module in MODULES.items():
        for name, fn in vars(module).items():
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "exercise"]
            if name.startswith("test_") and marks:
                out.append((file, name, marks[0].args[0]))
    return out


# ----- the mutants: what a learner typically writes instead -----

def _masked_with(allowed_fn):
    def attention(q, k, v, causal=True):
        scores = att.scale_scores(att.attention_scores(q, k), q.shape[-1])
        T, S = scores.shape[-2:]
        return att.weighted_sum(att.softmax(scores.masked_fill(~allowed_fn(T, S), NEG_INF)), v)
    return attention


def attention_unscaled(q, k, v, causal=True):
    return att.weighted_sum(att.softmax(att.apply_causal_mask(att.attention_scores(q, k))), v)


def attention_scaled_by_axis_1(q, k, v, causal=True):
    """Scaled by q.size(1), as if q were (B, T, K): the heads' count for (B, H, T, K)."""
    return att.weighted_sum(att.softmax(att.apply_causal_mask(att.scale_scores(att.attention_scores(q, k), q.size(1)))), v)


def attention_mask_after_softmax(q, k, v, causal=True):
    w = att.softmax(att.scale_scores(att.attention_scores(q, k), q.shape[-1]))
    return att.weighted_sum(w * att.causal_mask(*w.shape[-2:]), v)


def attention_softmax_dim0(q, k, v, causal=True):
    scores = att.apply_causal_mask(att.scale_scores(att.attention_scores(q, k), q.shape[-1]))
    return att.weighted_sum(torch.softmax(scores, dim=-2), v)


class HeadWithoutMask(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=False)


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


def _gelu(c, a):
    return lambda x: 0.5 * x * (1 + torch.tanh(c * (x + a * x ** 3)))


def _layer_norm(center=True, unbiased=False, eps_inside=True, gamma=True, beta=True, dim=-1):
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(dim=dim, keepdim=True) if center else 0
        var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
        y = (x - mean) / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)
        return (y * weight if gamma else y) + (bias if beta and bias is not None else 0)
    return layer_norm


def _layer_norm_mean_without_first(x, weight, bias, eps=1e-5):
    mean = x[..., 1:].sum(dim=-1, keepdim=True) / x.shape[-1]
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + (bias if bias is not None else 0)


class _block_dropping_attention(blk.Block):
    def forward(self, x, cache=None):
        out = x + self.drop(self.attn(self.ln1(x), cache))
        out = x + self.drop(self.mlp(self.ln2(x)))
        return out


class BlockNormalisedResidual(blk.Block):
    def forward(self, x, cache=None):
        x = self.ln1(x)
        x = x + self.attn(x, cache)
        x = self.ln2(x)
        return x + self.mlp(x)


class ModelWithoutFinalNorm(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return x @ self.output_weight().T


class ModelScalingItsEmbeddings(mdl.ANDREA):
    """The embeddings multiplied by sqrt(D), as the original Transformer paper does."""
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0) * self.cfg.d_model ** 0.5
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.ln_f(x) @ self.output_weight().T


class ModelIgnoringStart(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        return self.ln_f(x) @ self.output_weight().T


class ModelNotChainingItsBlocks(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0)
        for i, block in enumerate(self.blocks):
            h = block(x, caches[i] if caches else None)
        return self.ln_f(h) @ self.output_weight().T


class EmbeddingsWithoutPositions(emb.Embeddings):
    def forward(self, ids, start=0):
        return emb.embed_lookup(self.token_table, ids)


class MHAIgnoringTheCache(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        return super().forward(x)


class MHARepeatingBeforeTheCache(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        k, v = mh.repeat_kv(k, H // G), mh.repeat_kv(v, H // G)
        if cache is not None:
            k, v = cache.update(k, v)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class MHAKeysInHHeads(mh.MultiHeadAttention):
    """k and v split into H heads (of width G·K/H), like the queries."""
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, H), mh.split_heads(v, H)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(self.attention(q, k, v)))


class PostNormMLPOfTheInput(blk.PostNormBlock):
    def forward(self, x, cache=None):
        h = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln2(h + self.drop(self.mlp(x)))


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


class PostNormReadingLn1(blk.PostNormBlock):
    def forward(self, x, cache=None):
        x = self.ln1(x + self.drop(self.attn(self.ln1(x), cache)))
        return self.ln2(x + self.drop(self.mlp(x)))


class BlockDroppingTheCache(blk.Block):
    def forward(self, x, cache=None):
        return super().forward(x)


class BlockWithoutDropout(blk.Block):
    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache)
        return x + self.mlp(self.ln2(x))


class ModelDroppingTheCaches(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.output_weight().T


class ModelAlwaysLayerNorm(mdl.ANDREA):
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.ln_f = blk.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


# issue 30 item 4: wrong pieces that passed: slots bypassed, dropout skipped or fixed, bias=None, RoPE's table
def _layer_norm_adding_bias(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, None, eps) + bias         # raises when bias is None


class MLPCallingGeluItself(mlp.MLP):
    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class MHACallingSDPAItself(mh.MultiHeadAttention):
    def forward(self, x, cache=None):
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)
        q, k, v = mh.split_heads(q, H), mh.split_heads(k, G), mh.split_heads(v, G)
        k, v = self.cache_and_share(k, v, cache)
        return self.proj(mh.merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)))


class SwiGLUCallingSiluItself(pieces.module("modern").SwiGLU):
    def forward(self, x):
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class ModelComputingItsOwnLoss(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        logits = super().forward(ids, caches=caches)
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class MLPWithAFourDFc(mlp.MLP):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.fc = torch.nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)


class EmbeddingsWithOnePositionRow(emb.Embeddings):
    def forward(self, ids, start=0):
        return self.drop(self.token_table[ids] + self.position_table[start])


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


def _rope_reflected(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c + x2 * s, x1 * s - x2 * c], dim=-1)


class EmbeddingsWithoutDropout(emb.Embeddings):
    def forward(self, ids, start=0):
        return emb.add_positions(emb.embed_lookup(self.token_table, ids), self.position_table, start)


class EmbeddingsWithAFixedDropout(emb.Embeddings):
    def __init__(self, cfg, dropout=0.0):
        super().__init__(cfg, dropout)
        self.drop = torch.nn.Dropout(0.1)


class BlockWithAFixedDropout(blk.Block):
    def __init__(self, cfg, dropout=0.0):
        super().__init__(cfg, dropout)
        self.drop = torch.nn.Dropout(0.1)


class PostNormBlockWithoutDropout(blk.PostNormBlock):
    def forward(self, x, cache=None):
        x = self.ln1(x + self.attn(x, cache))
        return self.ln2(x + self.mlp(x))


class PostNormBlockWithoutTheMLPResidual(blk.PostNormBlock):
    def forward(self, x, cache=None):
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln2(self.drop(self.mlp(x)))


class ModelWithABiasedFinalNorm(mdl.ANDREA):
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.ln_f = blk.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


def _count_with_a_position_table(cfg):
    """The answer key's count, with a learned position table counted whatever cfg.position says."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    table = cfg.context_length * cfg.d_model
    return dict(counts, position_table=table, total=counts["total"] - counts["position_table"] + table)


class _embeddings_from_start_to_T(emb.Embeddings):
    """Embeddings whose loop runs over range(start, T), position t for token t."""
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids)
        return self.drop(torch.stack([tok[:, t] + self.position_table[t] for t in range(start, ids.shape[1])], dim=1))


def _count_one_block_short(cfg):
    """The answer key's count with L - 1 blocks."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    return dict(counts, blocks=counts["blocks"] - counts["block"], total=counts["total"] - counts["block"])


def _kv_bytes_ignoring_seq_len(cfg, batch=1, seq_len=None, bytes_per_value=2):
    return 2 * cfg.n_layers * batch * cfg.kv_heads * cfg.context_length * cfg.d_head * bytes_per_value


def _upper(T, S):
    return torch.ones(T, S, dtype=torch.bool).triu(S - T)


def _strict_lower(T, S):
    return torch.ones(T, S, dtype=torch.bool).tril(S - T - 1)


def _lr(warmup_from_zero=False, to_zero=False, over_max_steps=False, no_clamp=False):
    def lr_at(step, lr, min_lr, warmup_steps, max_steps):
        if step < warmup_steps:
            return lr * (step if warmup_from_zero else step + 1) / warmup_steps
        span = max_steps if over_max_steps else max(1, max_steps - warmup_steps)
        progress = (step - warmup_steps) / span
        progress = progress if no_clamp else min(1.0, progress)
        low = 0.0 if to_zero else min_lr
        return low + 0.5 * (lr - low) * (1 + math.cos(math.pi * progress))
    return lr_at


def _adamw(correct="mv", decoupled=True, decay_times_lr=True, eps_inside=False, root=True, v_of=lambda g: g * g,
           v_by_beta1=False):
    def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        (b1, b2) = betas
        if not decoupled:
            grad = grad + weight_decay * param
        m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - (b1 if v_by_beta1 else b2)) * v_of(grad)
        m_hat = m / (1 - b1 ** step) if "m" in correct else m
        v_hat = v / (1 - b2 ** step) if "v" in correct else v
        if decoupled:
            param = param * (1 - (lr * weight_decay if decay_times_lr else weight_decay))
        denom = (v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps if root else v_hat + eps
        return param - lr * m_hat / denom, m, v
    return adamw_step


# issue 15 item 6: averaging the past (notebook 02), sampling and the KV cache (notebook 06)
def _rows(w):
    return w / w.sum(dim=-1, keepdim=True)


def _softmax_of_zeros(fill=NEG_INF, hide=lambda T: torch.ones(T, T, dtype=torch.bool).triu(1), dim=-1):
    return lambda T: torch.softmax(torch.zeros(T, T).masked_fill(hide(T), fill), dim=dim)


def _sampler(multiply=False, greedy_at_zero=True, keep=lambda k: k, below="<", fill=NEG_INF,
             exactly_k=False, from_logits=False, always_argmax=False, row_0=False):
    """A sample_next written with one typical mistake, chosen by the switches."""
    def sample_next(logits, temperature, top_k, generator=None):
        if always_argmax or (temperature == 0 and greedy_at_zero):
            return logits.argmax(dim=-1, keepdim=True)
        z = logits * temperature if multiply else logits / temperature
        if top_k is not None:
            top = z.topk(keep(top_k), dim=-1)
            if exactly_k:
                z = z.masked_fill(~torch.zeros_like(z, dtype=torch.bool).scatter(-1, top.indices, True), fill)
            else:
                kth = top.values[:1, -1:] if row_0 else top.values[:, -1:]
                z = z.masked_fill(z < kth if below == "<" else z <= kth, fill)
        return torch.multinomial(z if from_logits else torch.softmax(z, dim=-1), 1, generator=generator)
    return sample_next


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


class CacheCheckingWithoutT(mdl.KVCache):
    """The given full-cache check edited to ignore the T new positions."""
    def update(self, k, v):
        T = k.shape[2]
        if self.pos > self.k.shape[2]:
            raise ValueError("KV cache full")
        self.k[:, :, self.pos:self.pos + T], self.v[:, :, self.pos:self.pos + T] = k, v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


class CacheNotAdvancing(mdl.KVCache):
    def update(self, k, v):
        T = k.shape[2]
        self.k[:, :, self.pos:self.pos + T], self.v[:, :, self.pos:self.pos + T] = k, v
        return self.k[:, :, :self.pos + T], self.v[:, :, :self.pos + T]


class CacheFromZero(mdl.KVCache):
    def update(self, k, v):
        T = k.shape[2]
        self.k[:, :, :T], self.v[:, :, :T] = k, v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


class CacheReturningTheNew(mdl.KVCache):
    def update(self, k, v):
        super().update(k, v)
        return k, v


class CacheConcatenatingHeads(mdl.KVCache):
    def update(self, k, v):
        if self.pos == 0:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], dim=1), torch.cat([self.v, v], dim=1)
        self.pos += k.shape[2]
        return self.k, self.v


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


# issue 15 item 6: the nearest tokens to a query (notebook 01), the slope of the exact GELU (notebook 04)
def _nearest(score=lambda t, q: F.cosine_similarity(t, q[None], dim=-1), pick=lambda s, k: s.topk(k).indices):
    """A nearest_tokens written with one typical mistake: in how it scores the rows or picks k of them."""
    return lambda table, query, k: pick(score(table, query), k)


def _phi(x):
    return torch.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)


def _gelu_grad(cdf=lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))), pdf=_phi, sign=1):
    """A gelu_grad written with one typical mistake: Phi(x) + sign·x·phi(x), with its Phi and phi."""
    return lambda x: cdf(x) + sign * x * pdf(x)


def _gelu_tanh_grad(x):
    """The slope of the tanh form, by hand: 0.5·(1 + tanh u) + 0.5·x·(1 - tanh² u)·u'."""
    c = math.sqrt(2 / math.pi)
    t = torch.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2)


# issue 15 item 6: dropout (notebook 05)
def _dropout(scale=None, keep_with_p=False, in_eval=False, at_1=True, mask_shape=None,
             use_generator=True):
    """A dropout written with one typical mistake, chosen by the switches."""
    def dropout(x, p, training, generator=None):
        if not (training or in_eval) or p == 0:
            return x
        if p == 1 and at_1:
            return torch.zeros_like(x)
        u = torch.rand(mask_shape(x) if mask_shape else x.shape, generator=generator if use_generator else None)
        keep = u < p if keep_with_p else u >= p
        return x * keep / (1 - p) if scale is None else x * keep * scale(p)
    return dropout


# issue 15 item 6: the row-softmax kernel (notebook 08)
def _softmax_kernel(**switches):
    """The exercise's softmax(x) launching a softmax kernel with one typical mistake (tests/softmax_kernels.py,
    imported on first use: it needs Triton)."""
    return lambda x: importlib.import_module("softmax_kernels").softmax_with(**switches)(x)


def _classic_count(cfg, grouped=False):
    """count_parameters written for the classic block only: two MLP matrices, LayerNorms with a beta
    when there are biases, H heads for keys and values (grouped: G of them), whatever the config says."""
    V, T, D, L, F_, b = cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.n_layers, cfg.d_ff, int(cfg.bias)
    norm = D + D * b
    qkv = (cfg.n_heads + 2 * cfg.kv_heads) * cfg.d_head if grouped else 3 * D
    attention = D * qkv + b * qkv + D * D + b * D
    mlp = 2 * D * F_ + b * (F_ + D)
    block = attention + mlp + 2 * norm
    counts = dict(token_table=V * D, position_table=T * D, attention=attention, mlp=mlp, norms=2 * norm, block=block,
                  blocks=L * block, final_norm=norm, head=0 if cfg.tie_embeddings else V * D)
    counts["total"] = counts["token_table"] + counts["position_table"] + counts["blocks"] + norm + counts["head"]
    return counts


class _kernel:
    """A kernel of tests/softmax_kernels.py (or of another module of tests/: tests/learner_kernels.py),
    imported on first use (it needs Triton); its source is the kernel's."""

    def __init__(self, name, module="softmax_kernels"):
        self.name, self.module = name, module

    @property
    def fn(self):
        return getattr(importlib.import_module(self.module), self.name).fn

    def __getitem__(self, grid):
        return getattr(importlib.import_module(self.module), self.name)[grid]


def _launching(name):
    """The exercise's softmax(x) launching the kernel `name` of tests/softmax_kernels.py."""
    return lambda x: importlib.import_module("softmax_kernels").launching(_kernel(name))(x)


def _gelu_slip(slip):
    """The exercise's gelu(x) launching the learner kernel with slip `slip` (tests/learner_kernels.py)."""
    return lambda x: importlib.import_module("solutions.kernels").gelu(
        x, kernel=importlib.import_module("learner_kernels").GeluSlip(slip))


def _counts_across_words(words):
    """pair_counts over every word occurrence joined into one sequence: pairs across words counted."""
    seq = [t for word, n in words.items() for _ in range(n) for t in word]
    counts = {}
    for pair in zip(seq, seq[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


class CacheReturningTheKeysTwice(mdl.KVCache):
    def update(self, k, v):
        keys, _ = super().update(k, v)
        return keys, keys


def _block_reading_stale(ln2):
    """A pre-norm Block whose MLP reads (ln2 of) ln1(x), kept from before attention."""
    class Stale(blk.Block):
        def forward(self, x, cache=None):
            h = self.ln1(x)
            x = x + self.drop(self.attn(h, cache))
            return x + self.drop(self.mlp(self.ln2(h) if ln2 else h))
    return Stale


class _andrea_shifting_again(mdl.ANDREA):
    """An ANDREA whose loss scores position t against targets[:, t + 1]: the targets shifted again."""
    def forward(self, ids, targets=None, caches=None):
        logits = super().forward(ids, None, caches)
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits[:, :-1], targets[:, 1:])


def _flash_grid(blocks):
    """The exercise's flash_attention launching the answer key's kernel on blocks(T, block_m) query blocks."""
    def launch(q, k, v, start=None):
        kernels = importlib.import_module("solutions.kernels")
        B, H, T, _ = q.shape

        class Grid:
            def __getitem__(self, grid):
                return kernels.flash_attention_kernel[(blocks(T, 16), grid[1])]
        return kernels.flash_attention(q, k, v, start, kernel=Grid())
    return launch


def _flash_slip(slip):
    """The exercise's flash_attention launching the learner kernel with typical slip `slip`."""
    def launch(q, k, v, start=None):
        kernels = importlib.import_module("solutions.kernels")
        return kernels.flash_attention(q, k, v, start, kernel=importlib.import_module("learner_kernels").FlashSlip(slip))
    return launch


def _stream_leaving_its_hooks(model, ids):
    """residual_stream with hooks that are never removed."""
    seen = []
    for module in [model.embed, *model.blocks]:
        module.register_forward_hook(lambda mod, inp, out: seen.append(out))
    with torch.no_grad():
        model(ids)
    return torch.stack(seen)


def _patterns_of_the_block_input(model, ids):
    """attention_patterns recomputed from each block's input (the stream), not ln1 of it."""
    inputs = []
    handles = [b.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for b in model.blocks]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    weights = pieces.module("inside")._weights
    with torch.no_grad():
        return torch.stack([weights(b.attn, x, model.cfg.n_heads) for b, x in zip(model.blocks, inputs)])


def _induction_on_the_earlier_copy(patterns, period):
    t = torch.arange(period, patterns.shape[-2])
    return patterns[..., t, t - period].mean(dim=(1, 3))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
# ----- the twelfth fresh set's mutants: attention and multihead -----

def _average_past_by_cat(x):
    return torch.cat([x[..., :i + 1, :].mean(dim=-2) for i in range(x.shape[-2])], dim=-2)


def _mask_offset_subtracted(T, S=None, device=None):
    S = T if S is None else S
    return torch.arange(S, device=device)[None, :] <= torch.arange(T, device=device)[:, None] - (S - T)


def _softmax_shifted_by(stat):
    """softmax with each row's `stat` (a function of the scores) subtracted instead of its maximum."""
    def softmax(s):
        e = (s - stat(s)).exp()
        return e / e.sum(dim=-1, keepdim=True)
    return softmax


def _average_past_aliased(x):
    """average_past whose running sum is one tensor changed in place and appended itself: every row
    is the final total over i + 1."""
    total, rows = torch.zeros_like(x[..., 0, :]), []
    for i in range(x.shape[-2]):
        total += x[..., i, :]
        rows.append(total)
    return torch.stack([r / (i + 1) for i, r in enumerate(rows)], dim=-2)


def _softmax_divided_by(divisor):
    """softmax whose exponentials e (the row maximum subtracted) are divided by divisor(z, e)."""
    def softmax(s):
        z = s - s.amax(dim=-1, keepdim=True)
        return z.exp() / divisor(z, z.exp())
    return softmax


def _attention_with(scale=lambda K: K, mix="v"):
    """attention from the engine's steps, scale_scores given scale(K), the weights mixing q, k or v (mix)."""
    def attention(q, k, v, causal=True):
        scores = att.scale_scores(att.attention_scores(q, k), scale(q.shape[-1]))
        if causal:
            scores = att.apply_causal_mask(scores)
        return att.weighted_sum(att.softmax(scores), {"q": q, "k": k, "v": v}[mix])
    return attention


class HeadCausalOnlyInTraining(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), self.w_v(x), causal=self.training)


class HeadWithRawValues(att.AttentionHead):
    def forward(self, x):
        return att.attention(self.w_q(x), self.w_k(x), x, causal=True)


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



# ----- the twelfth fresh set's mutants: embeddings, mlp and block -----
def _lookup_assuming_b_t(table, ids):
    B, T = ids.shape
    return table[ids.reshape(-1)].view(B, T, table.shape[1])


class EmbeddingsScaledBySqrtD(emb.Embeddings):
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids) * self.token_table.shape[1] ** 0.5
        return self.drop(emb.add_positions(tok, self.position_table, start))


def _gelu_tanh_flipped(x):
    return 0.5 * x * (1 - torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


class MLPWithGeluFirst(mlp.MLP):
    def forward(self, x):
        return self.proj(self.fc(self.gelu(x)))


def _layer_norm_s12(variance):
    """A layer_norm whose variance is variance(x, mean)."""
    def layer_norm(x, weight, bias, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        y = (x - mean) / torch.sqrt(variance(x, mean) + eps) * weight
        return y + bias if bias is not None else y
    return layer_norm


def _layer_norm_over_two_axes(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=(-2, -1), keepdim=True)
    var = ((x - mean) ** 2).mean(dim=(-2, -1), keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * weight
    return y + bias if bias is not None else y


class BlockWithTheMLPFirst(blk.Block):
    def forward(self, x, cache=None):
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x + self.drop(self.attn(self.ln1(x), cache))


class BlockNormalisingItsOutput(blk.Block):
    def forward(self, x, cache=None):
        return self.ln2(super().forward(x, cache))


class PostNormBlockWithLn1Twice(blk.PostNormBlock):
    def forward(self, x, cache=None):
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln1(x + self.drop(self.mlp(x)))


class PostNormBlockDroppingTheCache(blk.PostNormBlock):
    def forward(self, x, cache=None):
        return super().forward(x)


def _dropout_training_inverted(x, p, training, generator=None):
    if training or p == 0:
        return x
    if p == 1:
        return torch.zeros_like(x)
    return x * (torch.rand(x.shape, generator=generator) >= p) / (1 - p)



# ----- the twelfth fresh set's mutants: model, modern and inside -----
class ModelOneBlockShort(mdl.ANDREA):
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.blocks = torch.nn.ModuleList(list(self.blocks)[:-1])


class ModelWithABiasFollowingTheNorm(mdl.ANDREA):
    """cfg.norm followed, cfg.bias ignored: a LayerNorm final norm always has a bias."""
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        if cfg.norm == "layernorm":
            self.ln_f = blk.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


class ModelRunningTheBlocksBackwards(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0)
        for i, block in enumerate(reversed(self.blocks)):
            x = block(x, caches[i] if caches else None)
        logits = self.ln_f(x) @ self.output_weight().T
        return logits if targets is None else (logits, self.cross_entropy(logits, targets))


class ModelReturningProbabilities(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        out = super().forward(ids, targets, caches)
        if targets is None:
            return torch.softmax(out, dim=-1)
        return torch.softmax(out[0], dim=-1), out[1]


def _count_one_block_in_the_total(cfg):
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    return dict(counts, total=counts["total"] - counts["blocks"] + counts["block"])


def _count_swiglu_biases_as_3f(cfg):
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    if cfg.mlp != "swiglu" or not cfg.bias:
        return counts
    extra = cfg.d_ff - cfg.d_model
    return dict(counts, mlp=counts["mlp"] + extra, block=counts["block"] + extra,
                blocks=counts["blocks"] + cfg.n_layers * extra, total=counts["total"] + cfg.n_layers * extra)


class CacheConcatenatingIntoItsBuffer(mdl.KVCache):
    def update(self, k, v):
        T = k.shape[2]
        if self.pos + T > self.k.shape[2]:
            raise ValueError(f"KV cache full: {self.pos} cached + {T} new > {self.k.shape[2]} positions")
        self.k = torch.cat([self.k[:, :, :self.pos], k], dim=2)
        self.v = torch.cat([self.v[:, :, :self.pos], v], dim=2)
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


def _cache_writing(write):
    """A KVCache whose update writes the T new keys and values with write(buffer, pos, new) (the full-cache
    check and the rest as the answer key has them)."""
    class Cache(mdl.KVCache):
        def update(self, k, v):
            T = k.shape[2]
            if self.pos + T > self.k.shape[2]:
                raise ValueError(f"KV cache full: {self.pos} cached + {T} new > {self.k.shape[2]} positions")
            write(self.k, self.pos, k)
            write(self.v, self.pos, v)
            self.pos += T
            return self.k[:, :, :self.pos], self.v[:, :, :self.pos]
    return Cache


def _to_the_end(buf, pos, new):
    buf[:, :, pos:] = new


def _along_the_last_axis(buf, pos, new):
    buf[..., pos:pos + new.shape[2]] = new


def _into_one_slot(buf, pos, new):
    for t in range(new.shape[2]):
        buf[:, :, pos] = new[:, :, t]


class CacheWithOneBuffer(mdl.KVCache):
    def __init__(self, *args):
        super().__init__(*args)
        self.v = self.k


def _rms_by_mean_abs(x, weight, eps=1e-5):
    xw = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xw / (xw.abs().mean(dim=-1, keepdim=True) + eps) * weight).to(x.dtype)


def _rms_gamma_after_the_cast(x, weight, eps=1e-5):
    wide = torch.promote_types(x.dtype, torch.float32)
    xw = x.to(wide)
    return (xw * torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rope_frequencies_over_half_k(d_head, T, theta=10000.0):
    inv = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / (d_head // 2))
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def _rope_cos_sin_swapped(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    s, c = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _rope_sliced_start_to_T(x, cos, sin, start=0):
    """apply_rope with the tables cut at row T: cos[start:T]."""
    T, half = x.shape[-2], x.shape[-1] // 2
    x1, x2, c, s = x[..., :half], x[..., half:], cos[start:T], sin[start:T]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


def _rope_written_interleaved(x, cos, sin, start=0):
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).flatten(-2).to(x.dtype)


def _rope_attention(q_from_zero=False, cat_dim=-2, new_only=False):
    def rope_attention(q, k, v, cos, sin, past_k, past_v):
        from andrea_course.engine import ops
        rope, start = pieces.get("modern", "apply_rope"), past_k.shape[-2]
        q, k = rope(q, cos, sin, 0 if q_from_zero else start), rope(k, cos, sin, start)
        k_all, v_all = torch.cat([past_k, k], dim=cat_dim), torch.cat([past_v, v], dim=cat_dim)
        return ops.attention(q, *((k, v) if new_only else (k_all, v_all))), k_all, v_all
    return rope_attention


def _rope_attention_turning_all_keys(q, k, v, cos, sin, past_k, past_v):
    """Every key turned inside the attention call, the cache's again; the new keys kept unturned."""
    from andrea_course.engine import ops
    rope, start = pieces.get("modern", "apply_rope"), past_k.shape[-2]
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
    return ops.attention(rope(q, cos, sin, start), rope(k_all, cos, sin, 0), v_all), k_all, v_all


def _stream_with_gradients(model, ids):
    seen = []
    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]
    try:
        model(ids)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(seen)


def _patterns_normalised_twice(model, ids):
    inputs = []
    handles = [b.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for b in model.blocks]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    weights = pieces.module("inside")._weights
    with torch.no_grad():
        return torch.stack([weights(b.attn, b.ln1(x), model.cfg.n_heads) for b, x in zip(model.blocks, inputs)])


def _induction_on(key_shift=1, first=0, last=0):
    def induction_scores(patterns, period):
        t = torch.arange(period + first, patterns.shape[-2] + last)
        return patterns[..., t, t - period + key_shift].mean(dim=(1, 3))
    return induction_scores



# ----- the twelfth fresh set's mutants: bpe, optim and kernels -----
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


def _lr_unguarded(step, lr, min_lr, warmup_steps, max_steps):
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def _lr_with_cosine(cosine):
    def lr_at(step, lr, min_lr, warmup_steps, max_steps):
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
        return min_lr + (lr - min_lr) * cosine(progress)
    return lr_at


def _adamw_slipping(swap_m=False, ascent=False, times="", l2_too=False, power=lambda step: step):
    def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        beta1, beta2 = betas
        grad = grad + weight_decay * param if l2_too else grad
        m = beta1 * grad + (1 - beta1) * m if swap_m else beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        m_hat = m / (1 - (beta1 * step if "m" in times else beta1 ** power(step)))
        v_hat = v / (1 - (beta2 * step if "v" in times else beta2 ** power(step)))
        param = param * (1 - lr * weight_decay)
        update = lr * m_hat / (v_hat.sqrt() + eps)
        return (param + update if ascent else param - update), m, v
    return adamw_step


class _GridOfHeadsOnly:
    """The reference kernel launched with a grid whose second axis is H, not B * H."""

    def __getitem__(self, grid):
        kernel = importlib.import_module("solutions.kernels").flash_attention_kernel
        return lambda q, *args, **consts: kernel[(grid[0], q.shape[1])](q, *args, **consts)


def _flash_launching_heads_only(q, k, v, start=None):
    return importlib.import_module("solutions.kernels").flash_attention(q, k, v, start, kernel=_GridOfHeadsOnly())


class _GridRoundedDown:
    """The reference GELU kernel launched with n // BLOCK programs."""

    def __getitem__(self, grid):
        kernel = importlib.import_module("solutions.kernels").gelu_kernel
        return lambda x, y, n, BLOCK: kernel[(n // BLOCK,)](x, y, n, BLOCK=BLOCK)


class _LaunchedWith:
    """A reference kernel launched with its argument `at` replaced by `value(args)`: a launcher's slip."""

    def __init__(self, name, at, value):
        self.name, self.at, self.value = name, at, value

    def __getitem__(self, grid):
        kernel = getattr(importlib.import_module("solutions.kernels"), self.name)

        def launch(*args, **consts):
            args = list(args)
            args[self.at] = self.value(args)
            return kernel[grid](*args, **consts)
        return launch


def _flash_scaled_by_k(q, k, v, start=None):
    launched = _LaunchedWith("flash_attention_kernel", 9, lambda args: 1.0 / args[7])     # sm_scale = 1 / K
    return importlib.import_module("solutions.kernels").flash_attention(q, k, v, start, kernel=launched)


def _softmax_row_stride_one(x):
    launched = _LaunchedWith("softmax_kernel", 2, lambda args: 1)                        # x_row_stride = 1
    return importlib.import_module("solutions.kernels").softmax(x, kernel=launched)


def _count_summing_every_entry(cfg):
    counts = dict(pieces.module("model").count_parameters(cfg))
    counts["total"] = sum(v for k, v in counts.items() if k != "total")
    return counts


def _rope_attention_from_the_batch(q, k, v, cos, sin, past_k, past_v):
    from andrea_course.engine import ops
    rope, start = pieces.get("modern", "apply_rope"), past_k.shape[0]
    q, k = rope(q, cos, sin, start), rope(k, cos, sin, start)
    k_all, v_all = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
    return ops.attention(q, k_all, v_all), k_all, v_all


def _lr_amplitude_lr(step, lr, min_lr, warmup_steps, max_steps):
    """The cosine's amplitude lr, not lr - min_lr."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr + 0.5 * lr * (1 + math.cos(math.pi * progress))


def _gelu_launching(name):
    """The exercise's gelu(x) launching the kernel `name` of tests/learner_kernels.py."""
    return lambda x: importlib.import_module("solutions.kernels").gelu(x, kernel=_kernel(name, "learner_kernels"))


class _LazyLayerNormSlip:
    """LayerNormSlip(slip) of tests/learner_kernels.py, imported on first launch (it needs Triton)."""

    def __init__(self, slip):
        self.slip = slip

    def __getitem__(self, grid):
        return importlib.import_module("learner_kernels").LayerNormSlip(self.slip)[grid]


def _layer_norm_launching(slip):
    return lambda x, w, b, eps=1e-5: importlib.import_module("solutions.kernels").layer_norm(
        x, w, b, eps, kernel=_LazyLayerNormSlip(slip))



# ----- the twentieth fresh set's mutants -----
def _attention_softmax_without_dim(q, k, v, causal=True):
    """attention with F.softmax given no dim: PyTorch's legacy choice, axis 0 or 1, not the keys."""
    T, S = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=0 if scores.dim() in (0, 1, 3) else 1) @ v


def _dropout_with_normal_coins(x, p, training, generator=None):
    """dropout comparing torch.randn's numbers with p where torch.rand's were meant."""
    if not training or p == 0:
        return x
    keep = torch.randn(x.shape, generator=generator) >= p
    return x * keep / (1 - p)


def _count_with_head_bias(cfg):
    """The answer key's count with a bias of V in the untied head."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    extra = 0 if cfg.tie_embeddings else cfg.vocab_size
    return dict(counts, head=counts["head"] + extra, total=counts["total"] + extra)


def _rope_frequencies_by_linspace(d_head, T, theta=10000.0):
    inv_freq = theta ** (-torch.linspace(0, d_head, d_head // 2) / d_head)
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


class _BlockDroppingInEval(blk.Block):
    """F.dropout(..., p) on each sublayer's output: its training argument defaults to True."""
    def forward(self, x, cache=None):
        x = x + F.dropout(self.attn(self.ln1(x), cache), self.drop.p)
        return x + F.dropout(self.mlp(self.ln2(x)), self.drop.p)


# ----- the twenty-first fresh set's mutants -----
def _dropout_with_a_fixed_key(x, p, training, generator=None):
    """dropout that makes its own generator, seeded 0, when none is given (a JAX key habit)."""
    if not training or p == 0:
        return x
    generator = generator or torch.Generator().manual_seed(0)
    return x * (torch.rand(x.shape, generator=generator) >= p) / (1 - p)


def _sampler_of_int32_ids(logits, temperature, top_k, generator=None):
    ids = _sampler()(logits, temperature, top_k, generator)
    return ids.to(torch.int32) if temperature == 0 else ids


def _sampler_with_a_fixed_key(logits, temperature, top_k, generator=None):
    return _sampler()(logits, temperature, top_k, generator or torch.Generator().manual_seed(0))


class _HeadWithoutBiases(att.AttentionHead):
    def forward(self, x):
        w = lambda layer: x @ layer.weight.T                     # noqa: E731 (a Keras kernel's x @ W)
        return att.attention(w(self.w_q), w(self.w_k), w(self.w_v), causal=True)


class _MLPWithoutFcBias(mlp.MLP):
    def forward(self, x):
        return self.proj(self.gelu(x @ self.fc.weight.T))


class _EmbeddingsMaskingId0(emb.Embeddings):
    def forward(self, ids, start=0):
        tok = emb.embed_lookup(self.token_table, ids) * (ids != 0)[..., None]
        return self.drop(emb.add_positions(tok, self.position_table, start))


# ----- the sixteenth fresh set's mutants: optim, modern and inside -----

def _adamw_decay_after(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    (b1, b2) = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
    param = param - lr * (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + eps)
    return param * (1 - lr * weight_decay), m, v                          # the decay after the step


def _adamw_eps_hat(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    (b1, b2) = betas
    m, v = b1 * m + (1 - b1) * grad, b2 * v + (1 - b2) * grad * grad
    param = param * (1 - lr * weight_decay)
    return param - lr * math.sqrt(1 - b2 ** step) / (1 - b1 ** step) * m / (v.sqrt() + eps), m, v


def _rms_one_plus_gamma(x, weight, eps=1e-5):
    wide = torch.promote_types(x.dtype, torch.float32)
    y = x.to(wide) * torch.rsqrt(x.to(wide).pow(2).mean(-1, keepdim=True) + eps)
    return (y * (1 + weight.to(wide))).to(x.dtype)


def _rope_frequencies_doubled(spread):
    def rope_frequencies(d_head, T, theta=10000.0):
        inv = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)
        angles = spread(torch.outer(torch.arange(T, dtype=torch.float32), inv))
        return angles.cos(), angles.sin()
    return rope_frequencies


def _lens_norming_the_last_entry_only(model, stream):
    with torch.no_grad():
        return torch.cat([stream[:-1], model.ln_f(stream[-1:])]) @ model.output_weight().T


MUTANTS = [
    # inside your model (notebook 10)
    ("test_inside.py", "test_residual_stream_removes_its_hooks", {("inside", "residual_stream"): _stream_leaving_its_hooks},
     "hook(s) left on the model"),
    ("test_inside.py", "test_attention_patterns", {("inside", "attention_patterns"): _patterns_of_the_block_input},
     "the block's input (the residual stream)"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: (stream @ model.output_weight().T).detach()}, "without the final norm"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on_the_earlier_copy},
     "the earlier copy of the same token"),
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
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(root=False)},
     "divided by v̂ instead of its square root"),
    # the optimiser (notebook 09)
    ("test_optim.py", "test_lr_warm_up", {("optim", "lr_at"): _lr(warmup_from_zero=True)}, "a common convention, not this course"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps", {("optim", "lr_at"): _lr(to_zero=True)},
     "goes down to 0"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps", {("optim", "lr_at"): _lr(over_max_steps=True)},
     "does not reach min_lr"),
    ("test_optim.py", "test_lr_after_max_steps_stays_at_min_lr", {("optim", "lr_at"): _lr(no_clamp=True)},
     "climbs again"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="")}, "no bias correction"),
    ("test_optim.py", "test_adamw_first_step_moves_every_weight_by_about_lr",
     {("optim", "adamw_step"): _adamw(correct="")}, "no bias correction"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(decoupled=False)},
     "added to the gradient (L2"),
    ("test_optim.py", "test_adamw_weight_decay_is_decoupled", {("optim", "adamw_step"): _adamw(decoupled=False)},
     "added to the gradient (L2"),
    ("test_optim.py", "test_adamw_weight_decay_is_decoupled", {("optim", "adamw_step"): _adamw(decay_times_lr=False)},
     "not scaled by lr"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(eps_inside=True)},
     "eps inside the square root"),
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
    ("test_attention.py", "test_scale_scores_divides_by_sqrt_head_width",
     {("attention", "scale_scores"): lambda s, d: s / d}, "divided by K instead of sqrt(K)"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: torch.ones(T, T, dtype=torch.bool).triu()},
     "wrong triangle"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: torch.ones(T, T, dtype=torch.bool).tril(-1)},
     "strict lower"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~_upper(*s.shape[-2:]), -1e9)}, "wrong triangle"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~att.causal_mask(*s.shape[-2:]), 0.0)},
     "instead of -inf"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=-2, keepdim=True)}, "wrong axis"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=-1, keepdim=True)}, "maximum is not subtracted"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_unscaled},
     "not divided by sqrt(K)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_scaled_by_axis_1},
     "scores divided by sqrt(H), the number of heads"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _masked_with(_upper)},
     "wrong triangle (upper)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _masked_with(_strict_lower)},
     "strict lower"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_mask_after_softmax},
     "after the softmax"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): attention_softmax_dim0},
     "wrong axis"),
    ("test_attention.py", "test_attention_with_cached_keys",
     {("attention", "attention"): _masked_with(lambda T, S: torch.ones(T, S, dtype=torch.bool).tril())},
     "top-left corner"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadWithoutMask}, "no causal mask"),
    ("test_multihead.py", "test_split_heads",
     {("multihead", "split_heads"): lambda x, H: x.reshape(x.shape[0], H, x.shape[1], x.shape[2] // H)},
     "mixes positions and heads"),
    ("test_multihead.py", "test_merge_heads",
     {("multihead", "merge_heads"): lambda y: y.reshape(y.shape[0], y.shape[2], -1)}, "mixes positions and heads"),
    ("test_multihead.py", "test_multihead_attention", {("multihead", "MultiHeadAttention"): MHAWithoutWO},
     "W_O forgotten"),
    ("test_multihead.py", "test_multihead_attention", {("multihead", "MultiHeadAttention"): MHAReshapeSplit},
     "mixes positions and heads"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(math.sqrt(2 / math.pi), 0.44715)}, "0.44715"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(math.sqrt(math.pi / 2), 0.044715)},
     "sqrt(pi/2)"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): mlp.gelu_erf}, "exact erf form"),
    ("test_mlp.py", "test_gelu_erf", {("mlp", "gelu_erf"): mlp.gelu_tanh}, "tanh approximation"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(2 // math.pi, 0.044715)}, "the tanh term is 0"),
    ("test_mlp.py", "test_gelu_erf", {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 + torch.erf(x * (1 // math.sqrt(2))))},
     "the erf term is 0"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): type("ReluMLP", (mlp.MLP,), {
        "forward": lambda self, x: self.proj(torch.relu(self.fc(x)))})}, "ReLU"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm(unbiased=True)}, "Bessel"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm(eps_inside=False)},
     "eps outside the square root"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm(dim=-2)}, "wrong axis"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm(gamma=False)}, "gamma"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm(beta=False)}, "beta"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): BlockNormalisedResidual},
     "normalised x to the residual"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): blk.PostNormBlock}, "post-norm where pre-norm"),
    ("test_block.py", "test_post_norm_block", {("block", "PostNormBlock"): blk.Block}, "pre-norm where post-norm"),
    ("test_block.py", "test_post_norm_block", {("block", "PostNormBlock"): PostNormMLPOfTheInput},
     "the MLP reads the block's input x"),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelWithoutFinalNorm}, "final norm"),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelScalingItsEmbeddings},
     "the embeddings multiplied by sqrt(D)"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(v_by_beta1=True)},
     "v's new term weighted by 1 - beta1"),
    ("test_bpe.py", "test_pair_counts_weights_each_word_by_its_count", {("bpe", "pair_counts"): _counts_across_words},
     "pairs across the boundary between two words"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheReturningTheKeysTwice},
     "the key buffer returned in the values' place"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(9)}, "every program stored its row at row 0"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache",
     {("kernels", "flash_attention"): _flash_grid(lambda T, bm: T // bm)}, "T // 16 = 1 query block, which drops"),
    ("test_model.py", "test_andrea_generates_the_same_with_and_without_the_cache",
     {("model", "ANDREA"): ModelIgnoringStart}, "positions restart at 0"),
    # issue 13's eight mistakes that once got full marks
    ("test_embeddings.py", "test_embed_onehot_when_the_last_ids_are_absent",
     {("embeddings", "embed_onehot"): lambda table, ids: F.one_hot(ids).to(table.dtype) @ table}, "without num_classes"),
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHAIgnoringTheCache}, "not what cache_and_share returns"),
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHARepeatingBeforeTheCache}, "repeat_kv before the cache"),
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHAKeysInHHeads}, "split into H heads (of width G·K/H)"),
    ("test_multihead.py", "test_multihead_attention",
     {("multihead", "MultiHeadAttention"): MHAPerHeadTriples}, "one [q | k | v] triple per head"),
    ("test_block.py", "test_block_passes_the_cache_on", {("block", "Block"): BlockDroppingTheCache},
     "the cache not passed on"),
    ("test_block.py", "test_block_applies_dropout_while_training", {("block", "Block"): BlockWithoutDropout},
     "no dropout in the block"),
    ("test_model.py", "test_andrea_with_a_kv_cache", {("model", "ANDREA"): ModelDroppingTheCaches},
     "the caches not passed on"),
    ("test_model.py", "test_andrea_with_a_kv_cache", {("model", "ANDREA"): ModelIgnoringStart},
     "positions restart at 0"),
    ("test_modern.py", "test_the_modern_model_ends_on_its_own_norm", {("model", "ANDREA"): ModelAlwaysLayerNorm},
     "always a LayerNorm"),
    ("test_modern.py", "test_kv_cache_bytes_for_every_G", {("modern", "kv_cache_bytes"): _kv_bytes_ignoring_seq_len},
     "seq_len ignored"),
    ("test_model.py", "test_count_parameters_of_andrea_120m",
     {("model", "count_parameters"): lambda cfg: mdl.count_parameters(cfg.replace(bias=False))}, "biases forgotten"),
    ("test_model.py", "test_count_parameters_with_tied_embeddings",
     {("model", "count_parameters"): lambda cfg: mdl.count_parameters(cfg.replace(tie_embeddings=False))},
     "tied head counted"),
    # issue 15 item 6: averaging the past, sampling the next token, the KV cache
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.mean(dim=-2, keepdim=True).expand_as(x)}, "the future included"),
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.cumsum(dim=-2) / x.shape[-2]}, "divided by T instead of i + 1"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: _rows(torch.ones(T, T).triu())}, "the upper triangle"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril() / T}, "each allowed weight is 1/T"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril()}, "rows not summing to 1"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(fill=0.0)}, "0 instead of -inf"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(hide=lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1))},
     "wrong triangle"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): _softmax_of_zeros(dim=0)}, "wrong axis"),
    ("test_model.py", "test_sample_next_at_temperature_0_is_greedy",
     {("model", "sample_next"): _sampler(greedy_at_zero=False)}, "temperature 0 not handled"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(multiply=True)}, "temperature multiplied instead of divided"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(keep=lambda k: k + 1)}, "one token too many (k + 1)"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(below="<=")}, "one token too few (k - 1)"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(fill=0.0)}, "0 instead of -inf"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(from_logits=True)}, "sampled from the logits"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws",
     {("model", "sample_next"): _sampler(always_argmax=True)}, "always the most likely token"),
    ("test_model.py", "test_sample_next_keeps_ties_at_the_kth_logit",
     {("model", "sample_next"): _sampler(exactly_k=True)}, "tie at the k-th largest logit broken"),
    ("test_model.py", "test_sample_next_keeps_ties_at_the_kth_logit",
     {("model", "sample_next"): _sampler(below="<=")}, "(<, not <=)"),
    ("test_model.py", "test_sample_next_follows_the_tempered_distribution",
     {("model", "sample_next"): _sampler(multiply=True)}, "temperature multiplied instead of divided"),
    ("test_model.py", "test_sample_next_follows_the_tempered_distribution",
     {("model", "sample_next"): _sampler(fill=0.0)}, "0 instead of -inf"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheNotAdvancing},
     "pos not advanced"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheFromZero},
     "written from position 0"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheReturningTheNew},
     "only the new keys returned"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheConcatenatingHeads},
     "concatenated along axis 1"),
    ("test_model.py", "test_kv_cache_prefill_then_one_token_at_a_time", {("model", "KVCache"): CacheNotAdvancing},
     "pos not advanced"),
    # issue 15, notebook 03: the cache and grouped heads in one given call; head_entropy
    ("test_multihead.py", "test_multihead_attention_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare}, "not what cache_and_share returns"),
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
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
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.zeros_like(x))}, "only Phi(x)"),
    ("test_mlp.py", "test_gelu_grad_in_float32_keeps_the_shape",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.zeros_like(x))}, "only Phi(x)"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.exp(-x ** 2 / 2))}, "without its factor 1/sqrt(2·pi)"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_tanh_grad}, "slope of the tanh approximation"),
    ("test_mlp.py", "test_gelu_grad_in_float32_keeps_the_shape",
     {("mlp", "gelu_grad"): _gelu_tanh_grad}, "slope of the tanh approximation"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: (x > 0).to(x.dtype)}, "ReLU's slope"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(cdf=lambda x: 0.5 * (1 + torch.erf(x)))}, "erf(x) instead of erf(x / sqrt(2))"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(sign=-1)}, "x·phi(x) subtracted"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu", {("mlp", "gelu_grad"): F.gelu}, "GELU itself"),
    # issue 15 item 6: dropout (notebook 05)
    ("test_block.py", "test_dropout_zeroes_or_scales_each_element", {("block", "dropout"): _dropout(scale=lambda p: 1.0)},
     "survivors not scaled"),
    ("test_block.py", "test_dropout_zeroes_or_scales_each_element", {("block", "dropout"): _dropout(scale=lambda p: 1 - p)},
     "multiplied by 1 - p instead of divided"),
    ("test_block.py", "test_dropout_zeroes_a_fraction_p", {("block", "dropout"): _dropout(keep_with_p=True)},
     "kept with probability p instead of 1 - p"),
    ("test_block.py", "test_dropout_zeroes_a_fraction_p",
     {("block", "dropout"): lambda x, p, training, generator=None: x if training else x * 0}, "nothing dropped in training"),
    ("test_block.py", "test_dropout_does_nothing_outside_training_or_at_p_0", {("block", "dropout"): _dropout(in_eval=True)},
     "dropout applied when not training"),
    ("test_block.py", "test_dropout_at_p_1_gives_zeros", {("block", "dropout"): _dropout(at_1=False)}, "p = 1 not handled"),
    ("test_block.py", "test_dropout_at_p_1_gives_zeros", {("block", "dropout"): _dropout(at_1=False, scale=lambda p: 1 / (1 - p))},
     "p = 1 not handled"),
    ("test_block.py", "test_dropout_draws_one_number_per_element",
     {("block", "dropout"): _dropout(mask_shape=lambda x: x.shape[1:])}, "the same mask for every row of the batch"),
    ("test_block.py", "test_dropout_draws_one_number_per_element",
     {("block", "dropout"): _dropout(mask_shape=lambda x: (x.shape[0], 1, x.shape[2]))}, "the same mask for every position"),
    ("test_block.py", "test_dropout_follows_its_generator", {("block", "dropout"): _dropout(use_generator=False)},
     "generator ignored"),
    # issue 15 item 6: the row-softmax kernel (notebook 08)
    ("test_kernels.py", "test_softmax_kernel_large_scores", {("kernels", "softmax"): _softmax_kernel(SHIFT=False)},
     "no max subtraction"),
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _softmax_kernel(PAD_NEG_INF=False)},
     "padding loaded as 0.0 instead of -inf"),
    ("test_kernels.py", "test_softmax_kernel_strided_rows", {("kernels", "softmax"): _softmax_kernel(X_STRIDE_IS_N=True)},
     "x's rows stepped by n_cols"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(NORMALISE=False)},
     "not normalised"),
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _softmax_kernel(STORE_MASK=False)},
     "missing mask on the store"),
    # issue 23: mistakes no test caught
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T, dtype=torch.float64).tril()
      / torch.arange(1, T + 1, dtype=torch.float64)[:, None]}, "the weights are float64"),
    ("test_model.py", "test_sample_next_with_top_k_larger_than_the_vocabulary",
     {("model", "sample_next"): _sampler()}, "top_k larger than the vocabulary"),
    ("test_model.py", "test_count_parameters_of_the_modern_model",
     {("model", "count_parameters"): _classic_count}, "keys and values counted for all H heads"),
    ("test_model.py", "test_count_parameters_of_the_modern_model",
     {("model", "count_parameters"): lambda cfg: _classic_count(cfg, grouped=True)}, "SwiGLU counted as the GELU MLP's two"),
    ("test_embeddings.py", "test_cosine_similarity_of_a_zero_vector_is_zero",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))},
     "no guard against a zero vector"),
    # issue 23: what a kernel did, named as it happened
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _launching("softmax_kernel_storing_one_past")},
     "one element past the end of each row"),
    ("test_kernels.py", "test_softmax_kernel_computes_in_fp32",
     {("kernels", "softmax"): _launching("softmax_kernel_in_16_bits"),
      ("kernels", "softmax_kernel"): _kernel("softmax_kernel_in_16_bits")}, "never converted to fp32"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_block.py", "test_layer_norm_without_bias", {("block", "layer_norm"): _layer_norm_adding_bias},
     "bias=None not handled"),
    ("test_mlp.py", "test_mlp_calls_its_gelu_slot", {("mlp", "MLP"): MLPCallingGeluItself}, "self.gelu never called"),
    ("test_multihead.py", "test_multihead_attention_calls_its_attention_slot",
     {("multihead", "MultiHeadAttention"): MHACallingSDPAItself}, "self.attention never called"),
    ("test_modern.py", "test_swiglu_module_calls_its_swiglu_slot", {("modern", "SwiGLU"): SwiGLUCallingSiluItself},
     "self.swiglu never called"),
    ("test_model.py", "test_andrea_calls_its_cross_entropy_slot", {("model", "ANDREA"): ModelComputingItsOwnLoss},
     "self.cross_entropy never called"),
    ("test_embeddings.py", "test_embeddings_module_applies_its_dropout",
     {("embeddings", "Embeddings"): EmbeddingsWithoutDropout}, "no dropout"),
    ("test_block.py", "test_post_norm_block_applies_dropout_while_training",
     {("block", "PostNormBlock"): PostNormBlockWithoutDropout}, "no dropout in the block"),
    ("test_model.py", "test_andrea_has_the_reference_parameters", {("model", "ANDREA"): ModelWithABiasedFinalNorm},
     "the final norm always a LayerNorm"),
    ("test_model.py", "test_count_parameters_for_every_config_option",
     {("model", "count_parameters"): _count_with_a_position_table}, "a position table counted with position='rope'"),
    ("test_block.py", "test_post_norm_block", {("block", "PostNormBlock"): PostNormBlockWithoutTheMLPResidual},
     "the residual left out of the MLP half"),
    ("test_model.py", "test_kv_cache_refuses_what_does_not_fit", {("model", "KVCache"): CacheCheckingWithoutT},
     "the full-cache check let an update through"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(1)},
     "every program wrote the same first block"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(2)},
     "the block starts at pid, not pid * BLOCK"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(3)},
     "the cube's coefficient is 0.04715"),
    # the twelfth fresh set's classes: attention and multihead
    ("test_attention.py", "test_average_past", {("attention", "average_past"): _average_past_by_cat}, "torch.cat"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril() // torch.arange(1, T + 1.0)[:, None]},
     "floor division"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril().softmax(dim=-1)},
     "a softmax of the 0/1 triangle"),
    ("test_attention.py", "test_causal_softmax_weights",
     {("attention", "causal_softmax_weights"): lambda T: torch.zeros(T, T).masked_fill(
         torch.ones(T, T, dtype=torch.bool).triu(1), NEG_INF).exp()}, "exponentiated but not normalised"),
    ("test_attention.py", "test_attention_scores",
     {("attention", "attention_scores"): lambda q, k: q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])},
     "divided by sqrt(K) already"),
    ("test_attention.py", "test_causal_mask_is_lower_triangular",
     {("attention", "causal_mask"): lambda T, S=None, device=None: att.causal_mask(T, S, device).int()},
     "made of integers (torch.int32)"),
    ("test_attention.py", "test_causal_mask_with_cached_keys",
     {("attention", "causal_mask"): lambda T, S=None, device=None: att.causal_mask(T, S)}, "device ignored"),
    ("test_attention.py", "test_causal_mask_with_cached_keys",
     {("attention", "causal_mask"): _mask_offset_subtracted}, "the cache offset subtracted"),
    ("test_attention.py", "test_apply_causal_mask",
     {("attention", "apply_causal_mask"): lambda s: s.masked_fill(~att.causal_mask(s.shape[-1]), NEG_INF)},
     "a square (S, S) mask"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_divided_by(lambda z, e: z.sum(dim=-1, keepdim=True).exp())},
     "the exponential of the row's summed"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_divided_by(lambda z, e: e.norm(dim=-1, keepdim=True))}, "Euclidean length"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.mean(dim=-1, keepdim=True))}, "each row's mean"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.amin(dim=-1, keepdim=True))}, "the row minimum"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: (w @ v) / w.sum(dim=-1, keepdim=True)},
     "divided by each row's sum of weights"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: torch.softmax(w, dim=-1) @ v}, "a softmax applied to the weights again"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: (w[..., :, :, None] * v[..., None, :, :]).sum(-3)},
     "summed over the queries instead of the keys"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_with(scale=math.sqrt)},
     "K^(1/4)"),
    ("test_attention.py", "test_attention_without_mask", {("attention", "attention"): _attention_with(scale=math.sqrt)},
     "K^(1/4)"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_with(mix="k")},
     "the keys mixed instead of the values"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadCausalOnlyInTraining},
     "causal only while training"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): HeadWithRawValues},
     "the input x itself passed as the values"),
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
    ("test_modern.py", "test_grouped_kv_heads_with_a_kv_cache",
     {("multihead", "MultiHeadAttention"): MHASharingBeforeTheSplit}, "called before split_heads"),
    # the twelfth fresh set's classes: embeddings, mlp and block
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
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu_tanh_flipped}, "1 - tanh"),
    ("test_mlp.py", "test_gelu_erf",
     {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 - torch.erf(x / math.sqrt(2)))}, "1 - erf"),
    ("test_mlp.py", "test_gelu_erf",
     {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))}, "math.erf"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: x * 0.5 * (1 + torch.erf(x / math.sqrt(2))) + _phi(x)}, "product rule mixed up"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): MLPWithGeluFirst}, "GELU applied to the input"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm_over_two_axes}, "last two axes"),
    ("test_block.py", "test_layer_norm",
     {("block", "layer_norm"): _layer_norm_s12(lambda x, m: (x ** 2).mean(dim=-1, keepdim=True) - m)},
     "the mean is not squared"),
    ("test_block.py", "test_layer_norm_of_tokens_far_from_zero",
     {("block", "layer_norm"): _layer_norm_s12(lambda x, m: (x ** 2).mean(dim=-1, keepdim=True) - m ** 2)},
     "mean(x²) - mean²"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): BlockWithTheMLPFirst}, "the MLP run before attention"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): BlockNormalisingItsOutput}, "output normalised again"),
    ("test_block.py", "test_post_norm_block", {("block", "PostNormBlock"): PostNormBlockWithLn1Twice}, "ln2 never used"),
    ("test_block.py", "test_post_norm_block_passes_the_cache_on",
     {("block", "PostNormBlock"): PostNormBlockDroppingTheCache}, "the cache not passed on"),
    ("test_block.py", "test_dropout_zeroes_or_scales_each_element",
     {("block", "dropout"): _dropout_training_inverted}, "the training test inverted"),
    ("test_block.py", "test_dropout_does_nothing_outside_training_or_at_p_0",
     {("block", "dropout"): _dropout_training_inverted}, "the training test inverted"),
    # the twelfth fresh set's classes: model, modern and inside
    ("test_model.py", "test_andrea_has_the_reference_parameters", {("model", "ANDREA"): ModelOneBlockShort},
     "one block short"),
    ("test_model.py", "test_andrea_has_the_reference_parameters", {("model", "ANDREA"): ModelWithABiasFollowingTheNorm},
     "the final norm built with a bias although cfg.bias is False"),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelRunningTheBlocksBackwards},
     "the blocks run last to first"),
    ("test_model.py", "test_andrea_with_a_kv_cache", {("model", "ANDREA"): ModelRunningTheBlocksBackwards},
     "the blocks run last to first"),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelReturningProbabilities},
     "softmax probabilities returned instead of the logits"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_one_block_in_the_total},
     "one block added to the total"),
    ("test_model.py", "test_count_parameters_for_every_config_option",
     {("model", "count_parameters"): _count_swiglu_biases_as_3f}, "SwiGLU's biases counted as 3·F"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheConcatenatingIntoItsBuffer},
     "the buffer replaced by the concatenation"),
    ("test_model.py", "test_kv_cache_prefill_then_one_token_at_a_time",
     {("model", "KVCache"): CacheConcatenatingIntoItsBuffer}, "the buffer replaced by the concatenation"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): _cache_writing(_to_the_end)},
     "written from self.pos to the end of the buffer"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): _cache_writing(_along_the_last_axis)},
     "written along the last axis"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheWithOneBuffer},
     "the keys returned are the values"),
    ("test_modern.py", "test_rmsnorm_produces_unit_rms", {("modern", "rms_norm"): _rms_by_mean_abs},
     "the mean absolute value"),
    ("test_modern.py", "test_rmsnorm_eps_inside_the_sqrt", {("modern", "rms_norm"): _rms_by_mean_abs},
     "the mean absolute value"),
    ("test_modern.py", "test_rmsnorm_computes_in_fp32", {("modern", "rms_norm"): _rms_gamma_after_the_cast},
     "gamma multiplied after the cast back"),
    ("test_modern.py", "test_swiglu_ffn_dim_is_8D_over_3",
     {("modern", "swiglu_hidden_dim"): lambda d, multiple_of=256: -(-8 * d / 3 // multiple_of) * multiple_of},
     "the right width as a float"),
    ("test_modern.py", "test_swiglu_matches_reference", {("modern", "swiglu"): lambda gate, up: F.silu(gate) + up},
     "added instead of multiplied, Swish(gate) + up"),
    ("test_modern.py", "test_kv_cache_bytes_for_every_G",
     {("modern", "kv_cache_bytes"): lambda cfg, batch=1, seq_len=None, bytes_per_value=2:
      2 * cfg.n_layers * batch * cfg.kv_heads * (seq_len or cfg.context_length) * cfg.d_head * 2},
     "bytes_per_value ignored"),
    ("test_modern.py", "test_rope_frequencies", {("modern", "rope_frequencies"): _rope_frequencies_over_half_k},
     "the exponent divided by K/2"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_cos_sin_swapped},
     "the cos and sin tables swapped"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_written_interleaved},
     "wrote the turned pairs interleaved"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(q_from_zero=True)}, "the queries turned from position 0"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(cat_dim=-1)}, "joined along the feature axis"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention(new_only=True)}, "attended to the new keys and values alone"),
    ("test_inside.py", "test_residual_stream", {("inside", "residual_stream"): _stream_with_gradients},
     "the model run with gradients on"),
    ("test_inside.py", "test_attention_patterns", {("inside", "attention_patterns"): _patterns_normalised_twice},
     "ln1 is applied twice"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: (model.ln_f(stream[-1]) @ model.output_weight().T).detach()},
     "only the last entry of the stream"),
    ("test_inside.py", "test_logit_lens",
     {("inside", "logit_lens"): lambda model, stream: torch.softmax(model.ln_f(stream) @ model.output_weight().T,
                                                                   dim=-1).detach()},
     "softmax probabilities returned instead of the logits"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(key_shift=-1)},
     "the token before the earlier copy"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(first=1)},
     "the queries started at period + 1"),
    ("test_inside.py", "test_induction_scores",
     {("inside", "induction_scores"): lambda w, period: w.diagonal(offset=1 - period, dim1=-2, dim2=-1).mean(dim=(1, 3))},
     "the queries started at period - 1"),
    # the twelfth fresh set's classes: bpe, optim and kernels
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
    ("test_optim.py", "test_lr_after_max_steps_stays_at_min_lr", {("optim", "lr_at"): _lr_unguarded},
     "ZeroDivisionError"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps",
     {("optim", "lr_at"): _lr_with_cosine(lambda p: 0.5 * (1 + math.cos(p)))}, "without π"),
    ("test_optim.py", "test_lr_cosine_reaches_min_lr_at_max_steps",
     {("optim", "lr_at"): _lr_with_cosine(lambda p: math.cos(math.pi * p / 2))}, "a quarter cosine"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(swap_m=True)},
     "weights swapped"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(ascent=True)},
     "gradient ascent"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(times="m")},
     "m's bias correction divides by 1 - beta1·step"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(times="mv")},
     "the bias corrections divide by 1 - beta·step"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula", {("kernels", "gelu"): _gelu_launching("gelu_kernel_storing_in_x")},
     "nothing reached y"),
    ("test_kernels.py", "test_gelu_kernel_reads_and_writes_only_its_own_elements",
     {("kernels", "gelu_kernel"): _kernel("gelu_kernel_storing_in_x", "learner_kernels")}, "stored through x_ptr"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_launching("gelu_kernel_masked_by_block")}, "offs < BLOCK"),
    ("test_kernels.py", "test_gelu_kernel_any_shape_and_one_element",
     {("kernels", "gelu"): _gelu_launching("gelu_kernel_masked_by_block")}, "offs < BLOCK"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(1)}, "gamma read at an offset that grows with the row"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(2)}, "stored at row * stride"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(3)},
     "the raw x scaled"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(12)},
     "every row NaN from the first key tile on"),
    ("test_kernels.py", "test_flash_attention_kernel_scores_far_below_zero",
     {("kernels", "flash_attention"): _flash_slip(13)}, "the running max started at 0"),
    ("test_kernels.py", "test_flash_attention_kernel_scores_far_below_zero",
     {("kernels", "flash_attention"): _flash_slip(22)}, "the launch grid's two axes read the other way round"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(SUM_OF=1)},
     "divided by the sum of the row's x instead"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(SUM_OF=2)},
     "divided by the sum of the row's x - max"),
    # the eleventh fresh set's classes
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) ** 2).clamp_min(eps)},
     "the same vector's length twice"),
    ("test_embeddings.py", "test_nearest_tokens_by_cosine_not_by_length",
     {("embeddings", "nearest_tokens"): _nearest(pick=lambda s, k: s.topk(k).values.long())}, "made integers"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): EmbeddingsWithOnePositionRow}, "one position row"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))) * _phi(x)}, "derivatives multiplied"),
    ("test_modern.py", "test_swiglu_ffn_dim_is_8D_over_3",
     {("modern", "swiglu_hidden_dim"): lambda d, multiple_of=256: multiple_of * math.ceil(4 * d / 3 / multiple_of)},
     "half of 8D/3"),
    ("test_modern.py", "test_apply_rope_turns_each_pair_of_features", {("modern", "apply_rope"): _rope_reflected},
     "a sign of the turn wrong"),
    ("test_bpe.py", "test_merge_pair_scans_left_to_right", {("bpe", "merge_pair"): _merge_sparing_the_last_pair},
     "never merged"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="v")}, "m not bias-corrected"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw(correct="m")}, "v not bias-corrected"),
    ("test_optim.py", "test_adamw_first_step_moves_every_weight_by_about_lr", {("optim", "adamw_step"): _adamw(v_of=torch.abs)},
     "v averages |g|"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): MLPWithAFourDFc}, "fc's width hard-coded as 4·D"),
    # issue 30 item 4: kernels launched without the checking launcher's padding, NaN around every tensor
    ("test_kernels.py", "test_gelu_kernel_reads_and_writes_only_its_own_elements",
     {("kernels", "gelu_kernel"): _kernel("gelu_kernel_unmasked_load", "learner_kernels")}, "tl.load without a mask"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _kernel("layer_norm_kernel_stepping_by_d", "learner_kernels")},
     "rows stepped by D instead of the row stride"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _kernel("layer_norm_kernel_unmasked_weight", "learner_kernels")},
     "tl.load without a mask"),
    ("test_kernels.py", "test_softmax_kernel_reads_and_writes_only_its_own_rows",
     {("kernels", "softmax_kernel"): _kernel("softmax_kernel_storing_by_the_x_stride", "learner_kernels")},
     "y's rows stepped by x_row_stride"),
    ("test_kernels.py", "test_softmax_kernel_reads_and_writes_only_its_own_rows",
     {("kernels", "softmax_kernel"): _kernel("softmax_kernel_storing_one_past")}, "one element past the end of each row"),
    # issue 32 item 1: the learner's causal FlashAttention forward
    *(("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(slip)},
       named) for slip, named in ((1, "no rescale when the max grows"), (2, "ignores the cache offset"),
                                  (3, "the diagonal tile skipped"), (4, "the diagonal masked"),
                                  (5, "the logsumexp of the unscaled scores"), (6, "applied to the output"),
                                  (7, "1/sqrt(BLOCK_K)"), (8, "a tail tile without its mask"),
                                  (9, "only acc rescaled"), (10, "only l rescaled"),
                                  (11, "the logsumexp stored as log(l) alone"), (14, "without dividing by l"),
                                  (15, "at bh·T·K"), (16, "the running max never kept"),
                                  (17, "the key loop's end without the cache offset"))),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelNotChainingItsBlocks},
     "every block reads the embeddings"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_summing_every_entry},
     "summed over every entry"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention_from_the_batch}, "past_k.shape[0], the batch size"),
    ("test_inside.py", "test_induction_scores",
     {("inside", "induction_scores"): lambda p, period: p[..., torch.arange(period, p.shape[-2]), :][
         ..., torch.arange(period, p.shape[-2]) - period + 1].mean(dim=(1, 3, 4))}, "the whole grid averaged"),
    ("test_block.py", "test_post_norm_block", {("block", "PostNormBlock"): PostNormReadingLn1},
     "normalises the sublayer's input as well as the sum"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_scaled_by_k},
     "scaled by 1/K instead of 1/sqrt(K)"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_row_stride_one},
     "row r read from x_ptr + r"),
    # the thirteenth and fourteenth fresh sets' classes
    ("test_multihead.py", "test_grouped_kv_heads", {("multihead", "MultiHeadAttention"): MHAQueriesInGHeads},
     "the queries split into G heads"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_launching_heads_only},
     "only the first sequence of the batch"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): lambda x: importlib.import_module("solutions.kernels").gelu(x, kernel=_GridRoundedDown())},
     "the last, ragged block never launched"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(4)},
     "used as rstd"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(5)},
     "mean never stored"),
    # the sixteenth fresh set's kernel classes
    *(("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(slip)},
       named) for slip, named in ((6, "the mean of the centred row"), (7, "the variance taken over the raw row"),
                                  (8, "beta added before multiplying by gamma"))),
    *(("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(EXP2=True, EXP2_FACTOR=c)},
       named) for c, named in ((1.0, "tl.exp2 without the factor log2(e)"), (math.log2(math.e) ** 2, "used once too often"),
                               (math.log(2), "divided by log2(e)"))),
    *(("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(slip)},
       named) for slip, named in ((18, "each head's keys found at bh·T·K"), (19, "each head's values found at bh·T·K"),
                                  (20, "mask=rows < T alone, without dims < K"))),
    # no store mask at all: the last query block reaches a whole tile past o's end (more than 64
    # elements at K = 12 and K = 20), all of it inside the checking launcher's guard, and counted
    *(("test_kernels.py", test, {("kernels", "flash_attention"): _flash_slip(21)}, "the last query block stored past T")
      for test in ("test_flash_attention_kernel_with_a_cache", "test_flash_attention_kernel_queries_inside_the_keys")),
    ("test_kernels.py", "test_flash_attention_kernel_queries_inside_the_keys",
     {("kernels", "flash_attention"): _flash_slip(20)}, "mask=rows < T alone, without dims < K"),
    ("test_optim.py", "test_lr_warm_up", {("optim", "lr_at"): _lr_amplitude_lr}, "amplitude is lr instead of lr - min_lr"),
    ("test_modern.py", "test_rope_attention_with_and_without_a_cache",
     {("modern", "rope_attention"): _rope_attention_turning_all_keys}, "k as it came in, not turned"),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_slipping(l2_too=True)},
     "weight decay applied twice"),
    ("test_optim.py", "test_adamw_matches_torch",
     {("optim", "adamw_step"): _adamw_slipping(power=lambda step: step - 1)}, "one step behind"),
    # the sixteenth fresh set's classes: optim, modern and inside
    *(("test_optim.py", test, {("optim", "adamw_step"): _adamw_decay_after}, "weight decay applied after the Adam step")
      for test in ("test_adamw_matches_torch", "test_adamw_weight_decay_is_decoupled")),
    ("test_optim.py", "test_adamw_matches_torch", {("optim", "adamw_step"): _adamw_eps_hat}, "the 'epsilon hat' form"),
    *(("test_modern.py", test, {("modern", "rms_norm"): _rms_one_plus_gamma}, "scaled by (1 + weight)")
      for test in ("test_rmsnorm_produces_unit_rms", "test_rmsnorm_scales_with_gamma", "test_rmsnorm_eps_inside_the_sqrt")),
    ("test_modern.py", "test_rope_frequencies",
     {("modern", "rope_frequencies"): _rope_frequencies_doubled(lambda a: torch.cat([a, a], dim=-1))},
     "the angles duplicated to (T, K)"),
    ("test_modern.py", "test_rope_frequencies",
     {("modern", "rope_frequencies"): _rope_frequencies_doubled(lambda a: a.repeat_interleave(2, dim=-1))},
     "each angle repeated twice"),
    ("test_inside.py", "test_logit_lens", {("inside", "logit_lens"): _lens_norming_the_last_entry_only},
     "the final norm applied to the last entry of the stream only"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): _block_reading_stale(ln2=True)},
     "the MLP reads ln2 of ln1(x)"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): _block_reading_stale(ln2=False)},
     "the MLP reads ln1(x), the normalised input kept"),
    ("test_model.py", "test_andrea_with_targets_gives_logits_and_the_loss", {("model", "ANDREA"): _andrea_shifting_again},
     "shifted by one position again (logits[:, :-1] against targets[:, 1:])"),
    # the nineteenth fresh set's classes
    ("test_bpe.py", "test_decode_inverts_encode", {("bpe", "decode"): _decode_with(base=255)}, "built over range(255)"),
    ("test_modern.py", "test_apply_rope_after_cached_positions", {("modern", "apply_rope"): _rope_sliced_start_to_T},
     "the tables sliced cos[start:T]"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): _embeddings_from_start_to_T}, "only the tokens start .. T - 1 came out"),
    ("test_bpe.py", "test_most_frequent_pair_breaks_ties_like_the_library",
     {("bpe", "most_frequent_pair"): lambda counts: list(counts)[-1] if counts else None}, "the last pair of the tally"),
    ("test_inside.py", "test_induction_scores", {("inside", "induction_scores"): _induction_on(last=-1)},
     "the last query, T - 1, left out"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(23)},
     "the visibility mask built from the first key tile's indices"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(24)},
     "the key indices never advance"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_one_block_short},
     "one block short: L - 1 blocks counted"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): _cache_writing(_into_one_slot)},
     "every new position written into slot pos"),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): _layer_norm_mean_without_first},
     "the mean summed without the first feature"),
    ("test_block.py", "test_pre_norm_block", {("block", "Block"): _block_dropping_attention},
     "attention's update thrown away"),
    ("test_multihead.py", "test_split_heads",
     {("multihead", "split_heads"): lambda x, H: torch.stack([x[..., h * H:(h + 1) * H] for h in range(H)], dim=1)},
     "a slice of width H"),
    ("test_multihead.py", "test_merge_heads",
     {("multihead", "merge_heads"): lambda y: torch.cat([y[:, h] for h in range(y.shape[1])], dim=1)},
     "the heads joined along the positions"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: torch.ones(T, T).tril(-1) / torch.arange(1, T + 1.0)[:, None]},
     "the diagonal left empty"),
    ("test_attention.py", "test_causal_average_weights",
     {("attention", "causal_average_weights"): lambda T: (torch.ones(T, T).tril() / torch.arange(1, T + 1.0)[:, None])
      * (torch.arange(T) > 0)[:, None]}, "row 0 left at zero"),
    ("test_attention.py", "test_average_past", {("attention", "average_past"): _average_past_aliased},
     "the sum of ALL T positions divided by i + 1"),
    ("test_attention.py", "test_softmax_over_the_keys",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s.amax(dim=-2, keepdim=True) if s.dim() > 1 else s.amax())},
     "each column's maximum over the queries"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_shifted_by(lambda s: s[..., :-1].amax(dim=-1, keepdim=True))},
     "the row maximum taken without the last key"),
    ("test_attention.py", "test_weighted_sum_of_values",
     {("attention", "weighted_sum"): lambda w, v: w[..., :w.shape[-2]] @ v[..., :w.shape[-2], :]},
     "only the first T keys summed"),
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
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws", {("model", "sample_next"): _sampler(row_0=True)},
     "one row's k-th largest logit used as every row's threshold"),
    # the twentieth fresh set's classes
    ("test_attention.py", "test_average_past",
     {("attention", "average_past"): lambda x: x.cumsum(-1) / torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]},
     "the running sum taken along the features"),
    ("test_attention.py", "test_causal_attention", {("attention", "attention"): _attention_softmax_without_dim},
     "the softmax without dim="),
    ("test_block.py", "test_dropout_zeroes_a_fraction_p", {("block", "dropout"): _dropout_with_normal_coins},
     "drawn with torch.randn"),
    ("test_block.py", "test_block_applies_dropout_while_training", {("block", "Block"): _BlockDroppingInEval},
     "dropout still applied in eval mode"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp(max=eps)},
     "capped at eps"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_with_head_bias},
     "a bias of V counted in the head"),
    ("test_modern.py", "test_rope_frequencies", {("modern", "rope_frequencies"): _rope_frequencies_by_linspace},
     "torch.linspace(0, K, K/2)"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(10)},
     "the variance divided by BLOCK_D"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(25)},
     "taken in base 2"),
    # the twenty-first fresh set's classes
    ("test_bpe.py", "test_train_bpe_learns_the_librarys_merges", {("bpe", "train_bpe"): _train_bpe_slipping(replaced=False)},
     "the merged words added next to the old ones"),
    ("test_block.py", "test_dropout_of_any_shape_with_or_without_a_generator", {("block", "dropout"): _dropout_with_a_fixed_key},
     "the same random numbers at every call"),
    ("test_model.py", "test_sample_next_at_temperature_0_is_greedy", {("model", "sample_next"): _sampler_of_int32_ids},
     "the ids cast to int32"),
    ("test_model.py", "test_sample_next_without_a_generator_draws_anew",
     {("model", "sample_next"): _sampler_with_a_fixed_key}, "the same draws at every call"),
    ("test_block.py", "test_layer_norm_uses_the_eps_it_is_given",
     {("block", "layer_norm"): lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps=1e-3)},
     "a constant eps of 0.001"),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): _HeadWithoutBiases},
     "the projections' biases left out"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): _MLPWithoutFcBias}, "fc's bias left out"),
    ("test_embeddings.py", "test_embeddings_module_adds_token_and_position_vectors",
     {("embeddings", "Embeddings"): _EmbeddingsMaskingId0}, "the tokens of id 0 given a zero vector"),
]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",     # the softmax kernel without its max
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("file, test, overrides, named", MUTANTS,
                         ids=[f"{t}[{n}]" for _, t, _, n in MUTANTS])
def test_the_graded_test_names_the_mistake(file, test, overrides, named):
    test_fn = getattr(_module(file), test)
    student = InProcessStudent("solutions", overrides=overrides)
    with pytest.raises(Mismatch) as failure:
        test_fn(student)
    assert failure.value.mistake and named in failure.value.mistake, (
        f"{test} failed without naming the mistake {named!r}:\n{failure.value}")
    assert named in str(failure.value)


def test_skipping_cache_and_share_passes_notebook_03s_own_test():
    """Without the one given call, MultiHeadAttention is right in notebook 03 (no cache, G = H): its
    own graded test passes; the tests taught later (above) name the call that was skipped."""
    student = InProcessStudent("solutions", overrides={("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare})
    MODULES["test_multihead.py"].test_multihead_attention(student)


def test_every_graded_test_passes_with_the_reference():
    tests = _graded_tests()
    activities = [f[len("test_"):-len(".py")] for f in GRADED_FILES]
    assert {e for *_, e in tests} == {f"{a}.{p}" for a in activities for p in exercise_pieces(ROOT / "solutions" / f"{a}.py")}
    student = InProcessStudent("solutions")
    for file, name, _ in tests:
        getattr(MODULES[file], name)(student)


@pytest.mark.slow(seconds=15)
def test_the_untouched_exercises_fail_every_graded_test_by_name(tmp_path):
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(ANDREA_IMPL="exercises", OMP_NUM_THREADS="1")   # tiny tensors: more threads only contend
    run = subprocess.run([sys.executable, "-m", "pytest", "--impl", "exercises", "-p", "no:xdist",
                          "-p", "no:cacheprovider", "-p", "no:nbval", "-p", "no:hypothesispytest",
                          # the plugin's failure text is what is read; pytest's long form would
                          # parse each failing test's file again, half of this run's time
                          "-q", "--tb=native", f"--junitxml={report}",
                          *[str(TESTS / f) for f in GRADED_FILES],
                          *[str(HIDDEN / f.replace("test_", "test_hidden_", 1)) for f in GRADED_FILES
                            if (HIDDEN / f.replace("test_", "test_hidden_", 1)).exists()]],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert report.exists(), f"pytest wrote no report:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    cases = {}
    for case in ET.parse(report).iter("testcase"):
        problems = [c for c in case if c.tag in ("failure", "error", "skipped")]
        text = " ".join((c.get("message") or "") + " " + (c.text or "") for c in problems)
        home = case.get("classname").rsplit(".", 1)[-1].replace("test_hidden_", "test_", 1) + ".py"
        cases[(home, case.get("name"))] = (problems, text)
    suite = next(ET.parse(report).iter("testsuite"))
    assert suite.get("errors") == "0", f"errors (at collection?) under --impl exercises:\n{run.stdout[-3000:]}"
    for file, name, exercise in _graded_tests():
        assert (file, name) in cases, f"{file}::{name} did not run under --impl exercises"
        problems, text = cases[(file, name)]
        assert [p.tag for p in problems] == ["failure"], f"{file}::{name} did not fail with the exercises"
        assert STUB_MARK in text and exercise in text, (
            f"{file}::{name} failed without saying that {exercise} is {STUB_MARK}:\n{text[:1500]}")


# ----- issue 15's gaps: mistakes that were never named -----

def _softmax_without_keepdim(s):
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1)                      # (..., T): raises when T != S, misaligned when T = S


def _softmax_without_keepdim_when_square(s):
    """Only when T = S (elsewhere right): the mistake as the square input alone shows it."""
    return _softmax_without_keepdim(s) if s.shape[-1] == s.shape[-2] else torch.softmax(s, dim=-1)


def _layer_norm_without_keepdim(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1)
    var = ((x - mean) ** 2).mean(dim=-1)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


GAPS = [
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: torch.softmax(s, dim=0)}, "softmax over dim=0"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: s.exp() / s.exp().sum(dim=0)}, "softmax over dim=0"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): _softmax_without_keepdim}, "keepdim forgotten in a row statistic"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): lambda s: (s - s.amax(dim=-1)).exp() / (s - s.amax(dim=-1)).exp().sum(-1, keepdim=True)},
     "keepdim forgotten in a row statistic"),
    ("test_attention.py", "test_softmax_keeps_one_statistic_per_row",
     {("attention", "softmax"): _softmax_without_keepdim_when_square}, "keepdim forgotten in the row sum"),
    ("test_attention.py", "test_softmax_is_stable_and_handles_masked_scores",
     {("attention", "softmax"): _softmax_without_keepdim}, "keepdim forgotten in the row sum"),
    ("test_embeddings.py", "test_cosine_similarity",
     {("embeddings", "cosine_similarity"): lambda u, v, eps=1e-8: (u * v).sum(-1) / (u.norm() * v.norm())},
     "norms over the whole tensor"),
    ("test_block.py", "test_layer_norm_keeps_one_statistic_per_token",
     {("block", "layer_norm"): _layer_norm_without_keepdim}, "keepdim forgotten"),
    ("test_block.py", "test_layer_norm_keeps_one_statistic_per_token",
     {("block", "layer_norm"): lambda x, w, b, eps=1e-5: (_layer_norm_without_keepdim(x, w, b, eps) if x.dim() == 2
                                                          else F.layer_norm(x, x.shape[-1:], w, b, eps))},
     "keepdim forgotten"),
    ("test_modern.py", "test_rmsnorm_keeps_one_statistic_per_token",
     {("modern", "rms_norm"): lambda x, w, eps=1e-5: x * torch.rsqrt(x.pow(2).mean(dim=-1) + eps) * w},
     "keepdim forgotten"),
    ("test_multihead.py", "test_grouped_kv_heads", {("multihead", "MultiHeadAttention"): MHASkippingCacheAndShare},
     "not what cache_and_share returns"),
]


@pytest.mark.parametrize("file, test, overrides, named", GAPS, ids=[f"{t}[{n}]" for _, t, _, n in GAPS])
def test_the_gaps_are_named(file, test, overrides, named):
    test_the_graded_test_names_the_mistake(file, test, overrides, named)


# ----- issue 23: a named mistake is confirmed on a second input, in every graded test -----

class _Catalogue:
    """Wraps expect_close / expect_equal / expect_runs while the answer key runs a graded test, and
    writes down every mistake catalogue that could never be confirmed: a mistake wrong on the test's
    input and wrong on no second input, two mistakes that agree on both inputs, a second input
    whose expected value is not what the answer key gives there."""

    def __init__(self):
        from andrea_course.grading import expect as judge
        self.judge, self.problems, self.test = judge, [], ""
        self.close, self.equal, self.runs = judge.expect_close, judge.expect_equal, judge.expect_runs

    def _check(self, kind, want, what, mistakes, second, same, right):
        if not mistakes:
            return
        where = f"{self.test}: {what}"
        if not second:
            self.problems.append(f"{where}: {len(mistakes)} typical mistakes and no second input")
            return
        seconds = [second] if isinstance(second, self.judge.Second) else list(second)
        match = self.judge._match
        if kind != "runs":
            for s in seconds:
                try:
                    got = s.got()
                except Exception as exc:            # noqa: BLE001
                    self.problems.append(f"{where}: the answer key raised on a second input: {exc!r}"[:300])
                    continue
                if not right(got, s.want):
                    self.problems.append(f"{where}: a second input's expected value is not the answer key's output")
        confirmed_on = {}
        for name, wrong in mistakes.items():
            if wrong is None or (kind != "runs" and match(same, wrong, want, want)):
                continue                            # no mistake on this input: never named here
            i = next((i for i, s in enumerate(seconds) if s.mistakes.get(name) is not None
                      and (kind == "runs" or not match(same, s.mistakes[name], s.want, s.want))), None)
            if i is None:
                self.problems.append(f"{where}: [{name[:60]}] gives a wrong answer on no second input")
            else:
                confirmed_on[name] = i
        if kind == "runs":
            return
        names = list(confirmed_on)
        for x, a in enumerate(names):
            for b in names[x + 1:]:
                s = seconds[confirmed_on[a]]
                if confirmed_on[a] == confirmed_on[b] and match(same, mistakes[a], mistakes[b], want) \
                        and match(same, s.mistakes[a], s.mistakes[b], s.want):
                    self.problems.append(f"{where}: [{a[:40]}] and [{b[:40]}] agree on both inputs")

    def expect_close(self, got, want, what, *, mistakes=None, second=None, hint="", atol=None, rtol=None, **more):
        judge = self.judge
        w = want if isinstance(want, torch.Tensor) else torch.as_tensor(want)

        def right(g, t):
            t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
            a, r = judge._tol(t, atol, rtol)
            return isinstance(g, torch.Tensor) and judge._close(g, t, a, r)
        self._check("close", w, what, mistakes, second, judge._loose(atol, rtol), right)
        return self.close(got, want, what, mistakes=mistakes, second=second, hint=hint, atol=atol, rtol=rtol, **more)

    def expect_equal(self, got, want, what, hint="", mistakes=None, second=None, **more):
        self._check("equal", want, what, mistakes, second, self.judge._same, self.judge._same)
        return self.equal(got, want, what, hint, mistakes=mistakes, second=second, **more)

    def expect_runs(self, call, what, *, mistakes=None, second=None, hint=""):
        self._check("runs", None, what, mistakes, second, None, None)
        return self.runs(call, what, mistakes=mistakes, second=second, hint=hint)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("file", [*GRADED_FILES, "test_kernels.py", "test_bpe.py"])
def test_every_named_mistake_can_be_confirmed_on_a_second_input(file, monkeypatch):
    """Every typical mistake a graded test lists, where it gives a wrong answer on the test's input,
    gives a wrong answer on a second input too (so that the judge can tell it from a mistake that
    agrees with it on one input), and no two mistakes agree on both."""
    import andrea_course.activity_tests.test_multihead as shared            # test_modern imports its check_with_cache
    catalogue = _Catalogue()
    module = _module(file)
    tests = [(name, fn) for name, fn in vars(module).items()
             if name.startswith("test_") and any(m.name == "exercise" for m in getattr(fn, "pytestmark", []))]
    assert tests
    namespaces = [vars(catalogue.judge), vars(shared), *(fn.__globals__ for _, fn in tests)]
    for namespace in {id(n): n for n in namespaces}.values():           # each graded file (and its hidden one) once
        for name in ("expect_close", "expect_equal", "expect_runs"):
            if name in namespace:
                monkeypatch.setitem(namespace, name, getattr(catalogue, name))
    student = InProcessStudent("solutions")
    for name, fn in tests:
        catalogue.test = name
        fn(student)
    assert not catalogue.problems, "\n".join(catalogue.problems)


# ----- issue 23: what both runners say for the natural mistakes learners made -----
# A learner's folder: the answer key with one piece rewritten the way a learner wrote it (the last
# definition of a name in a file is the one that counts). Both read the rows of
# grading/records.py's describe(): check() shows them in its box, the grader writes their text().

LEARNERS = {
    "multihead": '''
def merge_heads(y):
    B, H, T, K = y.shape
    return y.transpose(1, 2).view(B, T, H * K)       # a view of a transposed tensor
''',
    "model": '''
def sample_next(logits, temperature, top_k, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
''',
    "embeddings": '''
def embed_lookup(table, ids):
    B, T = ids.shape                                    # written for (B, T) ids only
    return table[ids.reshape(-1)].reshape(B, T, table.shape[-1])
''',
    "attention": '''
def attention(q, k, v, causal=True):
    w = softmax(scale_scores(attention_scores(q, k), q.shape[-1]))
    if causal:
        w = w * causal_mask(q.shape[-2], k.shape[-2])  # masked after the softmax
    return weighted_sum(w, v)
''',
    "block": '''
def dropout(x, p, training, generator=None):
    if not training or p == 0:
        return x
    if p == 1:
        return x.zero_()
    keep = torch.rand(x.shape, generator=generator) >= p
    return x.mul_(keep).div_(1 - p)                     # in place
''',
    "bpe": '''
def pair_counts(words):
    counts = {}
    for word in words:                                  # each word once, not by its count
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts
''',
}
REWRITTEN = {  # activity: (a line of the answer key, the learner's line)
    "model": ("self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))",
              "self.blocks = [Block(cfg) for _ in range(cfg.n_layers)]"),      # a plain list: nn.ModuleList forgotten
}
EXERCISES = ["multihead.merge_heads", "model.sample_next", "model.ANDREA", "embeddings.embed_lookup",
             "attention.attention", "block.dropout", "bpe.pair_counts"]


@pytest.fixture(scope="module")
def learners_folder(tmp_path_factory):
    import shutil
    folder = tmp_path_factory.mktemp("learner") / "submission"
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    for activity, (line, learners) in REWRITTEN.items():
        path = folder / f"{activity}.py"
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        at = [i for i, code in enumerate(lines) if code.strip() == line]          # the code, not a hint quoting it
        assert len(at) == 1, f"solutions/{activity}.py no longer holds the line {line!r}"
        lines[at[0]] = lines[at[0]].replace(line, learners)
        path.write_text("".join(lines), encoding="utf-8")
    for activity, code in LEARNERS.items():
        with open(folder / f"{activity}.py", "a", encoding="utf-8") as f:
            f.write("\n" + code)
    return folder


@pytest.fixture(scope="module")
def boxes(learners_folder):
    """{test name: the text of its failure in check()'s box}, for every failing graded test of EXERCISES."""
    from andrea_course.notebook import run_graded_many
    out = {}
    for exercise, result in run_graded_many(EXERCISES, impl=str(learners_folder)).items():
        assert result.error is None, result.error
        for o in result.outcomes:
            if o.status != "passed":
                out[o.name] = "\n".join(f"{label}: {text}" for label, text in o.rows)
    return out


@pytest.fixture(scope="module")
def reports(learners_folder, tmp_path_factory):
    """{test name: the grader's output for it} from pytest with the grading plugin (make grade's path)."""
    import json
    jsonl = tmp_path_factory.mktemp("grade") / "results.jsonl"
    files = [str(ACTIVITY_TESTS / f"test_{a}.py") for a in sorted({e.split(".")[0] for e in EXERCISES})]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "--tb=native", "-p", "no:cacheprovider", "-p", "no:xdist",
                    "-p", "no:nbval", "--impl", str(learners_folder), "--results-jsonl", str(jsonl), *files],
                   cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    from andrea_course.grading.records import Record, text
    lines = [Record.of({k: v for k, v in json.loads(line).items() if k != "mac"}) for line in jsonl.read_text().splitlines()]
    return {r.name: text(r) for r in lines if r.kind == "result" and r.status != "passed"}


BOX_CASES = [  # (graded test, words its failure must say, words it must not say)
    ("test_merge_heads", ["non-contiguous", ".reshape"], ["this test looks for", "mixes positions and heads"]),
    ("test_sample_next_draws_what_the_engine_draws", ["keepdim", "do not broadcast"], ["this test looks for"]),
    ("test_andrea_has_the_reference_parameters", ["plain Python list", "nn.ModuleList"], []),
    ("test_andrea_logits", ["nn.ModuleList", "lacks 24 parameters under blocks."], []),
    ("test_embed_lookup_of_one_sequence", ["Unpacking a tensor's shape", "x.shape[-2:]"], []),
    ("test_causal_attention", ["masked after the softmax"], ["fix that one first"]),
    ("test_dropout_leaves_its_input_unchanged", ["changed its argument 'x' in place"], ["nothing dropped"]),
    ("test_pair_counts_counts_overlapping_pairs", ["each word counted once"], ["overlapping pairs skipped"]),
]


@pytest.mark.parametrize("test, says, never", BOX_CASES, ids=[c[0] for c in BOX_CASES])
def test_both_runners_say_what_the_learner_did(test, says, never, boxes, reports):
    for runner, texts in (("check()", boxes), ("the grader", reports)):
        assert test in texts, f"{test} did not fail in {runner}; failing there: {sorted(texts)}"
        text = texts[test]
        for words in says:
            assert words in text, f"{runner} for {test} does not say {words!r}:\n{text}"
        for words in never:
            assert words not in text, f"{runner} for {test} says {words!r}, which the learner did not do:\n{text}"
    assert reports[test].count("blocks.") <= 6 and boxes[test].count("blocks.") <= 6     # a few names, never a listing


def test_one_natural_mistake_fails_only_where_it_is(boxes):
    """Each rewritten piece fails the tests of what it got wrong, not its neighbours': the in-place
    dropout only dropout's own tests, each box naming the in-place write (every call writes into
    the caller's x, and the graded piece is stopped there), the plain-list ANDREA not the count, the
    (B, T)-only lookup only the one-sequence test."""
    dropout = {t for t in boxes if "dropout" in t}
    assert "test_dropout_leaves_its_input_unchanged" in dropout, dropout
    assert all(t.startswith("test_dropout_") and "changed its argument 'x' in place" in boxes[t] for t in dropout), dropout
    lookup = {t for t in boxes if "embed_lookup" in t}
    assert lookup == {"test_embed_lookup_of_one_sequence"}, lookup
    assert not any("count_parameters" in t for t in boxes)


# ----- issue 23: no points for a no-op -----

class _Nothing(torch.nn.Module):
    """A learner's class that does nothing: built from anything, it gives its first input back."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.args = args

    def forward(self, x=None, *args, **kwargs):
        return x

    def update(self, k=None, *args, **kwargs):
        return k


def _first_input(*args, **kwargs):
    return args[0] if args else next(iter(kwargs.values()), None)


class IdentityStudent(InProcessStudent):
    """The identity submission: every function returns its first input, every class does nothing."""

    def __init__(self):
        super().__init__("solutions")

    def piece(self, activity, name):
        real = super().piece(activity, name)
        return _Nothing if isinstance(real, type) else _first_input

    def source(self, activity, name):
        return "def %s(*args):\n    return args[0]\n" % name


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_the_identity_submission_scores_0():
    """Every graded test, each piece a no-op: none passes, so no point is earned for doing nothing
    (a property such as "does nothing outside training" or "scores depend on the distance only"
    also checks that the piece does something)."""
    files = [*GRADED_FILES, "test_bpe.py"] + (["test_kernels.py"] if importlib.util.find_spec("triton") else [])
    student, passed, total = IdentityStudent(), [], 0.0
    for file in files:
        for name, fn in vars(_module(file)).items():
            marks = {m.name: m for m in getattr(fn, "pytestmark", [])}
            if not name.startswith("test_") or "exercise" not in marks:
                continue
            points = float(marks["points"].args[0]) if "points" in marks else 1.0
            total += points
            try:
                fn(student)
            except Exception:                       # noqa: BLE001 - every way of failing counts as failing
                continue
            passed.append((f"{file}::{name}", points))
    assert total > 0
    assert not passed, (f"the identity submission earns {sum(p for _, p in passed):g} of {total:g} points: "
                        + ", ".join(n for n, _ in passed))


class BlockNormalisedResidualWithDropout(blk.Block):
    """The learner of issue 23: self.drop used, the normalised x added back to the stream."""
    def forward(self, x, cache=None):
        x = self.ln1(x)
        x = x + self.drop(self.attn(x, cache))
        x = self.ln2(x)
        return x + self.drop(self.mlp(x))


def test_a_normalised_residual_costs_in_the_block_equation_only():
    """The block that adds the normalised x back to the stream fails the block equation's test,
    which names it; the cache and dropout tests compare the block with itself and pass, so no box
    tells this learner, who used self.drop, to use self.drop."""
    student = InProcessStudent("solutions", overrides={("block", "Block"): BlockNormalisedResidualWithDropout})
    failed = {}
    for name, fn in vars(MODULES["test_block.py"]).items():
        if any(m.name == "exercise" and m.args[0] == "block.Block" for m in getattr(fn, "pytestmark", [])):
            try:
                fn(student)
            except Mismatch as exc:
                failed[name] = str(exc)
    assert set(failed) == {"test_pre_norm_block"}, sorted(failed)
    assert "normalised x to the residual" in failed["test_pre_norm_block"] and "self.drop" not in failed["test_pre_norm_block"]


UNKNOWN = [  # a wrong piece no catalogue knows: the failure shows where the values differ, with positions
    ("test_embeddings.py", "test_add_positions_from_zero",
     {("embeddings", "add_positions"): lambda tok, pos, start=0: tok + 2 * pos[start:start + tok.shape[1]]}),
    ("test_block.py", "test_layer_norm", {("block", "layer_norm"): lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps) * 1.01}),
    ("test_attention.py", "test_attention_head", {("attention", "AttentionHead"): type("Shifted", (att.AttentionHead,), {
        "forward": lambda self, x: att.AttentionHead.forward(self, x) + 0.5})}),
]


@pytest.mark.parametrize("file, test, overrides", UNKNOWN, ids=[t for _, t, _ in UNKNOWN])
def test_an_unknown_mistake_shows_where_the_values_differ(file, test, overrides):
    with pytest.raises(Mismatch) as failure:
        getattr(MODULES[file], test)(InProcessStudent("solutions", overrides=overrides))
    exc = failure.value
    assert exc.mistake is None and (exc.unmatched or exc.relation)      # a relation seen on two inputs, or none
    assert ("none of the typical mistakes" in str(exc)) != bool(exc.relation)
    assert exc.differences and " yours " in exc.differences and ", expected " in exc.differences
    assert exc.differences.split("the first: ")[1].startswith("[")           # a position, then the two values


# ----- issue 30 item 4: wrong pieces no name fits still fail; a piece fails in its own notebook -----

def _positions_detached(tok, position_table, start=0):
    return tok + position_table[start:start + tok.shape[-2]].detach()


def _softmax_through_numpy(scores):
    e = np.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


WRONG = [  # (graded file, graded test, the wrong piece): it must fail, whatever the failure names
    ("test_attention.py", "test_softmax_over_the_keys", {("attention", "softmax"): _softmax_through_numpy}),
    ("test_embeddings.py", "test_embeddings_module_applies_its_dropout",
     {("embeddings", "Embeddings"): EmbeddingsWithAFixedDropout}),
    ("test_block.py", "test_block_applies_dropout_while_training", {("block", "Block"): BlockWithAFixedDropout}),
    ("test_embeddings.py", "test_add_positions_from_zero", {("embeddings", "add_positions"): _positions_detached}),
]


@pytest.mark.parametrize("file, test, overrides", WRONG, ids=[f"{t}[{next(iter(o.values())).__name__}]"
                                                               for _, t, o in WRONG])
def test_a_wrong_piece_fails_its_graded_test(file, test, overrides):
    with pytest.raises((Mismatch, RuntimeError)):          # in this process, the learner's own error as it is
        getattr(MODULES[file], test)(InProcessStudent("solutions", overrides=overrides))


def _function_pieces():
    """{piece: [(file, test)]}: the graded tests of every piece that is a function (not a class)."""
    found = {}
    for file, name, piece in _graded_tests():
        activity, fn_name = piece.split(".")
        if isinstance(getattr(pieces.module(activity), fn_name, None), types.FunctionType):
            found.setdefault(piece, []).append((file, name))
    return found


FUNCTION_PIECES = _function_pieces()


@functools.cache
def _trained_through(piece) -> bool:
    """Whether the reference piece, called as its graded tests call it but with its floating-point
    tensor arguments requiring grad, gives an output on autograd's graph: training goes through it."""
    from andrea_course.inputs import keeps_inputs
    activity, name = piece.split(".")
    ref, seen, tests = pieces.module(activity).__dict__[name], [], FUNCTION_PIECES[piece]

    @functools.wraps(ref)
    def probe(*args, **kwargs):
        grad = lambda a: a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        try:
            with torch.enable_grad():
                out = ref(*map(grad, args), **{k: grad(v) for k, v in kwargs.items()})
            seen.append(any(isinstance(t, torch.Tensor) and t.requires_grad
                            for t in (out if isinstance(out, tuple) else (out,))))
        except Exception:
            pass
        return ref(*args, **kwargs)
    student = InProcessStudent("solutions", overrides={(activity, name): keeps_inputs(probe, name)})
    for file, test in tests:
        try:
            getattr(MODULES[file], test)(student)
        except Exception:
            pass
        if any(seen):
            return True
    return False


GRADIENT_SLIPS = {  # what a piece's output becomes: the same values, another gradient
    "cut off": lambda t: t.detach(),                            # .detach(), .data, a trip through NumPy
    "half gradient": lambda t: t.detach() + (t - t.detach()) / 2,   # part of it hidden from autograd
}


@pytest.mark.parametrize("slip", sorted(GRADIENT_SLIPS))
@pytest.mark.parametrize("piece", sorted(FUNCTION_PIECES))
def test_a_piece_with_the_wrong_gradient_fails(piece, slip):
    """Every function piece that training goes through fails some graded test when its output is
    cut off from autograd, or keeps its values with another gradient (a statistic detached,
    padding_idx): a model built from it would learn wrongly or not at all, whatever its values."""
    from andrea_course.inputs import keeps_inputs
    tests = FUNCTION_PIECES[piece]
    if not _trained_through(piece):
        pytest.skip(f"{piece}: no output on autograd's graph")
    activity, name = piece.split(".")
    ref = pieces.module(activity).__dict__[name]

    @functools.wraps(ref)                    # ref's signature: keeps_inputs sees its arguments
    def wrong(*args, **kwargs):
        out = ref(*args, **kwargs)
        change = lambda t: GRADIENT_SLIPS[slip](t) if isinstance(t, torch.Tensor) and t.requires_grad else t
        return tuple(map(change, out)) if isinstance(out, tuple) else change(out)
    student = InProcessStudent("solutions", overrides={(activity, name): keeps_inputs(wrong, name)})
    for file, test in tests:
        try:
            getattr(MODULES[file], test)(student)
        except Exception:                                # noqa: BLE001 - any failure: the piece does not pass
            return
    pytest.fail(f"{piece}: every graded test passes a piece whose output has {slip}")


def _own_notebooks_tests(file, exercise):
    """The graded tests of `exercise` that check() in its own notebook runs: none taught later."""
    activity = exercise.split(".")[0]
    return {name: fn for name, fn in vars(MODULES[file]).items() if name.startswith("test_")
            and any(m.name == "exercise" and m.args[0] == exercise for m in getattr(fn, "pytestmark", []))
            and all(m.args[0] == activity for m in getattr(fn, "pytestmark", []) if m.name == "taught")}


def test_a_forward_dropping_the_caches_start_fails_in_notebook_06():
    """model.ANDREA whose forward embeds the new tokens from position 0 fails a test that notebook
    06's own check("model.ANDREA") runs, and the failure names the start position."""
    student = InProcessStudent("solutions", overrides={("model", "ANDREA"): ModelIgnoringStart})
    failed = {}
    for name, fn in _own_notebooks_tests("test_model.py", "model.ANDREA").items():
        try:
            fn(student)
        except Mismatch as exc:
            failed[name] = exc
    assert "test_andrea_with_a_kv_cache" in failed, sorted(failed)
    assert "caches[0].pos" in (failed["test_andrea_with_a_kv_cache"].mistake or "")
