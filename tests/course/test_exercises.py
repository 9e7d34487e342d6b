"""exercises/ and data/hints.json are what the generator makes of solutions/; every solution region
has a one-line summary (what the stub and the check box say) and three levels of hint that each
say more than the stub: the idea in new words and without code, the API with an example on other
data that runs and holds no line of the solution, then the line; every exercise file imports, and
every exercise piece has at least one graded test."""
import ast
import functools
import json
import re
import subprocess
from pathlib import Path

import pytest

from andrea_course.exercises import RegionError, exercise_pieces, generate, hints_text, regions
from andrea_course.exercises import EXERCISES, HINTS, SOLUTIONS
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.paths import ROOT, STUB_MARK
from andrea_course.overlay import Overlay, unwritten_pieces

TESTS = Path(__file__).resolve().parents[1]
GRADED_TEST_DIRS = [ACTIVITY_TESTS, ROOT / "instructor" / "hidden_tests"]   # every graded test, hidden ones too
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


# What gives a line of code away; the idea (### HINT:) and the summary hold none of it. Shapes such
# as (B, T, D), numbers and arithmetic in words ("start + T - 1", "8D over 3") are fine.
CODE_IN_WORDS = {
    "a call, like f(x)": r"[A-Za-z_]\w*\(",
    "an attribute or method, like x.mean or torch.exp": r"\b[A-Za-z_]\w*\.[A-Za-z_]",
    "an assignment, keyword argument or comparison (=)": r"=",
    "indexing or slicing, like x[i]": r"[\w)\]]\[",
    "an operator only code uses (@, **, //, ~)": r"@|\*\*|//|~",
    "code in backticks": r"`",
}
SHARED_WORDS = 7          # a run of this many words of a hint level found in the stub: not new words
EXAMPLE = re.compile(r"`([^`]+)` gives `([^`]+)`")


def _code_in(idea: str) -> list[str]:
    return [what for what, pattern in CODE_IN_WORDS.items() if re.search(pattern, idea)]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _shared_run(level: str, stub: str, n: int = SHARED_WORDS) -> str | None:
    """The first run of n consecutive words of `level` that `stub` also holds, else None."""
    words, there = _words(level), " " + " ".join(_words(stub)) + " "
    for i in range(len(words) - n + 1):
        run = " ".join(words[i:i + n])
        if f" {run} " in there:
            return run
    return None


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text).replace('"', "'")


def _solution_lines(region: dict) -> list[str]:
    """The statements of a region's reference code and of its LINE level, each also without its
    `return` or assignment target, squeezed of spaces: what level 2 must not hold. Statements too
    short to give anything away (`break`, `return x`, `Counter()`) are left out."""
    found = []
    statements = [line.split("  #")[0].strip() for line in region["code"].splitlines()]
    statements += [part.strip() for part in region["line"].split(";")]
    for st in statements:
        st = re.sub(r"^(return|if|elif|while|for)\s+", "", st).rstrip(":")
        parts = [st] + ([st.split("=", 1)[1]] if re.match(r"^[\w\[\]., :]+\s*[-+*/]?=\s*[^=]", st) else [])
        found += [_squeeze(p) for p in parts if len(_squeeze(p)) >= 10]
    return found


def _stub_of(activity: str, region: dict) -> str:
    """The exercise text a learner reads for one region: the whole piece it stands in (the
    signature, the docstring, the stub's comment and message), from the generated file."""
    text = generate()[f"{activity}.py"]
    tree = ast.parse(text)
    top = region["qualname"].split(".")[0]
    node = next(n for n in tree.body if getattr(n, "name", None) == top)
    return "\n".join(text.splitlines()[node.lineno - 1:node.end_lineno])


def _all_regions():
    return [(a, r) for a in ACTIVITIES for r in regions((SOLUTIONS / f"{a}.py").read_text(encoding="utf-8"))]


def _rid(case):
    return f"{case[0]}.{case[1]['qualname']}"


@pytest.mark.parametrize("activity", ACTIVITIES)
def test_every_solution_region_has_a_summary_and_three_levels_of_hint_and_the_idea_holds_no_code(activity):
    found = regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8"))
    assert found, f"solutions/{activity}.py has no solution region"
    for r in found:
        where = f"solutions/{activity}.py, the region in {r['qualname']}"
        assert all(r[k] for k in ("summary", "idea", "api", "line")), f"{where}: a level is empty"
        assert len(r["idea"].split()) >= 12, f"{where}: the idea says too little to teach: {r['idea']!r}"
        for level in ("summary", "idea"):
            assert not _code_in(r[level]), (f"{where}: the {level} gives code away: {_code_in(r[level])}: "
                                            f"{r[level]!r}")
        width = 100 - len(r["indent"]) - len("# Hint: ")
        assert len(r["summary"]) <= width, (f"{where}: the summary is one line of the stub, at most {width} "
                                            f"characters here; it has {len(r['summary'])}")
        texts = {k: _squeeze(r[k]) for k in ("summary", "idea", "api", "line")}
        for a in texts:
            for b in texts:
                assert a == b or texts[a] not in texts[b], f"{where}: the {a} level is inside the {b} level"


@pytest.mark.parametrize("case", _all_regions(), ids=_rid)
def test_hint_level_1_is_new_words_not_the_stub(case):
    """The idea says what the stub (its docstring, comment and message) does not: no run of
    SHARED_WORDS words of it is in the piece's exercise text, nor in the summary."""
    activity, r = case
    stub = _stub_of(activity, r)
    assert r["summary"] in stub, "the stub carries the summary"
    run = _shared_run(r["idea"], stub)
    assert run is None, f"{_rid(case)}: hint level 1 repeats the stub: {run!r}"


@pytest.mark.parametrize("case", _all_regions(), ids=_rid)
def test_hint_level_2_shows_the_api_on_other_data_and_holds_no_line_of_the_solution(case):
    activity, r = case
    api = _squeeze(r["api"])
    leaks = [line for line in _solution_lines(r) if line in api]
    assert not leaks, f"{_rid(case)}: hint level 2 holds a line of the solution: {leaks}"
    assert EXAMPLE.search(r["api"]), (f"{_rid(case)}: hint level 2 has no example "
                                      f"(\"`EXPR` gives `VALUE`\", on other data): {r['api']!r}")
    assert _shared_run(r["api"], _stub_of(activity, r)) is None, f"{_rid(case)}: hint level 2 repeats the stub"


def _run_example(code: str):
    """Run an example's code: statements, then the value of the last expression."""
    import collections
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    tree = ast.parse(code)
    scope = {"torch": torch, "nn": nn, "F": F, "math": math, "Counter": collections.Counter}
    *body, last = tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), "<example>", "exec"), scope)
    assert isinstance(last, ast.Expr), f"the example {code!r} must end with an expression"
    return eval(compile(ast.Expression(last.value), "<example>", "eval"), scope)


def _same(got, want, shown: str) -> bool:
    """Whether an example's result is the VALUE shown, to the decimals shown."""
    import torch
    if isinstance(got, torch.Tensor) or (isinstance(want, (list, float)) and not isinstance(got, (str, bytes))):
        decimals = max((len(d) for d in re.findall(r"\.(\d+)", shown)), default=0)
        try:
            g = torch.as_tensor(got, dtype=torch.float64)
            w = torch.as_tensor(want, dtype=torch.float64)
        except (TypeError, ValueError):
            return got == want
        return g.shape == w.shape and bool(torch.allclose(g, w, rtol=0, atol=0.5 * 10 ** -decimals + 1e-12,
                                                          equal_nan=True))
    if isinstance(got, tuple) and isinstance(want, list):
        want = tuple(want)
    return got == want


EXAMPLES = [(f"{a}.{r['qualname']}", m.group(1), m.group(2)) for a, r in _all_regions()
            for m in EXAMPLE.finditer(r["api"])]


@pytest.mark.parametrize("piece, code, shown", EXAMPLES, ids=[f"{e[0]}:{i}" for i, e in enumerate(EXAMPLES)])
def test_every_example_of_hint_level_2_gives_what_it_says(piece, code, shown):
    got = _run_example(code)
    import torch
    want = eval(shown, {"inf": float("inf"), "nan": float("nan"), "torch": torch})
    assert _same(got, want, shown), f"{piece}: `{code}` gives {got!r}, not {shown}"


def test_the_rule_for_code_in_words_is_fair():
    """It refuses what gives a line away and lets shapes and arithmetic in words through."""
    for code in ("x.mean(dim=-1)", "scores / math.sqrt(d_head)", "keepdim=True", "table[ids]", "q @ k",
                 "x ** 3", "H // G", "use `torch.exp`", "torch.softmax"):
        assert _code_in(f"subtract the row maximum: {code}, then divide"), code
    for words in ("The output has shape (B, T, D), one row per token.", "positions start + 1 up to start + T - 1",
                  "round 8D over 3 up to a multiple of 256; 0.044715 on the cube", "each head is K wide (H / G of them)."):
        assert not _code_in(words), words


def test_the_rules_for_new_words_and_solution_lines_can_fail():
    """A level that copies the stub, or an example that is the solution's own line, is caught."""
    r = dict(code="z = scores - scores.amax(dim=-1, keepdim=True)\nreturn z.exp()", line="return z.exp() / s",
             api="`scores - scores.amax(dim=-1, keepdim=True)` gives `[0.]`")
    assert _solution_lines(r) and any(line in _squeeze(r["api"]) for line in _solution_lines(r))
    assert _shared_run("then divide each row of the scores by its own sum, over the keys",
                       "# Hint: exponentiate, then divide each row of the scores by its own sum")
    assert _shared_run("a different way of saying it entirely, in other words", "divide each row") is None
    assert _same(_run_example("t = torch.zeros(3); t[1] = 2.5; t"), [0.0, 2.5, 0.0], "[0., 2.5, 0.]")
    assert not _same(_run_example("torch.tensor([0.17])"), [0.1], "[0.1]")


def test_a_region_without_every_level_is_refused():
    source = ("def softmax(scores):\n    ### BEGIN SOLUTION\n    ### SUMMARY: normalise the rows\n"
              "    ### HINT: normalise each row of scores\n"
              "    ### LINE: return e / e.sum(-1, keepdim=True)\n    return scores\n    ### END SOLUTION\n")
    with pytest.raises(RegionError, match=r"line 2: the region in softmax has no '### API: \.\.\.' line"):
        regions(source)
    with pytest.raises(RegionError, match="more than one '### HINT:"):
        regions(source.replace("### LINE:", "### HINT: again\n    ### API: torch.exp\n    ### LINE:"))
    with pytest.raises(RegionError, match=r"has no '### SUMMARY: \.\.\.' line"):
        regions(source.replace("    ### SUMMARY: normalise the rows\n", "").replace(
            "### LINE:", "### API: torch.exp\n    ### LINE:"))


def test_the_exercises_hold_the_summary_and_no_level_of_hint():
    texts = {p.name: p.read_text(encoding="utf-8") for p in EXERCISES.glob("*.py")}
    messages = {name: " ".join(n.value for n in ast.walk(ast.parse(text))
                               if isinstance(n, ast.Constant) and isinstance(n.value, str)) for name, text in texts.items()}
    for activity in ACTIVITIES:
        for r in regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8")):
            for level in ("idea", "api", "line"):
                leaks = [name for name, text in texts.items() if r[level] in text]
                assert not leaks, f"{activity}.{r['qualname']}: its {level} level appears in exercises/{leaks}"
            assert f"Hint: {r['summary']}" in messages[f"{activity}.py"], (
                f"{activity}.{r['qualname']}: the stub's message lacks its summary")


def test_hints_json_is_generated_from_the_solutions_and_seals_all_but_the_summary():
    committed = HINTS.read_text(encoding="utf-8")
    assert committed == hints_text(), ("andrea_course/data/hints.json differs from what solutions/ generates: "
                                       "run `make exercises` and commit the result")
    table = json.loads(committed)
    pieces_ = {f"{a}.{p}" for a in ACTIVITIES for p in exercise_pieces(SOLUTIONS / f"{a}.py")}
    assert set(table) == pieces_
    for activity in ACTIVITIES:
        for r in regions((SOLUTIONS / f"{activity}.py").read_text(encoding="utf-8")):
            for level in ("idea", "api", "line", "code"):
                assert r[level] not in committed, f"{activity}.{r['qualname']}: its {level} is readable in hints.json"
    from andrea_course.notebook.hints import levels
    for piece in pieces_:
        found = levels(piece)
        assert set(found) == {"summary", "idea", "api", "line", "code"} and all(found.values()), piece
    softmax = levels("attention.softmax")
    assert "keepdim=True" in softmax["api"] and "amax" in softmax["line"] and "return e / e.sum" in softmax["code"]
    both = levels("model.ANDREA")             # two regions: __init__ and forward
    assert "in ANDREA.__init__:" in both["idea"] and "# in ANDREA.forward" in both["code"]
    assert "in ANDREA.forward:" in both["summary"]


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
