"""Is a graded piece the learner's own? Three checks: before the file runs, after it ran, and
while the piece's graded tests run.

The package holds a working version of every piece (the engine, pieces/ and model.py), and the
grading worker must import it to stand in for the pieces a graded piece calls. So a submission
could hand in the engine's piece as its own, and Python offers endless routes to an object
(relative imports, getattr with built names, sys.modules, pickle, gc, threads, exec of the
engine's source...). A list of forbidden names cannot decide what code reaches; this module
makes the engine's own version of the graded piece unusable instead:

- check_source (before the file runs): a friendly early message for the plain cases: an import
  of the course's inner modules or of the answer key, an engine object reached under the name
  of one of the file's own pieces, __import__, sys.modules and the like. It is not the boundary,
  so it stays narrow (an engine object of another activity, which isolation hands the learner
  anyway, passes).
- check_object (after it ran): a graded function is defined in the learner's file; a graded
  class defines its own forward there (a class that is not a module: its own methods). A
  Triton kernel is judged by the Python function it wraps.
- forbid_engine (while the piece's graded tests run, called by the grading worker before it
  loads the learner's file): every function and class of the engine that implements THAT piece
  (engine_versions: pieces/, model.py, ops.py, the Triton back-end and its twins) stops working
  in place: its code is swapped for one that raises EngineRefused ("the engine's softmax is not
  yours to hand in while attention.softmax is graded: write it"), so every route to the object
  ends in the refusal. Copies are refused too: an audit hook (sys.addaudithook, which nothing can
  remove) refuses to run code compiled from the engine's text (exec of its source, a reload, its
  .pyc through marshal, a function built from its code) and to open its source files; where the
  kernel has Landlock, the worker and every process it starts cannot read those files at all
  (else starting another program is refused, Triton's own compilers excepted). PyTorch's own ops
  stay allowed: torch.softmax or F.scaled_dot_product_attention in a learner's file is honest.

In the grading worker every caller is learner code or the engine standing in for another piece,
so the refusal is unconditional and permanent (the worker ends with its test). In a process
that also computes the tests' expected values (in-process pytest), forbid_engine(...,
learner=folder) refuses only calls made from the learner's files or from threads they started,
and lift() undoes it; that mode is a convenience, the worker is the boundary.

What none of this sees: a learner who types (or pastes) the engine's code into their file; the
similarity report (grading/similarity.py) lists such copies for the instructor. Nor can an
in-process guard hold against native code (ctypes writing the interpreter's memory, a compiled
extension): the sandbox still contains such code, and the similarity report still sees its text.
"""
from __future__ import annotations

import ast
import dis
import importlib
import importlib.util
import inspect
import linecache
import os
import pathlib
import sys
import threading
import types
import warnings
from pathlib import Path

from . import contracts, pieces

INNER = ("andrea_course.pieces", "andrea_course.overlay", "andrea_course.activity_tests", "andrea_course.grading",
         "andrea_course.notebook", "andrea_course.authorship", "solutions")
REACHING = ("importlib", "gc", "inspect", "ctypes")
DUNDERS = {"__import__", "__builtins__", "__subclasses__", "__globals__", "__loader__", "__spec__"}


class NotYours(ValueError):
    """A piece that is not the learner's own work; the message says why."""


class EngineRefused(BaseException):
    """The engine's own version of the piece being graded was called (or a copy of its code run,
    or another program started) from the learner's code. A BaseException, so that `except
    Exception` in learner code does not hide why the test failed; each one is remembered for
    refused_note (a refusal in a thread the learner started, say)."""

    def __init__(self, message: str = ""):
        super().__init__(message)
        _REFUSALS.append(str(message))


_REFUSALS: list[str] = []


def refused_note(exc: BaseException) -> str:
    """For an error that is not itself a refusal: why, if the engine was refused earlier in this
    process (a worker serves one test), else ""."""
    if isinstance(exc, EngineRefused) or not _REFUSALS:
        return ""
    return f" (earlier in this test: {_REFUSALS[-1]})"


# ----------------------------------------------------------------------------- before: the source
def _piece_names() -> set[str]:
    return {name for activity in pieces.ACTIVITIES for name in pieces.names(activity)}


def check_source(source: str, path: Path) -> None:
    """Refuse a learner's file that plainly reaches for the course's own pieces (see the module doc)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return                                    # loading it will report the syntax error
    course_aliases, problems = set(), []
    # An engine object imported by name is refused under the name of a piece of this file's own
    # activity: model.py may not import the engine's KVCache, multihead.py is given it (any piece
    # it would stand in for is graded with the engine's version anyway, and check_object refuses
    # an import handed in under another name).
    own = set(pieces.names(path.stem)) if path.stem in pieces.ACTIVITIES else _piece_names()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(INNER) or a.name.split(".")[0] in REACHING:
                    problems.append(f"line {node.lineno} imports {a.name}")
                if a.name.split(".")[0] == "andrea_course":
                    course_aliases.add(a.asname or "andrea_course")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith(INNER) or node.module.split(".")[0] in REACHING:
                problems.append(f"line {node.lineno} imports from {node.module}")
            elif node.module.split(".")[0] == "andrea_course":
                for a in node.names:
                    if ({a.name, a.asname} & own) or a.name.startswith(("pieces", "overlay", "activity_tests", "grading")):
                        problems.append(f"line {node.lineno} imports {a.name} from {node.module} "
                                        f"(the engine's, not yours)")
                    course_aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Name) and node.id in DUNDERS:
            problems.append(f"line {node.lineno} uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in DUNDERS:
                problems.append(f"line {node.lineno} uses .{node.attr}")
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id == "sys" and node.attr == "modules":
                problems.append(f"line {node.lineno} uses sys.modules")
    for node in ast.walk(tree):                   # engine objects reached under the name of one of this file's pieces
        if isinstance(node, ast.Attribute) and node.attr in own:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in course_aliases:
                problems.append(f"line {node.lineno} uses the engine's {node.attr}")
    if problems:
        raise NotYours(f"{path.name} reaches for the course's own code, which is not yours to hand in: "
                       + "; ".join(sorted(set(problems))) + ". Write the piece in your file.")


# ----------------------------------------------------------------------------- after: the object
def python_function(obj):
    """The Python function a Triton kernel (triton.jit's JITFunction, or its interpreter's
    InterpretedFunction) wraps; anything else as it is."""
    inner = getattr(obj, "fn", None) if type(obj).__module__.startswith("triton") else None
    return inner if isinstance(inner, types.FunctionType) else obj


def check_object(obj, name: str, path: Path) -> None:
    """A graded function must be defined in the learner's file; a graded class must define its
    forward (not a module: its methods) in its own body there."""
    where = str(path)
    obj = python_function(obj)
    if isinstance(obj, type):
        # a module: its forward, in its own body; any other class (a KV cache): every method it
        # has, its bases' included (none inherited from the engine)
        if hasattr(obj, "forward"):
            codes, what = [getattr(vars(obj).get("forward"), "__code__", None)], "forward"
        else:
            codes = [f.__code__ for k in obj.__mro__[:-1] for f in vars(k).values() if hasattr(f, "__code__")]
            what = "methods"
        if not codes or any(code is None or code.co_filename != where for code in codes):
            raise NotYours(f"{name} in {path.name} does not define its own {what}: write it in your file")
    elif callable(obj):
        code = getattr(obj, "__code__", None)
        if code is None or code.co_filename != where:
            raise NotYours(f"{name} is not defined in {path.name} (it comes from elsewhere): write it in your file")


# ----------------------------------------------------------------------------- during: the engine's version
# Methods of an engine class that the exercise gives rather than asks for (the learner may use
# the engine's): MultiHeadAttention.cache_and_share, and ANDREA's given_model_methods(). A
# class's private helpers (one leading underscore) serve given methods and are never asked for.
# (contracts.py: each piece's row, `given`.)
GIVEN = {piece: row.given for piece, row in contracts.declared().items() if row.given}

# Other engine code that computes the same piece besides pieces/ and the op slot's back-ends
# (backends.TABLE): a whole module ("package.module") or one function ("package.module:name"),
# each piece's `twins` in contracts.py.
TWINS = {piece: row.twins for piece, row in contracts.declared().items() if row.twins}


def _given(exercise: str) -> set[str]:
    names = set(GIVEN.get(exercise, ()))
    if exercise == "model.ANDREA":
        from .engine.model import given_model_methods
        names |= {getattr(f, "__name__", "") for f in given_model_methods()}
    return names


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _class_functions(cls: type, skip: set[str] = frozenset()) -> list[tuple[str, types.FunctionType]]:
    """(label, function) for every function defined in cls's own body (methods, static and
    class methods, properties), given and private ones left out."""
    out = []
    for attr, value in vars(cls).items():
        if attr in skip or _is_private(attr):
            continue
        inner = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        found = [inner.fget, inner.fset, inner.fdel] if isinstance(inner, property) else [inner]
        for f in found:
            if isinstance(f, types.FunctionType) and f.__qualname__.startswith(cls.__qualname__ + "."):
                out.append((f"{cls.__name__}.{attr}", f))
    return out


def _private_helpers(fn: types.FunctionType) -> list[tuple[str, types.FunctionType]]:
    """Module-level private functions `fn` calls, transitively (count_parameters' _count_tensors)."""
    found, todo, seen = [], [fn], {fn}
    while todo:
        f = todo.pop()
        codes, names = [f.__code__], set()
        while codes:
            c = codes.pop()
            names.update(c.co_names)
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        for name in names:
            g = f.__globals__.get(name)
            if (_is_private(name) and isinstance(g, types.FunctionType) and g not in seen
                    and g.__module__ == fn.__module__):
                seen.add(g)
                found.append((name, g))
                todo.append(g)
    return found


def _module_objects(module: types.ModuleType) -> list[tuple[str, object]]:
    """Every function, class method and Triton kernel defined in `module` itself."""
    out = []
    for name, value in vars(module).items():
        inner = python_function(value)
        if getattr(inner, "__module__", None) != module.__name__:
            continue
        if isinstance(value, type):
            out += _class_functions(value)
        elif inner is not value or isinstance(value, types.FunctionType):
            out.append((name, value))
    return out


def _twins(exercise: str, piece) -> list[tuple[str, object]]:
    from .engine import backends
    specs = list(TWINS.get(exercise, ()))
    for slot, row in backends.TABLE.items():          # an op slot's piece: every back-end's version
        try:
            torch_version = backends.op(slot, "torch")
        except (ImportError, KeyError):
            continue
        if torch_version is piece:
            specs += [target if backend == "torch" else target.partition(":")[0] for backend, target in row.items()]
    out = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError:                          # Triton missing: nothing to reach either
            continue
        where = module_name.removeprefix("andrea_course.")
        found = [(attr, getattr(module, attr))] if attr else _module_objects(module)
        out += [(f"{where}.{label}", obj) for label, obj in found]
    return out


def engine_versions(activity: str, name: str) -> list[tuple[str, object]]:
    """(label, object) for every engine function, method and Triton kernel that implements the
    piece `activity.name`; [] for a name that is not a graded piece (a kernel's launcher)."""
    if activity not in pieces.ACTIVITIES or name not in pieces.names(activity):
        return []
    exercise = f"{activity}.{name}"
    piece = pieces.get(activity, name)
    if isinstance(piece, type):
        found = _class_functions(piece, _given(exercise))
    else:
        found = [(name, piece)]
        inner = python_function(piece)
        if isinstance(inner, types.FunctionType):
            found += _private_helpers(inner)
    found += _twins(exercise, piece)
    out, seen = [], set()
    for label, obj in found:
        if id(python_function(obj)) not in seen:
            seen.add(id(python_function(obj)))
            out.append((label, obj))
    return out


def _source_files(objects, activity: str) -> list[str]:
    """The files whose text is the engine's version of the piece: the modules that define the
    objects, the activity's pieces/ file, and their cached bytecode."""
    modules = {getattr(python_function(obj), "__module__", None) for _, obj in objects}
    modules.add(pieces.module(activity).__name__)
    files = []
    for module in sorted(m for m in modules if m in sys.modules):
        source = getattr(sys.modules[module], "__file__", None)
        if not source:
            continue
        files.append(os.path.realpath(source))
        for level in ("", "1", "2"):
            try:
                files.append(os.path.realpath(importlib.util.cache_from_source(source, optimization=level)))
            except (NotImplementedError, ValueError):
                pass
    return sorted(set(files))


# ----- the refusal that replaces an engine function's code
_GATE = "__andrea_gate__"


class _Refusal:
    """Stands where an engine function's code was (the worker: no way back to the original)."""
    __slots__ = ("message", "error")

    def __init__(self, message: str):
        self.message, self.error = message, EngineRefused

    def check(self) -> None:
        raise self.error(self.message)

    def __call__(self, args, kwargs):
        raise self.error(self.message)


class _Gate:
    """In-process: `original` runs unless a learner's file is on the stack or the call comes
    from a thread other than the one that installed the guard."""

    def __init__(self, original, message: str, folder: str, thread: int):
        self.original, self.message, self.folder, self.thread = original, message, folder, thread

    def check(self) -> None:
        if _learner_calling(self.folder, self.thread):
            raise EngineRefused(self.message)

    def __call__(self, args, kwargs):
        self.check()
        return self.original(*args, **kwargs)


class _Launch:
    """A Triton kernel's launch (its instance's `run`), behind a gate."""

    def __init__(self, gate, run):
        self.gate, self.run = gate, run

    def __call__(self, *args, **kwargs):
        self.gate.check()
        return self.run(*args, **kwargs)


def _learner_calling(folder: str, thread: int) -> bool:
    if threading.get_ident() != thread:
        return True
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith(folder):
            return True
        frame = frame.f_back
    return False


def _refusing_code(fn: types.FunctionType, gate, filename: str) -> types.CodeType:
    """A code object for `fn` (its free variables kept, so it fits fn's closure) whose body is
    `return gate(args, kwargs)`; its file name is not a file, so inspect.getsource(fn) fails."""
    free = fn.__code__.co_freevars
    a, k = "args", "kwargs"
    while a in free or k in free:
        a, k = "_" + a, "_" + k
    lines = ["def _outer():", *[f"    {v} = None" for v in free], f"    def refused(*{a}, **{k}):"]
    if free:
        lines.append(f"        (lambda: ({', '.join(free)},))")
    lines += [f"        return {_GATE!r}({a}, {k})", "    return refused"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # "'str' object is not callable": replaced below
        module = compile("\n".join(lines), filename, "exec", dont_inherit=True)
    outer = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    consts = tuple(gate if isinstance(c, str) and c == _GATE else c for c in inner.co_consts)
    return inner.replace(co_consts=consts, co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname)


# ----- keys of code objects: compiled from the engine's text, or the same code at other lines
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes, tuple, frozenset, type(...)})


_OP = {name: dis.opmap.get(name, -1) for name in ("CACHE", "LOAD_METHOD", "LOAD_ATTR", "LOAD_GLOBAL")}


def _code_keys(code, CODE=types.CodeType, PLAIN=_PLAIN, CACHE=_OP["CACHE"], METHOD=_OP["LOAD_METHOD"],
               ATTR=_OP["LOAD_ATTR"], GLOBAL=_OP["LOAD_GLOBAL"], isinstance=isinstance, type=type, repr=repr,
               tuple=tuple, bytes=bytes, bytearray=bytearray, range=range, len=len):
    """(exact, free): `exact` is the same for code compiled from the same text at the same lines
    (whatever the file name); `free` ignores lines, local names, the docstring and how a call
    of an attribute compiles (a method call, or an attribute of an imported module: the same
    text compiles either way in CPython 3.11, by whether the module imports the name), so a
    function cut out of the engine's source and compiled alone has the engine's `free` key.
    Reads no global name (it runs inside the worker's audit hook: see _guard_hook)."""
    consts = []
    for k in code.co_consts:
        if isinstance(k, CODE):
            consts.append(("code", k.co_code, k.co_names))
        elif type(k) in PLAIN:
            consts.append((type(k).__name__, repr(k)))
        else:
            consts.append(("object", type(k).__name__))
    raw, ops = code.co_code, bytearray()
    for i in range(0, len(raw) - 1, 2):
        op, arg = raw[i], raw[i + 1]
        if op == CACHE:
            continue
        if op == METHOD:
            op = ATTR
        elif op == GLOBAL:
            arg >>= 1                                  # the low bit only says "push NULL too"
        ops.append(op)
        ops.append(arg)
    counts = (code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)
    doc = 1 if code.co_flags & 0x2 else 0               # CO_NEWLOCALS: a function, co_consts[0] is its docstring slot
    exact = ("exact", code.co_name, code.co_firstlineno, raw, code.co_linetable, code.co_exceptiontable,
             code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, counts, tuple(consts))
    free = ("free", bytes(ops), code.co_names, counts, tuple(consts[doc:]))
    return exact, free


_WATCHED = frozenset({"exec", "function.__new__", "object.__setattr__", "open", "subprocess.Popen", "os.exec",
                      "os.posix_spawn", "os.spawn", "os.system"})


def _compiled_from_its_file(code, DENIED=frozenset(), CODE=types.CodeType, PLAIN=_PLAIN, BASE=BaseException,
                            isinstance=isinstance, type=type, stat=os.stat, osopen=os.open, read=os.read,
                            close=os.close, RDONLY=os.O_RDONLY, compile=compile):
    """Whether `code` is what its own file (not one of the engine's) compiles to, every constant
    plain. Such a module, imported from its file, is judged by the exact key only: honest code may
    match the engine's at other lines. Self-contained like _guard_hook."""
    name = code.co_filename
    try:
        st = stat(name)
        if (st.st_dev, st.st_ino) in DENIED or st.st_size >= (16 << 20):
            return False
        todo = [code]
        while todo:
            for k in todo.pop().co_consts:
                if isinstance(k, CODE):
                    todo.append(k)
                elif type(k) not in PLAIN:
                    return False
        fd = osopen(name, RDONLY)                      # (os.open, not io: nothing here imports)
        try:
            data = read(fd, st.st_size + 1)
        finally:
            close(fd)
        return compile(data, name, "exec", 0, True) == code
    except BASE:
        return False


def _guard_hook(event, args, WHAT="", EXACT=frozenset(), FREE=frozenset(), DENIED=frozenset(), PROTECTED=frozenset(),
                SPAWN=None, KEYS=None, NOTES=None, GENUINE=None, WATCHED=_WATCHED, REFUSED=EngineRefused,
                PERMISSION=PermissionError, CODE=types.CodeType, OSERROR=OSError,
                VALUE=ValueError, TYPE=TypeError, isinstance=isinstance, id=id, len=len,
                PATHS=frozenset({pathlib.PosixPath, pathlib.PurePosixPath, pathlib.WindowsPath, pathlib.PureWindowsPath,
                                 pathlib.Path, pathlib.PurePath}),
                type=type, str=str, bytes=bytes, int=int, stat=os.stat, fstat=os.fstat):
    """The worker's audit hook for one graded piece. Everything it uses, its helpers included, is
    bound here as a default and it reads no global name (a test checks its bytecode), so rebinding
    names in this module or in builtins changes nothing; assigning its __code__ or __defaults__,
    or its helpers', is refused by itself."""
    if event not in WATCHED:
        return
    why = (f"a copy of the engine's code for {WHAT} is not yours to hand in while {WHAT} is graded: "
           f"write it")
    if event == "open":
        target = args[0]
        if type(target) in PATHS:                     # a pathlib path: its text is what open() uses
            target = str(target)
        elif type(target) not in (str, bytes, int):   # another os.PathLike could answer twice, differently
            raise PERMISSION(f"open() of a {type(target).__name__} while {WHAT} is graded: give a str or a "
                             f"pathlib.Path")
        try:
            st = fstat(target) if type(target) is int else stat(target)
        except (OSERROR, VALUE, TYPE):
            return
        if (st.st_dev, st.st_ino) in DENIED:
            why = f"the engine's source ({target}) is not yours to read while {WHAT} is graded: write the piece yourself"
            NOTES.append(why)                          # linecache and inspect hide the error itself
            raise PERMISSION(why)
        return
    if event == "object.__setattr__":
        target, name, value = args
        if id(target) in PROTECTED:
            raise REFUSED(f"the engine's code for {WHAT} cannot be changed while {WHAT} is graded "
                          f"(tried to set {name})")
        if name != "__code__" or not isinstance(value, CODE):
            return
        codes, genuine = [value], False
    elif event == "function.__new__":
        if not isinstance(args[0], CODE):
            return
        codes, genuine = [args[0]], False
    elif event == "exec":
        if not isinstance(args[0], CODE):
            return
        # anything but a module's code compiled from its own file (exec of a string, marshal) is
        # judged by the free key too
        codes, genuine = [args[0]], GENUINE(args[0])
    else:                                              # starting another program
        if SPAWN is None:
            return
        if event == "os.system":
            SPAWN([], None)
        exe, env = (args[0] or args[1], args[3]) if event == "subprocess.Popen" else \
            (args[1], args[3]) if event == "os.spawn" else (args[0], args[2])
        if not isinstance(exe, (str, bytes)):
            exe = exe[0] if len(exe) else ""
        SPAWN([exe], env)
        return
    while codes:
        code = codes.pop()
        exact, free = KEYS(code)
        if exact in EXACT or (not genuine and free in FREE):
            raise REFUSED(why)
        for k in code.co_consts:
            if isinstance(k, CODE):
                codes.append(k)


def _spawn_check(programs, env, WHAT="", ALLOWED=frozenset(), TRITON="", REFUSED=EngineRefused,
                 OSERROR=OSError, VALUE=ValueError, TYPE=TypeError, isinstance=isinstance, str=str, bytes=bytes,
                 stat=os.stat, exec_path=os.get_exec_path, getframe=sys._getframe):
    """Refuse to start a program (`programs`: the candidate paths or names, PATH searched with
    `env`) unless it is one of Triton's own (its bundled compilers) or Triton's own code starts
    it (its C compiler, ldconfig): a fresh Python would not be guarded. Self-contained like
    _guard_hook."""
    for program in programs:
        name = program.decode() if isinstance(program, bytes) else str(program)
        for folder in ([""] if "/" in name else exec_path(env)):
            try:
                st = stat(folder + "/" + name if folder else name)
            except (OSERROR, VALUE, TYPE):
                continue
            if (st.st_dev, st.st_ino) in ALLOWED:
                return
    if TRITON:
        frame = getframe(1)
        while frame is not None:
            if frame.f_code.co_filename.startswith(TRITON):
                return
            frame = frame.f_back
    shown = ", ".join(p.decode() if isinstance(p, bytes) else str(p) for p in programs) or "a shell"
    raise REFUSED(f"starting another program ({shown}) is refused while {WHAT} is graded: "
                  f"compute the piece in your own code")


_FORK_EXEC = "__andrea_fork_exec__"
_SPAWN_CHECK = "__andrea_spawn_check__"


def _gated_fork_exec(original, check) -> types.FunctionType:
    """_posixsubprocess.fork_exec (what subprocess and multiprocessing start programs with,
    unaudited) behind `check`; the original is kept in the code's constants, not in a name."""
    source = (f"def fork_exec(*args):\n    {_SPAWN_CHECK!r}(args[1], None)\n"
              f"    return {_FORK_EXEC!r}(*args)\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = compile(source, "<the grading worker's fork_exec>", "exec", dont_inherit=True)
    code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    consts = tuple(check if c == _SPAWN_CHECK else original if c == _FORK_EXEC else c
                   for c in code.co_consts)
    return types.FunctionType(code.replace(co_consts=consts), {"__builtins__": {}}, "fork_exec")


def _private_copy(fn: types.FunctionType, defaults: tuple) -> types.FunctionType:
    """fn with its own empty globals (a global name it read would fail loudly) and `defaults`."""
    return types.FunctionType(fn.__code__, {"__builtins__": {}}, fn.__name__, defaults)


def _hook_for(what: str, exact, free, denied, protected, spawn):
    keys = _private_copy(_code_keys, _code_keys.__defaults__)
    genuine = _private_copy(_compiled_from_its_file, (frozenset(denied),) + _compiled_from_its_file.__defaults__[1:])
    head, tail = (what, frozenset(exact), frozenset(free), frozenset(denied)), _guard_hook.__defaults__[9:]
    hook = _private_copy(_guard_hook, head + (frozenset(), spawn, keys, _REFUSALS, genuine) + tail)
    hook.__defaults__ = head + (frozenset(protected) | {id(hook), id(keys), id(genuine)}, spawn, keys, _REFUSALS,
                                genuine) + tail
    return hook


# ----- Landlock: the engine's files unreadable by the worker and whatever it starts
_LANDLOCK = {"create": 444, "add": 445, "restrict": 446}      # syscall numbers, the same on every arch
_READ_FILE, _EXECUTE = 1 << 2, 1 << 0


def _landlock_deny(files: list[str]) -> str:
    """Forbid reading `files` to this process and its future children (Landlock, Linux >= 5.13):
    everything else stays readable. Returns "" when applied, else why not."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
    except (OSError, AttributeError) as exc:
        return f"no libc ({exc})"
    if libc.syscall(_LANDLOCK["create"], None, ctypes.c_size_t(0), ctypes.c_uint32(1)) < 1:
        return f"Landlock unavailable ({os.strerror(ctypes.get_errno())})"
    denied = {os.path.realpath(f) for f in files}
    ancestors = {os.path.dirname(f) for f in denied}
    for f in list(ancestors):
        while f != os.path.dirname(f):
            f = os.path.dirname(f)
            ancestors.add(f)
    handled = ctypes.c_uint64(_READ_FILE | _EXECUTE)
    ruleset = libc.syscall(_LANDLOCK["create"], ctypes.byref(handled), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused a ruleset ({os.strerror(ctypes.get_errno())})"

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        for folder in sorted(ancestors):
            try:
                entries = os.listdir(folder)
            except OSError:
                continue
            for entry in entries:
                path = os.path.join(folder, entry)
                if path in ancestors or path in denied:
                    continue
                try:
                    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    rule = PathBeneath(_READ_FILE | _EXECUTE, fd)
                    libc.syscall(_LANDLOCK["add"], ruleset, ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
                finally:
                    os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:            # PR_SET_NO_NEW_PRIVS, required by restrict_self
            return f"no_new_privs refused ({os.strerror(ctypes.get_errno())})"
        if libc.syscall(_LANDLOCK["restrict"], ruleset, ctypes.c_uint32(0)) != 0:
            return f"Landlock refused to apply ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    return ""


def _spawn_rule(what: str) -> types.FunctionType:
    """_spawn_check for the piece `what`, with Triton's bundled programs and its folder."""
    import glob
    allowed, triton = set(), ""
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.submodule_search_locations:
        triton = os.path.realpath(list(spec.submodule_search_locations)[0]) + os.sep
        for path in glob.glob(os.path.join(triton, "backends", "*", "bin", "*")):
            try:
                st = os.stat(path)
            except OSError:
                continue
            allowed.add((st.st_dev, st.st_ino))
    return _private_copy(_spawn_check, (what, frozenset(allowed), triton) + _spawn_check.__defaults__[3:])


# ----- the one entry point
class Forbidden:
    """What forbid_engine did for one piece: `labels` refused, `files` made unreadable, and how
    (`kernel`: "landlock" or why not). In-process (learner=...), lift() undoes it."""

    def __init__(self, exercise: str, labels: list[str], files: list[str], kernel: str):
        self.exercise, self.labels, self.files, self.kernel = exercise, labels, files, kernel
        self._undo: list = []
        self._hook = None

    def describe(self) -> str:
        if self._hook is not None:
            how = "refused to the learner's calls only (in-process)"
        elif self.kernel == "landlock":
            how = "refused; its source files unreadable (Landlock)"
        else:
            how = f"refused; its source files refused to open (no Landlock: {self.kernel})"
        return f"{self.exercise}: the engine's {', '.join(self.labels)} {how}"

    def lift(self) -> None:
        for fn, code, signature in reversed(self._undo):
            if code == "run":                          # a kernel's launch
                vars(fn).pop("run", None)
                continue
            fn.__code__ = code
            if signature is None:
                vars(fn).pop("__signature__", None)
            else:
                fn.__signature__ = signature
        self._undo.clear()
        if self._hook in _IN_PROCESS:
            _IN_PROCESS.remove(self._hook)
        _REFUSALS.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.lift()


_IN_PROCESS: list = []            # the hooks of in-process guards now in force
_DONE: dict[str, Forbidden] = {}   # worker mode: exercise -> its guard (installed once per process)


def _in_process_hook(event, args):
    if not _IN_PROCESS or event not in _WATCHED:
        return
    for hook in list(_IN_PROCESS):
        if _learner_calling(hook.__andrea_folder__, hook.__andrea_thread__):
            hook(event, args)


def forbid_engine(activity: str, name: str, *, learner: str | os.PathLike | None = None) -> Forbidden | None:
    """Make the engine's own version of the piece `activity.name` unusable (see the module doc).

    Without `learner` (the grading worker, before it loads the learner's file): for good, from
    any caller; the piece's engine source files become unreadable to this process and every
    process it starts (Landlock where the kernel has it, else an open() refused and other programs
    refused). With `learner` (a folder): only calls from files in that folder, or from a thread
    other than the caller's, are refused, no file is made unreadable, and the returned guard's
    lift() (or `with`) undoes it. Returns None for a name that is not a graded piece.
    """
    exercise = f"{activity}.{name}"
    if learner is None and exercise in _DONE:
        return _DONE[exercise]
    objects = engine_versions(activity, name)
    if not objects:
        return None
    files = _source_files(objects, activity)
    folder = os.path.realpath(os.fspath(learner)) + os.sep if learner is not None else None
    thread = threading.get_ident()
    labels, exact, free, protected, undo = [], set(), set(), set(), []
    for label, obj in objects:
        fn = python_function(obj)
        if not isinstance(fn, types.FunctionType):
            continue
        if fn.__code__.co_filename.startswith("<the engine's"):      # already refused (a shared object)
            continue
        _refuse(label, obj, fn, exercise, name, folder, thread, (exact, free, protected, undo))
        labels.append(label)
    guard = Forbidden(exercise, labels, files, "")
    if folder is None:
        _forbid_for_good(exercise, guard, files, exact, free, protected)
    else:
        _REFUSALS.clear()
        guard._undo = undo
        hook = _hook_for(exercise, exact, free, set(), protected, _spawn_rule(exercise))
        hook.__andrea_folder__, hook.__andrea_thread__ = folder, thread
        guard._hook = hook
        guard.kernel = "in-process: the grader's own calls run"
        if not _IN_PROCESS_INSTALLED:
            sys.addaudithook(_in_process_hook)
            _IN_PROCESS_INSTALLED.append(True)
        _IN_PROCESS.append(hook)
    return guard


def _refuse(label, obj, fn, exercise, name, folder, thread, keys) -> None:
    """Put a refusal in place of one engine version `fn` (of `obj`: the function, or a Triton
    kernel) of the piece: its code keys go in exact and free, its id in protected, its undoing in
    undo (keys = (exact, free, protected, undo))."""
    exact, free, protected, undo = keys
    message = (f"the engine's {label} is not yours to hand in while {exercise} is graded: write it"
               if label.split(".")[0] == name or label == name else
               f"the engine's {label} computes {exercise}, which is not yours to hand in while it is "
               f"graded: write it")
    original = fn.__code__
    for key in _code_keys(original):
        (exact if key[0] == "exact" else free).add(key)
    if folder is None:
        gate = _Refusal(message)
    else:
        shadow = types.FunctionType(original, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        shadow.__kwdefaults__ = fn.__kwdefaults__
        gate = _Gate(shadow, message, folder, thread)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    undo.append((fn, original, vars(fn).get("__signature__")))
    fn.__signature__ = signature
    fn.__code__ = _refusing_code(fn, gate, f"<the engine's {label}, refused while {exercise} is graded>")
    protected.add(id(fn))
    if obj is not fn:                              # a Triton kernel: its launch, its rewrite
        _guard_kernel(obj, fn, gate, folder, thread, message, undo)


def _forbid_for_good(exercise, guard, files, exact, free, protected) -> None:
    """forbid_engine without a learner's folder: the source files made unreadable, the audit
    hook and the fork/exec gate installed for good."""
    for path in files:
        linecache.cache.pop(path, None)
    denied = set()                               # their folders too: os.open(name, dir_fd=...) shows only the name
    for path in files + sorted({os.path.dirname(f) for f in files}):
        try:
            st = os.stat(path)
            denied.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    try:
        why = _landlock_deny(files) if files else "no file"
    except (OSError, AttributeError, ValueError, TypeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
    guard.kernel = "landlock" if not why else why
    spawn = _spawn_rule(exercise)
    hook = _hook_for(exercise, exact, free, denied, protected | {id(spawn)}, spawn)
    sys.addaudithook(hook)
    _gate_fork_exec(spawn)
    _DONE[exercise] = guard


_IN_PROCESS_INSTALLED: list = []


def _gate_fork_exec(check) -> None:
    """The worker: every program started through _posixsubprocess passes `check` (the first
    guard's; later ones are in the audit hook)."""
    try:
        import _posixsubprocess
    except ImportError:
        return
    if getattr(_posixsubprocess.fork_exec, "__name__", "") == "fork_exec" and \
            isinstance(_posixsubprocess.fork_exec, types.FunctionType):
        return
    _posixsubprocess.fork_exec = _gated_fork_exec(_posixsubprocess.fork_exec, check)


def _guard_kernel(kernel, fn, gate, folder, thread, message, undo) -> None:
    """A Triton kernel: its launch (kernel[grid](...) calls the instance's run), its compile
    (parse, and the source it keeps) and the interpreter's rewritten copy of its function
    all go through `gate` as well as fn itself."""
    launch = getattr(kernel, "run", None)
    kernel.run = _Launch(gate, launch if folder is not None else None)
    undo.append((kernel, "run", None))
    if folder is None:
        for attr in ("parse", "warmup"):
            if hasattr(type(kernel), attr):
                setattr(kernel, attr, _Launch(gate, None))
        if isinstance(getattr(kernel, "_src", None), str):
            kernel._src = f"# {message}\n"
    rewritten = getattr(type(kernel), "rewritten_fn", None)
    if isinstance(rewritten, dict):              # Triton's interpreter
        if folder is None:
            rewritten.pop(fn, None)                  # a rewrite needs fn's source: refused, so fn runs
        else:
            copy = kernel.rewrite() if fn not in rewritten else rewritten[fn]
            shadow = types.FunctionType(copy.__code__, copy.__globals__, copy.__name__, copy.__defaults__,
                                        copy.__closure__)
            undo.append((copy, copy.__code__, vars(copy).get("__signature__")))
            copy.__code__ = _refusing_code(copy, _Gate(shadow, message, folder, thread),
                                           f"<the engine's {fn.__name__}, rewritten>")
