# sys.modules imported under its own name.
from sys import modules

E = modules["andrea_course.pieces.attention"]
