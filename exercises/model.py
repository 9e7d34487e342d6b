# GENERATED from solutions/model.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
"""Activity · Twelve blocks make ANDREA-120M: embeddings, L pre-norm blocks, a final norm,
and the output head that turns each position's vector into V logits.

    x = token_table[ids] + position_table[positions]
    for block in blocks: x = block(x)
    logits = head(LN_f(x))
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .block import Block, make_norm
from .embeddings import Embeddings
from .multihead import KVCache


class ANDREA(nn.Module):
    """The whole model.  ids: (B, T) int -> logits: (B, T, V) [, mean cross-entropy loss].

    Submodules, by these names: embed (Embeddings), blocks (nn.ModuleList of L Blocks),
    ln_f (the final norm), head (Linear D -> V, no bias; None when cfg.tie_embeddings,
    in which case the token table itself is the output projection).
    """

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # Hint: self.embed = Embeddings(cfg); self.blocks = nn.ModuleList of cfg.n_layers Blocks; self.ln_f = make_norm(cfg); self.head = Linear(D, V, bias=False), or None when cfg.tie_embeddings.
        raise NotImplementedError('model.ANDREA.__init__: not implemented yet. Hint: self.embed = Embeddings(cfg); self.blocks = nn.ModuleList of cfg.n_layers Blocks; self.ln_f = make_norm(cfg); self.head = Linear(D, V, bias=False), or None when cfg.tie_embeddings.')
        self.loss_fn = cross_entropy
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small normal draws scaled by width (std = 1/sqrt(D) unless cfg.init_std is set);
        the residual projections (W_O and the MLP's last layer) also by 1/sqrt(2L), as GPT-2."""
        std = self.cfg.std
        for name, p in self.named_parameters():
            if p.dim() == 1:   # biases, norm gains
                nn.init.ones_(p) if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")) else nn.init.zeros_(p)
            elif name.endswith(("proj.weight", "w_down.weight")) and ".blocks." in f".{name}":
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def output_weight(self) -> torch.Tensor:
        """The (V, D) matrix that maps the last hidden state to logits."""
        return self.embed.token_table if self.head is None else self.head.weight

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None,
                caches: list | None = None):
        start = caches[0].pos if caches else 0
        check_inputs(ids, targets, self.cfg, start)
        # Hint: x = self.embed(ids, start); pass x through every block with its cache (caches[i] or None); self.ln_f; logits = x @ self.output_weight().T.
        raise NotImplementedError('model.ANDREA.forward: not implemented yet. Hint: x = self.embed(ids, start); pass x through every block with its cache (caches[i] or None); self.ln_f; logits = x @ self.output_weight().T.')
        if targets is None:
            return logits
        return logits, self.loss_fn(logits, targets)

    def new_caches(self, batch: int, max_len: int | None = None) -> list:
        """One empty KVCache per block, for generation."""
        cfg, p = self.cfg, self.embed.token_table
        max_len = max_len or cfg.context_length
        return [KVCache(batch, cfg.kv_heads, max_len, cfg.d_head, p.dtype, p.device) for _ in self.blocks]

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None,
                 use_cache: bool = True) -> torch.Tensor:
        """Append max_new_tokens sampled tokens to ids (B, T0) and return (B, T0 + max_new_tokens).

        temperature 0 picks the most likely token. With use_cache each step feeds only the new
        token and reuses the cached keys and values; once the sequence outgrows the context
        length T, the window slides and the cache is rebuilt, exactly as recomputing would.
        """
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
            else:
                if caches is None or ids.shape[1] > T_max:   # (re)start: prefill the window
                    caches = self.new_caches(ids.shape[0])
                    logits = self(window, caches=caches)
                else:                                        # feed only what is new
                    logits = self(ids[:, caches[0].pos:], caches=caches)
            logits = logits[:, -1, :].float()                # (B, V)
            ids = torch.cat([ids, sample_next(logits, temperature, top_k, generator)], dim=1)
        return ids


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss.  logits: (B, T, V), targets: (B, T) with -100 for ignored positions."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100)


def sample_next(logits: torch.Tensor, temperature: float, top_k: int | None,
                generator: torch.Generator | None) -> torch.Tensor:
    """logits: (B, V) -> next ids: (B, 1)."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


def check_inputs(ids, targets, cfg, start: int = 0) -> None:
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


def count_parameters(cfg) -> dict:
    """Parameters of ANDREA for a config, by component, computed from the sizes alone.

    Returns a dict with the keys: token_table, position_table, attention (one block),
    mlp (one block), norms (one block), block (one block), blocks (all L), final_norm,
    head (0 when tied), total.
    """
    V, T, D, L = cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.n_layers
    H, G, K, F_ = cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_ff
    b = 1 if cfg.bias else 0
    # Hint: count each piece from V, T, D, L, H, G, K, F and b: the qkv projection has (H + 2G)·K outputs; a LayerNorm has gamma and, when cfg.bias, beta (RMSNorm: gamma only); sum them up.
    raise NotImplementedError('model.count_parameters: not implemented yet. Hint: count each piece from V, T, D, L, H, G, K, F and b: the qkv projection has (H + 2G)·K outputs; a LayerNorm has gamma and, when cfg.bias, beta (RMSNorm: gamma only); sum them up.')
