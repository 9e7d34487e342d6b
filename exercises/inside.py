# Your work for notebooks/10_inside.ipynb: write your code where a `raise NotImplementedError`
# stands, then delete that line. check() in the notebook and `make grade` grade what you wrote.
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
    # Hint: Forward hooks on the embeddings and on every block record their outputs during one pass.
    # More help: hint("inside.residual_stream") in the notebook, one level at a time.
    raise NotImplementedError('inside.residual_stream: not implemented yet. Hint: Forward hooks on the embeddings and on every block record their outputs during one pass.')


def attention_patterns(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """ids (B, T) -> the attention weights of every head, (L, B, H, T, T): entry [l, b, h, i, j]
    is how much query i of head h in block l attends to key j (0 for j > i; each row sums to 1).

    A hook sees a module's inputs and output, not the weights inside it. So record the input of
    each block's attention (a forward pre-hook on block.attn: the normalised stream, (B, T, D)),
    then recompute the weights from it with the module's own projection block.attn.qkv, which
    gives q, k and v side by side, D features each: softmax of q·kᵀ/√K over the visible keys.
    H and K come from model.cfg (n_heads, d_head).
    """
    # Hint: Pre-hooks record each attention's input; recompute its causal softmax of q·kᵀ/√K.
    # More help: hint("inside.attention_patterns") in the notebook, one level at a time.
    raise NotImplementedError('inside.attention_patterns: not implemented yet. Hint: Pre-hooks record each attention\'s input; recompute its causal softmax of q·kᵀ/√K.')


def logit_lens(model: nn.Module, stream: torch.Tensor) -> torch.Tensor:
    """The residual stream (L + 1, B, T, D) -> what each layer's stream would predict, (L + 1, B,
    T, V) logits: each entry read out as the model reads its last one, through the final norm
    model.ln_f and the output matrix model.output_weight() (V, D). The last entry is then the
    model's own logits.
    """
    # Hint: Read every layer's stream out through the final norm and the output matrix.
    # More help: hint("inside.logit_lens") in the notebook, one level at a time.
    raise NotImplementedError('inside.logit_lens: not implemented yet. Hint: Read every layer\'s stream out through the final norm and the output matrix.')


def induction_scores(patterns: torch.Tensor, period: int) -> torch.Tensor:
    """Attention weights (L, B, H, T, T) on sequences that repeat with the given period (token t
    equals token t - period for every t >= period) -> (L, H): each head's induction score.

    An induction head, at a token of the second copy, attends to the token that FOLLOWED the
    same token in the first copy: query t to key t - period + 1. The score is that weight
    averaged over the batch and over the queries t = period .. T - 1.
    """
    # Hint: Each repeat query's weight on the key after its earlier copy, averaged.
    # More help: hint("inside.induction_scores") in the notebook, one level at a time.
    raise NotImplementedError('inside.induction_scores: not implemented yet. Hint: Each repeat query\'s weight on the key after its earlier copy, averaged.')
