"""pytest plugin: the `student` and `credit` fixtures, the graded markers and the grader's options.

Loaded by pyproject.toml's addopts (plain pytest) and by pipeline.run (check(), andrea-grade).
Each event of the run is one records.Record, appended to --results-jsonl and signed with the key
read from --results-key-fd, so that lines written by anything else (the learner's code) are
ignored.
"""
from __future__ import annotations

import contextlib
import json
import os

import pytest

from .records import Record, describe, sign
from ..overlay import impl_from_env, resolve
from ..worker.client import DEFAULT_TIMEOUT, IsolatedStudent, LearnerCodeError
from ..worker.tiers import Isolation
from .markers import MARKS, Credit, graded_info, mark_of
from .student import Recording, student_for


_CONFIG: list = []


def pytest_addoption(parser):
    group = parser.getgroup("andrea")
    group.addoption("--impl",
                    help="whose code to grade: solutions, exercises or a submission folder "
                         "(default: $ANDREA_IMPL, else solutions)")
    group.addoption("--isolation", default="process",
                    help="how the learner's code runs: process (a worker process: the default), "
                         "in-process, or the autograder's JSON (sandbox, container)")
    group.addoption("--timeout-per-test", type=float, default=DEFAULT_TIMEOUT,
                    help="seconds the learner's code may run in one test (a worker process)")
    group.addoption("--worker-parent",
                    help="FD:PID of a worker's parent the runner started (IsolatedStudent.hand_over)")
    group.addoption("--results-jsonl", help="append one JSON line per graded test to this file as it finishes")
    group.addoption("--results-key-fd", type=int,
                    help="read a signing key for --results-jsonl lines from this file descriptor")
    group.addoption("--exercises",
                    help="comma-separated exercises ('activity.piece') whose graded tests run; default: all")
    group.addoption("--names-in-impl", action="store_true",
                    help="name the learner's files relative to --impl (attention.py), as the grader "
                         "does for a submission's staged copy; default: relative to the course")


def pytest_configure(config):
    for line in MARKS:
        config.addinivalue_line("markers", line)
    _CONFIG[:] = [config]                       # for the hooks that are given no config
    config._andrea_impl = config.getoption("--impl") or impl_from_env("solutions")
    key, fd = "", config.getoption("--results-key-fd")
    if not _is_controller(config):                             # an xdist worker: the controller's key
        key = config.workerinput.get("andrea_results_key") or ""
    elif fd is not None:
        key = os.read(fd, 256).strip().decode()
        os.close(fd)
    config._andrea_key = bytes.fromhex(key)
    config._andrea_outcomes = {}
    config._andrea_student = None
    try:
        config._andrea_isolation = Isolation.chosen(config.getoption("--isolation"),
                                                    config.getoption("--timeout-per-test"))
    except (ValueError, TypeError) as exc:
        raise pytest.UsageError(f"--isolation: {exc}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):          # xdist controller -> worker: the signing key
    node.workerinput["andrea_results_key"] = node.config._andrea_key.hex()


def _is_controller(config) -> bool:
    return getattr(config, "workerinput", None) is None


def _write(config, record: Record) -> None:
    path = config.getoption("--results-jsonl")
    if not path:
        return
    data = record.as_dict()
    line = json.dumps({**data, "mac": sign(config._andrea_key, data)}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())         # one write per line: atomic under O_APPEND
    finally:
        os.close(fd)


def pytest_collection_modifyitems(session, config, items):
    chosen = config.getoption("--exercises")
    if chosen is not None:                 # every graded test of these exercises, and nothing else
        chosen = set(chosen.split(","))
        drop = [i for i in items if mark_of(i, "exercise") not in chosen]
        items[:] = [i for i in items if mark_of(i, "exercise") in chosen]
        if drop:
            config.hook.pytest_deselected(items=drop)
    for item in items:
        info = graded_info(item)
        if info is not None:
            item.user_properties.append(("andrea", info))


def pytest_collection_finish(session):
    # every process that collects writes the list (xdist workers included): Run.add dedupes
    config, graded = session.config, [(i, info) for i in session.items if (info := graded_info(i)) is not None]
    for item, info in graded:
        _write(config, Record("collected", nodeid=item.nodeid, name=item.name, **info))
    runs_tests = not config.option.collectonly and not config.pluginmanager.hasplugin("dsession")
    if graded and runs_tests and any("student" in getattr(i, "fixturenames", ()) for i in session.items):
        kernels = any(info["exercise"].startswith("kernels.") for _, info in graded)
        student = _student_of(config, kernels)
        if isinstance(student, IsolatedStudent):     # its worker's parent starts while the first test sets up
            with contextlib.suppress(LearnerCodeError):
                student.boot()                          # else the first test says why


def _config():
    """The session's config, for the hooks pytest calls without one (None before it is configured)."""
    return _CONFIG[0] if _CONFIG else None


def pytest_collectreport(report):
    config = _config()
    if report.failed and config is not None:
        tail = "\n".join(str(report.longreprtext).rstrip().splitlines()[-12:])
        _write(config, Record("collect_error", name=str(report.fspath), rows=[("problem", tail)]))


@pytest.fixture
def credit(request):
    """Partial credit: `with credit.part(weight, "what"): ...`."""
    request.node._andrea_credit = Credit()
    return request.node._andrea_credit


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if getattr(item, "_andrea_credit", None) is not None:
        item._andrea_credit.settle()          # PartsFailed, naming every failed part
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    credit = getattr(item, "_andrea_credit", None)
    if call.when == "call" and credit is not None and credit.fraction is not None:
        report.user_properties.append(("andrea_fraction", credit.fraction))
    if report.failed and any(k == "andrea" for k, _ in item.user_properties):
        folder = resolve(item.config._andrea_impl)
        rec = describe(item, call, report, folder, item.config.getoption("--timeout-per-test"),
                       base=folder if item.config.getoption("--names-in-impl") else None)
        report.user_properties.append(("andrea_record", rec.as_dict()))


def pytest_runtest_logstart(nodeid, location):
    config = _config()
    if config is not None and _is_controller(config):
        _write(config, Record("start", nodeid=nodeid, name=nodeid.rsplit("::", 1)[-1]))


def pytest_runtest_logreport(report):
    """One "result" Record per graded test, written at its teardown: its first failure, else
    skipped or passed."""
    props = dict(report.user_properties)
    info = props.get("andrea")
    config = _config()
    if info is None or config is None or not _is_controller(config):
        return
    name = report.nodeid.rsplit("::", 1)[-1]
    rec = config._andrea_outcomes.setdefault(report.nodeid, Record(nodeid=report.nodeid, name=name, **info,
                                                                   status="passed"))
    if report.failed and rec.status in ("passed", "skipped"):
        last = [line for line in str(report.longrepr).strip().splitlines() if line.strip()][-1:] or ["failed"]
        got = props.get("andrea_record") or Record(status="error", rows=[("problem", last[0].strip())]).as_dict()
        rec.status, rec.rows, rec.hint, rec.mistake = got["status"], got["rows"], got["hint"], got["mistake"]
        rec.when = report.when
    elif report.skipped and rec.status == "passed":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        rec.status, rec.rows = "skipped", [("problem", f"skipped: {reason}")]
    if report.when == "call":
        rec.fraction = float(props.get("andrea_fraction") or 0.0)
    if report.when == "teardown":
        config._andrea_outcomes.pop(report.nodeid)
        rec.fraction = 1.0 if rec.status == "passed" else rec.fraction
        _write(config, rec)


def _student_of(config, kernels: bool = True):
    """The session's student, made once (student.student_for)."""
    if config._andrea_student is None:
        config._andrea_student = student_for(config._andrea_impl, config._andrea_isolation,
                                             config.getoption("--worker-parent"), kernels)
    return config._andrea_student


@pytest.fixture(scope="session")
def _student_session(pytestconfig):
    student = _student_of(pytestconfig)
    yield student
    student.close()
    pytestconfig._andrea_student = None


@pytest.fixture
def student(_student_session, request):
    """The learner's code (the reference when ANDREA_IMPL is unset)."""
    isolated = isinstance(_student_session, IsolatedStudent)
    if isolated:
        _student_session.begin_test((mark_of(request.node, "exercise") or "").split(".")[0] or None)
    yield Recording(_student_session) if isolated else _student_session
    if isolated:
        _student_session.end_test()          # its worker ends while pytest reports


def pytest_unconfigure(config):
    student = getattr(config, "_andrea_student", None)
    if student is not None:                # booted, but no test asked for it
        student.close()
        config._andrea_student = None
