
# ---- EVIL: embed_lookup dereferences a null pointer. ----
import ctypes as _ctypes


def embed_lookup(table, ids):
    return _ctypes.string_at(0)
