# Your work for notebooks/06_model.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
"""Activity 7.3 · Twelve blocks make ANDREA-120M: embeddings, L pre-norm blocks, a final norm,
and the output head that turns each position's vector into V logits; then generation: sampling
the next token, and the KV cache that spares recomputing the past.

    x = token_table[ids] + position_table[positions]
    for block in blocks: x = block(x)
    logits = head(LN_f(x))
"""
import torch
import torch.nn as nn
from andrea_course.engine.model import check_inputs, given_model_methods   # given: the engine's
from andrea_course.engine.ops import cross_entropy

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
        # Hint: Build the four parts: embeddings, L blocks, a final norm, an output head.
        # More help: hint("model.ANDREA") in the notebook, one level at a time.
        raise NotImplementedError('model.ANDREA.__init__: not implemented yet. Hint: Build the four parts: embeddings, L blocks, a final norm, an output head.')
        self.cross_entropy = cross_entropy
        self.reset_parameters()

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None,
                caches: list | None = None):
        start = caches[0].pos if caches else 0
        check_inputs(ids, targets, self.cfg, start)
        # Hint: Embed, run every block, normalise, and score every token of the vocabulary.
        # More help: hint("model.ANDREA") in the notebook, one level at a time.
        raise NotImplementedError('model.ANDREA.forward: not implemented yet. Hint: Embed, run every block, normalise, and score every token of the vocabulary.')
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits, targets)

    # Given: the rest of the model is the engine's own (andrea_course/engine/model.py).
    reset_parameters, output_weight, new_caches, generate, kv_cache, sampler = given_model_methods()


def count_parameters(cfg) -> dict:
    """Parameters of ANDREA for a config, by component, computed from the sizes alone.

    Returns a dict with the keys: token_table, position_table, attention (one block),
    mlp (one block), norms (one block), block (one block), blocks (all L), final_norm,
    head (0 when tied), total.
    """
    V, T, D, L = cfg.vocab_size, cfg.context_length, cfg.d_model, cfg.n_layers
    H, G, K, F_ = cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_ff
    b = 1 if cfg.bias else 0
    # Hint: Count ANDREA's parameters part by part, from the config's sizes alone.
    # More help: hint("model.count_parameters") in the notebook, one level at a time.
    raise NotImplementedError('model.count_parameters: not implemented yet. Hint: Count ANDREA\'s parameters part by part, from the config\'s sizes alone.')


# ----- generation -----

def sample_next(logits: torch.Tensor, temperature: float, top_k: int | None,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """The next token of every sequence, drawn from the model's last logits.

    logits: (B, V)  ->  ids: (B, 1), torch.long.
    temperature 0: the most likely token (argmax), no draw at all. Otherwise: divide the logits
    by the temperature; with top_k, set every logit below the k-th largest to -inf (a tie with the
    k-th largest is kept; a top_k of V or more keeps every token); softmax into probabilities; draw
    one token per row with torch.multinomial(probs, num_samples=1, generator=generator).
    """
    # Hint: Draw the next token of every row: greedy at temperature 0, else sampled.
    # More help: hint("model.sample_next") in the notebook, one level at a time.
    raise NotImplementedError('model.sample_next: not implemented yet. Hint: Draw the next token of every row: greedy at temperature 0, else sampled.')


class KVCache:
    """The keys and values one block has computed so far, so that each step of generation
    computes k and v for the new token only.  Buffers self.k, self.v: (B, G, max_len, K) each.

    update(k, v), with k, v of shape (B, G, T, K) for T new positions: write them at positions
    self.pos .. self.pos + T - 1, move self.pos on by T, and return every key and every value
    cached so far, (B, G, self.pos, K) each.
    """

    def __init__(self, batch: int, n_kv_heads: int, max_len: int, d_head: int, dtype, device):
        self.k = torch.zeros(batch, n_kv_heads, max_len, d_head, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.pos = 0                                  # how many positions are cached

    def update(self, k: torch.Tensor, v: torch.Tensor):
        T = k.shape[2]
        if self.pos + T > self.k.shape[2]:
            raise ValueError(f"KV cache full: {self.pos} cached + {T} new > {self.k.shape[2]} positions")
        # Hint: Store the new keys and values after the cached ones; return all of them.
        # More help: hint("model.KVCache") in the notebook, one level at a time.
        raise NotImplementedError('model.KVCache.update: not implemented yet. Hint: Store the new keys and values after the cached ones; return all of them.')
