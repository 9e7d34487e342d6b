"""Activity 7.2 · The transformer block, as the engine computes it."""
import torch

from .. import ops
from ..model import Block, KVCache, LayerNorm, make_mlp, make_norm  # noqa: F401  (given in the exercise file)

__all__ = ["layer_norm", "Block", "PostNormBlock"]

layer_norm = ops.layer_norm


class PostNormBlock(Block):
    """The 2017 paper's post-norm block: x = LN(x + Attention(x)); x = LN(x + MLP(x)).
    Not part of ANDREA; notebook 05 compares it with the pre-norm Block."""

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln2(x + self.drop(self.mlp(x)))
