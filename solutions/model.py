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
        ### BEGIN SOLUTION
        ### SUMMARY: Build the four parts: embeddings, L blocks, a final norm, an output head.
        ### HINT: Create the parts in the order the data flows through them: the embedding layer; then L blocks in a container that registers each one as a submodule (a plain Python list would hide their weights from the optimiser and from saving); then the final norm of the configured kind; then a bias-free linear head from D to V, unless the embeddings are tied, in which case there is no head at all.
        ### API: The classes Embeddings and Block and the function make_norm each take the config; nn.ModuleList(iterable) registers every module it holds; nn.Linear(inputs, outputs, bias=False); cfg.n_layers, cfg.d_model, cfg.vocab_size, cfg.tie_embeddings. `len(list(nn.ModuleList(nn.Linear(2, 2) for _ in range(3)).parameters()))` gives `6`; `nn.Linear(4, 2, bias=False).weight.shape` gives `(2, 4)`
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
        ### SUMMARY: Embed, run every block, normalise, and score every token of the vocabulary.
        ### HINT: Follow one stream of vectors from ids to logits: the embeddings place the ids at their positions, which start after whatever the caches already hold; every block updates the stream in turn, block number i with cache number i when caches were given; the final norm prepares it; and a product with the output weight, turned on its side, gives one score per vocabulary entry.
        ### API: self.embed takes the ids and the start position; enumerate over self.blocks gives each block with its number; self.ln_f; self.output_weight() returns the (V, D) matrix that scores tokens, tied or not; @ and .T. `[(i, m.out_features) for i, m in enumerate(nn.ModuleList([nn.Linear(1, 5), nn.Linear(5, 2)]))]` gives `[(0, 5), (1, 2)]`; `(torch.ones(1, 2) @ torch.tensor([[1., 2.], [3., 4.], [5., 6.]]).T).shape` gives `(1, 3)`
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
    ### BEGIN SOLUTION
    ### SUMMARY: Count ANDREA's parameters part by part, from the config's sizes alone.
    ### HINT: Count by kind of layer. A linear map from n inputs to m outputs holds n times m weights, plus m biases when the config has biases. The attention's fused projection makes queries for H heads but keys and values for only G heads, and its output projection is D by D. A LayerNorm holds a gain and, with biases, a shift; an RMSNorm only a gain. The SwiGLU MLP has three matrices and the GELU MLP two. Learned positions are a T by D table, and RoPE, which turns q and k, has none. An untied head is one more V by D matrix; then add everything up.
    ### API: The sizes V, T, D, L, H, G, K, F_ and b (1 with biases, else 0) are set above; cfg.norm is 'layernorm' or 'rmsnorm', cfg.mlp 'gelu' or 'swiglu', cfg.position 'learned' or 'rope', cfg.tie_embeddings a bool. Check a formula against a real layer: `sum(p.numel() for p in nn.Linear(10, 4).parameters())` gives `44`; `sum(p.numel() for p in nn.LayerNorm(6).parameters())` gives `12`
    ### LINE: qkv_out = (H + 2 * G) * K; attention = D * qkv_out + b * qkv_out + D * D + b * D; mlp = 3 * D * F_ + b * (2 * F_ + D) for SwiGLU, else 2 * D * F_ + b * (F_ + D); block = attention + mlp + 2 * norm
    norm = D + (D * b if cfg.norm == "layernorm" else 0)        # gamma (+ beta)
    qkv_out = (H + 2 * G) * K
    attention = D * qkv_out + b * qkv_out + D * D + b * D       # W_qkv, b_qkv, W_O, b_O
    if cfg.mlp == "swiglu":
        mlp = 3 * D * F_ + b * (2 * F_ + D)
    else:
        mlp = 2 * D * F_ + b * (F_ + D)
    block = attention + mlp + 2 * norm
    positions = 0 if cfg.position == "rope" else T * D         # RoPE turns q and k: no table
    counts = dict(token_table=V * D, position_table=positions, attention=attention, mlp=mlp,
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
    ### SUMMARY: Draw the next token of every row: greedy at temperature 0, else sampled.
    ### HINT: Temperature 0 is the limit of ever sharper distributions, so it is no draw at all: take the largest logit, one column per row. Otherwise dividing by the temperature sharpens the distribution below 1 and flattens it above 1; top-k keeps only the k largest logits of each row (ties with the k-th stay, and a k beyond the vocabulary keeps everything) by pushing the rest to minus infinity; the softmax then gives probabilities, and one draw per row from them, with the given generator, picks the token.
    ### API: t.argmax(dim=-1, keepdim=True); torch.topk(t, k, dim=-1).values holds the k largest of each row, the largest first, so [:, -1:] is the k-th as a column; t.masked_fill(t < column, float('-inf')); torch.softmax(t, dim=-1); torch.multinomial(p, 1, generator=g) draws one index per row. `torch.tensor([[1., 5., 3.]]).argmax(dim=-1, keepdim=True)` gives `[[1]]`; `torch.topk(torch.tensor([[4., 9., 1., 7.]]), 2, dim=-1).values[:, -1:]` gives `[[7.]]`; `torch.multinomial(torch.tensor([[0., 1., 0.]]), num_samples=1)` gives `[[1]]`
    ### LINE: if temperature == 0: return logits.argmax(dim=-1, keepdim=True); logits = logits / temperature; if top_k is not None: logits = logits.masked_fill(logits < torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:], float('-inf')); return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
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
        ### SUMMARY: Store the new keys and values after the cached ones; return all of them.
        ### HINT: The buffers are allocated once for the longest sequence, and a counter says how many positions are filled. New positions go into the next free slots along the position axis, the third one; then the counter moves on by their number, and what you hand back is every filled slot, old and new: a view of the buffers up to the counter.
        ### API: Slice assignment writes into a tensor in place, buf[:, :, a:b] = new; buf[:, :, :n] is a view of the first n positions; an int attribute grows with +=. `buf = torch.zeros(1, 1, 5); buf[:, :, 1:3] = torch.tensor([7., 8.]); buf[:, :, :3]` gives `[[[0., 7., 8.]]]`
        ### LINE: self.k[:, :, self.pos:self.pos + T] = k; self.v[:, :, self.pos:self.pos + T] = v; self.pos += T; return self.k[:, :, :self.pos], self.v[:, :, :self.pos]
        self.k[:, :, self.pos:self.pos + T] = k                       # (B, G, T, K) into the buffer
        self.v[:, :, self.pos:self.pos + T] = v
        self.pos += T
        return self.k[:, :, :self.pos], self.v[:, :, :self.pos]       # (B, G, S, K), S = pos
        ### END SOLUTION
