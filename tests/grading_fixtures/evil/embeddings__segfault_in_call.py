
# ---- EVIL: embed_lookup crashes the process with a segmentation fault (ctypes is refused as
# not the learner's own code, so the crash comes from faulthandler's test hook). ----
import faulthandler as _faulthandler


def embed_lookup(table, ids):
    _faulthandler._sigsegv()
