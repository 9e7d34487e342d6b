"""pytest plugin: the `student` fixture, the graded markers, and the grader's options.

Loaded by tests/conftest.py; the autograder (runner.py) loads it too, with:

    --impl SUB             whose code to grade (solutions, exercises or a submission folder)
    --isolate              run the learner's code in a sandboxed worker process (isolated.py)
    --timeout-per-test S   with --isolate: seconds of learner time per test
    --sandbox-uid U        with --isolate, as root: the sandbox's unprivileged uid
    --sandbox-cgroup JSON  with --isolate: the cgroup dirs the runner made for the sandbox
    --unsafe-no-sandbox    with --isolate: no sandbox (a learner grading their own work)
    --results-jsonl PATH   append one JSON line per graded test as it finishes

Partial credit: a graded test that asks for the `credit` fixture splits its points into parts,

    @graded("attention.softmax", points=3)
    def test_softmax(student, credit):
        with credit.part(1, "rows sum to one"):
            expect_true(...)
        with credit.part(2, "equals the reference"):
            expect_close(...)

and scores points × (weight of the parts that passed) / (all weight); a failed part fails the
test (its message is reported) but the next part still runs.

A results line: {"kind": "result", "nodeid", "name", "exercise", "points", "visibility", "mac",
"passed", "fraction", "skipped", "output"}; "collected" lines list every graded test before the run, and
"collect_error" lines name test files that failed to import. With --results-key-fd the
plugin reads a key from a pipe and signs every line (its "mac" field, HMAC-SHA256), so that lines written by
anything else (the learner's code, say) are recognised and ignored by the runner.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from pathlib import Path

import pytest

from .expect import Mismatch
from .explain import explain
from ..overlay import impl_from_env
from .isolated import DEFAULT_TIMEOUT, IsolatedStudent, LearnerCodeError
from .sandbox import UID_BASE, Cgroup
from .student import InProcessStudent

MAX_OUTPUT = 4000


def pytest_addoption(parser):
    group = parser.getgroup("andrea")
    group.addoption("--impl", default=None,
                    help="whose code to grade: solutions, exercises or a submission folder "
                         "(default: $ANDREA_IMPL, else solutions)")
    group.addoption("--isolate", action="store_true",
                    help="run the learner's code in a separate worker process (the autograder)")
    group.addoption("--timeout-per-test", type=float, default=DEFAULT_TIMEOUT,
                    help="with --isolate: seconds the learner's code may run in one test")
    group.addoption("--sandbox-uid", type=int, default=None,
                    help="with --isolate, as root: the sandbox's unprivileged uid "
                         f"(default {UID_BASE} + this process's pid)")
    group.addoption("--sandbox-cgroup", default=None,
                    help="with --isolate: JSON {controller: dir} of a cgroup for the sandbox")
    group.addoption("--unsafe-no-sandbox", action="store_true",
                    help="with --isolate: run the worker without a sandbox (never as root)")
    group.addoption("--results-jsonl", default=None,
                    help="append one JSON line per graded test to this file as it finishes")
    group.addoption("--results-key-fd", type=int, default=None,
                    help="read a signing key for --results-jsonl lines from this file descriptor")


def pytest_configure(config):
    for line in ("points(n): points this graded test is worth",
                 "visibility(v): Gradescope visibility",
                 "exercise(name): the exercise ('activity.piece') a graded test grades",
                 "taught(activity): the later notebook that teaches the idea a graded test checks"):
        config.addinivalue_line("markers", line)
    config._andrea_impl = config.getoption("--impl") or impl_from_env("solutions")
    workerinput = getattr(config, "workerinput", None)         # an xdist worker
    if workerinput is not None:
        key = workerinput.get("andrea_results_key")
    elif config.getoption("--results-key-fd") is not None:
        fd = config.getoption("--results-key-fd")
        key = os.read(fd, 256).strip()
        os.close(fd)
    else:
        key = None
    config._andrea_key = bytes.fromhex(key.decode() if isinstance(key, bytes) else key) if key else b""
    config._andrea_outcomes = {}


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):          # xdist controller -> worker: the signing key
    node.workerinput["andrea_results_key"] = node.config._andrea_key.hex()




def _is_controller(config) -> bool:
    return getattr(config, "workerinput", None) is None


def sign(key: bytes, record: dict) -> str:
    """HMAC-SHA256 of the record's canonical JSON (empty without a key)."""
    if not key:
        return ""
    return hmac.new(key, json.dumps(record, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def _write(config, record: dict) -> None:
    path = config.getoption("--results-jsonl")
    if not path:
        return
    line = json.dumps({**record, "mac": sign(config._andrea_key, record)}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())         # one write per line: atomic under O_APPEND
    finally:
        os.close(fd)


def graded_info(item) -> dict | None:
    """{"exercise", "points", "visibility"} of a graded test item, else None."""
    ex = item.get_closest_marker("exercise")
    if ex is None:
        return None
    points = item.get_closest_marker("points")
    vis = item.get_closest_marker("visibility")
    return {"exercise": ex.args[0], "points": float(points.args[0]) if points else 1.0,
            "visibility": vis.args[0] if vis else "visible"}


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        info = graded_info(item)
        if info is not None:
            item.user_properties.append(("andrea", info))


def pytest_collection_finish(session):
    # Every process that collects writes the list (xdist workers included): the runner dedupes.
    for item in session.items:
        info = graded_info(item)
        if info is not None:
            _write(session.config, {"kind": "collected", "nodeid": item.nodeid, "name": item.name, **info})


def pytest_collectreport(report):
    config = _CONFIG[0] if _CONFIG else None
    if report.failed and config is not None:
        _write(config, {"kind": "collect_error", "path": str(report.fspath),
                        "output": _last_line(str(report.longrepr))})


def failure_message(excinfo) -> str:
    """The failure as a learner reads it: a Mismatch's (or the grader's) message, else the
    exception as `Type: message`, never the traceback."""
    exc = excinfo.value
    if isinstance(exc, (Mismatch, LearnerCodeError, PartsFailed, pytest.fail.Exception)):
        text = str(exc)
    else:
        text = excinfo.exconly()
    meaning = explain(exc) if not isinstance(exc, (Mismatch, PartsFailed, pytest.fail.Exception)) else None
    if meaning:
        text = f"{text.strip()}\nWhat it means: {meaning}"
    return text.strip()[:MAX_OUTPUT]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:MAX_OUTPUT] if lines else ""


class PartsFailed(AssertionError):
    """Some parts of a partial-credit test failed (the message lists them)."""


class Credit:
    """The parts of one graded test (see the module docstring)."""

    def __init__(self):
        self.parts: list[tuple[float, str, str | None]] = []     # (weight, what, failure or None)

    @contextlib.contextmanager
    def part(self, weight: float, what: str):
        if weight <= 0:
            raise ValueError(f"a part's weight must be > 0, got {weight}")
        try:
            yield
        except (AssertionError, LearnerCodeError, NotImplementedError) as exc:
            self.parts.append((float(weight), what, f"{what}: {str(exc).strip() or type(exc).__name__}"))
        except Exception as exc:          # noqa: BLE001  (the learner's error fails this part only)
            self.parts.append((float(weight), what, f"{what}: {type(exc).__name__}: {exc}"))
        else:
            self.parts.append((float(weight), what, None))

    @property
    def fraction(self) -> float | None:
        total = sum(w for w, _, _ in self.parts)
        return None if not total else sum(w for w, _, f in self.parts if f is None) / total

    def failures(self) -> list[str]:
        return [f for _, _, f in self.parts if f is not None]


@pytest.fixture
def credit(request):
    """Partial credit: `with credit.part(weight, "what"): ...` (see the module docstring)."""
    request.node._andrea_credit = Credit()
    return request.node._andrea_credit


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    credit = getattr(item, "_andrea_credit", None)
    if credit is not None and credit.failures():
        n, total = len(credit.failures()), len(credit.parts)
        raise PartsFailed(f"{n} of {total} parts failed (partial credit {credit.fraction:.0%}):\n"
                          + "\n".join(credit.failures()))
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    credit = getattr(item, "_andrea_credit", None)
    if call.when == "call" and credit is not None and credit.fraction is not None:
        report.user_properties.append(("andrea_fraction", credit.fraction))
    if call.excinfo is not None and report.failed and any(k == "andrea" for k, _ in item.user_properties):
        report.user_properties.append(("andrea_output", f"{call.when}: " * (call.when != "call")
                                       + failure_message(call.excinfo)))


def pytest_runtest_logreport(report):
    props = dict(report.user_properties)
    info = props.get("andrea")
    config = _CONFIG[0] if _CONFIG else None
    if info is None or config is None or not _is_controller(config):
        return
    state = config._andrea_outcomes.setdefault(report.nodeid, {"passed": True, "skipped": False,
                                                               "output": ""})
    if report.failed:
        state["passed"] = False
        state["output"] = state["output"] or props.get("andrea_output") or _last_line(str(report.longrepr))
    elif report.skipped:
        state["skipped"] = True
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        state["output"] = f"skipped: {reason}"
    if report.when == "call":
        state["fraction"] = props.get("andrea_fraction")
    if report.when == "teardown":
        config._andrea_outcomes.pop(report.nodeid)
        passed = state["passed"] and not state["skipped"]
        fraction = 1.0 if passed else float(state.get("fraction") or 0.0)
        _write(config, {"kind": "result", "nodeid": report.nodeid,
                        "name": report.nodeid.rsplit("::", 1)[-1], **info, "passed": passed,
                        "fraction": fraction, "skipped": state["skipped"],
                        "output": "" if passed else state["output"]})


_CONFIG: list = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _CONFIG[:] = [session.config]


@pytest.fixture(scope="session")
def _student_session(pytestconfig):
    if pytestconfig.getoption("--isolate"):
        _preload_reference()
        cgroup = pytestconfig.getoption("--sandbox-cgroup")
        uid = pytestconfig.getoption("--sandbox-uid")
        student = IsolatedStudent(
            pytestconfig._andrea_impl, timeout=pytestconfig.getoption("--timeout-per-test"),
            sandbox=not pytestconfig.getoption("--unsafe-no-sandbox"),
            uid=uid if uid is not None else UID_BASE + os.getpid(),
            cgroup=Cgroup({k: Path(v) for k, v in json.loads(cgroup).items()}) if cgroup else None)
    else:
        student = InProcessStudent(pytestconfig._andrea_impl)
    yield student
    student.close()


@pytest.fixture
def student(_student_session):
    """The learner's code (the reference when ANDREA_IMPL is unset)."""
    if isinstance(_student_session, IsolatedStudent):
        _student_session.begin_test()
    return _student_session


def _preload_reference() -> None:
    """Import the engine and its version of every piece before any learner code runs, so that
    nothing a learner's code might write to disk later can change what the grader compares with."""
    from .. import pieces
    for activity in pieces.ACTIVITIES:
        try:
            pieces.module(activity)
        except ImportError:            # Triton or tokenizers missing: their tests say so themselves
            pass
