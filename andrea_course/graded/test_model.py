"""Graded tests, activity · Twelve blocks make ANDREA-120M: assembling the model and
counting its parameters."""
import torch
import torch.nn.functional as F

from andrea_course import ANDREA, ModelConfig
from andrea_course.grading import expect_close, expect_equal, graded
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


