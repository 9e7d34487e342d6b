"""pytest plugin: the `student` fixture, the graded markers, and the --impl option.

Loaded by tests/conftest.py; the autograder loads it too (with --isolate).
"""
from __future__ import annotations

import os

import pytest

from .student import InProcessStudent


def pytest_addoption(parser):
    group = parser.getgroup("andrea")
    group.addoption("--impl", default=None,
                    help="whose code to grade: solutions, exercises or a submission folder "
                         "(default: $ANDREA_IMPL, else solutions)")


def pytest_configure(config):
    for line in ("points(n): points this graded test is worth",
                 "visibility(v): Gradescope visibility",
                 "exercise(name): the exercise ('activity.piece') a graded test grades"):
        config.addinivalue_line("markers", line)
    impl = config.getoption("--impl")
    if impl:
        os.environ["ANDREA_IMPL"] = impl


@pytest.fixture(scope="session")
def _student_session():
    student = InProcessStudent()
    yield student
    student.close()


@pytest.fixture
def student(_student_session):
    """The learner's code (the reference when ANDREA_IMPL is unset)."""
    return _student_session
