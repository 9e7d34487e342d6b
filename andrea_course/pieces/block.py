"""Activity 7.2 · The transformer block, as the engine computes it."""
import torch
import torch.nn.functional as F

from ..engine import ops
from ..engine.model import Block, KVCache, LayerNorm, make_mlp, make_norm  # noqa: F401  (given in the exercise file)
from ..lessons import lesson

__all__ = list(lesson("block").pieces)     # the pieces the learner writes (lessons.py)

layer_norm = ops.layer_norm


def dropout(x: torch.Tensor, p: float, training: bool, generator: torch.Generator | None = None) -> torch.Tensor:
    """PyTorch's own F.dropout, what the engine's nn.Dropout runs. F.dropout takes no generator:
    a given one seeds torch's global generator, forked so that the global draws are left as they were."""
    if generator is None:
        return F.dropout(x, p, training)
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        torch.manual_seed(int(torch.randint(2 ** 62, (), generator=generator)))
        return F.dropout(x, p, training)


class PostNormBlock(Block):
    """The 2017 paper's post-norm block: x = LN(x + Attention(x)); x = LN(x + MLP(x)).
    Not part of ANDREA; notebook 05 compares it with the pre-norm Block."""

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        x = self.ln1(x + self.drop(self.attn(x, cache)))
        return self.ln2(x + self.drop(self.mlp(x)))
