"""Graded tests, activity 7.3 · Twelve blocks make ANDREA-120M: assembling the model and
counting its parameters."""
import torch
import torch.nn.functional as F

from andrea_course import ANDREA, ModelConfig
from andrea_course.grading import Mismatch, expect_close, expect_equal, graded
from andrea_course import pieces
from andrea_course.params import count_parameters

CFG = ModelConfig(vocab_size=19, context_length=8, d_model=16, n_layers=2, n_heads=4, d_ff=32)
USES_PIECES = "ANDREA runs your Embeddings and Block: if one of their tests fails, fix that one first"


def _reference_model(cfg, seed=0):
    """The reference ANDREA in float64 with every parameter random (norm gains included)."""
    ref = pieces.module("model").ANDREA(cfg).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(torch.randn(p.shape, dtype=p.dtype, generator=g) * 0.5)
    return ref.eval()


def _student_model(student, ref, cfg):
    m = student.piece("model", "ANDREA")(cfg)
    m.double()
    m.load_state_dict(ref.state_dict())
    m.eval()
    return m


def _shapes(model):
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _logits_and_mistakes(ref, ids):
    """The right logits, step by step from the reference's parts, and those of typical mistakes."""
    cfg = ref.cfg
    tok, pos = ref.embed.token_table, ref.embed.position_table
    ln_f = lambda t: F.layer_norm(t, (cfg.d_model,), ref.ln_f.weight, ref.ln_f.bias, ref.ln_f.eps)
    head = tok if cfg.tie_embeddings else ref.head.weight                 # (V, D)
    with torch.no_grad():
        def trunk(x):
            for block in ref.blocks:
                x = block(x)
            return x
        x0 = tok[ids] + pos[:ids.shape[1]]                                 # (B, T, D)
        x = trunk(x0)
        want = ln_f(x) @ head.T                                            # (B, T, V)
        mistakes = {"final norm (ln_f) forgotten: logits = head(ln_f(x))": x @ head.T,
                    "positions not added: self.embed(ids, start) adds them": ln_f(trunk(tok[ids])) @ head.T,
                    "the blocks skipped: pass x through every block in self.blocks": ln_f(x0) @ head.T}
        if not cfg.tie_embeddings:
            mistakes["the token table used as the output head although cfg.tie_embeddings is False: "
                     "use self.output_weight()"] = ln_f(x) @ tok.T
    return want, mistakes


@graded("model.ANDREA", points=1)
def test_andrea_has_the_reference_parameters(student):
    ref = _reference_model(CFG)
    m = student.piece("model", "ANDREA")(CFG)
    want = _shapes(ref)
    expect_equal(_shapes(m), want, "ANDREA(cfg).state_dict(): names and shapes",
                 hint="self.embed, self.blocks (nn.ModuleList of L Blocks), self.ln_f, self.head (D -> V, no bias)",
                 mistakes={"the output head has a bias: nn.Linear(D, V, bias=False)":
                           {**want, "head.bias": (CFG.vocab_size,)},
                           "no output head: an untied model has self.head = nn.Linear(D, V, bias=False)":
                           {k: v for k, v in want.items() if k != "head.weight"}})


@graded("model.ANDREA", points=3)
def test_andrea_logits(student):
    ref = _reference_model(CFG)
    ids = torch.randint(0, CFG.vocab_size, (2, 6), generator=torch.Generator().manual_seed(1))
    want, mistakes = _logits_and_mistakes(ref, ids)
    m = _student_model(student, ref, CFG)
    expect_close(m(ids), want, "ANDREA(cfg)(ids)", mistakes=mistakes, hint=USES_PIECES)


@graded("model.ANDREA", points=2)
def test_andrea_with_tied_embeddings(student):
    cfg = CFG.replace(tie_embeddings=True)
    ref = _reference_model(cfg, seed=2)
    m = student.piece("model", "ANDREA")(cfg)
    want = _shapes(ref)
    expect_equal(_shapes(m), want, "ANDREA(cfg with tie_embeddings=True).state_dict(): names and shapes",
                 mistakes={"a separate head although cfg.tie_embeddings is True: set self.head = None; "
                           "the token table is the output projection":
                           {**want, "head.weight": (cfg.vocab_size, cfg.d_model)}})
    m = _student_model(student, ref, cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 5), generator=torch.Generator().manual_seed(3))
    want, mistakes = _logits_and_mistakes(ref, ids)
    expect_close(m(ids), want, "ANDREA(tied cfg)(ids)", mistakes=mistakes, hint=USES_PIECES)


@graded("model.ANDREA", points=2, taught="modern")
def test_andrea_with_a_kv_cache(student):
    """The model fed 3 tokens, then 3 more, through its caches (model.new_caches) gives the
    logits that one pass over all 6 gives: every block gets its own cache, and the new tokens'
    positions start where the cached ones ended."""
    ref = _generation_model(seed=6)
    ids = torch.randint(0, CFG.vocab_size, (2, 6), generator=torch.Generator().manual_seed(7))
    m = _student_model(student, ref, CFG)
    caches = m.new_caches(2)
    m(ids[:, :3], caches=caches)
    got = m(ids[:, 3:], caches=caches)
    with torch.no_grad():
        want = ref(ids)[:, 3:]
        no_cache = ref(ids[:, 3:])                                         # blocks given no cache
        restart = ref.new_caches(2)
        ref(ids[:, :3], caches=restart)
        x = ref.embed(ids[:, 3:], 0)                                       # positions restarting at 0
        for block, cache in zip(ref.blocks, restart):
            x = block(x, cache)
        restarted = ref.ln_f(x) @ ref.output_weight().T
    expect_close(got, want, "ANDREA(cfg) fed 3 tokens, then 3, through its KV caches", hint=USES_PIECES, mistakes={
        "the caches not passed on: block i gets caches[i], and the new tokens attend to the cached ones":
            no_cache,
        "positions restart at 0 for the new tokens: pass start = caches[0].pos to self.embed": restarted})


def _generation_model(seed=4):
    """A reference model whose next token depends strongly on position (large position vectors,
    no constant logit offset from ln_f's bias), so that wrong positions change what it generates."""
    ref = _reference_model(CFG, seed=seed)
    with torch.no_grad():
        ref.embed.position_table.mul_(3)
        ref.ln_f.bias.zero_()
    return ref




# ----- count_parameters -----

# The course's figures for ANDREA-120M (COURSE.md): GPT-2 small's trunk, V = 8,449, an untied head.
ANDREA_120M = dict(token_table=6_488_832, position_table=786_432, attention=2_362_368, mlp=4_722_432,
                   norms=3_072, block=7_087_872, blocks=85_054_464, final_norm=1_536, head=6_488_832,
                   total=98_820_096)


def _check_counts(got, want, what, mistakes_by_key=None):
    expect_equal(sorted(got) if isinstance(got, dict) else got, sorted(want), f"{what}: keys",
                 hint="a dict with the keys " + ", ".join(want))
    for key in ["total", *want]:                  # the total first: its mistakes say the most
        expect_equal(got[key], want[key], f"{what}[{key!r}]", mistakes=(mistakes_by_key or {}).get(key))


@graded("model.count_parameters", points=3)
def test_count_parameters_of_andrea_120m(student):
    cfg = ModelConfig.preset("andrea-120m")
    got = student.piece("model", "count_parameters")(cfg)
    w = ANDREA_120M
    D, L = cfg.d_model, cfg.n_layers
    biases = L * (3 * D + D + 4 * D + D) + (2 * L + 1) * D      # qkv, W_O, fc, proj biases; every LayerNorm's beta
    _check_counts(got, w, "count_parameters(andrea-120m)", {
        "norms": {"a LayerNorm counted with gamma only: it has gamma and beta, 2·D": D * 2},
        "block": {"biases forgotten: the block's linear layers and LayerNorms have biases (cfg.bias)":
                  w["block"] - 11 * D},
        "total": {"biases forgotten: linear layers and LayerNorms have biases (cfg.bias)": w["total"] - biases,
                  "the position table forgotten: T·D learned position vectors": w["total"] - w["position_table"],
                  "the final LayerNorm forgotten: 25 LayerNorms in all": w["total"] - w["final_norm"],
                  "LayerNorms counted with gamma only: each has gamma and beta, 2·D": w["total"] - (2 * L + 1) * D,
                  "the head counted as tied: ANDREA-120M's head is a separate V·D matrix": w["total"] - w["head"]},
    })


@graded("model.count_parameters", points=1)
def test_count_parameters_with_tied_embeddings(student):
    cfg = ModelConfig.preset("andrea-120m", tie_embeddings=True)
    got = student.piece("model", "count_parameters")(cfg)
    want = dict(ANDREA_120M, head=0, total=92_331_264)
    _check_counts(got, want, "count_parameters(andrea-120m, tie_embeddings=True)", {
        "head": {"the tied head counted: the token table is the output projection, head = 0": ANDREA_120M["head"]},
        "total": {"the tied head counted twice: a shared table counts once": ANDREA_120M["total"]}})


# ----- generation: sampling the next token -----

NEG_INF = float("-inf")
SAMPLE_HINT = ("temperature 0: argmax; else logits / temperature, the logits below the k-th largest set to "
               "-inf, softmax, then torch.multinomial(probs, num_samples=1, generator=generator)")


def _positive_logits(B, V, seed):
    """(B, V) float32 logits in (0.1, 4): positive, so that sampling the logits themselves runs too."""
    return torch.rand(B, V, generator=torch.Generator().manual_seed(seed)) * 3.9 + 0.1


def _draws(fn, logits, temperature, top_k, seed):
    return fn(logits, temperature, top_k, torch.Generator().manual_seed(seed))


def _sample(logits, seed, *, scale, keep=None, fill=NEG_INF, from_logits=False, exactly_k=False):
    """What torch.multinomial draws (generator seeded `seed`) from logits * scale with only the `keep`
    largest kept (the others set to `fill`; exactly_k: ties at the k-th broken, k kept), softmaxed
    unless from_logits. The switches are the typical mistakes."""
    z = logits * scale
    if keep is not None and exactly_k:
        kept = torch.zeros_like(z, dtype=torch.bool).scatter(-1, z.topk(keep, dim=-1).indices, True)
        z = z.masked_fill(~kept, fill)
    elif keep is not None:
        z = z.masked_fill(z < z.topk(keep, dim=-1).values[:, -1:], fill)
    p = z if from_logits else torch.softmax(z, dim=-1)
    return torch.multinomial(p, num_samples=1, generator=torch.Generator().manual_seed(seed))


def _sampling_mistakes(logits, temperature, top_k, seed):
    """{typical mistake: the draws it gives} for sample_next(logits, temperature, top_k)."""
    t, k = temperature, top_k
    out = {"temperature multiplied instead of divided: logits / temperature":
               _sample(logits, seed, scale=t, keep=k),
           "temperature ignored: divide the logits by it": _sample(logits, seed, scale=1.0, keep=k),
           "always the most likely token: argmax is for temperature 0 only; otherwise draw with torch.multinomial":
               logits.argmax(dim=-1, keepdim=True)}
    if k is None:
        out["sampled from the logits, not from probabilities: softmax first, then torch.multinomial"] = \
            _sample(logits, seed, scale=1 / t, from_logits=True)
    else:
        out.update({
            f"top-k kept k + 1 = {k + 1} tokens: keep the k largest": _sample(logits, seed, scale=1 / t, keep=k + 1),
            f"top-k kept k - 1 = {k - 1} tokens: set to -inf only the logits BELOW the k-th largest (<, not <=)":
                _sample(logits, seed, scale=1 / t, keep=k - 1),
            "the logits outside the top k set to 0 instead of -inf: exp(0) = 1 still gives them weight":
                _sample(logits, seed, scale=1 / t, keep=k, fill=0.0),
            "top-k ignored: keep only the k largest logits": _sample(logits, seed, scale=1 / t)})
    return out


@graded("model.sample_next", points=1)
def test_sample_next_at_temperature_0_is_greedy(student):
    logits = torch.randn(8, 30, generator=torch.Generator().manual_seed(40))      # (B, V)
    try:
        got = _draws(student.piece("model", "sample_next"), logits, 0.0, None, seed=0)
    except (RuntimeError, ZeroDivisionError) as exc:
        if isinstance(exc, RuntimeError) and "probability tensor" not in str(exc):
            raise
        raise Mismatch("sample_next(logits, temperature=0)", f"it raised: {exc}", SAMPLE_HINT,
                       mistake="temperature 0 not handled: dividing by 0 makes the logits infinite; "
                               "return logits.argmax(dim=-1, keepdim=True) when temperature == 0") from None
    expect_equal(got, logits.argmax(dim=-1, keepdim=True), "sample_next(logits, temperature=0)", SAMPLE_HINT,
                 mistakes={"shape (B,) instead of (B, 1): argmax(dim=-1, keepdim=True)": logits.argmax(dim=-1),
                           "argmax over the whole batch: take it over the vocabulary, dim=-1": logits.argmax()})


@graded("model.sample_next", points=3)
def test_sample_next_draws_what_the_engine_draws(student):
    """With equal generators, equal draws: the same probabilities and one torch.multinomial call."""
    fn, engine = student.piece("model", "sample_next"), pieces.get("model", "sample_next")
    logits = _positive_logits(64, 12, seed=41)                                      # (B, V)
    for temperature, top_k in ((0.7, None), (1.5, 4)):
        what = f"sample_next(logits, temperature={temperature}, top_k={top_k}, generator seeded 5)"
        want = _draws(engine, logits, temperature, top_k, seed=5)                   # (B, 1)
        expect_equal(_draws(fn, logits, temperature, top_k, seed=5), want, what, SAMPLE_HINT,
                     mistakes=_sampling_mistakes(logits, temperature, top_k, seed=5))


@graded("model.sample_next", points=1)
def test_sample_next_keeps_ties_at_the_kth_logit(student):
    """top_k=2 on logits 3, 2, 2, 1, 0: the k-th largest is 2 and both 2s stay (nanoGPT's and
    Hugging Face's rule: hide only the logits below the k-th largest)."""
    fn, engine = student.piece("model", "sample_next"), pieces.get("model", "sample_next")
    logits = torch.tensor([3.0, 2.0, 2.0, 1.0, 0.0]).repeat(64, 1)                 # (B, V)
    want = _draws(engine, logits, 1.0, 2, seed=6)
    expect_equal(_draws(fn, logits, 1.0, 2, seed=6), want, "sample_next(logits 3, 2, 2, 1, 0; top_k=2)", SAMPLE_HINT,
                 mistakes={"a tie at the k-th largest logit broken: keep every logit >= the k-th largest "
                           "(both 2s here), hide only the ones below": _sample(logits, 6, scale=1.0, keep=2, exactly_k=True),
                           "the k-th largest itself hidden (<= instead of <): both 2s are kept":
                           _sample(logits, 6, scale=1.0, keep=1),
                           **_sampling_mistakes(logits, 1.0, 2, seed=6)})


@graded("model.sample_next", points=2)
def test_sample_next_follows_the_tempered_distribution(student):
    """4,000 draws of one row: each token's frequency is its probability under softmax(logits / T)
    with the top k kept, and a token outside the top k is never drawn."""
    fn = student.piece("model", "sample_next")
    V, N, t, k = 5, 4000, 0.5, 3
    logits = torch.tensor([1.0, 0.5, 0.25, 0.0, -0.5]).repeat(N, 1)               # (N, V)
    probs = lambda scale, keep=k, fill=NEG_INF: torch.softmax(
        (logits[0] * scale).masked_fill(logits[0] * scale < (logits[0] * scale).topk(keep).values[-1], fill)
        if keep else logits[0] * scale, dim=-1)
    got = _draws(fn, logits, t, k, seed=7)
    freq = torch.bincount(got.flatten(), minlength=V).double() / N if isinstance(got, torch.Tensor) else got
    expect_close(freq, probs(1 / t).double(), f"the frequencies of {N:,} draws of sample_next(logits, "
                 f"temperature={t}, top_k={k})", atol=0.03, rtol=0, hint=SAMPLE_HINT,
                 mistakes={"temperature multiplied instead of divided: logits / temperature": probs(t).double(),
                           "temperature ignored: divide the logits by it": probs(1.0).double(),
                           "the logits outside the top k set to 0 instead of -inf: exp(0) = 1 still gives them "
                           "weight": probs(1 / t, fill=0.0).double(),
                           "top-k ignored: keep only the k largest logits": probs(1 / t, keep=None).double()})


# ----- generation: the KV cache -----

def _kv(B, G, T, K, seed):
    return _randn(B, G, T, K, seed=seed), _randn(B, G, T, K, seed=seed + 100)


def _randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _check_cache(student, steps, what):
    """Feed KVCache(B=2, G=2, max_len=sum(steps), K=3) chunks of `steps` positions; after each
    update, pos and the returned keys and values must be all positions so far, in order."""
    B, G, K, S = 2, 2, 3, sum(steps)
    cache = student.piece("model", "KVCache")(B, G, S, K, torch.float64, "cpu")
    ks, vs, pos = [], [], 0
    for step, T in enumerate(steps, 1):
        k, v = _kv(B, G, T, K, seed=50 + step)
        got = cache.update(k, v)
        ks.append(k)
        vs.append(v)
        pos += T
        at = f"{what}, update {step} ({T} new positions after {pos - T})"
        expect_equal(cache.pos, pos, f"{at}: cache.pos", "self.pos counts the cached positions: add T",
                     mistakes={"pos not advanced: after writing T positions, self.pos += T": pos - T})
        if not (isinstance(got, tuple) and len(got) == 2):
            raise Mismatch(f"{at}: what update returns", f"got {type(got).__name__}, expected a pair (keys, values)",
                           "return self.k[:, :, :self.pos], self.v[:, :, :self.pos]")
        want_k = torch.cat(ks, dim=2)                                               # (B, G, pos, K)
        mistakes = {"only the new keys returned: return every key cached so far, old and new": k,
                    "every update written from position 0, over the cached ones: write at self.pos":
                        torch.cat([k, torch.zeros_like(want_k[:, :, T:])], dim=2),
                    **{f"concatenated along axis {d}, not the position axis (2) of (B, G, T, K)":
                       torch.cat(ks, dim=d) for d in (0, 1, 3) if len(ks) > 1 and all(
                           x.shape[2] == k.shape[2] for x in ks)}}
        expect_close(got[0], want_k, f"{at}: the keys returned", mistakes=mistakes,
                     hint="write k at positions self.pos .. self.pos + T - 1 (axis 2), then return the buffer up to the new pos")
        expect_close(got[1], torch.cat(vs, dim=2), f"{at}: the values returned",
                     hint="the values the same way as the keys, into self.v")


@graded("model.KVCache", points=2)
def test_kv_cache_appends_each_update(student):
    _check_cache(student, (2, 2, 2), "KVCache fed 2 positions at a time")


@graded("model.KVCache", points=2)
def test_kv_cache_prefill_then_one_token_at_a_time(student):
    _check_cache(student, (3, 1, 1, 1), "KVCache fed a prompt of 3, then 1 token at a time")
