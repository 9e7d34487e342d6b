# pkgutil.resolve_name of a string.
import pkgutil

E = pkgutil.resolve_name("andrea_course.pieces:attention")
