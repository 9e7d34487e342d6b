"""ANDREA, the whole model in one file: what you read here is what runs.

    x = token_table[ids] + position_table[positions]          Embeddings (no table with RoPE)
    for each of L blocks:                                     Block (pre-norm)
        x = x + Attention(norm(x))                            MultiHeadAttention (RoPE turns q, k)
        x = x + MLP(norm(x))                                  MLP (GELU) or SwiGLU
    logits = norm_f(x) · Wᵀ                                   W: the head, or the token table when tied

Every size and switch comes from a ModelConfig (config.py). The hot operations and the rotary
steps are called through *slots*, attributes named like the slot (self.attention, self.gelu, ...)
that the module types listed in MODULE_SLOTS carry; backends.apply fills them, by module type:
PyTorch's fused ops by default (ops.py), the course's Triton kernels with kernels="triton".
Parameters are initialised by module type too (reset_parameters): every Linear, every Norm, the
residual projections by the mark residual() sets. The engine knows nothing of learners: the
overlay (overlay.build, a layer above) builds this model and puts a learner's pieces in it.

Notation: B batch, T positions, S key/value positions attended, V vocabulary, D width,
H query heads, G key/value heads, K head width, F MLP width, L blocks.
"""
from __future__ import annotations

import math
import os

import torch
import torch.nn as nn

from . import backends, ops
from .config import ModelConfig

# Without a GPU the course's Triton kernels run in Triton's interpreter, which must be chosen before
# anything imports Triton: torch does, on its own, the first time a meta-device model is built
# (count_parameters, overlay.model_pieces), and Triton's library kernels made then are compiled
# ones that an interpreted kernel cannot call. So the engine chooses it where it starts (as
# kernels/_common.py does for a kernel file imported on its own).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# ----------------------------------------------------------------------------- embeddings
class Embeddings(nn.Module):
    """ids (B, T) -> x (B, T, D): a row of the token table plus the row of its position.
    With cfg.position = "rope" there is no position table: attention turns q and k instead."""

    def __init__(self, cfg: ModelConfig, dropout: float = 0.0):
        super().__init__()
        self.token_table = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))         # (V, D)
        self.position_table = (nn.Parameter(torch.empty(cfg.context_length, cfg.d_model))  # (T, D)
                               if cfg.position == "learned" else None)
        self.drop = nn.Dropout(dropout)       # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        T = ids.shape[1]
        x = self.token_table[ids]                                            # (B, T, D)
        if self.position_table is not None:
            x = x + self.position_table[start:start + T]
        return self.drop(x)


# ----------------------------------------------------------------------------- init marks
def residual(linear: nn.Linear) -> nn.Linear:
    """Mark a projection whose output is added to the residual stream (W_O, the MLP's last
    layer): reset_parameters scales its initial weights by 1/sqrt(2L), as GPT-2."""
    linear.residual_projection = True
    return linear


def is_residual(module: nn.Module) -> bool:
    return getattr(module, "residual_projection", False) is True


# ----------------------------------------------------------------------------- norms
class Norm(nn.Module):
    """What every normalisation of the model is: reset_parameters sets its gains (`weight`) to 1
    and its shift (`bias`, when it has one) to 0, by this type. A new normalisation subclasses it
    (or is PyTorch's nn.LayerNorm / nn.RMSNorm) and needs nothing else to start right."""


NORM_TYPES = (Norm, nn.LayerNorm, nn.RMSNorm)


class LayerNorm(Norm):
    """gamma·(x - mean)/sqrt(var + eps) + beta over D; beta only with cfg.bias."""

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.eps = eps
        self.layer_norm = ops.layer_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x, self.weight, self.bias, self.eps)


class RMSNorm(Norm):
    """gamma·x/sqrt(mean(x²) + eps) over D, in fp32 whatever x's dtype; no bias."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps
        self.rms_norm = ops.rms_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms_norm(x, self.weight, self.eps)


def make_norm(cfg: ModelConfig) -> nn.Module:
    """The model's normalisation: LayerNorm (classic) or RMSNorm (modern)."""
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias)


# ----------------------------------------------------------------------------- attention
class KVCache:
    """The keys and values of the positions one block has seen: (B, G, max_len, K) each.

    update(k, v) appends T new positions and returns everything cached so far, (B, G, S, K).
    """

    def __init__(self, batch: int, n_kv_heads: int, max_len: int, d_head: int, dtype, device):
        self.k = torch.zeros(batch, n_kv_heads, max_len, d_head, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.pos = 0

    def update(self, k: torch.Tensor, v: torch.Tensor):
        B, G, T, K = k.shape
        if (B, G, K) != (self.k.shape[0], self.k.shape[1], self.k.shape[3]) or v.shape != k.shape:
            b, g, _, d = self.k.shape
            raise ValueError(f"KV cache made for B={b} sequences, G={g} key/value heads of width K={d}; "
                             f"got k of shape {tuple(k.shape)} and v of shape {tuple(v.shape)} (B, G, T, K)")
        if self.pos + T > self.k.shape[2]:
            raise ValueError(f"KV cache full: {self.pos} cached + {T} new > {self.k.shape[2]} positions")
        self.k[:, :, self.pos:self.pos + T] = k
        self.v[:, :, self.pos:self.pos + T] = v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, G, S, K) -> (B, G·n_rep, S, K): each key/value head serves n_rep = H/G neighbouring
    query heads (query head h uses key/value head h // n_rep)."""
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


# ----------------------------------------------------------------------------- rotary positions
def rope_frequencies(d_head: int, T: int, theta: float = 10000.0, device=None):
    """cos, sin: (T, K/2) each, in fp32. Position t turns feature pair i by the angle
    t·theta^(-2i/K): the first pairs turn fast (short distances), the last slowly (long ones)."""
    inv_freq = theta ** (-torch.arange(0, d_head, 2, dtype=torch.float32, device=device) / d_head)   # (K/2,)
    angles = torch.outer(torch.arange(T, dtype=torch.float32, device=device), inv_freq)           # (T, K/2)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0) -> torch.Tensor:
    """Rotary position embedding (Su et al., 2021), in the GPT-NeoX / Hugging Face LLaMA layout:
    feature i is paired with feature i + K/2 (the two halves of the head), and the pair at
    position start + t is turned by the angle in row start + t of cos, sin (rope_frequencies).

    x: (..., T, K) -> (..., T, K) in x's dtype. A dot product of a turned query and a turned key
    depends on their positions only through the difference, so cached keys never change.
    """
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[start:start + T], sin[start:start + T]                 # (T, K/2)
    wide = torch.promote_types(x.dtype, torch.float32)              # bf16 angles would be coarse
    x1, x2 = x[..., :half].to(wide), x[..., half:].to(wide)           # the two halves: pair (i, i + K/2)
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).to(x.dtype)


class Rotary(nn.Module):
    """RoPE inside one attention module (cfg.position = "rope"); no parameters.

    Its slots: rope_frequencies and apply_rope, the steps the engine turns q and k with; and
    rope_attention, None in the engine: a whole rope_attention(q, k, v, cos, sin, past_k, past_v)
    (activity 8's signature: turn, append to the past, attend) that, once set, runs instead of
    the engine's steps.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.theta = cfg.rope_theta
        self.rope_frequencies = rope_frequencies
        self.apply_rope = apply_rope
        self.rope_attention = None

    def forward(self, attn: "MultiHeadAttention", q, k, v, cache: KVCache | None) -> torch.Tensor:
        """q (B, H, T, K), k and v (B, G, T, K) of the T new positions -> y (B, H, T, K), through
        attn's cache_and_share and attention; the cache keeps keys already turned."""
        T, K = q.shape[-2], q.shape[-1]
        start = cache.pos if cache is not None else 0                 # the positions of these T tokens
        if self.rope_frequencies is rope_frequencies:                 # the engine's takes the device
            cos, sin = rope_frequencies(K, start + T, self.theta, q.device)
        else:
            cos, sin = (t.to(q.device) for t in self.rope_frequencies(K, start + T, self.theta))
        if self.rope_attention is None:
            q, k = self.apply_rope(q, cos, sin, start), self.apply_rope(k, cos, sin, start)
            k, v = attn.cache_and_share(k, v, cache)                  # (B, H, S, K)
            return attn.attention(q, k, v)
        # A whole rope_attention sees every query head's copy of k and v (G = H), the past included.
        n_rep = attn.n_heads // attn.n_kv_heads
        past_k, past_v = (cache.k[:, :, :start], cache.v[:, :, :start]) if cache is not None else (k[..., :0, :], v[..., :0, :])
        y, k_all, v_all = self.rope_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), cos, sin,
                                              repeat_kv(past_k, n_rep), repeat_kv(past_v, n_rep))
        if cache is not None:                                         # one copy per key/value head, turned
            cache.update(k_all[:, ::n_rep, start:], v_all[:, ::n_rep, start:])
        return y


class MultiHeadAttention(nn.Module):
    """Causal self-attention with H query heads and G <= H key/value heads.  x: (B, T, D) -> (B, T, D).

    qkv: one projection D -> (H + 2G)·K giving q (H heads), k and v (G heads each);
    proj: W_O, D -> D, mixes the concatenated heads. With cfg.position = "rope", `rotary` turns
    q and k (never v) by their positions (offset by what the cache holds) before k is cached.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = cfg.n_heads, cfg.kv_heads, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, (self.n_heads + 2 * self.n_kv_heads) * self.d_head, bias=cfg.bias)
        self.proj = residual(nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias))   # W_O
        self.rotary = Rotary(cfg) if cfg.position == "rope" else None
        self.attention = ops.attention

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        H, G, K = self.n_heads, self.n_kv_heads, self.d_head
        q, k, v = self.qkv(x).split([H * K, G * K, G * K], dim=-1)    # (B, T, H·K), (B, T, G·K) x2
        q = q.view(B, T, H, K).transpose(1, 2)                        # (B, H, T, K)
        k = k.view(B, T, G, K).transpose(1, 2)                        # (B, G, T, K)
        v = v.view(B, T, G, K).transpose(1, 2)
        if self.rotary is not None:
            y = self.rotary(self, q, k, v, cache)                     # (B, H, T, K)
        else:
            k, v = self.cache_and_share(k, v, cache)                  # (B, H, S, K)
            y = self.attention(q, k, v)                               # (B, H, T, K)
        return self.proj(y.transpose(1, 2).reshape(B, T, H * K))      # (B, T, D)

    def cache_and_share(self, k: torch.Tensor, v: torch.Tensor, cache: KVCache | None):
        """k, v (B, G, T, K) -> (B, H, S, K) each: appended to the cache, when there is one, which
        hands back all S positions so far (S = T without one); then each of the G key/value heads
        repeated for the H/G query heads it serves. No cache and G = H: k and v as they came."""
        if cache is not None:
            k, v = cache.update(k, v)                                 # (B, G, S, K)
        n_rep = self.n_heads // self.n_kv_heads
        return repeat_kv(k, n_rep), repeat_kv(v, n_rep)               # (B, H, S, K)


# ----------------------------------------------------------------------------- feed-forward
class MLP(nn.Module):
    """x: (B, T, D) -> (B, T, D) through a hidden layer of width F: proj(GELU(fc(x)))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)     # W1: D -> F
        self.proj = residual(nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias))   # W2: F -> D
        self.gelu = ops.gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.gelu(self.fc(x)))                       # (B, T, F) in between


class SwiGLU(nn.Module):
    """x: (B, T, D) -> (B, T, D): w_down(Swish(w_gate(x)) ⊙ w_up(x)), hidden width F."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w_gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
        self.w_down = residual(nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias))
        self.swiglu = ops.swiglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_down(self.swiglu(self.w_gate(x), self.w_up(x)))  # (B, T, F) in between


def make_mlp(cfg: ModelConfig) -> nn.Module:
    """The block's feed-forward sublayer: GELU MLP (classic) or SwiGLU (modern)."""
    return SwiGLU(cfg) if cfg.mlp == "swiglu" else MLP(cfg)


# ----------------------------------------------------------------------------- the block
class Block(nn.Module):
    """Pre-norm transformer block.  x: (B, T, D) -> (B, T, D).

    Each sublayer reads a normalised copy of the residual stream and adds its output (after
    dropout) to the stream itself.
    """

    def __init__(self, cfg: ModelConfig, dropout: float = 0.0):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = MultiHeadAttention(cfg)
        self.ln2 = make_norm(cfg)
        self.mlp = make_mlp(cfg)
        self.drop = nn.Dropout(dropout)       # a run-time switch: ANDREA(..., dropout=p) sets it

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), cache))
        x = x + self.drop(self.mlp(self.ln2(x)))
        return x


# ----------------------------------------------------------------------------- sampling
def sample_next(logits: torch.Tensor, temperature: float, top_k: int | None,
                generator: torch.Generator | None) -> torch.Tensor:
    """logits: (B, V) -> next ids: (B, 1). Temperature 0: the most likely token."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


# ----------------------------------------------------------------------------- the model
class ANDREA(nn.Module):
    """The whole model.  ids: (B, T) int -> logits: (B, T, V) [, mean cross-entropy loss].

    cfg: a ModelConfig or a preset's name. How it runs, none of which changes the weights:
      kernels  "torch" (PyTorch's fused ops) or "triton" (the course's kernels), backends.py;
               model.slots then says, per slot, which code runs it
      dropout  the probability of every dropout layer (0 for inference)
      init_std the scale of the initial weights (None: 1/sqrt(D))
    A learner's pieces are put in by overlay.build (or grading.passing.learner_model), above it.
    """

    def __init__(self, cfg: ModelConfig | str, *, kernels: str = "torch",
                 dropout: float = 0.0, init_std: float | None = None):
        super().__init__()
        cfg = ModelConfig.preset(cfg) if isinstance(cfg, str) else cfg
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg must be a ModelConfig or a preset's name, got {type(cfg).__name__}")
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = make_norm(cfg)
        self.head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.cross_entropy = ops.cross_entropy
        self.reset_parameters(init_std)
        self.set_dropout(dropout)
        self.kernels = kernels
        self.slots = backends.apply(self, kernels, MODULE_SLOTS)   # {slot: "engine" | "Triton kernel"}

    def reset_parameters(self, init_std: float | None = None) -> None:
        """Initialise every parameter by the type of the module that holds it: a Linear's weight
        from a normal with std = init_std (default 1/sqrt(D)), scaled by 1/sqrt(2L) for a residual
        projection (W_O and the MLP's last layer, marked by residual(), as GPT-2), its bias 0; a
        Norm's gains 1 and shift 0; any other parameter of two or more axes (the embedding tables)
        from the same normal. A module of no known type keeps the 1-D parameters its constructor made.
        A model built on the meta device (count_parameters) has no values to set: it is left alone
        (and PyTorch's initialisers would import its compiler for meta tensors, seconds)."""
        std = init_std if init_std is not None else 1.0 / math.sqrt(self.cfg.d_model)
        for module in self.modules():
            for name, p in module.named_parameters(recurse=False):
                if p.is_meta:
                    continue
                if isinstance(module, nn.Linear):
                    if name == "bias":
                        nn.init.zeros_(p)
                    else:
                        scale = 1.0 / math.sqrt(2 * self.cfg.n_layers) if is_residual(module) else 1.0
                        nn.init.normal_(p, 0.0, std * scale)
                elif isinstance(module, NORM_TYPES):
                    nn.init.ones_(p) if name == "weight" else nn.init.zeros_(p)
                elif p.dim() >= 2:
                    nn.init.normal_(p, 0.0, std)

    def set_dropout(self, p: float) -> None:
        """The probability of every dropout layer (a run-time switch; 0 for inference)."""
        if not (isinstance(p, (int, float)) and 0.0 <= p < 1.0):
            raise ValueError(f"dropout must be a number in [0, 1), got {p!r}")
        for m in self.modules():
            if isinstance(m, nn.Dropout):
                m.p = float(p)

    def output_weight(self) -> torch.Tensor:
        """The (V, D) matrix that maps the last hidden state to logits."""
        return self.embed.token_table if self.head is None else self.head.weight

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None, caches: list | None = None):
        start = caches[0].pos if caches else 0
        check_inputs(ids, targets, self.cfg, start)
        x = self.embed(ids, start)                                   # (B, T, D)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)              # (B, T, D)
        x = self.ln_f(x)
        logits = x @ self.output_weight().T                          # (B, T, V)
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits, targets)

    kv_cache = KVCache      # the cache new_caches builds (overlay.build may set a learner's on a model)
    sampler = staticmethod(sample_next)   # draws each token generate adds (overlay.build: a learner's sample_next)

    def new_caches(self, batch: int, max_len: int | None = None) -> list[KVCache]:
        """One empty cache (self.kv_cache) per block, for generation."""
        cfg, p = self.cfg, self.embed.token_table
        return [self.kv_cache(batch, cfg.kv_heads, max_len or cfg.context_length, cfg.d_head, p.dtype, p.device)
                for _ in self.blocks]

    @torch.no_grad()
    def generate(self, ids, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None,
                 use_cache: bool = True):
        """Append max_new_tokens sampled tokens to ids (B, T0) and return (B, T0 + max_new_tokens).

        ids may also be a list of prompts of different lengths (lists of ids or 1-D tensors):
        then a list comes back, each prompt with its new tokens. Prompts of one length run as
        one batch; no padding is ever attended to, so each row is what generating it alone gives.

        temperature 0 picks the most likely token. With use_cache each step feeds only the new
        token and reuses the cached keys and values. Once the sequence outgrows the context
        length T the window slides by one token and the cache is rebuilt, exactly as recomputing
        would: with learned absolute positions every cached key was computed at a position that
        has just changed, so a rolling cache would be wrong. (With position="rope" a score depends
        only on the distance between two positions, so a rolling cache would be exact; it is not
        built here.) Past T, generation therefore costs what recomputing costs.
        """
        if isinstance(ids, (list, tuple)):
            return self._generate_ragged(ids, max_new_tokens, temperature, top_k, generator, use_cache)
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be a positive number of tokens or None, got {top_k}")
        T_max = self.cfg.context_length
        caches = None
        for _ in range(max_new_tokens):
            window = ids[:, -T_max:]
            if not use_cache:
                logits = self(window)
            elif caches is None or ids.shape[1] > T_max:           # (re)start: prefill the window
                caches = self.new_caches(ids.shape[0])
                logits = self(window, caches=caches)
            else:                                                  # feed only what is new
                logits = self(ids[:, caches[0].pos:], caches=caches)
            logits = logits[:, -1, :].float()                      # (B, V)
            ids = torch.cat([ids, self.sampler(logits, temperature, top_k, generator)], dim=1)   # (B, T + 1)
        return ids


    def _generate_ragged(self, prompts, max_new_tokens, temperature, top_k, generator, use_cache) -> list:
        rows = [torch.as_tensor(p, dtype=torch.long, device=self.embed.token_table.device).reshape(-1)
                for p in prompts]
        if any(r.numel() == 0 for r in rows):
            raise ValueError("every prompt needs at least one token")
        out: list = [None] * len(rows)
        for length in sorted({r.numel() for r in rows}):
            group = [i for i, r in enumerate(rows) if r.numel() == length]
            done = self.generate(torch.stack([rows[i] for i in group]), max_new_tokens, temperature,
                                 top_k, generator, use_cache)
            for i, row in zip(group, done):
                out[i] = row
        return out


# The slots each module type carries, each held in the attribute of its name (backends.apply fills
# them, by type: a subclass carries its base's). Function slots with a back-end are backends.TABLE's;
# Rotary's are the engine's functions until something else is put in them.
MODULE_SLOTS: dict[type, tuple[str, ...]] = {
    MultiHeadAttention: ("attention",),
    Rotary: ("rope_frequencies", "apply_rope", "rope_attention"),
    LayerNorm: ("layer_norm",),
    RMSNorm: ("rms_norm",),
    MLP: ("gelu",),
    SwiGLU: ("swiglu",),
    ANDREA: ("cross_entropy",),
}


def given_model_methods():
    """What a learner's ANDREA (exercises/model.py) is given rather than written: the engine's
    reset_parameters, output_weight, new_caches, generate; kv_cache, the cache class new_caches
    builds, and sampler, the function generate draws each token with (the engine's KVCache and
    sample_next; the overlay sets a learner's on the model)."""
    return (ANDREA.reset_parameters, ANDREA.output_weight, ANDREA.new_caches, ANDREA.generate, ANDREA.kv_cache,
            ANDREA.__dict__["sampler"])


def check_inputs(ids, targets, cfg: ModelConfig, start: int = 0) -> None:
    """Refuse what the model cannot read, saying what was wrong and what was expected."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids must be a torch.Tensor of token ids with shape (B, T), got {type(ids).__name__}")
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got a {ids.dim()}-D tensor of shape {tuple(ids.shape)}; "
                         f"for a single sequence use ids[None] or ids.unsqueeze(0)")
    if ids.dtype not in (torch.long, torch.int32):
        raise TypeError(f"ids must be integer token ids (torch.long), got dtype {ids.dtype}")
    B, T = ids.shape
    if B == 0 or T == 0:
        raise ValueError(f"ids is empty (shape {tuple(ids.shape)}): need at least one sequence of one token")
    if start + T > cfg.context_length:
        cached = f" ({start} cached + {T} new)" if start else ""
        raise ValueError(f"sequence too long: {start + T} positions{cached} but the context length T is "
                         f"{cfg.context_length}; crop to the last {cfg.context_length} tokens")
    # Reading values forces a GPU sync and breaks a torch.compile graph: a compiled training
    # step relies on its data being checked once when it was prepared (andrea-prepare).
    values = not torch.compiler.is_compiling()
    lo, hi = (int(ids.min()), int(ids.max())) if values else (0, 0)
    if lo < 0 or hi >= cfg.vocab_size:
        bad = hi if hi >= cfg.vocab_size else lo
        raise ValueError(f"token id {bad} is outside the vocabulary [0, {cfg.vocab_size}) (V = {cfg.vocab_size})")
    if targets is not None:
        if not isinstance(targets, torch.Tensor) or targets.shape != ids.shape:
            got = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise ValueError(f"targets must have the same shape as ids {tuple(ids.shape)}, got {got}")
        if targets.dtype != torch.long:
            raise TypeError(f"targets must be integer token ids (torch.long), got dtype {targets.dtype}")
        valid = (targets == -100) | ((targets >= 0) & (targets < cfg.vocab_size))
        if values and not bool(valid.all()):
            bad = int(targets[~valid][0])
            raise ValueError(f"target id {bad} is outside the vocabulary [0, {cfg.vocab_size}) "
                             f"(use -100 for positions to ignore)")
