# GENERATED from solutions/model.py by `make exercises`. Write your code where a
# `raise NotImplementedError` stands, then delete that line.
"""Activity · Twelve blocks make ANDREA-120M: embeddings, L pre-norm blocks, a final norm,
and the output head that turns each position's vector into V logits.

    x = token_table[ids] + position_table[positions]
    for block in blocks: x = block(x)
    logits = head(LN_f(x))
"""
import torch
import torch.nn as nn
from andrea_course.model import check_inputs, given_model_methods   # given: the engine's
from andrea_course.ops import cross_entropy

from .block import Block, make_norm
from .embeddings import Embeddings


class ANDREA(nn.Module):
    """The whole model.  ids: (B, T) int -> logits: (B, T, V) [, mean cross-entropy loss].

    Submodules, by these names: embed (Embeddings), blocks (nn.ModuleList of L Blocks),
    ln_f (the final norm), head (Linear D -> V, no bias; None when cfg.tie_embeddings,
    in which case the token table itself is the output projection). reset_parameters,
    output_weight, new_caches and generate are the engine's, given.
    """

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        # Hint: self.embed = Embeddings(cfg); self.blocks = nn.ModuleList of cfg.n_layers Blocks; self.ln_f = make_norm(cfg); self.head = Linear(D, V, bias=False), or None when cfg.tie_embeddings.
        raise NotImplementedError('model.ANDREA.__init__: not implemented yet. Hint: self.embed = Embeddings(cfg); self.blocks = nn.ModuleList of cfg.n_layers Blocks; self.ln_f = make_norm(cfg); self.head = Linear(D, V, bias=False), or None when cfg.tie_embeddings.')
        self.cross_entropy = cross_entropy
        self.reset_parameters()

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None,
                caches: list | None = None):
        start = caches[0].pos if caches else 0
        check_inputs(ids, targets, self.cfg, start)
        # Hint: x = self.embed(ids, start); pass x through every block with its cache (caches[i] or None); self.ln_f; logits = x @ self.output_weight().T.
        raise NotImplementedError('model.ANDREA.forward: not implemented yet. Hint: x = self.embed(ids, start); pass x through every block with its cache (caches[i] or None); self.ln_f; logits = x @ self.output_weight().T.')
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits, targets)

    # Given: the rest of the model is the engine's own (andrea_course/model.py).
    reset_parameters, output_weight, new_caches, generate = given_model_methods()


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
