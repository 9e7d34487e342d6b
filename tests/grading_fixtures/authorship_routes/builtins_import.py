# sys.modules reached through builtins' __import__, its name built at run time.
import builtins

E = getattr(builtins, "__imp" + "ort__")("sys").modules["andrea_course.pieces.attention"]
