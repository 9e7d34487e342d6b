"""What every graded file's mutants go through, written once (README.md beside this file).

The graded files, loaded as plain namespaces of functions of `student` (with the instructor's
hidden tests when this checkout has them), and the parametrised tests that each
test_<activity>_mutants.py makes from its own tables:

    test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
    test_the_gaps_are_named = the_gaps_are_named(GAPS)
    test_an_unknown_mistake_shows_where_the_values_differ = an_unknown_mistake_shows_where_the_values_differ(UNKNOWN)
    test_a_wrong_piece_fails_its_graded_test = a_wrong_piece_fails_its_graded_test(WRONG)

Each is collected in the file that makes it, one test per row, the row's graded test and words
in its id. (tests/conftest.py has pytest rewrite this module's asserts, as a test file's.)"""
import functools
import importlib.util
import types

import pytest

from andrea_course.grading import Mismatch
from andrea_course.grading.student import InProcessStudent
from andrea_course.paths import ACTIVITY_TESTS, ROOT

GRADED_FILES = ["test_embeddings.py", "test_attention.py", "test_multihead.py", "test_mlp.py",
                "test_block.py", "test_model.py", "test_modern.py", "test_optim.py", "test_inside.py"]
TESTS = ACTIVITY_TESTS
HIDDEN = ROOT / "instructor" / "hidden_tests"     # the instructor's hidden tests, when this checkout has them


def _load(file):
    """An activity's graded tests, with its hidden ones when present, as one namespace (its tests
    are then plain functions of `student`)."""
    found = {}
    for path in (TESTS / file, HIDDEN / file.replace("test_", "test_hidden_", 1)):
        if path.exists():
            spec = importlib.util.spec_from_file_location(f"_graded_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.update(vars(module))
    return types.SimpleNamespace(**found)


MODULES = {f: _load(f) for f in GRADED_FILES}


@functools.cache
def _module(file):
    """A graded file's tests: GRADED_FILES loaded above; test_kernels.py, which needs Triton, on first use."""
    if file not in MODULES and importlib.util.find_spec("triton") is None:
        pytest.skip("Triton is not installed")
    return MODULES[file] if file in MODULES else _load(file)


def _graded_tests():
    """[(file, test name, exercise)] of every graded test in GRADED_FILES."""
    out = []
    for file, module in MODULES.items():
        for name, fn in vars(module).items():
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "exercise"]
            if name.startswith("test_") and marks:
                out.append((file, name, marks[0].args[0]))
    return out


def names_the_mistake(file, test, overrides, named):
    """The graded test, run on the answer key with `overrides` (the mutant), fails with a Mismatch
    whose mistake contains the words `named`."""
    test_fn = getattr(_module(file), test)
    student = InProcessStudent("solutions", overrides=overrides)
    with pytest.raises(Mismatch) as failure:
        test_fn(student)
    assert failure.value.mistake and named in failure.value.mistake, (
        f"{test} failed without naming the mistake {named!r}:\n{failure.value}")
    assert named in str(failure.value)


def the_graded_test_names_the_mistake(rows):
    """test_the_graded_test_names_the_mistake over MUTANTS: rows of (graded file, graded test,
    {(activity, piece): mutant}, words the failure must contain)."""
    @pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",     # the softmax kernel without its max
                                "ignore:invalid value encountered:RuntimeWarning")
    @pytest.mark.parametrize("file, test, overrides, named", rows,
                             ids=[f"{t}[{n}]" for _, t, _, n in rows])
    def test_the_graded_test_names_the_mistake(file, test, overrides, named):
        names_the_mistake(file, test, overrides, named)
    return test_the_graded_test_names_the_mistake


def the_gaps_are_named(rows):
    """test_the_gaps_are_named over GAPS (issue 15's mistakes that were never named): MUTANTS' rows."""
    @pytest.mark.parametrize("file, test, overrides, named", rows, ids=[f"{t}[{n}]" for _, t, _, n in rows])
    def test_the_gaps_are_named(file, test, overrides, named):
        names_the_mistake(file, test, overrides, named)
    return test_the_gaps_are_named


def an_unknown_mistake_shows_where_the_values_differ(rows):
    """test_an_unknown_mistake_shows_where_the_values_differ over UNKNOWN: rows of (graded file,
    graded test, {(activity, piece): a wrong piece no catalogue knows})."""
    @pytest.mark.parametrize("file, test, overrides", rows, ids=[t for _, t, _ in rows])
    def test_an_unknown_mistake_shows_where_the_values_differ(file, test, overrides):
        with pytest.raises(Mismatch) as failure:
            getattr(MODULES[file], test)(InProcessStudent("solutions", overrides=overrides))
        exc = failure.value
        assert exc.mistake is None and (exc.unmatched or exc.relation)      # a relation seen on two inputs, or none
        assert ("none of the typical mistakes" in str(exc)) != bool(exc.relation)
        assert exc.differences and " yours " in exc.differences and ", expected " in exc.differences
        assert exc.differences.split("the first: ")[1].startswith("[")           # a position, then the two values
    return test_an_unknown_mistake_shows_where_the_values_differ


def a_wrong_piece_fails_its_graded_test(rows):
    """test_a_wrong_piece_fails_its_graded_test over WRONG: rows of (graded file, graded test,
    {(activity, piece): a wrong piece no name fits}); it must fail, whatever the failure names."""
    @pytest.mark.parametrize("file, test, overrides", rows, ids=[f"{t}[{next(iter(o.values())).__name__}]"
                                                                  for _, t, o in rows])
    def test_a_wrong_piece_fails_its_graded_test(file, test, overrides):
        with pytest.raises((Mismatch, RuntimeError)):          # in this process, the learner's own error as it is
            getattr(MODULES[file], test)(InProcessStudent("solutions", overrides=overrides))
    return test_a_wrong_piece_fails_its_graded_test
