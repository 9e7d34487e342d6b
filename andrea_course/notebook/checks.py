"""check() and use(): run an exercise's graded tests in-process and say what they found.

The graded tests live in tests/test_<activity>.py (and any other tests/test_*.py, see graded_files)
and carry @graded("activity.piece", ...).
check("attention.softmax") runs exactly the tests marked with that exercise, with pytest, in
this process, against the learner's freshly re-read files, and shows one box. It never raises.
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .. import pieces
from ..graded import GRADED
from ..overlay import ROOT, STUB_MARK, Overlay, impl_from_env, resolve
from ._display import box, in_notebook

TESTS_DIR = GRADED              # the graded tests, shipped with the package
DEFAULT_IMPL = "exercises"     # in a notebook the learner's own exercises are the point


def notebook_impl() -> str:
    """Whose code a notebook checks: $ANDREA_IMPL if set, else the learner's exercises/."""
    return impl_from_env(DEFAULT_IMPL)


@dataclass
class Outcome:
    """One graded test's result."""
    name: str
    status: str                      # passed | failed | unwritten | error | skipped
    exc: BaseException | None = None
    text: str = ""                   # pytest's report when the failure is not a Mismatch


@dataclass
class CheckResult:
    exercise: str
    impl: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None         # the tests could not be run at all (missing file, bad name, ...)

    @property
    def status(self) -> str:
        """passed | failed | unwritten | error (no tests run, or none found)."""
        if self.error or not self.outcomes:
            return "error"
        st = {o.status for o in self.outcomes}
        if st <= {"passed", "skipped"} and "passed" in st:
            return "passed"
        if "unwritten" in st and not (st & {"failed", "error"}):
            return "unwritten"
        if st <= {"skipped"}:
            return "error"
        return "failed"

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _is_unwritten(exc: BaseException | None) -> bool:
    """A generated exercise stub raised (possibly wrapped by the test)."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, NotImplementedError) and STUB_MARK in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class _Collector:
    """A pytest plugin object: keeps the tests of some exercises and records their outcomes."""

    def __init__(self, exercises):
        self.exercises = set(exercises)
        self.results: dict[str, dict[str, Outcome]] = {e: {} for e in self.exercises}   # exercise -> nodeid -> outcome
        self.collect_errors: list[str] = []

    @staticmethod
    def exercise_of(item):
        mark = item.get_closest_marker("exercise")
        return mark.args[0] if mark is not None and mark.args else None

    def pytest_collection_modifyitems(self, session, config, items):
        keep, drop = [], []
        for item in items:
            (keep if self.exercise_of(item) in self.exercises else drop).append(item)
        items[:] = keep
        if drop:
            config.hook.pytest_deselected(items=drop)

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(report.longreprtext)

    def _record(self, item, call, rep):
        results, key, name = self.results.get(self.exercise_of(item)), item.nodeid, item.name
        if results is None or (rep.passed and rep.when != "call"):
            return
        if rep.skipped:
            results.setdefault(key, Outcome(name, "skipped", text=str(rep.longrepr)))
            return
        exc = call.excinfo.value if call.excinfo is not None else None
        if rep.passed:
            results[key] = Outcome(name, "passed")
            return
        if key in results and results[key].status != "passed":
            return                                   # keep the first failure (setup before teardown)
        status = "unwritten" if _is_unwritten(exc) else ("failed" if isinstance(exc, AssertionError) else "error")
        results[key] = Outcome(name, status, exc, rep.longreprtext)


def _make_collector(exercises) -> _Collector:
    import pytest

    collector = _Collector(exercises)

    class _Hooks:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            collector._record(item, call, outcome.get_result())

        def pytest_collection_modifyitems(self, session, config, items):
            collector.pytest_collection_modifyitems(session, config, items)

        def pytest_collectreport(self, report):
            collector.pytest_collectreport(report)

    collector.hooks = _Hooks()
    return collector


@contextlib.contextmanager
def _environ(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _isolated_modules(*stems: str):
    """Hide any module named like the test file (or a conftest) while pytest imports it, so a
    check always reads the tests afresh and never picks up a same-named module from elsewhere
    (an outer pytest's, a previous check's); put the old ones back afterwards."""
    import sys

    def ours(name):
        return any(name == s or name.endswith("." + s) for s in stems)

    saved = {n: sys.modules.pop(n) for n in [n for n in sys.modules if ours(n)]}
    try:
        yield
    finally:
        for n in [n for n in sys.modules if ours(n)]:
            del sys.modules[n]
        sys.modules.update(saved)


_recent: dict[tuple, tuple] = {}      # (exercise, impl, tests file) -> (file stamps, CheckResult)


def graded_files(exercise: str, tests_dir: str | os.PathLike | None = None) -> list[Path]:
    """The test files holding `exercise`'s graded tests: tests/test_<activity>.py, and any other
    tests/test_*.py with a test decorated @graded(exercise) (an activity's tests may span files,
    e.g. the modern block's test_modules.py, test_budget.py and test_modern_model.py)."""
    tests_dir = Path(tests_dir) if tests_dir is not None else TESTS_DIR
    home = tests_dir / f"test_{str(exercise).split('.')[0]}.py"
    others = [p for p in sorted(tests_dir.glob("test_*.py")) if p != home and _marks(p, exercise)]
    return ([home] if home.exists() else []) + others


def _marks(path: Path, exercise: str) -> bool:
    """Whether a test function in `path` is decorated @graded(exercise, ...) (not just mentions it)."""
    text = path.read_text(encoding="utf-8")
    if exercise not in text:
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(d, ast.Call) and getattr(d.func, "id", None) == "graded" and d.args
               and isinstance(d.args[0], ast.Constant) and d.args[0].value == exercise
               for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for d in node.decorator_list)


def _stamps(impl_name: str, test_files: list[Path]) -> tuple:
    """What a result depends on: the learner's .py files and the test files, by mtime and size."""
    files = sorted(resolve(impl_name).glob("*.py")) + list(test_files)
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.exists())


def run_graded(exercise: str, impl: str | os.PathLike | None = None,
               tests_dir: str | os.PathLike | None = None, reuse: bool = False) -> CheckResult:
    """Run the graded tests of `exercise` ("activity.piece") against `impl`; never raises.

    reuse=True returns the last result for the same exercise, code and tests when no file
    changed since (use() after check() then costs nothing)."""
    impl_name = str(impl) if impl is not None else notebook_impl()
    key = (exercise, impl_name, str(tests_dir))
    try:
        stamps = _stamps(impl_name, graded_files(exercise, tests_dir))
    except BaseException:
        stamps = None
    if reuse and stamps is not None and key in _recent and _recent[key][0] == stamps:
        return _recent[key][1]
    result = _run_graded(exercise, impl_name, tests_dir)
    if stamps is not None and result.error is None:
        _recent[key] = (stamps, result)
    return result


def _run_graded(exercise: str, impl_name: str, tests_dir) -> CheckResult:
    return _run_many([exercise], impl_name, tests_dir)[exercise]


def run_graded_many(exercises, impl: str | os.PathLike | None = None,
                    tests_dir: str | os.PathLike | None = None) -> dict[str, CheckResult]:
    """{exercise: CheckResult} for several exercises, in ONE pytest run (cheaper than one run
    each: the suite checks every exercise the notebooks name this way). Never raises."""
    return _run_many(list(dict.fromkeys(exercises)), str(impl) if impl is not None else notebook_impl(), tests_dir)


def _run_many(exercises: list[str], impl_name: str, tests_dir) -> dict[str, CheckResult]:
    results = {e: CheckResult(e, impl_name) for e in exercises}
    tests_dir = Path(tests_dir) if tests_dir is not None else TESTS_DIR
    files: dict[str, list[Path]] = {}
    for exercise, result in results.items():
        try:
            activity, piece = str(exercise).split(".")
        except ValueError:
            result.error = (f"{exercise!r} is not an exercise name: write it as 'activity.piece', "
                            f"e.g. 'attention.softmax'")
            continue
        try:
            paths = graded_files(exercise, tests_dir)
        except BaseException as exc:
            result.error = f"the graded tests could not be read: {type(exc).__name__}: {exc}"
            continue
        if not paths:
            result.error = (f"no graded tests for {exercise}: {tests_dir / f'test_{activity}.py'} does not exist "
                            f"and no other test file names it")
            continue
        files[exercise] = paths
    if not files:
        return results
    paths = list(dict.fromkeys(p for ps in files.values() for p in ps))
    try:
        import pytest

        collector = _make_collector(files)
        args = [*map(str, paths), "-p", "andrea_course.grading.plugin", "-p", "no:cacheprovider", "--impl", impl_name,
                "-o", "addopts=", "-o", "python_files=test_*.py", "--capture=sys", "-q", "--tb=short",
                "-W", "ignore", "--import-mode=importlib",
                f"--rootdir={tests_dir.parent}", f"--confcutdir={tests_dir}", "-c", os.devnull]
        out = io.StringIO()
        with _environ(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), \
                _isolated_modules(*(p.stem for p in paths), "conftest"), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = pytest.main(args, plugins=[collector.hooks])
        for exercise in files:
            result = results[exercise]
            result.outcomes = list(collector.results[exercise].values())
            if collector.collect_errors:
                result.error = "the graded tests could not be loaded:\n" + _tail(collector.collect_errors[0])
            elif not result.outcomes:
                result.error = (f"no graded test is marked @graded({exercise!r}) in "
                                f"{', '.join(p.name for p in files[exercise])}"
                                + ("" if int(code) in (0, 5) else
                                   f" (pytest exit code {int(code)}):\n{_tail(out.getvalue())}"))
    except BaseException as exc:                     # never let a check break the notebook
        for exercise in files:
            results[exercise].error = f"{type(exc).__name__}: {exc}\n{_tail(traceback.format_exc())}"
    return results


def _tail(text: str, lines: int = 12) -> str:
    rows = [r for r in str(text).rstrip().splitlines()]
    return "\n".join(rows[-lines:])


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")" if isinstance(shape, (tuple, list)) else str(shape)


def _failure_rows(o: Outcome) -> list[tuple[str, str]]:
    from ..grading.expect import Mismatch

    exc = o.exc
    if isinstance(exc, Mismatch):
        rows = [("problem", f"{exc.what}: {exc.problem}")]
        if exc.max_error is not None:
            rows.append(("largest error", f"{exc.max_error:.3g}"))
        if exc.shape_found is not None or exc.shape_expected is not None:
            rows.append(("shape", f"found {_fmt_shape(exc.shape_found)}, expected {_fmt_shape(exc.shape_expected)}"))
        if exc.mistake:
            rows.append(("typical mistake", exc.mistake))
        if exc.hint:
            rows.append(("hint", exc.hint))
        return rows
    if exc is not None:
        msg = str(exc).strip() or type(exc).__name__
        if isinstance(exc, AssertionError):          # drop pytest's rewritten-assert explanation
            msg = msg.split("\nassert ")[0].strip() or "an assertion failed"
            msg = "\n".join(msg.splitlines()[:6])
        else:
            msg = f"{type(exc).__name__}: {msg}"
        rows = [("problem", msg)]
        if o.status == "error" and o.text:
            rows.append(("where", _tail(o.text, 6)))
        return rows
    return [("problem", _tail(o.text, 8) or o.status)]


def show_result(result: CheckResult) -> None:
    """Display the one box that sums up a CheckResult."""
    ex, st = result.exercise, result.status
    who = f"checked: {result.impl}"
    if st == "passed":
        names = [o.name for o in result.outcomes if o.status == "passed"]
        box("passed", f"{ex}: all {len(names)} graded test{'s' * (len(names) != 1)} pass",
            [("", [("", n) for n in names])], who)
    elif st == "unwritten":
        hint = ""
        for o in result.outcomes:
            if o.status == "unwritten":
                msg = str(o.exc)
                hint = msg.split("Hint:", 1)[1].strip() if "Hint:" in msg else ""
                break
        rows = [("", "its body still raises NotImplementedError (the exercise stub)")]
        if hint:
            rows.append(("hint", hint))
        box("unwritten", f"{ex}: the notebook uses the reference for now",
            [("", rows)], who + f"; write it in exercises/{ex.split('.')[0]}.py, then run this cell again")
    elif st == "failed":
        bad = [o for o in result.outcomes if o.status in ("failed", "error", "unwritten")]
        good = [o for o in result.outcomes if o.status == "passed"]
        sections = [(o.name, _failure_rows(o)) for o in bad]
        box("failed", f"{ex}: {len(bad)} of {len(bad) + len(good)} graded tests fail", sections,
            who + "; until they pass, the notebook uses the reference")
    else:
        box("error", f"{ex}: the check could not run", [("", [("", result.error or "no graded tests found")])],
            who + "; the notebook uses the reference for now")


def check(exercise: str, *, impl: str | os.PathLike | None = None,
          tests_dir: str | os.PathLike | None = None) -> None:
    """Run the graded tests of one exercise (e.g. "attention.softmax") and show one box.

    impl: whose code ($ANDREA_IMPL if set, else "exercises"); tests_dir: where test_<activity>.py
    lives (the course's tests/). Never raises; returns None.
    """
    try:
        show_result(run_graded(exercise, impl, tests_dir))
    except BaseException as exc:                     # even the display must not break a notebook
        print(f"[COULD NOT CHECK] {exercise}: {type(exc).__name__}: {exc}")
    return None


def use(activity: str, name: str, *, impl: str | os.PathLike | None = None,
        tests_dir: str | os.PathLike | None = None, quiet: bool = False):
    """The learner's `name` from `activity` if all its graded tests pass, else the engine's
    (andrea_course/pieces/<activity>.py).

    Prints one line saying which is used.
    """
    reference = pieces.get(activity, name)
    impl_name = str(impl) if impl is not None else notebook_impl()
    exercise = f"{activity}.{name}"
    try:
        result = run_graded(exercise, impl_name, tests_dir, reuse=True)
        if result.passed:
            chosen = Overlay(impl_name).isolated(activity, name)
            why = f"yours (all {len(result.outcomes)} graded tests pass)"
        elif result.status == "unwritten":
            chosen, why = reference, "the engine's (yours is not written yet)"
        elif result.status == "failed":
            n = sum(o.status != "passed" for o in result.outcomes)
            chosen, why = reference, f"the engine's ({n} of your graded tests fail: run check({exercise!r}))"
        else:
            chosen, why = reference, f"the engine's (could not check yours: {(result.error or '').splitlines()[0]})"
    except BaseException as exc:
        chosen, why = reference, f"the engine's (could not load yours: {type(exc).__name__}: {exc})"
    if not quiet:
        print(f"{exercise}: using {why}")
    return chosen
