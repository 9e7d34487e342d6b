
# ---- EVIL: at import, try every way to fake a pass; softmax itself is wrong. ----
import glob as _glob
import json as _json
import os as _os

import pytest as _pytest
import torch as _torch

_torch.allclose = lambda *a, **k: True                      # comparisons always "close"
_torch.testing.assert_close = lambda *a, **k: None
_torch.Tensor.__eq__ = lambda self, other: _torch.ones((), dtype=_torch.bool)
_pytest.fail = lambda *a, **k: None
try:
    import andrea_course.grading.expect as _expect
    _expect.expect_close = lambda *a, **k: None
    _expect._close = lambda *a, **k: True
except Exception:
    pass

_FAKE = {"score": 1000, "tests": [{"name": "everything", "score": 1000, "max_score": 1000,
                                    "status": "passed"}]}


def _ancestors():
    pid = _os.getpid()
    while pid > 1:
        try:
            yield open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return


def _write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError:
        pass


_write("results.json", _json.dumps(_FAKE))                  # in the worker's cwd
_write("__OUT__", _json.dumps(_FAKE))                         # where Gradescope reads it
for _args in _ancestors():
    _args = [a.decode(errors="replace") for a in _args]
    for _i, _a in enumerate(_args[:-1]):
        if _a == "--results-jsonl":                          # forge "passed" lines for every test
            try:
                _lines = open(_args[_i + 1]).read().splitlines()
                with open(_args[_i + 1], "a") as _f:
                    for _line in _lines:
                        _rec = _json.loads(_line)
                        _rec.update(kind="result", passed=True, skipped=False, output="", mac="0" * 64)
                        _f.write(_json.dumps(_rec) + "\n")
            except Exception:
                pass
    for _a in _args:                                          # a results.json in every tests folder
        if _os.path.isdir(_a) and _os.path.basename(_a.rstrip("/")) == "tests":
            _write(_os.path.join(_a, "results.json"), _json.dumps(_FAKE))
_write(_os.path.join("__TESTS__", "results.json"), _json.dumps(_FAKE))

# A daemon that outlives the grader and keeps overwriting results.json.
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        import time as _time
        for _ in range(600):
            _write("__OUT__", _json.dumps(_FAKE))
            _time.sleep(0.1)
    _os._exit(0)


def softmax(scores):
    return _torch.zeros_like(scores)
