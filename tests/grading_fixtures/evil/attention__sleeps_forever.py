
# ---- EVIL: softmax never returns (sleeping, so it costs no CPU while the limit runs out). ----
import time as _time


def softmax(scores):
    while True:
        _time.sleep(0.05)
