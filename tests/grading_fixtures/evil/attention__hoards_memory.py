
# ---- EVIL: softmax keeps 64 MiB blocks, written, until 4 GiB or the memory runs out. ----
import torch as _torch


def softmax(scores):
    hoard = []
    for _ in range(64):
        hoard.append(_torch.ones(16 * 2**20))
    return scores
