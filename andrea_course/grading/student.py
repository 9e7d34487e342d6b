"""The learner's code as graded tests see it.

InProcessStudent hands out the learner's own objects directly (fast; `pytest`, notebooks).
The autograder (andrea-grade) uses IsolatedStudent (worker/client.py) instead, whose pieces
run in a separate process: tests must therefore use pieces only through this protocol:
call a function; construct a class; call an instance or its methods; read an attribute; and
read a piece's code as written (student.source: the file is read, never run, for checks of how a
piece is written, such as a Triton kernel's conversion to fp32).
Arguments and results: tensors, numbers, strings, None, random generators (a copy: draws in
the learner's code do not advance the test's), ModelConfig, and lists, tuples and
dicts of these.

Either way a piece is isolated (Overlay.isolated): it runs with the engine standing in for
every other piece it calls, so a test grades that piece alone. student_for(impl, isolation) is
the one a session of graded tests gets (the plugin's `student` fixture).
"""
from __future__ import annotations

import collections
import functools
import inspect
import weakref
from typing import Any, NamedTuple

import torch

from ..overlay import Overlay, impl_from_env
from ..worker.client import IsolatedStudent, Proxy, source_of
from ..worker.server import warm_up
from ..worker.tiers import Isolation


class Call(NamedTuple):
    """One call of a learner's function piece, or of a class piece's module, with copies of its
    arguments as they were passed."""
    piece: str                  # "activity.name"
    args: tuple
    kwargs: dict
    module: Any = None          # a class piece's call: the learner's module (or its proxy) called
    made: tuple = ()            # and the (args, kwargs) that module was constructed with


_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # a class piece's module -> (piece, args, kwargs)


_RECENT: collections.deque = collections.deque(maxlen=16)     # (Call, its output), the latest calls


def call_giving(value) -> Call | None:
    """The latest recorded call of a learner's piece whose output is `value` itself (or one of the items
    it returned, or either detached): what a relation may run again with the engine's version (relations.py)."""
    if value is None:
        return None
    for made, out in reversed(_RECENT):
        if _same(out, value) or (isinstance(out, (tuple, list)) and any(_same(o, value) for o in out)):
            return made
    return None


def _same(out, value) -> bool:
    """value is out itself, or the same tensor seen another way (out.detach())."""
    return out is value or (isinstance(out, torch.Tensor) and isinstance(value, torch.Tensor) and value.numel() > 0
                            and (out.data_ptr(), out.shape, out.stride(), out.dtype)
                            == (value.data_ptr(), value.shape, value.stride(), value.dtype))


def safe_copy(value: Any, depth: int = 0) -> Any:
    """A copy safe from the learner's in-place changes: tensors cloned, containers of them rebuilt;
    anything else (a module, a proxy, a number, a string) as passed."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, torch.Generator):
        twin = torch.Generator(value.device)
        twin.set_state(value.get_state())
        return twin
    if depth < 3 and type(value) in (list, tuple):
        return type(value)(safe_copy(v, depth + 1) for v in value)
    if depth < 3 and type(value) is dict:
        return {k: safe_copy(v, depth + 1) for k, v in value.items()}
    return value


def _copies(args, kwargs) -> tuple:
    return tuple(safe_copy(a) for a in args), {k: safe_copy(v) for k, v in kwargs.items()}


def _module_call(module, args, kwargs) -> Call | None:
    """The Call a class piece's module is given (its construction known), with copies of its arguments."""
    made = _MADE.get(module)
    return None if made is None else Call(made[0], *_copies(args, kwargs), module=module, made=made[1:])


def _recording_class(cls, piece: str):
    """A class piece's module class (the learner's, isolated: or a mutation test's), its construction
    and its calls recorded (call_giving); the class is changed once, in place, as overlay.isolated
    changes it. The package's own classes (the engine's, as a reference or a variant test passes
    them) are never changed: every model in this process would record its calls."""
    if vars(cls).get("_andrea_recorded") or cls.__module__.partition(".")[0] == __name__.partition(".")[0]:
        return cls
    init, forward = cls.__init__, cls.forward

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if self not in _MADE:                          # a subclass's piece, not its parent's
            _MADE[self] = (piece, *_copies(args, kwargs))
        init(self, *args, **kwargs)

    @functools.wraps(forward)
    def recording_forward(self, *args, **kwargs):
        made = _module_call(self, args, kwargs)
        out = forward(self, *args, **kwargs)
        if made is not None:
            _RECENT.append((made, out))
        return out
    cls.__init__, cls.forward, cls._andrea_recorded = __init__, recording_forward, True
    return cls


def recorded(activity: str, name: str, fn):
    """fn (a learner's function, or a worker's proxy for one), recording its latest calls (call_giving);
    a class piece's module class its modules' calls; any other piece (a Triton kernel) as it is."""
    if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
        return _recording_class(fn, f"{activity}.{name}")
    is_proxy = isinstance(fn, Proxy)
    if not (inspect.isfunction(fn) or (is_proxy and object.__getattribute__(fn, "_kind") == "function")):
        return fn

    def call(*args, **kwargs):
        made = Call(f"{activity}.{name}", *_copies(args, kwargs))
        out = fn(*args, **kwargs)
        _RECENT.append((made, out))
        return out
    return call if is_proxy else functools.wraps(fn)(call)


_CLASSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # a class piece's proxy -> "activity.Name"


def _recorded_request(ask, op, proxy, *args):
    """A worker's request (IsolatedStudent._request), which records a class piece's construction and
    its modules' calls as _recording_class does in this process."""
    if op != "call" or not isinstance(proxy, Proxy) or (proxy not in _CLASSES and proxy not in _MADE):
        return ask(op, proxy, *args)
    given, named = (args[0], args[1]) if len(args) == 2 else ((), {})
    if proxy in _CLASSES:
        copies = _copies(given, named)
        out = ask(op, proxy, *args)
        if isinstance(out, Proxy):
            _MADE[out] = (_CLASSES[proxy], *copies)
        return out
    made = _module_call(proxy, given, named)
    out = ask(op, proxy, *args)
    _RECENT.append((made, out))
    return out


class Recording:
    """A student (an IsolatedStudent: worker/client.py knows nothing of grading) whose function
    pieces record their latest calls (call_giving); everything else is the student's own."""

    def __init__(self, student):
        self.student = student
        if "_request" not in vars(student):          # once per student: its proxies' requests recorded
            student._request = functools.partial(_recorded_request, student._request)

    def piece(self, activity: str, name: str):
        found = self.student.piece(activity, name)
        if isinstance(found, Proxy) and object.__getattribute__(found, "_kind").startswith("class "):
            _CLASSES[found] = f"{activity}.{name}"
        return recorded(activity, name, found)

    def __getattr__(self, name):
        return getattr(self.student, name)


class InProcessStudent:
    """The learner's pieces, in this process.

    impl: whose code ("solutions", "exercises", a folder; default $ANDREA_IMPL, else solutions).
    overrides: {(activity, name): object} served instead of the learner's piece; the mutation
    tests (tests/activity_tests/test_<activity>_mutants.py) use it to check that a graded test names a
    typical mistake.
    """

    def __init__(self, impl: str | Overlay | None = None, overrides: dict | None = None):
        self.overrides = dict(overrides or {})
        self._impl = impl
        self._overlay = impl if isinstance(impl, Overlay) else None

    @property
    def overlay(self) -> Overlay:
        if self._overlay is None:
            self._overlay = Overlay(self._impl if self._impl is not None else impl_from_env("solutions"))
        return self._overlay

    @property
    def is_reference(self) -> bool:
        return not self.overrides and self.overlay.is_answer_key

    def piece(self, activity: str, name: str):
        """The learner's own function or class, exactly as written, isolated."""
        if (activity, name) in self.overrides:
            return recorded(activity, name, self.overrides[(activity, name)])
        return recorded(activity, name, self.overlay.isolated(activity, name))

    def source(self, activity: str, name: str) -> str:
        """The code of a piece as written (an override's own source in the mutation tests)."""
        if (activity, name) in self.overrides:
            obj = self.overrides[(activity, name)]
            try:
                return inspect.getsource(getattr(obj, "fn", obj))
            except (OSError, TypeError):
                return ""
        return source_of(self.overlay.path(activity), name)

    def close(self) -> None:
        pass


def student_for(impl, isolation: Isolation, adopt: str | None = None, kernels: bool = True):
    """The learner's code for a session of graded tests: InProcessStudent in the in-process tier,
    else an IsolatedStudent (adopting the worker's parent `adopt`, IsolatedStudent.hand_over's).
    The engine is imported first (and, with kernels and a worker's parent forked from this process,
    Triton's interpreter warmed), so nothing the learner's code changes alters what the grader
    compares with."""
    if isolation.tier == "in-process":
        return InProcessStudent(impl)
    warm_up(kernels=kernels and isolation.start == "fork")
    return IsolatedStudent(impl, isolation=isolation, adopt=adopt)
