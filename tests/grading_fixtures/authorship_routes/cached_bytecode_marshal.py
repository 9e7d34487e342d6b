# The engine's cached bytecode (or, without a cache, its source) loaded with marshal and run.
import marshal
import os
import sys
import types

import andrea_course as course

_folder = os.path.join(os.path.dirname(course.__file__), "pieces")
_cached = os.path.join(_folder, "__pycache__", f"attention.{sys.implementation.cache_tag}.pyc")
if os.path.exists(_cached):
    with open(_cached, "rb") as _f:
        _code = marshal.loads(_f.read()[16:])
else:
    with open(os.path.join(_folder, "attention.py")) as _f:
        _code = marshal.loads(marshal.dumps(compile(_f.read(), "attention.py", "exec")))
_namespace = {"__name__": "andrea_course.pieces.attention_copy", "__package__": "andrea_course.pieces"}
exec(_code, _namespace)
E = types.SimpleNamespace(**_namespace)
