"""exercises/ and data/hints.json are what the generator makes of solutions/, every solution region
has three levels of hint (the idea, in words without code; the API; the line) and the exercises
hold only the idea,
every exercise file imports, and every exercise piece has at least one graded test."""
import ast
import functools
import json
import re
import subprocess
from pathlib import Path

import pytest

from andrea_course.exercises import RegionError, exercise_pieces, generate, hints_text, regions
from andrea_course.exercises import EXERCISES, HINTS, SOLUTIONS
from andrea_course.graded import GRADED
from andrea_course.paths import ROOT, STUB_MARK
from andrea_course.overlay import Overlay, unwritten_pieces

TESTS = Path(__file__).resolve().parent
GRADED_TEST_DIRS = [GRADED, ROOT / "instructor" / "hidden_tests"]   # every graded test, hidden ones too
ACTIVITIES = sorted(p.stem for p in SOLUTIONS.glob("*.py") if p.stem != "__init__")


def _committed(name: str) -> str:
    """exercises/<name> as committed at git HEAD (a learner's own edits don't count), else the file."""
    try:
        return subprocess.run(["git", "show", f"HEAD:exercises/{name}"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):      # not a git checkout, or a file not yet committed
        return (EXERCISES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(generate()))
def test_exercise_file_is_generated_from_its_solution(name):
    assert _committed(name) == generate()[name], (
        f"exercises/{name} differs from what solutions/{name} generates: run `make exercises` "
        f"(python -m andrea_course.exercises) and commit the result")


def test_no_exercise_file_without_a_solution():
    assert {p.name for p in EXERCISES.glob("*.py")} <= set(generate())


# What gives a line of code away; the idea (### HINT:) holds none of it. Shapes such as
# (B, T, D), numbers and arithmetic in words ("start + T - 1", "8D over 3") are fine.
CODE_IN_WORDS = {
    "a call, like f(x)": r"[A-Za-z_]\w*\(",
    "an attribute or method, like x.mean or torch.exp": r"\b[A-Za-z_]\w*\.[A-Za-z_]",
    "an assignment, keyword argument or comparison (=)": r"=",
    "indexing or slicing, like x[i]": r"[\w)\]]\[",
    "an operator only code uses (@, **, //, ~)": r"@|\*\*|//|~",
    "code in backticks": r"`",
}


def _code_in(idea: str) -> list[str]:
    return [what for what, pattern in CODE_IN_WORDS.items() if re.search(pattern, idea)]


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_solution_region_has_three_levels_of_hint_and_the_idea_holds_no_code(activity):
    found = regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8"))
    assert found, f"solutions/{activity}.py has no solution region"
    for r in found:
        where = f"solutions/{activity}.py, the region in {r['qualname']}"
        assert len(r["idea"].split()) >= 12, f"{where}: the idea says too little to teach: {r['idea']!r}"
        assert not _code_in(r["idea"]), f"{where}: the idea (### HINT:) gives code away: {_code_in(r['idea'])}: {r['idea']!r}"
        assert r["api"] and r["line"] and r["api"] != r["line"], f"{where}: ### API: and ### LINE: must differ"
        assert r["line"] not in r["idea"] and r["api"] not in r["idea"], where


def test_the_rule_for_code_in_words_is_fair():
    """It refuses what gives a line away and lets shapes and arithmetic in words through."""
    for code in ("x.mean(dim=-1)", "scores / math.sqrt(d_head)", "keepdim=True", "table[ids]", "q @ k",
                 "x ** 3", "H // G", "use `torch.exp`", "torch.softmax"):
        assert _code_in(f"subtract the row maximum: {code}, then divide"), code
    for words in ("The output has shape (B, T, D), one row per token.", "positions start + 1 up to start + T - 1",
                  "round 8D over 3 up to a multiple of 256; 0.044715 on the cube", "each head is K wide (H / G of them)."):
        assert not _code_in(words), words


def test_a_region_without_every_level_is_refused():
    source = ("def softmax(scores):\n    ### BEGIN SOLUTION\n    ### HINT: normalise each row of scores\n"
              "    ### LINE: return e / e.sum(-1, keepdim=True)\n    return scores\n    ### END SOLUTION\n")
    with pytest.raises(RegionError, match=r"line 2: the region in softmax has no '### API: \.\.\.' line"):
        regions(source)
    with pytest.raises(RegionError, match="more than one '### HINT:"):
        regions(source.replace("### LINE:", "### HINT: again\n    ### API: torch.exp\n    ### LINE:"))


def test_the_exercises_never_hold_the_api_or_the_line():
    texts = {p.name: p.read_text(encoding="utf-8") for p in EXERCISES.glob("*.py")}
    messages = {name: " ".join(n.value for n in ast.walk(ast.parse(text))
                               if isinstance(n, ast.Constant) and isinstance(n.value, str)) for name, text in texts.items()}
    for activity in ACTIVITIES:
        for r in regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8")):
            for level in ("api", "line"):
                leaks = [name for name, text in texts.items() if r[level] in text]
                assert not leaks, f"{activity}.{r['qualname']}: its {level} level appears in exercises/{leaks}"
            assert r["idea"] in messages[f"{activity}.py"], f"{activity}.{r['qualname']}: the stub lacks its idea"


def test_hints_json_is_generated_from_the_solutions_and_seals_all_but_the_idea():
    committed = HINTS.read_text(encoding="utf-8")
    assert committed == hints_text(), ("andrea_course/data/hints.json differs from what solutions/ generates: "
                                       "run `make exercises` and commit the result")
    table = json.loads(committed)
    pieces_ = {f"{a}.{p}" for a in ACTIVITIES for p in exercise_pieces(SOLUTIONS / f"{a}.py")}
    assert set(table) == pieces_
    for activity in ACTIVITIES:
        for r in regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8")):
            assert r["line"] not in committed and r["api"] not in committed and r["code"] not in committed
    from andrea_course.notebook.hints import levels
    softmax = levels("attention.softmax")
    assert "keepdim=True" in softmax["api"] and "amax" in softmax["line"] and "return e / e.sum" in softmax["code"]
    both = levels("model.ANDREA")             # two regions: __init__ and forward
    assert "in ANDREA.__init__:" in both["idea"] and "# in ANDREA.forward" in both["code"]


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_exercise_file_imports_and_every_piece_is_a_stub(activity):
    overlay = Overlay(EXERCISES)
    overlay.module(activity)
    assert activity not in overlay.errors, f"exercises/{activity}.py does not import: {overlay.errors.get(activity)!r}"
    pieces = exercise_pieces(SOLUTIONS / f"{activity}.py")
    assert unwritten_pieces((EXERCISES / f"{activity}.py").read_text(encoding="utf-8")) == pieces, (
        "every exercise piece starts as a stub the loader recognises")
    assert overlay.written(activity) == set()
    assert STUB_MARK in (EXERCISES / f"{activity}.py").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def _graded_exercises() -> frozenset[str]:
    """Every "activity.piece" named by @graded(...) or @pytest.mark.exercise(...) in the graded tests."""
    names = set()
    for path in (p for d in GRADED_TEST_DIRS for p in d.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called in ("graded", "exercise") and isinstance(node.args[0].value, str):
                    names.add(node.args[0].value)
    return frozenset(names)


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_exercise_piece_has_a_graded_test(activity):
    graded = _graded_exercises()
    untested = sorted(p for p in exercise_pieces(SOLUTIONS / f"{activity}.py") if f"{activity}.{p}" not in graded)
    assert not untested, f"exercise pieces of {activity} with no graded test: {untested}"


def test_every_graded_test_names_a_real_exercise():
    known = {f"{a}.{p}" for a in ACTIVITIES for p in exercise_pieces(SOLUTIONS / f"{a}.py")}
    unknown = sorted(_graded_exercises() - known)
    assert not unknown, f"graded tests name exercises that do not exist: {unknown}"


def test_make_exercises_check_fails_loudly_without_solutions(tmp_path, capsys, monkeypatch):
    """In a copy without the answer key there is nothing to generate from: say so, exit 2,
    never "0 exercise file(s) differ"."""
    import andrea_course.exercises as ex
    with pytest.raises(FileNotFoundError, match="no solution files"):
        ex.generate(tmp_path)
    monkeypatch.setattr(ex, "SOLUTIONS", tmp_path)
    assert ex.main(["--check"]) == 2
    assert "student release" in capsys.readouterr().err
