"""Graded tests, activity 7.3 · Twelve blocks make ANDREA-120M: assembling the model and
counting its parameters."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

from andrea_course import ANDREA, ModelConfig
from andrea_course.grading import (type_name, Case, Mismatch, Second, expect_cases, expect_close, expect_equal, expect_runs,
                                   expect_true, graded, load_weights)
from andrea_course import pieces
from andrea_course.activity_tests import expect_slot_called, parameter_shapes, transposed_shapes
from andrea_course.engine.model import check_inputs
from andrea_course.engine.params import count_parameters

CFG = ModelConfig(vocab_size=19, context_length=8, d_model=16, n_layers=2, n_heads=4, d_ff=32)
CFG2 = ModelConfig(vocab_size=23, context_length=8, d_model=8, n_layers=3, n_heads=2, d_ff=16)
MODEL_HINT = ("x = embed(ids, start) (tokens and positions), every block in self.blocks in order, then ln_f, "
              "then the output head: logits (B, T, V)")


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
    load_weights(m, ref.state_dict(), "ANDREA(cfg)")
    m.eval()
    return m


SHARED_BLOCK = ("one Block shared by all L layers ([block] * L, or [Block(cfg)] * L, repeats the same object, so "
                "every layer has the same weights): build a new Block(cfg) for each layer, "
                "nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))")


def _shared_block_model(ref):
    """The reference with its last block in all L places: what a learner's model whose L places hold
    one Block object computes once the reference's weights are loaded (each blocks.i loads into that
    one object, the last one last)."""
    shared = copy.deepcopy(ref)
    shared.blocks = nn.ModuleList([shared.blocks[-1]] * len(shared.blocks))
    return shared


REVERSED = ("the blocks run last to first (reversed(self.blocks)): the stream goes through block 0 first, then "
            "block 1, ..., in order, for i, block in enumerate(self.blocks)")
SOFTMAXED = ("softmax probabilities returned instead of the logits: the model returns the raw scores "
             "x @ self.output_weight().T; the cross-entropy (and sampling) apply the softmax themselves")


def _reversed_model(ref):
    """The reference with its blocks in the reverse order (each still paired with one cache of its own)."""
    back = copy.deepcopy(ref)
    back.blocks = nn.ModuleList(list(back.blocks)[::-1])
    return back


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
                    "the blocks skipped: pass x through every block in self.blocks": ln_f(x0) @ head.T,
                    SHARED_BLOCK: _shared_block_model(ref)(ids)}
        x_normed = x0
        for block in ref.blocks:
            x_normed = ln_f(block(x_normed))
        mistakes["ln_f applied after every block (indented into the loop over the blocks): the final norm comes "
                 "once, after the last block"] = x_normed @ head.T
        x_back = x0
        for block in reversed(ref.blocks):
            x_back = block(x_back)
        mistakes[REVERSED] = ln_f(x_back) @ head.T
        mistakes["every block reads the embeddings, not the block before it (its output kept under another name "
                 "while the loop feeds x on): only the last block's output reaches ln_f; write x = block(x)"] = \
            ln_f(ref.blocks[-1](x0)) @ head.T if len(ref.blocks) > 1 else None
        mistakes[SOFTMAXED] = torch.softmax(want, dim=-1)
        x_twice = x0
        for block in ref.blocks:
            x_twice = x_twice + block(x_twice)
        mistakes["each block's output added to its input, x = x + block(x): a block already returns the stream with "
                 "its sublayers added, so the residual is counted twice; x = block(x)"] = ln_f(x_twice) @ head.T
        scale = cfg.d_model ** 0.5
        mistakes[EMBED_SCALED] = ln_f(trunk(x0 * scale)) @ head.T
        mistakes[TOKENS_SCALED] = ln_f(trunk(tok[ids] * scale + pos[:ids.shape[1]])) @ head.T
        if not cfg.tie_embeddings:
            mistakes["the token table used as the output head although cfg.tie_embeddings is False: "
                     "use self.output_weight()"] = ln_f(x) @ tok.T
    return want, mistakes


EMBED_SCALED = ("the embeddings multiplied by sqrt(D) before the blocks, as the original Transformer paper does: GPT-2 "
                "and this model start the stream with the embeddings as they are, x = self.embed(ids, start)")
TOKENS_SCALED = ("the token vectors multiplied by sqrt(D) before the positions are added, as the original Transformer "
                 "paper does: GPT-2 and this model add the two as they are")


def _logits_case(m, ref, ids, what):
    want, mistakes = _logits_and_mistakes(ref, ids)
    return Case(f"{what}(ids of shape {tuple(ids.shape)})", lambda: m(ids), want, mistakes)


ONE_BLOCK_SHORT = ("one block short: n_layers - 1 blocks built (the last one, blocks.L-1, is missing); the model has "
                   "L blocks, nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))")
ALWAYS_LAYERNORM = ("the final norm always a LayerNorm (nn.LayerNorm(D), with a bias) whatever cfg.norm says: with "
                    "norm='rmsnorm' it is an RMSNorm, gamma only; self.ln_f = make_norm(cfg) builds the kind the "
                    "config asks for")
PLAIN_LIST = ("the blocks kept in a plain Python list: PyTorch sees no parameter inside it (they are not trained, "
              "saved or moved with the model); self.blocks = nn.ModuleList([...]) registers them")


def _shapes_case(student, cfg, what):
    want = parameter_shapes(_reference_model(cfg))
    last = f"blocks.{cfg.n_layers - 1}."
    mistakes = {PLAIN_LIST: {k: v for k, v in want.items() if not k.startswith("blocks.")},
                ONE_BLOCK_SHORT: {k: v for k, v in want.items() if not k.startswith(last)}}
    if not cfg.tie_embeddings:
        mistakes.update({"the output head has a bias: nn.Linear(D, V, bias=False)": {**want, "head.bias": (cfg.vocab_size,)},
                         "no output head: an untied model has self.head = nn.Linear(D, V, bias=False)":
                             {k: v for k, v in want.items() if k != "head.weight"}})
    else:
        mistakes["a separate head although cfg.tie_embeddings is True: set self.head = None; the token table is "
                 "the output projection"] = {**want, "head.weight": (cfg.vocab_size, cfg.d_model)}
    if cfg.norm == "rmsnorm":
        mistakes[ALWAYS_LAYERNORM] = {**want, "ln_f.bias": (cfg.d_model,)}
    elif not cfg.bias:
        mistakes["the final norm built with a bias although cfg.bias is False: self.ln_f = make_norm(cfg)"] = \
            {**want, "ln_f.bias": (cfg.d_model,)}
    mistakes.update(transposed_shapes(want, own=lambda name: not name.startswith("blocks.")))   # the blocks: Block's
    return Case(what, lambda: parameter_shapes(student.piece("model", "ANDREA")(cfg)), want, mistakes)


@graded("model.ANDREA", points=1)
def test_andrea_has_the_reference_parameters(student):
    expect_cases(_shapes_case(student, CFG, "ANDREA(cfg).state_dict(): names and shapes"),
                 _shapes_case(student, CFG2, "ANDREA(cfg with L=3, D=8).state_dict(): names and shapes"), exact=True,
                 hint="self.embed, self.blocks (nn.ModuleList of L Blocks), self.ln_f, self.head (D -> V, no bias)")
    # RMSNorm first: a final norm that is always a LayerNorm shows there, before the bias does
    expect_cases(_shapes_case(student, CFG.replace(norm="rmsnorm", bias=False),
                              "ANDREA(cfg with norm='rmsnorm', bias=False).state_dict(): names and shapes"),
                 _shapes_case(student, CFG2.replace(norm="rmsnorm", bias=False),
                              "ANDREA(cfg with L=3, D=8, norm='rmsnorm', bias=False).state_dict(): names and shapes"),
                 exact=True, hint="every part built from cfg: self.ln_f = make_norm(cfg) follows cfg.norm and cfg.bias")
    expect_cases(_shapes_case(student, CFG.replace(bias=False), "ANDREA(cfg with bias=False).state_dict(): names and shapes"),
                 _shapes_case(student, CFG2.replace(bias=False), "ANDREA(cfg with L=3, D=8, bias=False).state_dict(): "
                                                                 "names and shapes"), exact=True,
                 hint="every part built from cfg: self.ln_f = make_norm(cfg) follows cfg.bias and cfg.norm")


@graded("model.ANDREA", points=3)
def test_andrea_logits(student):
    ref = _reference_model(CFG)
    m = _student_model(student, ref, CFG)
    g = torch.Generator().manual_seed(1)
    expect_cases(_logits_case(m, ref, torch.randint(0, CFG.vocab_size, (2, 6), generator=g), "ANDREA(cfg)"),
                 _logits_case(m, ref, torch.randint(0, CFG.vocab_size, (3, 4), generator=g), "ANDREA(cfg)"),
                 hint=MODEL_HINT)


@graded("model.ANDREA", points=1)
def test_andrea_with_targets_gives_logits_and_the_loss(student):
    """model(ids, targets), as training calls it: (logits, the mean cross-entropy of the next tokens)."""
    ref = _reference_model(CFG)
    m = _student_model(student, ref, CFG)
    g = torch.Generator().manual_seed(9)
    ids, targets = (torch.randint(0, CFG.vocab_size, (2, 6), generator=g) for _ in range(2))
    ids2, targets2 = (torch.randint(0, CFG.vocab_size, (3, 4), generator=g) for _ in range(2))
    out = m(ids, targets)
    expect_true(isinstance(out, (tuple, list)) and len(out) == 2, "ANDREA(cfg)(ids, targets)",
                f"returned {type(out).__name__}, not (logits, loss)",
                "keep the given end of forward: with targets it returns the logits and self.cross_entropy(logits, targets)")
    (want, mistakes), (want2, mistakes2) = _logits_and_mistakes(ref, ids), _logits_and_mistakes(ref, ids2)
    expect_close(out[0], want, "ANDREA(cfg)(ids, targets)[0], the logits", mistakes=mistakes,
                 second=Second(lambda: m(ids2, targets2)[0], want2, mistakes2), hint=MODEL_HINT)
    expect_close(out[1], _loss(want, targets),
                 "ANDREA(cfg)(ids, targets)[1], the loss (in fp32, as training computes it)",
                 mistakes=_loss_mistakes(want, targets),
                 second=Second(lambda: m(ids2, targets2)[1], _loss(want2, targets2), _loss_mistakes(want2, targets2)),
                 hint="the mean cross-entropy of the logits against the targets: the given self.cross_entropy")


def _loss(logits, targets):
    """The mean cross-entropy in fp32: logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


SHIFTED_AGAIN = ("logits and targets shifted by one position again ({}): targets already hold each position's next "
                 "token (the data loader shifted them), so position t's logits are scored against targets[:, t] as "
                 "they are: self.cross_entropy(logits, targets)")


def _loss_mistakes(logits, targets):
    return {SHIFTED_AGAIN.format("logits[:, :-1] against targets[:, 1:]"): _loss(logits[:, :-1], targets[:, 1:]),
            SHIFTED_AGAIN.format("logits[:, 1:] against targets[:, :-1]"): _loss(logits[:, 1:], targets[:, :-1])}


@graded("model.ANDREA", points=1)
def test_andrea_calls_its_cross_entropy_slot(student):
    """self.cross_entropy is a slot: the package puts its fused loss, or a Triton kernel, there;
    model(ids, targets) returns the loss it computes."""
    m = student.piece("model", "ANDREA")(CFG)
    ids = torch.randint(0, CFG.vocab_size, (2, 6), generator=torch.Generator().manual_seed(12))
    expect_slot_called(student, "model", "ANDREA", "cross_entropy", "its loss", lambda: m(ids, (ids + 1) % CFG.vocab_size))


def _head_called(ref, ids):
    """{typical mistake: a function that makes it}: the tied reference's forward ending on self.head, which
    is None there (raising what the learner's code raises)."""
    def trunk():
        x = ref.embed(ids, 0)
        for block in ref.blocks:
            x = block(x)
        return ref.ln_f(x)
    return {"self.head called although the embeddings are tied (self.head is None then): logits = "
            "self.ln_f(x) @ self.output_weight().T, which is the token table when tied": lambda: ref.head(trunk()),
            "self.head.weight used although the embeddings are tied (self.head is None then): use "
            "self.output_weight(), which is the token table when tied": lambda: trunk() @ ref.head.weight.T}


@graded("model.ANDREA", points=2)
def test_andrea_with_tied_embeddings(student):
    cfg = CFG.replace(tie_embeddings=True)
    expect_cases(_shapes_case(student, cfg, "ANDREA(cfg with tie_embeddings=True).state_dict(): names and shapes"),
                 _shapes_case(student, CFG2.replace(tie_embeddings=True), "ANDREA(cfg with L=3, D=8, tied)"
                                                                          ".state_dict(): names and shapes"), exact=True)
    ref = _reference_model(cfg, seed=2)
    m = _student_model(student, ref, cfg)
    g = torch.Generator().manual_seed(3)
    ids, ids2 = (torch.randint(0, cfg.vocab_size, shape, generator=g) for shape in ((2, 5), (1, 7)))
    first, second = _logits_case(m, ref, ids, "ANDREA(tied cfg)"), _logits_case(m, ref, ids2, "ANDREA(tied cfg)")
    expect_runs(first.got, first.what, mistakes=_head_called(ref, ids), hint=MODEL_HINT,
                second=Second(second.got, None, _head_called(ref, ids2)))
    expect_cases(first, second, hint=MODEL_HINT)


CACHES_NOT_PASSED = "the caches not passed on: block i gets caches[i], and the new tokens attend to the cached ones"
RESTART = "positions restart at 0 for the new tokens: pass start = caches[0].pos to self.embed"


def _cache_case(m, ref, ids, first):
    B_ = ids.shape[0]
    with torch.no_grad():
        want = ref(ids)[:, first:]
        no_cache = ref(ids[:, first:])                                     # blocks given no cache
        restart = ref.new_caches(B_)
        ref(ids[:, :first], caches=restart)
        x = ref.embed(ids[:, first:], 0)                                   # positions restarting at 0
        for block, cache in zip(ref.blocks, restart):
            x = block(x, cache)
        restarted = ref.ln_f(x) @ ref.output_weight().T
        shared = _shared_block_model(ref)(ids)[:, first:]                 # one Block object in all L places
        backwards = _reversed_model(ref)(ids)[:, first:]                  # the blocks last to first

    def got():
        caches = m.new_caches(B_)
        m(ids[:, :first], caches=caches)
        return m(ids[:, first:], caches=caches)
    return Case(f"ANDREA(cfg) fed {first} tokens, then {ids.shape[1] - first}, through its KV caches", got, want,
                {CACHES_NOT_PASSED: no_cache, RESTART: restarted, SHARED_BLOCK: shared, REVERSED: backwards})


ONE_CACHE = ("every block given cache 0 (caches[0]): all L blocks then append their keys and values to one "
             "cache, which fills L times as fast and mixes the layers; hand block i its own cache, caches[i]")


def _one_cache(ref, ids, first):
    """{ONE_CACHE: a function that makes that mistake}: the reference's parts fed as the model is, every
    block with caches[0] (raising what the learner's code raises)."""
    def forward(chunk, caches):
        start = caches[0].pos
        check_inputs(chunk, None, ref.cfg, start)
        x = ref.embed(chunk, start)
        for block in ref.blocks:
            x = block(x, caches[0])
        return ref.ln_f(x) @ ref.output_weight().T

    def run():
        with torch.no_grad():
            caches = ref.new_caches(ids.shape[0])
            forward(ids[:, :first], caches)
            return forward(ids[:, first:], caches)
    return {ONE_CACHE: run}


@graded("model.ANDREA", points=2)
def test_andrea_with_a_kv_cache(student):
    """The model fed 3 tokens, then 3 more, through its caches (model.new_caches) gives the
    logits that one pass over all 6 gives: every block gets its own cache, and the new tokens'
    positions start where the cached ones ended."""
    ref = _generation_model(seed=6)
    g = torch.Generator().manual_seed(7)
    m = _student_model(student, ref, CFG)
    hint = "hand block i its cache, caches[i], and start the new tokens' positions at caches[0].pos"
    (ids, first), (ids2, first2) = ((torch.randint(0, CFG.vocab_size, (2, 6), generator=g), 3),
                                    (torch.randint(0, CFG.vocab_size, (1, 7), generator=g), 5))
    case, case2 = _cache_case(m, ref, ids, first), _cache_case(m, ref, ids2, first2)
    expect_runs(case.got, case.what, mistakes=_one_cache(ref, ids, first), hint=hint,
                second=Second(case2.got, None, _one_cache(ref, ids2, first2)))
    expect_cases(case, case2, hint=hint)


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


def _count_mistakes(cfg) -> dict:
    """{key: {typical mistake: the count it gives}} for count_parameters(cfg), from the sizes."""
    from andrea_course.engine.params import count_parameters as counted
    want = counted(cfg)
    T, D, L = cfg.context_length, cfg.d_model, cfg.n_layers
    H, G, K, F_ = cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_ff
    b = 1 if cfg.bias else 0
    has_beta = cfg.norm == "layernorm" and cfg.bias
    block_biases = b * ((H + 2 * G) * K + D + (2 * F_ + D if cfg.mlp == "swiglu" else F_ + D)) + (2 * D if has_beta else 0)
    out = {"total": {}, "norms": {}, "block": {}, "mlp": {}, "attention": {}}
    total = out["total"]
    if b:
        out["block"]["biases forgotten: the block's linear layers and LayerNorms have biases (cfg.bias)"] = \
            want["block"] - block_biases
        total["biases forgotten: linear layers and LayerNorms have biases (cfg.bias)"] = \
            want["total"] - L * block_biases - (D if has_beta else 0)
    if want["position_table"]:
        total["the position table forgotten: T·D learned position vectors"] = want["total"] - want["position_table"]
    else:
        rope = ("a position table counted with position='rope': RoPE turns q and k by their positions and has no "
                "table, position_table = 0")
        out["position_table"] = {rope: T * D}
        total[rope] = want["total"] + T * D
    total["the final norm forgotten: one norm after the last block (2·L + 1 in all)"] = want["total"] - want["final_norm"]
    total["the total summed over every entry of the dict: attention, mlp, norms and block are one block's parts, "
          "already inside blocks, so they were counted again; total = token_table + position_table + blocks + "
          "final_norm + head"] = sum(v for k, v in want.items() if k != "total")
    qkv = ("the qkv projection's bias not counted: with cfg.bias it has (H + 2G)·K biases, one per output, "
           "besides its D·(H + 2G)·K weights")
    one = ("one norm per block counted: a pre-norm block has two, ln1 before attention and ln2 before the MLP, "
           "so norms = 2 · one norm")
    norm = want["final_norm"]
    # where the qkv biases are as many as one norm's parameters, the two mistakes give the same block and
    # total: only the attention (the qkv bias) and the norms (one norm) tell them apart
    clash = b and (H + 2 * G) * K == norm
    out["blocks"] = {}
    if b:
        out["attention"][qkv] = want["attention"] - (H + 2 * G) * K
        if not clash:
            out["block"][qkv] = want["block"] - (H + 2 * G) * K
            out["blocks"][qkv] = want["blocks"] - L * (H + 2 * G) * K
            total[qkv] = want["total"] - L * (H + 2 * G) * K
    if b and (H + 2 * G) * K != D:
        per_input = ("the qkv projection's bias counted with D entries, one per input, where it has (H + 2G)·K, "
                     "one per output (nn.Linear's bias has out_features entries)")
        missing = (H + 2 * G) * K - D
        out["attention"][per_input] = want["attention"] - missing
        out["block"][per_input] = want["block"] - missing
        out["blocks"][per_input] = want["blocks"] - L * missing
        total[per_input] = want["total"] - L * missing
    if not has_beta:                              # with a LayerNorm's beta, one norm (2·D) is named above
        out["norms"][one] = norm
    if not clash:
        out["block"][one] = want["block"] - norm
        out["blocks"][one] = want["blocks"] - L * norm
        total[one] = want["total"] - L * norm
    if has_beta:
        # one LayerNorm counted (2·D), or two counted with gamma only (2 · D), give the same 2·D here
        out["norms"]["the norms counted as 2·D, half their size: a block has two LayerNorms, ln1 and ln2, each "
                     "with gamma and beta (2·D each)"] = D * 2
        total["LayerNorms counted with gamma only: each has gamma and beta, 2·D"] = want["total"] - (2 * L + 1) * D
    if not has_beta:
        beta = ("an RMSNorm counted like a LayerNorm, with a beta: it has only gamma, D" if cfg.norm == "rmsnorm" else
                "a LayerNorm without biases counted with a beta: with cfg.bias False it has only gamma, D")
        out["norms"][beta] = 4 * D
        total[beta] = want["total"] + (2 * L + 1) * D
    _head_and_width_mistakes(cfg, want, out)
    return out


def _head_and_width_mistakes(cfg, want: dict, out: dict) -> None:
    """Adds to _count_mistakes's `out` the mistakes in the head, the MLP's width, the number of
    blocks and the grouped key and value heads."""
    V, D, L, H, G, K, F_ = (cfg.vocab_size, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_head,
                            cfg.d_ff)
    b, total = (1 if cfg.bias else 0), out["total"]
    if not cfg.tie_embeddings:
        total["the head counted as tied: this model's head is a separate V·D matrix"] = want["total"] - want["head"]
        head_bias = ("a bias of V counted in the head: nn.Linear has one by default, but the head is built with "
                     "bias=False, V·D weights alone")
        total[head_bias] = want["total"] + V
        out["head"] = {head_bias: want["head"] + V}
    else:
        total["the tied head counted twice: a shared table counts once"] = want["total"] + V * D
        out["head"] = {"the tied head counted: the token table is the output projection, head = 0": V * D}
    if cfg.mlp == "gelu" and F_ != 4 * D:
        four = 2 * D * 4 * D + b * (4 * D + D)
        name = "the MLP's width taken as 4·D instead of cfg.d_ff: fc maps D -> d_ff and proj d_ff -> D"
        out["mlp"][name] = four
        total[name] = want["total"] - L * (want["mlp"] - four)
    if L > 1:
        name = "one block added to the total instead of all L: blocks = L · block, and the total counts blocks"
        total[name] = want["total"] - want["blocks"] + want["block"]
    if L > 2:
        name = ("one block short: L - 1 blocks counted (a loop over range(1, L) or range(L - 1)); blocks = L · block")
        total[name] = want["total"] - want["block"]
        out["blocks"][name] = want["blocks"] - want["block"]
    if cfg.mlp == "swiglu" and b and F_ != D:
        name = ("SwiGLU's biases counted as 3·F: w_gate and w_up have F biases each, but w_down maps F -> D and has "
                "D, so 2·F + D in all")
        out["mlp"][name] = want["mlp"] - D + F_
        total[name] = want["total"] + L * (F_ - D)
    if cfg.mlp == "swiglu":
        two = 2 * D * F_ + b * (F_ + D)
        name = "SwiGLU counted as the GELU MLP's two matrices: it has three, w_gate, w_up (D -> F) and w_down (F -> D)"
        out["mlp"][name] = two
        total[name] = want["total"] - L * (want["mlp"] - two)
    if G != H:
        name = ("keys and values counted for all H heads: with grouped heads the projection makes H query heads "
                "but only G key and G value heads, (H + 2G)·K outputs")
        extra = 2 * (H - G) * K * (D + b)
        out["attention"][name] = want["attention"] + extra
        total[name] = want["total"] + L * extra


def _grouped(cfg) -> int | None:
    """cfg's key/value heads, or where G = H, the most G < H (dividing H) at which neither (H + 2G)·K
    nor (H + 2G)·K - D is one norm's size: the sizes that make two counting mistakes miss alike."""
    H, K, D = cfg.n_heads, cfg.d_head, cfg.d_model
    norm = 2 * D if cfg.norm == "layernorm" and cfg.bias else D
    if cfg.kv_heads != H:
        return cfg.n_kv_heads
    fits = [G for G in range(H - 1, 0, -1) if H % G == 0 and norm not in ((H + 2 * G) * K, (H + 2 * G) * K - D)]
    return fits[0] if fits else cfg.n_kv_heads


def _check_counts(fn, cfg, cfg2, what, want=None):
    """count_parameters(cfg) against `want` (default: the engine's count of the tensors), key by
    key, the total first; a mistake named is confirmed on cfg2 (None: cfg with one block more, a
    larger vocabulary and, where every query head has its own keys and values, half as many
    key/value heads: with G = H, (H + 2G)·K - D = 2D, so a qkv bias counted per input and one norm
    per block miss the same number)."""
    from andrea_course.engine.params import count_parameters as counted
    cfg2 = cfg2 or cfg.replace(n_layers=cfg.n_layers + 1, vocab_size=cfg.vocab_size + 7, n_kv_heads=_grouped(cfg))
    want, want2 = want or counted(cfg), counted(cfg2)
    got = fn(cfg)
    expect_equal(sorted(got) if isinstance(got, dict) else got, sorted(want), f"{what}: keys",
                 hint="a dict with the keys " + ", ".join(want))
    wrong, wrong2 = _count_mistakes(cfg), _count_mistakes(cfg2)

    def check(key):
        expect_equal(got[key], want[key], f"{what}[{key!r}]", mistakes=wrong.get(key),
                     second=Second(lambda: fn(cfg2)[key], want2[key], wrong2.get(key, {})), inputs={"cfg": cfg})
    try:
        check("total")                            # the total first: its mistakes say the most
    except Mismatch as total:
        if total.mistake:
            raise
        for key in want:                          # several mistakes at once: the first part that names one
            try:
                check(key)
            except Mismatch as part:
                if part.mistake:
                    raise part from None
        raise
    for key in want:
        check(key)


@graded("model.count_parameters", points=3)
def test_count_parameters_of_andrea_120m(student):
    fn = student.piece("model", "count_parameters")
    _check_counts(fn, ModelConfig.preset("andrea-120m"), None,
                  "count_parameters(andrea-120m)", want=ANDREA_120M)


@graded("model.count_parameters", points=1)
def test_count_parameters_with_tied_embeddings(student):
    fn = student.piece("model", "count_parameters")
    _check_counts(fn, ModelConfig.preset("andrea-120m", tie_embeddings=True), None,
                  "count_parameters(andrea-120m, tie_embeddings=True)",
                  want=dict(ANDREA_120M, head=0, total=92_331_264))


@graded("model.count_parameters", points=1, taught="modern")
def test_count_parameters_of_the_modern_model(student):
    """andrea-120m-modern: RMSNorm (gamma only), SwiGLU (three matrices, F = 2,048), G = 4 key/value
    heads for H = 12 query heads, no biases, a tied head."""
    fn = student.piece("model", "count_parameters")
    _check_counts(fn, ModelConfig.preset("andrea-120m-modern"), ModelConfig.preset("andrea-tiny-modern"),
                  "count_parameters(andrea-120m-modern)")


OPTIONS = (dict(d_ff=200), dict(position="rope"), dict(bias=False), dict(n_kv_heads=2), dict(tie_embeddings=True),
           dict(norm="rmsnorm", bias=False), dict(mlp="swiglu", d_ff=40),
           dict(position="rope", mlp="swiglu", d_ff=40, norm="rmsnorm", n_kv_heads=1, tie_embeddings=True))


@graded("model.count_parameters", points=1, taught="modern")
def test_count_parameters_for_every_config_option(student):
    """andrea-tiny with each option of the config changed (an MLP width other than 4D, RoPE, no biases,
    grouped heads, a tied head, RMSNorm, SwiGLU), then all of them at once: the count from the sizes equals the count of the
    tensors a model built with that config has."""
    fn = student.piece("model", "count_parameters")
    base = ModelConfig.preset("andrea-tiny", n_layers=2)
    for option in OPTIONS:
        cfg = base.replace(**option)
        said = ", ".join(f"{k}={v!r}" for k, v in option.items())
        cfg2 = cfg.replace(n_layers=3, vocab_size=cfg.vocab_size + 7, n_kv_heads=_grouped(cfg))
        _check_counts(fn, cfg, cfg2, f"count_parameters(andrea-tiny, {said})")


# ----- generation: sampling the next token -----

NEG_INF = float("-inf")
SAMPLE_HINT = ("temperature 0: argmax; else logits / temperature, the logits below the k-th largest set to "
               "-inf, softmax, then torch.multinomial(probs, num_samples=1, generator=generator)")


def _positive_logits(B, V, seed):
    """(B, V) float32 logits in (0.1, 4): positive, so that sampling the logits themselves runs too."""
    return torch.rand(B, V, generator=torch.Generator().manual_seed(seed)) * 3.9 + 0.1


def _draws(fn, logits, temperature, top_k, seed):
    return fn(logits, temperature, top_k, torch.Generator().manual_seed(seed))


def _sample(logits, seed, *, scale=None, temperature=None, keep=None, fill=NEG_INF, from_logits=False,
            exactly_k=False, dim=-1, row=None):
    """What torch.multinomial draws (generator seeded `seed`) from logits * scale (or logits / temperature)
    with only the `keep` largest kept (the others set to `fill`; exactly_k: ties at the k-th broken, k
    kept; row: the k-th largest of that row is every row's threshold), softmaxed over `dim` unless
    from_logits. The switches are the typical mistakes."""
    z = logits * scale if temperature is None else logits / temperature
    if keep is not None and row is not None:
        z = z.masked_fill(z < z[row].topk(keep).values[-1], fill)
    elif keep is not None and exactly_k:
        kept = torch.zeros_like(z, dtype=torch.bool).scatter(-1, z.topk(keep, dim=-1).indices, True)
        z = z.masked_fill(~kept, fill)
    elif keep is not None:
        z = z.masked_fill(z < z.topk(keep, dim=-1).values[:, -1:], fill)
    p = z if from_logits else torch.softmax(z, dim=dim)
    return torch.multinomial(p, num_samples=1, generator=torch.Generator().manual_seed(seed))


NO_GENERATOR = ("the generator ignored: torch.multinomial(probs, 1) draws from PyTorch's global generator; pass "
                "generator=generator so that equal seeds give equal draws")
ONE_ROWS_THRESHOLD = ("one row's k-th largest logit used as every row's threshold (logits[0]): a row whose logits "
                      "all lie below it keeps no token and its softmax is NaN; take the k-th largest of each row, "
                      "torch.topk(logits, k, dim=-1).values[:, -1:], shape (B, 1)")
FROM_LOGITS = "sampled from the logits, not from probabilities: softmax first, then torch.multinomial"
SOFTMAX_DIM_0 = ("the softmax taken over the batch axis (dim=0): each row's probabilities come from its own "
                 "logits, torch.softmax(logits, dim=-1), over the vocabulary")


def _or_none(draw):
    """What draw() gives, or None where it raises (a mistake that raises here names nothing by value)."""
    try:
        return draw()
    except RuntimeError:
        return None


def _sorted_rank(logits, seed, t, k):
    """The draw from the k most likely tokens sorted by probability, as its rank in that order."""
    probs = torch.sort(torch.softmax(logits / t, dim=-1), dim=-1, descending=True).values[:, :k]
    return torch.multinomial(probs, num_samples=1, generator=torch.Generator().manual_seed(seed))


def _sampling_mistakes(logits, temperature, top_k, seed):
    """{typical mistake: the draws it gives} for sample_next(logits, temperature, top_k)."""
    t, k = temperature, top_k
    out = {"temperature multiplied instead of divided: logits / temperature":
               _sample(logits, seed, scale=t, keep=k),
           "temperature ignored: divide the logits by it": _sample(logits, seed, scale=1.0, keep=k),
           SOFTMAX_DIM_0: _or_none(lambda: _sample(logits, seed, temperature=t, keep=k, dim=0))}
    argmax = logits.argmax(dim=-1, keepdim=True)
    if k is None:
        out["always the most likely token: argmax is for temperature 0 only; otherwise draw with "
            "torch.multinomial"] = argmax
    else:                                # here argmax is also what a top-k threshold at the largest logit gives
        out["only the most likely token drawn: argmax is for temperature 0 only, and the top-k threshold is the "
            "k-th largest logit (torch.topk(...).values[:, -1:]), not the largest"] = argmax
    if k is None:
        out[FROM_LOGITS] = \
            _sample(logits, seed, scale=1 / t, from_logits=True)
    else:
        out.update({
            "top-k kept one token too many (k + 1): keep the k largest": _sample(logits, seed, scale=1 / t, keep=k + 1),
            "the position in the sorted order returned, not the token's id: after torch.sort, map the draw back "
            "through the sort's indices (order.gather(-1, draw))": _sorted_rank(logits, seed, t, k),
            "top-k kept one token too few (k - 1): set to -inf only the logits BELOW the k-th largest (<, not <=)":
                _sample(logits, seed, scale=1 / t, keep=k - 1),
            "the logits outside the top k set to 0 instead of -inf: exp(0) = 1 still gives them weight":
                _sample(logits, seed, scale=1 / t, keep=k, fill=0.0),
            "top-k ignored: keep only the k largest logits": _sample(logits, seed, scale=1 / t)})
    return out


TEMPERATURE_0 = ("temperature 0 not handled: dividing by 0 makes the logits infinite; return "
                 "logits.argmax(dim=-1, keepdim=True) when temperature == 0")


def _greedy_case(fn, logits):
    def divided():                                              # the mistake: logits / 0, then a draw
        torch.multinomial(torch.softmax(logits / 0.0, dim=-1), 1)
    return Case(f"sample_next(logits of shape {tuple(logits.shape)}, temperature=0)",
                lambda: _draws(fn, logits, 0.0, None, seed=0), logits.argmax(dim=-1, keepdim=True),
                {"shape (B,) instead of (B, 1): argmax(dim=-1, keepdim=True)": logits.argmax(dim=-1),
                 "argmax over the whole batch: logits.argmax() with no dim is one index into the whole flattened "
                 "(B, V) tensor; take it over the vocabulary, argmax(dim=-1, keepdim=True)": logits.argmax(),
                 "argmax(keepdim=True) without dim: one index into the whole flattened (B, V) tensor, shape (1, 1); "
                 "take it over the vocabulary, argmax(dim=-1, keepdim=True)": logits.argmax(keepdim=True),
                 "argmax over the flattened logits: one index into all B·V entries, shape (1,); take it over the "
                 "vocabulary, argmax(dim=-1, keepdim=True)": logits.flatten().argmax(dim=-1, keepdim=True)}), divided


@graded("model.sample_next", points=1)
def test_sample_next_at_temperature_0_is_greedy(student):
    fn = student.piece("model", "sample_next")
    (first, divided), (second, divided2) = (_greedy_case(fn, torch.randn(8, 30, generator=torch.Generator().manual_seed(s)))
                                            for s in (40, 42))
    expect_runs(first.got, first.what, mistakes={TEMPERATURE_0: divided},
                second=Second(second.got, None, {TEMPERATURE_0: divided2}), hint=SAMPLE_HINT)
    expect_cases(first, second, exact=True, hint=SAMPLE_HINT)
    # As generate() calls it: positional arguments, temperature the int 0, no top_k, no generator.
    logits = torch.randn(3, 30, generator=torch.Generator().manual_seed(44))
    greedy = fn(logits, 0, None, None)
    expect_equal(greedy, logits.argmax(dim=-1, keepdim=True),
                 "sample_next(logits, 0, None, None), as generate(temperature=0) calls it", hint=SAMPLE_HINT)
    _expect_long(greedy, "sample_next(logits, 0, None, None)")
    _expect_long(fn(logits, 1.0, None, None), "sample_next(logits, 1.0, None, None)")


def _expect_long(ids, what):
    """Token ids are torch.long (int64), as argmax and torch.multinomial give them, whatever the temperature."""
    found = getattr(ids, "dtype", type(ids).__name__)
    expect_true(found == torch.long, what, f"the ids are {str(found).replace('torch.', '')}, not torch.long (int64)",
                "return the ids as argmax and torch.multinomial give them, torch.long", mistake=(
                    "the ids cast to int32 (a TensorFlow or JAX habit): PyTorch's token ids are torch.long, as the "
                    "docstring says; leave argmax's and multinomial's ids as they are" if found == torch.int32 else None))


def _engine_case(fn, logits, temperature, top_k, seed, extra=None):
    engine = pieces.get("model", "sample_next")
    what = f"the tokens drawn by sample_next(logits of shape {tuple(logits.shape)}, temperature={temperature}, " \
           f"top_k={top_k}, generator seeded {seed})"
    want = _draws(engine, logits, temperature, top_k, seed=seed)
    mistakes = {**_sampling_mistakes(logits, temperature, top_k, seed=seed), **(extra or {})}
    # a mistake that draws the very same tokens here is no mistake on this input
    mistakes = {name: wrong for name, wrong in mistakes.items() if wrong is not None and not torch.equal(wrong, want)}
    return Case(what, lambda: _draws(fn, logits, temperature, top_k, seed=seed), want, mistakes)


def _one_rows_threshold(fn):
    """Logits whose row 0 lies above every other row: a threshold taken from row 0 alone hides every
    token of the other rows, and their draw raises."""
    raised = lambda B, V, seed: _positive_logits(B, V, seed).index_add(0, torch.tensor([0]), torch.full((1, V), 4.0))
    lg, lg2 = raised(16, 12, 46), raised(24, 9, 47)                                      # (B, V)
    row_0 = lambda z, seed: {ONE_ROWS_THRESHOLD: lambda: _sample(z, seed, temperature=1.5, keep=4, row=0)}
    expect_runs(lambda: _draws(fn, lg, 1.5, 4, 5), "sample_next(logits of shape (16, 12), temperature=1.5, top_k=4)",
                mistakes=row_0(lg, 5), second=Second(lambda: _draws(fn, lg2, 1.5, 4, 6), None, row_0(lg2, 6)),
                hint=SAMPLE_HINT)


@graded("model.sample_next", points=3)
def test_sample_next_draws_what_the_engine_draws(student):
    """With equal generators, equal draws: the same probabilities and one torch.multinomial call."""
    fn = student.piece("model", "sample_next")
    logits, logits2 = _positive_logits(64, 12, seed=41), _positive_logits(96, 9, seed=43)     # (B, V)
    for temperature, top_k, temperature2 in ((0.7, None, 0.35), (1.5, 4, 3.0)):
        if top_k is not None:                   # after top_k=None, which names the mistakes that raise anyway
            _one_rows_threshold(fn)
        _unless_the_generator_is_ignored(lambda: expect_cases(_engine_case(fn, logits, temperature, top_k, 5),
                                                              _engine_case(fn, logits2, temperature2, top_k, 6),
                                                              exact=True, hint=SAMPLE_HINT),
                                         fn, logits, temperature, top_k, 5)


def _raising_draws(row, B, t, k, seed):
    """{typical mistake: a function that makes it} for mistakes that raise on `row` repeated B times:
    with every row alike, a softmax over the batch axis gives NaN in each column that top-k hides."""
    logits = torch.tensor(row).repeat(B, 1)
    return {SOFTMAX_DIM_0: lambda: _sample(logits, seed, temperature=t, keep=k, dim=0),
            FROM_LOGITS: lambda: _sample(logits, seed, scale=1 / t, keep=k, from_logits=True)}


def _unless_the_generator_is_ignored(check, fn, logits, temperature, top_k, seed):
    """check(); when it fails naming no mistake, and sample_next leaves the generator it is given as it
    was (no draw came from it: the draws cannot be reproduced, whatever the seed), that is said
    instead. A learner's code runs in its own process, so its draws from PyTorch's global generator
    cannot be computed here; what it did to the given generator comes back with its answer."""
    try:
        check()
    except Mismatch as failed:
        if failed.mistake:
            raise
        g = torch.Generator().manual_seed(seed)
        before = g.get_state().clone()
        try:
            fn(logits, temperature, top_k, g)
        except Exception:                          # noqa: BLE001 - the failure above says what went wrong
            raise failed from None
        if torch.equal(g.get_state(), before):
            raise Mismatch(failed.what, f"{failed.problem}; the generator passed in is as it was given: no draw "
                                        f"came from it", SAMPLE_HINT, mistake=NO_GENERATOR,
                           differences=failed.differences, shape_found=failed.shape_found,
                           shape_expected=failed.shape_expected) from None
        raise


def _ties_case(fn, row, k, seed):
    logits = torch.tensor(row).repeat(64, 1)                                      # (B, V)
    return _engine_case(fn, logits, 1.0, k, seed, {
        "a tie at the k-th largest logit broken: keep every logit >= the k-th largest (both 2s here), hide only "
        "the ones below": _sample(logits, seed, scale=1.0, keep=k, exactly_k=True)})


@graded("model.sample_next", points=1)
def test_sample_next_keeps_ties_at_the_kth_logit(student):
    """top_k=2 on logits 3, 2, 2, 1, 0: the k-th largest is 2 and both 2s stay (nanoGPT's and
    Hugging Face's rule: hide only the logits below the k-th largest)."""
    fn = student.piece("model", "sample_next")
    first, second = _ties_case(fn, [3.0, 2.0, 2.0, 1.0, 0.0], 2, 6), _ties_case(fn, [1.0, 3.0, 0.5, 1.0, 2.0], 3, 7)
    expect_runs(first.got, first.what, mistakes=_raising_draws([3.0, 2.0, 2.0, 1.0, 0.0], 64, 1.0, 2, 6),
                second=Second(second.got, None, _raising_draws([1.0, 3.0, 0.5, 1.0, 2.0], 64, 1.0, 3, 7)),
                hint=SAMPLE_HINT)
    _unless_the_generator_is_ignored(lambda: expect_cases(first, second, exact=True, hint=SAMPLE_HINT),
                                     fn, torch.tensor([3.0, 2.0, 2.0, 1.0, 0.0]).repeat(64, 1), 1.0, 2, 6)


TOP_K_ABOVE_V = ("top_k larger than the vocabulary: torch.topk(logits, k) raises when k exceeds V; keep "
                 "min(top_k, V) logits (top_k >= V keeps every token)")


@graded("model.sample_next", points=1)
def test_sample_next_with_top_k_larger_than_the_vocabulary(student):
    """top_k = 50 with V = 12 (generate() passes the user's top_k whatever the vocabulary): every token
    stays, as with top_k=None."""
    fn = student.piece("model", "sample_next")
    engine = pieces.get("model", "sample_next")
    logits, logits2 = _positive_logits(32, 12, seed=44), _positive_logits(16, 7, seed=45)
    draw = lambda f, lg, k: lambda: _draws(f, lg, 0.9, k, seed=8)
    got = expect_runs(draw(fn, logits, 50), "sample_next(logits with V = 12, temperature=0.9, top_k=50)",
                      mistakes={TOP_K_ABOVE_V: lambda: torch.topk(logits, 50, dim=-1)},
                      second=Second(draw(fn, logits2, 9), None, {TOP_K_ABOVE_V: lambda: torch.topk(logits2, 9, dim=-1)}),
                      hint="top_k at or above V keeps every token")
    wrong = lambda lg: {SOFTMAX_DIM_0: _sample(lg, 8, temperature=0.9, dim=0)}
    what = "the tokens drawn by sample_next(logits with V = 12, temperature=0.9, top_k=50, generator seeded 8)"
    _unless_the_generator_is_ignored(
        lambda: expect_equal(got, draw(engine, logits, None)(), what, SAMPLE_HINT, mistakes=wrong(logits),
                             second=Second(draw(fn, logits2, 9), draw(engine, logits2, None)(), wrong(logits2))),
        fn, logits, 0.9, 50, 8)


def _frequencies_case(fn, row, t, k, seed, N=4000):
    logits = torch.tensor(row).repeat(N, 1)                                       # (N, V)
    z = lambda scale: logits[0] * scale
    probs = lambda scale, keep=k, fill=NEG_INF: torch.softmax(
        z(scale).masked_fill(z(scale) < z(scale).topk(keep).values[-1], fill) if keep else z(scale), dim=-1).double()

    def got():
        out = _draws(fn, logits, t, k, seed=seed)
        return torch.bincount(out.flatten(), minlength=len(row)).double() / N if isinstance(out, torch.Tensor) else out
    return Case(f"the frequencies of {N:,} draws of sample_next(logits {row}, temperature={t}, top_k={k})", got,
                probs(1 / t), {"temperature multiplied instead of divided: logits / temperature": probs(t),
                               "temperature ignored: divide the logits by it": probs(1.0),
                               "the logits outside the top k set to 0 instead of -inf: exp(0) = 1 still gives them "
                               "weight": probs(1 / t, fill=0.0),
                               "top-k ignored: keep only the k largest logits": probs(1 / t, keep=None)})


SAME_DRAWS = ("the same draws at every call without a generator: a generator made inside the function with a "
              "fixed random seed starts over each time, so generate() would repeat itself whatever random seed the "
              "user set; when generator is None, draw from PyTorch's global generator (torch.multinomial(probs, 1, "
              "generator=None))")


@graded("model.sample_next", points=1)
def test_sample_next_without_a_generator_draws_anew(student):
    """generate() without a seed calls sample_next with no generator: each call draws anew, from
    PyTorch's own generator."""
    fn = student.piece("model", "sample_next")
    logits = torch.zeros(64, 50)                                      # (B, V): every token equally likely
    first, again = fn(logits, 1.0, None, None), fn(logits, 1.0, None, None)      # as generate() calls it
    expect_true(not (isinstance(first, torch.Tensor) and isinstance(again, torch.Tensor) and torch.equal(first, again)),
                "sample_next(uniform logits of shape (64, 50), 1.0, None, None) called twice, no generator",
                "both calls drew the very same 64 tokens", SAMPLE_HINT, mistake=SAME_DRAWS)


@graded("model.sample_next", points=2)
def test_sample_next_follows_the_tempered_distribution(student):
    """4,000 draws of one row: each token's frequency is its probability under softmax(logits / T)
    with the top k kept, and a token outside the top k is never drawn."""
    fn = student.piece("model", "sample_next")
    rows = ([1.0, 0.5, 0.25, 0.0, -0.5], 0.5, 3, 7), ([0.0, 1.5, -1.0, 0.7, 0.2, 1.0], 0.6, 4, 9)
    first, second = (_frequencies_case(fn, *row) for row in rows)
    expect_runs(first.got, first.what, mistakes=_raising_draws(rows[0][0], 4000, *rows[0][1:]), hint=SAMPLE_HINT,
                second=Second(second.got, None, _raising_draws(rows[1][0], 4000, *rows[1][1:])))
    expect_cases(first, second, atol=0.03, rtol=0, hint=SAMPLE_HINT)


# ----- generation: the KV cache -----

def _kv(B, G, T, K, seed):
    return _randn(B, G, T, K, seed=seed), _randn(B, G, T, K, seed=seed + 100)


def _randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _fed(steps, seed, dtype=torch.float64, G=2):
    """The (k, v) pairs a cache is fed, (B=2, G, T, K=3) each for T in steps."""
    out = []
    for step, T_ in enumerate(steps, 1):
        k, v = _kv(2, G, T_, 3, seed=seed + step)
        if dtype != torch.float64:
            k, v = (t.to(dtype).transpose(1, 2).contiguous().transpose(1, 2) for t in (k, v))
        out.append((k, v))
    return out


def _cache_run(student, steps, seed, dtype=torch.float64, G=2):
    """Feed KVCache(B=2, G=2, max_len=sum(steps), K=3) chunks of `steps` positions: per update, (what
    it was fed, what came back, pos after it); an error ends the run (the second input of a
    mistake: what it raised is what it gives). In float32 the keys and values come as the model
    hands them over: strided views of the split heads."""
    B_, K, S = 2, 3, sum(steps)
    cache = student.piece("model", "KVCache")(B_, G, S, K, dtype, torch.device("cpu"))
    out = []
    for k, v in _fed(steps, seed, dtype, G):
        try:
            got = cache.update(k, v)
            if isinstance(got, tuple):              # views of the cache's buffers: the next update changes them
                got = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in got)
            pos = cache.pos
        except Exception as exc:                   # noqa: BLE001 - reported when this run is judged
            out.append((k, v, exc, None))
            break
        out.append((k, v, got, pos))
    return out


WHOLE_BUFFER = ("the whole buffer returned, its unwritten zeros included: return only the positions written so "
                "far, self.k[:, :, :self.pos] and self.v[:, :, :self.pos]")


def _cache_expectations(run, S):
    """Per update: (keys so far, values so far, pos, {mistake: keys it returns}); S: the cache's max_len."""
    ks, vs, pos, out = [], [], 0, []
    early = torch.zeros(*run[0][0].shape[:2], S + sum(k.shape[2] for k, *_ in run), run[0][0].shape[3],
                        dtype=run[0][0].dtype) if run else None      # POS_FIRST's buffer, room to spare
    one_slot = torch.zeros_like(early) if run else None                              # ONE_SLOT's buffer
    for k, v, _, _ in run:
        ks.append(k)
        vs.append(v)
        T_ = k.shape[2]
        pos += T_
        want_k = torch.cat(ks, dim=2)                                               # (B, G, pos, K)
        early[:, :, pos:pos + T_] = k                                               # written after pos moved on
        one_slot[:, :, pos - T_] = k[:, :, -1]                                      # every new one at slot pos
        mistakes = {POS_FIRST: early[:, :, :pos].clone() if pos + T_ <= S else None,
                    "only the new keys returned: return every key cached so far, old and new": k if len(ks) > 1 else None,
                    "every update written from position 0, over the cached ones: write at self.pos":
                        torch.cat([k, torch.zeros_like(want_k[:, :, T_:])], dim=2) if len(ks) > 1 else None,
                    VALUES_AS_KEYS: torch.cat(vs, dim=2),
                    ONE_SLOT: one_slot[:, :, :pos].clone() if T_ > 1 else None,
                    WHOLE_BUFFER: torch.cat([want_k, want_k.new_zeros(*want_k.shape[:2], S - pos, want_k.shape[3])],
                                            dim=2) if pos < S else None,
                    **{f"concatenated along axis {d}, not the position axis (2) of (B, G, T, K)":
                       torch.cat(ks, dim=d) for d in (0, 1, 3) if len(ks) > 1 and all(
                           x.shape[2] == k.shape[2] for x in ks)}}
        out.append((want_k, torch.cat(vs, dim=2), pos, mistakes))
    return out


KEYS_AS_VALUES = ("the values returned are the keys: the keys written into the value buffer (self.v[...] = k) or the "
                  "key buffer returned in the values' place (return self.k[...], self.k[...]), a copied line?: self.v "
                  "gets v, self.v[:, :, self.pos:self.pos + T] = v, and update returns self.v[:, :, :self.pos] second")
ONE_SLOT = ("every new position written into slot pos, one after another (a loop over the T new positions that "
            "never moves the slot on): only the last survives there and the slots after it stay zeros; write the "
            "T of them at once, self.k[:, :, self.pos:self.pos + T] = k, or at self.pos + t in the loop")
VALUES_AS_KEYS = ("the keys returned are the values: the values were written over the keys, as when self.k and self.v "
                  "are one tensor (self.v = self.k gives the same buffer a second name, it copies nothing) or v is "
                  "written into self.k; give the values a buffer of their own, self.v = torch.zeros_like(self.k), "
                  "and write v there")
POS_FIRST = ("pos moved on before the write: the new keys land T slots too far on (from pos + T) and the first "
             "slots returned are still zeros; write at self.pos .. self.pos + T - 1 first, then self.pos += T")
NOT_ADVANCED = "pos not advanced: after writing T positions, self.pos += T"
BY_ONE = ("pos moved on by 1 instead of T: an update can bring several positions (a whole prompt), so "
          "self.pos += T with T = k.shape[2]")
HEADS_AXIS = ("the new keys and values written along axis 1 (the heads), self.k[:, self.pos:self.pos + T]: "
              "positions are axis 2 of (B, G, max_len, K), self.k[:, :, self.pos:self.pos + T] = k")


def _raise(exc):
    raise exc


def _written_along_heads(fed, dtype):
    """HEADS_AXIS's updates, fed (k, v) pairs, replayed on a cache's buffer (B, G, max_len, K): raises
    what it raises."""
    k0 = fed[0][0]
    buf = torch.zeros(k0.shape[0], k0.shape[1], sum(k.shape[2] for k, _ in fed), k0.shape[3], dtype=dtype)
    pos = 0
    for k, _ in fed:
        buf[:, pos:pos + k.shape[2]] = k
        pos += k.shape[2]
    return buf[:, :pos]


SHRUNK = ("the buffer replaced by the concatenation of its filled part and the new positions, self.k = "
          "torch.cat([self.k[:, :, :self.pos], k], dim=2): the buffer shrinks to pos, so the next update finds the "
          "cache full; write into the preallocated buffer, self.k[:, :, self.pos:self.pos + T] = k")


def _concatenated_into_the_buffer(fed, dtype):
    """SHRUNK's updates, fed (k, v) pairs, replayed on a cache's buffer (B, G, max_len, K) behind the given
    full-cache check: raises what it raises."""
    k0 = fed[0][0]
    buf = torch.zeros(k0.shape[0], k0.shape[1], sum(k.shape[2] for k, _ in fed), k0.shape[3], dtype=dtype)
    pos = 0
    for k, _ in fed:
        T_ = k.shape[2]
        if pos + T_ > buf.shape[2]:
            raise ValueError(f"KV cache full: {pos} cached + {T_} new > {buf.shape[2]} positions")
        buf = torch.cat([buf[:, :, :pos], k], dim=2)
        pos += T_
    return buf


TO_THE_END = ("the new keys written from self.pos to the end of the buffer, self.k[:, :, self.pos:] = k: that slice "
              "holds max_len - pos positions, not T; write exactly T, self.k[:, :, self.pos:self.pos + T] = k")


def _written_to_the_end(fed, dtype):
    """TO_THE_END's updates, fed (k, v) pairs, replayed on a cache's buffer (B, G, max_len, K): raises what it
    raises."""
    k0 = fed[0][0]
    buf = torch.zeros(k0.shape[0], k0.shape[1], sum(k.shape[2] for k, _ in fed), k0.shape[3], dtype=dtype)
    pos = 0
    for k, _ in fed:
        buf[:, :, pos:] = k
        pos += k.shape[2]
    return buf[:, :, :pos]


LAST_AXIS = ("the new keys written along the last axis, self.k[..., self.pos:self.pos + T]: `...` stands for every "
             "axis before the ones named, so that slice runs along K, the head width, not the positions; "
             "self.k[:, :, self.pos:self.pos + T] = k")


def _written_along_the_last_axis(fed, dtype):
    """LAST_AXIS's updates, fed (k, v) pairs, replayed on a cache's buffer (B, G, max_len, K): raises what it
    raises."""
    k0 = fed[0][0]
    buf = torch.zeros(k0.shape[0], k0.shape[1], sum(k.shape[2] for k, _ in fed), k0.shape[3], dtype=dtype)
    pos = 0
    for k, _ in fed:
        buf[..., pos:pos + k.shape[2]] = k
        pos += k.shape[2]
    return buf[:, :, :pos]


def _check_cache(student, steps, other, what, dtype=torch.float64):
    """Feed KVCache(B=2, G=2, max_len=sum(steps), K=3) chunks of `steps` positions; after each
    update, pos and the returned keys and values must be all positions so far, in order. A mistake
    is confirmed on a second cache fed chunks of `other`."""
    run, run2 = _cache_run(student, steps, 50, dtype), _cache_run(student, other, 80, dtype)
    wants, wants2 = _cache_expectations(run, sum(steps)), _cache_expectations(run2, sum(other))
    done = 0
    for step, ((k, v, got, pos), (want_k, want_v, want_pos, mistakes)) in enumerate(zip(run, wants), 1):
        j = min(step, len(run2)) - 1
        k2, v2, got2, pos2 = run2[j]
        want_k2, want_v2, want_pos2, mistakes2 = wants2[j]
        T_ = k.shape[2]
        at = f"{what}, update {step} ({T_} new positions after {want_pos - T_})"
        if isinstance(got, Exception):
            # confirmed on a cache of G = 4 heads fed `other`: there a write along the heads, of T < G heads,
            # and a write to the end of the buffer raise different errors (with G = 2 they raise the same)
            failed4 = next((e for _, _, e, _ in _cache_run(student, other, 80, dtype, G=4) if isinstance(e, Exception)),
                           None)
            raising = lambda fed: {HEADS_AXIS: lambda: _written_along_heads(fed, dtype),        # noqa: E731
                                   SHRUNK: lambda: _concatenated_into_the_buffer(fed, dtype),
                                   TO_THE_END: lambda: _written_to_the_end(fed, dtype),
                                   LAST_AXIS: lambda: _written_along_the_last_axis(fed, dtype)}
            expect_runs(lambda: _raise(got), f"{at}: cache.update(k, v)", hint="write k at positions self.pos .. "
                        "self.pos + T - 1 of axis 2, self.k[:, :, self.pos:self.pos + T] = k",
                        mistakes=raising(_fed(steps, 50, dtype)),
                        second=Second(lambda: _raise(failed4) if failed4 is not None else None, None,
                                      raising(_fed(other, 80, dtype, G=4))))
            raise got
        expect_equal(pos, want_pos, f"{at}: cache.pos", "self.pos counts the cached positions: add T",
                     mistakes={NOT_ADVANCED: want_pos - T_, BY_ONE: step if step != want_pos else None},
                     second=Second(lambda: pos2, want_pos2, {NOT_ADVANCED: want_pos2 - k2.shape[2],
                                                             BY_ONE: j + 1 if j + 1 != want_pos2 else None}))
        if not (isinstance(got, tuple) and len(got) == 2):
            raise Mismatch(f"{at}: what update returns", f"got {type_name(got)}, expected a pair (keys, values)",
                           "return self.k[:, :, :self.pos], self.v[:, :, :self.pos]")
        keys2 = lambda: got2[0] if isinstance(got2, tuple) else got2
        expect_close(got[0], want_k, f"{at}: the keys returned", mistakes=mistakes,
                     second=Second(keys2, want_k2, mistakes2),
                     hint="write k at positions self.pos .. self.pos + T - 1 (axis 2), then return the buffer up to the new pos")
        values2 = lambda: got2[1] if isinstance(got2, tuple) else got2
        expect_close(got[1], want_v, f"{at}: the values returned", mistakes={KEYS_AS_VALUES: want_k},
                     second=Second(values2, want_v2, {KEYS_AS_VALUES: want_k2}),
                     hint="the values the same way as the keys, into self.v")
        done += 1


@graded("model.KVCache", points=2)
def test_kv_cache_appends_each_update(student):
    _check_cache(student, (2, 2, 2), (3, 3, 3), "KVCache fed 2 positions at a time")


CACHE_FULL_LET_THROUGH = ("the full-cache check let an update through that does not fit: the check before "
                          "writing is self.pos + T > max_len (the T new positions count), and it raises "
                          "ValueError before anything is written")


@graded("model.KVCache", points=1)
def test_kv_cache_refuses_what_does_not_fit(student):
    """KVCache(max_len=5) fed 3 positions, then 3 more: the second update raises ValueError ("KV
    cache full", as the given check says) and leaves the cache as it was; the same with 5, then 1."""
    for first, more in ((3, 3), (5, 1)):
        (k, v), (k2, v2) = _fed((first, more), 60, torch.float64)
        cache = student.piece("model", "KVCache")(2, 2, 5, 3, torch.float64, torch.device("cpu"))
        what = f"KVCache(max_len=5): {first} positions, then update(k, v) with {more} more"
        expect_runs(lambda: cache.update(k, v), f"KVCache(max_len=5).update(k, v) with {first} positions",
                    hint="write k at positions self.pos .. self.pos + T - 1 of axis 2, then move pos on")
        try:
            cache.update(k2, v2)
        except ValueError:
            expect_equal(cache.pos, first, f"{what}: cache.pos after the refusal", "refuse before changing pos")
            continue
        except Exception as exc:                   # noqa: BLE001 - said in the box
            raise Mismatch(what, f"raised {type(exc).__name__}: {exc}".strip(), "keep the given check: "
                           "if self.pos + T > self.k.shape[2]: raise ValueError(...)",
                           mistake=CACHE_FULL_LET_THROUGH) from None
        raise Mismatch(what, f"no error: {first + more} positions do not fit in 5", "keep the given check: "
                       "if self.pos + T > self.k.shape[2]: raise ValueError(...)")


@graded("model.KVCache", points=2)
def test_kv_cache_prefill_then_one_token_at_a_time(student):
    _check_cache(student, (3, 1, 1, 1), (2, 2, 1, 1), "KVCache fed a prompt of 3, then 1 token at a time")
    _check_cache(student, (3, 1, 1), (2, 1, 1), "KVCache in float32, fed strided keys and values as the model splits them",
                 dtype=torch.float32)
