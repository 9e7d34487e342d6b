
# ---- EVIL: softmax never returns; scale_scores calls sys.exit. ----
import sys as _sys


def softmax(scores):
    while True:
        pass


def scale_scores(scores, d_head):
    _sys.exit("done")
