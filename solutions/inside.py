"""Activity 11 · Inside your model: forward hooks read what each module computes, and four probes
look at a trained ANDREA from the inside: its residual stream, its attention patterns, the logit
lens and the induction score of every head.

Each probe takes a classic ANDREA (learned positions, as many key/value heads as query heads),
runs it without gradients, and leaves it as it found it: every hook it registers is removed,
even when the forward pass raises.
"""
import math

import torch
import torch.nn as nn
from andrea_course.engine.model import ANDREA   # given: the engine's model (andrea_course/engine/model.py)


def residual_stream(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> the residual stream, (L + 1, B, T, D): entry 0 is what model.embed returns
    (token plus position embeddings), entry l + 1 what block l returns.

    Register a forward hook on model.embed and on each of model.blocks, run the model once under
    torch.no_grad(), and remove every hook in a `finally:` so that none stays behind.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Forward hooks on the embeddings and on every block record their outputs during one pass.
    ### HINT: A forward hook is a function the module calls after its forward with (module, inputs, output); it can keep the output in a list. Put one on the embedding module and one on every block, in the order the stream passes through them, run the whole model once without gradients, and stack what was recorded. Registering returns a handle: remove each handle whether or not the pass succeeded.
    ### API: h = module.register_forward_hook(fn) with fn(module, inputs, output), and h.remove() takes it off; a try: block with a finally: block; torch.no_grad(); torch.stack(list_of_tensors). `lin = torch.nn.Linear(2, 2); seen = []; h = lin.register_forward_hook(lambda m, i, o: seen.append(o)); lin(torch.ones(1, 2)); h.remove(); len(seen)` gives `1`
    ### LINE: seen = []; handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]; try: with torch.no_grad(): model(ids) finally: for h in handles: h.remove(); return torch.stack(seen)
    seen = []
    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out)) for m in [model.embed, *model.blocks]]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(seen)                                           # (L + 1, B, T, D)
    ### END SOLUTION


def attention_patterns(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> the attention weights of every head, (L, B, H, T, T): entry [l, b, h, i, j]
    is how much query i of head h in block l attends to key j (0 for j > i; each row sums to 1).

    A hook sees a module's inputs and output, not the weights inside it. So record the input of
    each block's attention (a forward pre-hook on block.attn: the normalised stream, (B, T, D)),
    then recompute the weights from it with the module's own projection block.attn.qkv, which
    gives q, k and v side by side, D features each: softmax of q·kᵀ/√K over the visible keys.
    H and K come from model.cfg (n_heads, d_head).
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Pre-hooks record each attention's input; recompute its causal softmax of q·kᵀ/√K.
    ### HINT: Record what each block's attention module receives (a pre-hook runs before the forward and sees the inputs as a tuple), during one pass without gradients, removing the hooks afterwards. For each recorded input, project it with that module's own query-key-value layer, keep the query and key parts, split each into heads as in notebook 03, and compute the scaled scores, the causal mask and the softmax over the keys exactly as in notebook 02. The input to use is the normalised one the attention sees, not the block's own input.
    ### API: handle = module.register_forward_pre_hook(fn) with fn(module, args), args[0] the input; t.split([D, D, D], dim=-1); t.view(B, T, H, K).transpose(1, 2); torch.ones(T, T, dtype=torch.bool).triu(1) is True above the diagonal; scores.masked_fill(mask, float("-inf")); torch.softmax(x, dim=-1). `torch.ones(3, 3, dtype=torch.bool).triu(1).sum()` gives `3`
    ### LINE: for each block and the input x its pre-hook recorded, with H, K = model.cfg.n_heads, model.cfg.d_head and B, T = ids.shape: q, k, _ = block.attn.qkv(x).split([H * K] * 3, dim=-1); q, k = (t.view(B, T, H, K).transpose(1, 2) for t in (q, k)); scores = (q @ k.transpose(-2, -1) / math.sqrt(K)).masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf")); weights = torch.softmax(scores, dim=-1)
    inputs = []
    handles = [block.attn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0])) for block in model.blocks]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    H, K = model.cfg.n_heads, model.cfg.d_head
    B, T = ids.shape
    future = torch.ones(T, T, dtype=torch.bool, device=ids.device).triu(1)
    patterns = []
    with torch.no_grad():
        for block, x in zip(model.blocks, inputs):                     # x: (B, T, D)
            q, k, _ = block.attn.qkv(x).split([H * K] * 3, dim=-1)     # (B, T, D) each
            q, k = (t.view(B, T, H, K).transpose(1, 2) for t in (q, k))   # (B, H, T, K)
            scores = (q @ k.transpose(-2, -1) / math.sqrt(K)).masked_fill(future, float("-inf"))
            patterns.append(torch.softmax(scores, dim=-1))             # (B, H, T, T)
    return torch.stack(patterns)                                       # (L, B, H, T, T)
    ### END SOLUTION


def logit_lens(model: nn.Module, stream: torch.Tensor) -> torch.Tensor:
    """The residual stream (L + 1, B, T, D) -> what each layer's stream would predict, (L + 1, B,
    T, V) logits: each entry read out as the model reads its last one, through the final norm
    model.ln_f and the output matrix model.output_weight() (V, D). The last entry is then the
    model's own logits.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Read every layer's stream out through the final norm and the output matrix.
    ### HINT: The model turns its last stream into logits in two steps: the final normalisation, then a product with the output matrix. Apply the same two steps to the stream after every layer, without gradients. Which matrix is the output one depends on whether the head is tied to the token table, so ask the model for it rather than picking a table yourself.
    ### API: model.ln_f(x) works on any leading axes; model.output_weight() is (V, D), so x @ W.T gives (..., V); torch.no_grad(). `(torch.ones(5, 2, 3, 4) @ torch.ones(7, 4).T).shape` gives `(5, 2, 3, 7)`
    ### LINE: with torch.no_grad(): return model.ln_f(stream) @ model.output_weight().T
    with torch.no_grad():
        return model.ln_f(stream) @ model.output_weight().T            # (L + 1, B, T, V)
    ### END SOLUTION


def induction_scores(patterns: torch.Tensor, period: int) -> torch.Tensor:
    """Attention weights (L, B, H, T, T) on sequences that repeat with the given period (token t
    equals token t - period for every t >= period) -> (L, H): each head's induction score.

    An induction head, at a token of the second copy, attends to the token that FOLLOWED the
    same token in the first copy: query t to key t - period + 1. The score is that weight
    averaged over the batch and over the queries t = period .. T - 1.
    """
    ### BEGIN SOLUTION
    ### SUMMARY: Each repeat query's weight on the key after its earlier copy, averaged.
    ### HINT: For every query in the repeated part, one key matters: not the earlier copy of the same token, but the position right after it, whose token comes next. Pick that single weight for each such query (an index on the query axis and a matching index on the key axis together), then average over the batch and over those queries, keeping one number per layer and head.
    ### API: indexing with two index tensors of the same length picks pairs: w[..., rows, cols]; torch.arange(a, b); .mean(dim=(1, 3)) averages two axes at once. `torch.arange(9).view(3, 3)[torch.tensor([1, 2]), torch.tensor([0, 1])]` gives `[3, 7]`
    ### LINE: t = torch.arange(period, patterns.shape[-2]); return patterns[..., t, t - period + 1].mean(dim=(1, 3))
    t = torch.arange(period, patterns.shape[-2], device=patterns.device)    # the queries of the repeat
    return patterns[..., t, t - period + 1].mean(dim=(1, 3))           # (L, B, H, P') -> (L, H)
    ### END SOLUTION
