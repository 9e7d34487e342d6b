"""The learner's code as graded tests see it.

InProcessStudent hands out the learner's own objects directly (fast; `pytest`, notebooks).
The autograder (andrea-grade) uses IsolatedStudent (isolated.py) instead, whose pieces
run in a separate process: tests must therefore use pieces only through this protocol:
call a function; construct a class; call an instance or its methods; read an attribute.
Arguments and results: tensors, numbers, strings, None, ModelConfig, and lists, tuples and
dicts of these.
"""
from __future__ import annotations

from ..impl import Impl, get_impl


class InProcessStudent:
    """The learner's pieces, in this process.

    overrides: {(activity, name): object} served instead of the learner's piece; the mutation
    tests (tests/test_mistakes.py) use it to check that a graded test names a typical mistake.
    """

    def __init__(self, impl: str | Impl | None = None, overrides: dict | None = None):
        self.impl = impl if isinstance(impl, Impl) else get_impl(impl)
        self.overrides = dict(overrides or {})

    @property
    def is_reference(self) -> bool:
        return self.impl.is_reference and not self.overrides

    def piece(self, activity: str, name: str):
        """The learner's own function or class, exactly as written."""
        if (activity, name) in self.overrides:
            return self.overrides[(activity, name)]
        return self.impl.own(activity, name)

    def close(self) -> None:
        pass
