"""Mutation tests of andrea_course/activity_tests/test_model.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import torch
import torch.nn.functional as F

from andrea_course.grading import Mismatch
from andrea_course.grading.student import InProcessStudent
from andrea_course import pieces

from mutant_checks import MODULES, the_graded_test_names_the_mistake

blk = pieces.module("block")
mdl = pieces.module("model")
NEG_INF = float("-inf")


# ----- the mutants: what a learner typically writes instead -----

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


class ModelDroppingTheCaches(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        x = self.embed(ids, caches[0].pos if caches else 0)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.output_weight().T


class ModelComputingItsOwnLoss(mdl.ANDREA):
    def forward(self, ids, targets=None, caches=None):
        logits = super().forward(ids, caches=caches)
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class ModelWithABiasedFinalNorm(mdl.ANDREA):
    def __init__(self, cfg, *args, **kwargs):
        super().__init__(cfg, *args, **kwargs)
        self.ln_f = blk.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


def _count_with_a_position_table(cfg):
    """The answer key's count, with a learned position table counted whatever cfg.position says."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    table = cfg.context_length * cfg.d_model
    return dict(counts, position_table=table, total=counts["total"] - counts["position_table"] + table)


def _count_qkv_bias_per_input(cfg):
    """The answer key's count with the qkv projection's bias counted as D, one per input."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    short = cfg.n_layers * ((cfg.n_heads + 2 * cfg.kv_heads) * cfg.d_head - cfg.d_model) if cfg.bias else 0
    each = short // cfg.n_layers
    return dict(counts, attention=counts["attention"] - each, block=counts["block"] - each,
                blocks=counts["blocks"] - short, total=counts["total"] - short)


def _count_one_block_short(cfg):
    """The answer key's count with L - 1 blocks."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    return dict(counts, blocks=counts["blocks"] - counts["block"], total=counts["total"] - counts["block"])


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


class CacheReturningTheKeysTwice(mdl.KVCache):
    def update(self, k, v):
        keys, _ = super().update(k, v)
        return keys, keys


class _andrea_shifting_again(mdl.ANDREA):
    """An ANDREA whose loss scores position t against targets[:, t + 1]: the targets shifted again."""
    def forward(self, ids, targets=None, caches=None):
        logits = super().forward(ids, None, caches)
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits[:, :-1], targets[:, 1:])


# ----- the twelfth fresh set's mutants -----

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


def _count_summing_every_entry(cfg):
    counts = dict(pieces.module("model").count_parameters(cfg))
    counts["total"] = sum(v for k, v in counts.items() if k != "total")
    return counts


# ----- the twentieth fresh set's mutants -----

def _count_with_head_bias(cfg):
    """The answer key's count with a bias of V in the untied head."""
    counts = InProcessStudent("solutions").piece("model", "count_parameters")(cfg)
    extra = 0 if cfg.tie_embeddings else cfg.vocab_size
    return dict(counts, head=counts["head"] + extra, total=counts["total"] + extra)


# ----- the twenty-first fresh set's mutants -----

def _sampler_of_int32_ids(logits, temperature, top_k, generator=None):
    ids = _sampler()(logits, temperature, top_k, generator)
    return ids.to(torch.int32) if temperature == 0 else ids


def _sampler_with_a_fixed_key(logits, temperature, top_k, generator=None):
    return _sampler()(logits, temperature, top_k, generator or torch.Generator().manual_seed(0))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelWithoutFinalNorm}, "final norm"),
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelScalingItsEmbeddings},
     "the embeddings multiplied by sqrt(D)"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): CacheReturningTheKeysTwice},
     "the key buffer returned in the values' place"),
    ("test_model.py", "test_andrea_generates_the_same_with_and_without_the_cache",
     {("model", "ANDREA"): ModelIgnoringStart}, "positions restart at 0"),
    # issue 13's eight mistakes that once got full marks
    ("test_model.py", "test_andrea_with_a_kv_cache", {("model", "ANDREA"): ModelDroppingTheCaches},
     "the caches not passed on"),
    ("test_model.py", "test_andrea_with_a_kv_cache", {("model", "ANDREA"): ModelIgnoringStart},
     "positions restart at 0"),
    ("test_model.py", "test_count_parameters_of_andrea_120m",
     {("model", "count_parameters"): lambda cfg: mdl.count_parameters(cfg.replace(bias=False))}, "biases forgotten"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_qkv_bias_per_input},
     "the qkv projection's bias counted with D entries, one per input"),
    ("test_model.py", "test_count_parameters_with_tied_embeddings",
     {("model", "count_parameters"): lambda cfg: mdl.count_parameters(cfg.replace(tie_embeddings=False))},
     "tied head counted"),
    # issue 15 item 6: averaging the past, sampling the next token, the KV cache
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
    # issue 23: mistakes no test caught
    ("test_model.py", "test_sample_next_with_top_k_larger_than_the_vocabulary",
     {("model", "sample_next"): _sampler()}, "top_k larger than the vocabulary"),
    ("test_model.py", "test_count_parameters_of_the_modern_model",
     {("model", "count_parameters"): _classic_count}, "keys and values counted for all H heads"),
    ("test_model.py", "test_count_parameters_of_the_modern_model",
     {("model", "count_parameters"): lambda cfg: _classic_count(cfg, grouped=True)}, "SwiGLU counted as the GELU MLP's two"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_model.py", "test_andrea_calls_its_cross_entropy_slot", {("model", "ANDREA"): ModelComputingItsOwnLoss},
     "self.cross_entropy never called"),
    ("test_model.py", "test_andrea_has_the_reference_parameters", {("model", "ANDREA"): ModelWithABiasedFinalNorm},
     "the final norm always a LayerNorm"),
    ("test_model.py", "test_count_parameters_for_every_config_option",
     {("model", "count_parameters"): _count_with_a_position_table}, "a position table counted with position='rope'"),
    ("test_model.py", "test_kv_cache_refuses_what_does_not_fit", {("model", "KVCache"): CacheCheckingWithoutT},
     "the full-cache check let an update through"),
    # the twelfth fresh set's classes
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
    ("test_model.py", "test_andrea_logits", {("model", "ANDREA"): ModelNotChainingItsBlocks},
     "every block reads the embeddings"),
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_summing_every_entry},
     "summed over every entry"),
    # the sixteenth fresh set's classes
    ("test_model.py", "test_andrea_with_targets_gives_logits_and_the_loss", {("model", "ANDREA"): _andrea_shifting_again},
     "shifted by one position again (logits[:, :-1] against targets[:, 1:])"),
    # the nineteenth fresh set's classes
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_one_block_short},
     "one block short: L - 1 blocks counted"),
    ("test_model.py", "test_kv_cache_appends_each_update", {("model", "KVCache"): _cache_writing(_into_one_slot)},
     "every new position written into slot pos"),
    ("test_model.py", "test_sample_next_draws_what_the_engine_draws", {("model", "sample_next"): _sampler(row_0=True)},
     "one row's k-th largest logit used as every row's threshold"),
    # the twentieth fresh set's classes
    ("test_model.py", "test_count_parameters_of_andrea_120m", {("model", "count_parameters"): _count_with_head_bias},
     "a bias of V counted in the head"),
    # the twenty-first fresh set's classes
    ("test_model.py", "test_sample_next_at_temperature_0_is_greedy", {("model", "sample_next"): _sampler_of_int32_ids},
     "the ids cast to int32"),
    ("test_model.py", "test_sample_next_without_a_generator_draws_anew",
     {("model", "sample_next"): _sampler_with_a_fixed_key}, "the same draws at every call"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)


# ----- issue 30 item 4: a piece fails in its own notebook -----

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
