"""Activity · Twelve blocks make ANDREA-120M: embeddings, L pre-norm blocks, a final norm,
and the output head that turns each position's vector into V logits; then generation: sampling
the next token, and the KV cache that spares recomputing the past.

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
        ### BEGIN SOLUTION
        ### HINT: The model holds four parts: the embeddings, a list of L blocks registered as submodules (so their weights are the model's), a final norm of the config's kind, and an output head from D to V without a bias, which a model with tied embeddings does not have (the token table serves instead).
        ### API: Embeddings(cfg), nn.ModuleList, Block(cfg), make_norm(cfg), nn.Linear(D, V, bias=False)
        ### LINE: self.embed = Embeddings(cfg); self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers)); self.ln_f = make_norm(cfg); self.head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.embed = Embeddings(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = make_norm(cfg)
        self.head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        ### END SOLUTION
        self.cross_entropy = cross_entropy
        self.reset_parameters()

    def forward(self, ids: torch.Tensor, targets: torch.Tensor | None = None,
                caches: list | None = None):
        start = caches[0].pos if caches else 0
        check_inputs(ids, targets, self.cfg, start)
        ### BEGIN SOLUTION
        ### HINT: Embed the ids at their positions (counting from where the caches left off), pass the stream through every block in turn, each with its own cache when there are caches, apply the final norm, and project onto the vocabulary with the output weight.
        ### API: self.embed(ids, start), enumerate(self.blocks), block(x, cache), self.ln_f, self.output_weight(), @ and .T
        ### LINE: x = self.embed(ids, start); for i, block in enumerate(self.blocks): x = block(x, caches[i] if caches else None); logits = self.ln_f(x) @ self.output_weight().T
        x = self.embed(ids, start)                                   # (B, T, D)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)              # (B, T, D)
        x = self.ln_f(x)
        logits = x @ self.output_weight().T                          # (B, T, V)
        ### END SOLUTION
        if targets is None:
            return logits
        return logits, self.cross_entropy(logits, targets)

    # Given: the rest of the model is the engine's own (andrea_course/model.py).
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
    ### BEGIN SOLUTION
    ### HINT: Count each part from the sizes alone: a linear layer has inputs times outputs weights, plus one bias per output when the config has biases; the attention projection makes queries for H heads but keys and values for only G; a LayerNorm has a gain and, with biases, a shift, an RMSNorm only a gain; the SwiGLU MLP has three matrices, the GELU MLP two; then add the parts up.
    ### API: the sizes V, T, D, L, H, G, K, F_ and b given above; cfg.norm, cfg.mlp, cfg.tie_embeddings
    ### LINE: qkv_out = (H + 2 * G) * K; attention = D * qkv_out + b * qkv_out + D * D + b * D; mlp = 3 * D * F_ + b * (2 * F_ + D) for SwiGLU, else 2 * D * F_ + b * (F_ + D); block = attention + mlp + 2 * norm
    norm = D + (D * b if cfg.norm == "layernorm" else 0)        # gamma (+ beta)
    qkv_out = (H + 2 * G) * K
    attention = D * qkv_out + b * qkv_out + D * D + b * D       # W_qkv, b_qkv, W_O, b_O
    if cfg.mlp == "swiglu":
        mlp = 3 * D * F_ + b * (2 * F_ + D)
    else:
        mlp = 2 * D * F_ + b * (F_ + D)
    block = attention + mlp + 2 * norm
    counts = dict(token_table=V * D, position_table=T * D, attention=attention, mlp=mlp,
                  norms=2 * norm, block=block, blocks=L * block, final_norm=norm,
                  head=0 if cfg.tie_embeddings else V * D)
    counts["total"] = (counts["token_table"] + counts["position_table"] + counts["blocks"]
                       + counts["final_norm"] + counts["head"])
    return counts
    ### END SOLUTION


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
    ### BEGIN SOLUTION
    ### HINT: temperature 0 means no randomness: the largest logit. Otherwise divide the logits by the temperature (below 1 sharpens, above 1 flattens), hide everything below the k-th largest so softmax gives it probability 0, turn the logits into probabilities, and draw one token per row.
    ### API: logits.argmax(dim=-1, keepdim=True); torch.topk(logits, k, dim=-1).values[:, -1:]; logits.masked_fill(..., float('-inf')); torch.softmax(..., dim=-1); torch.multinomial(probs, num_samples=1, generator=generator)
    ### LINE: logits = logits / temperature; kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]; logits = logits.masked_fill(logits < kth, float('-inf')); return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)                     # (B, 1)
    logits = logits / temperature                                      # (B, V)
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]   # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)                              # (B, V), rows sum to 1
    return torch.multinomial(probs, num_samples=1, generator=generator)
    ### END SOLUTION


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
        ### BEGIN SOLUTION
        ### HINT: the new positions go after the ones already cached (the position axis is axis 2), then the count of cached positions grows by T; return the buffers up to that count, old and new together.
        ### API: slice assignment self.k[:, :, a:b] = k (and the same for v); self.pos += T; slicing self.k[:, :, :self.pos]
        ### LINE: self.k[:, :, self.pos:self.pos + T] = k; self.v[:, :, self.pos:self.pos + T] = v; self.pos += T; return self.k[:, :, :self.pos], self.v[:, :, :self.pos]
        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer
        self.v[:, :, self.pos:self.pos + T] = v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos
        ### END SOLUTION
