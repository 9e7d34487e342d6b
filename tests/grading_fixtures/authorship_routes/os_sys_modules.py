# sys.modules reached as an attribute of os.
import os

E = os.sys.modules["andrea_course.pieces.attention"]
