
# ---- EVIL: gelu_tanh ends the process; MLP.forward allocates 50 GB. ----
import os as _os

import torch as _torch


def gelu_tanh(x):
    _os._exit(0)


class MLP(MLP):                                  # noqa: F811  (the reference's, with a greedy forward)
    def forward(self, x):
        hoard = _torch.ones(50 * 2**30, dtype=_torch.uint8)
        return x + hoard[0]
