"""Everything the learner's release ships is written for the learner.

What andrea-release writes (andrea_course/release.py: the notebooks with their sealed quizzes
opened, the generated exercises, the learner's README, the docs, every file of the package with
its docstrings and messages, the hints with every level opened) never mentions the texts the
course was made from, "seed" texts, or how the course was made: where the usual account of
something is wrong, the course says what is true, in its own voice. "seed" as a random seed
(torch.manual_seed, --seed, seed(0), "three random seeds") is fine.

The prose written for the learner (notebooks, exercises, README, docs) is held to more: no words
about how, where or by whom the course was made ("our", sessions, "measured here", a simulated
Colab, notes to its editors such as "paste both here" or "rewrite it", generated-file banners).
"""
from __future__ import annotations

import ast
import json
import re

import pytest

from andrea_course.paths import ROOT

pytestmark = pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a learner's release)")

TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".txt", ".toml", ".yml", ".yaml", ".sh", ".cfg", ".json"}
TEXT_NAMES = {"Makefile", "postBuild", "run_autograder", "LICENSE"}
NOT_PROSE = {"andrea_course/data/tokenizer.json"}              # merges and byte strings, no words

# Phrases about the course's sources or its making: never in learner text.
ABOUT_SOURCES = {
    "a source of this course": r"\bsources? (of|for|behind) (this|the) course\b",
    "our sources": r"\bour sources?\b",
    "a source text": r"\bsource[- ]texts?\b",
    "the course texts": r"\bcourse texts?\b",
    "how the course grew": r"\b(course|it) grew (out )?(of|from)\b|\bthe course (was|is) (made|built|written) from\b",
    "a seed text": r"\bseed[- ]?(texts?|course|materials?|files?|documents?|notes?)\b",
    "the seed's, the seeds'": r"\bseed['’]s\b|\bseeds['’](?!\w)",
    "seed NNN": r"\bseeds? 0\d\d\b",
    "the seeds folder": r"\bseeds/",
    "microgpt_cuda.cu": r"microgpt_cuda",
    "the project's issue tracker": r"\bissues? #?\d+",
}
# Words about how, where or by whom the course was made, or addressed to its makers: never in
# learner text either (the course speaks of its subject, in its own voice).
MAKING_OF = {
    "our": r"\bour\b",
    "a session": r"\bsessions?\b",
    "a generated-file banner": r"(?-i:\bGENERATED\b)|\bgenerated from (the )?(solutions?|answer key|these files)\b",
    "where the course was tried": r"\b(these|our|this course's|the course's)( \w+)? machines?\b|\bmeasured here\b|"
                                  r"\b(not|never) (yet )?(checked|measured|timed|built|tried|tested)( here| on (a|one|it))\b|"
                                  r"\bnot yet timed\b|\bsimulated Colab\b",
    "who made it": r"\b(who|that) (wrote|made|built) (these|this|the) (kernels?|course|notebooks?|exercises)\b",
    "a note to the course's editors": r"\bpaste (both|them|it|the \w+) here\b|\brewrite (it|this)\b|"
                                      r"\bthe text (below|above) says\b|\bthe table above\b",
}
SEED = re.compile(r"\bseeds?\b", re.I)
# "seed" about random numbers: in code, with a number, with a word that says so, or on a line
# about random draws, generators, initialisation or batches.
RANDOM_SEED = [
    re.compile(r"(--|\.|_|`|\"|')seeds?\b"),
    re.compile(r"\bSEED\b"),                                   # a constant, in code
    re.compile(r"\bseeds? (is|in|for|if|else|and not)\b|\bin seeds?\b"),     # Python around a variable
    re.compile(r"\bseeds?\s*(=|\(|\)|\[|\]|:|,|\+|\}|`|$)"),
    re.compile(r"\bseeds? \d"),
    re.compile(r"\b(random|same|another|different|each|every|per|its|their|a new|the initial|fixed|one|two|three|"
               r"several|other|whose|any)\s+seeds?\b", re.I),
]
RANDOM_LINE = re.compile(r"random|generator|\brng\b|initiali[sz]|batch|shuffl|reproduc|data order|torch\.manual", re.I)


# What the course writes for the learner to read: the notebooks, the exercises, the README and
# the docs (the package's own code and docstrings are held to ABOUT_SOURCES only).
LEARNER_PROSE = ("notebooks/", "exercises/", "README.md", "docs/", "configs/", "binder/", "andrea_course/data/hints.json")


def problems(text: str, prose: bool = False) -> list[str]:
    """What in `text` speaks of the course's sources or its making, line by line (`prose`: text
    written for the learner to read, held to MAKING_OF too)."""
    found = []
    rules = {**ABOUT_SOURCES, **MAKING_OF} if prose else ABOUT_SOURCES
    for n, line in enumerate(text.splitlines(), 1):
        for what, pattern in rules.items():
            if re.search(pattern, line, re.I):
                found.append(f"line {n}: {what}: {line.strip()[:160]}")
        for m in SEED.finditer(line):
            start, end = max(0, m.start() - 30), m.end() + 30
            near = line[start:end]
            if not (any(p.search(near) for p in RANDOM_SEED) or RANDOM_LINE.search(line)):
                found.append(f"line {n}: 'seed' not about random numbers: {line.strip()[:160]}")
    return found


def _quiz_texts(source: str) -> list[str]:
    """The learner-visible text of every quiz(...) call in a code cell, its sealed parts opened."""
    from andrea_course.notebook.quizzes import as_question
    out = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "quiz":
            for q in map(as_question, ast.literal_eval(node.args[0])):
                out += [q.question, *q.options, q.answer_text, q.explain, *q.why.values()]
    return out


def _notebook_texts(path) -> dict[str, str]:
    texts = {}
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        source = "".join(cell["source"])
        texts[f"cell {i}"] = source
        if cell["cell_type"] == "code" and "quiz(" in source:
            texts[f"cell {i}, the quiz opened"] = "\n".join(_quiz_texts(source))
    return texts


def _hint_texts(path) -> str:
    from andrea_course.notebook.quizzes import _open
    table = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join(f"{piece}: {entry['summary']}\n" + "\n".join(_open(piece, entry["sealed"])["a"].values())
                     for piece, entry in table.items())


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A learner's release, built here."""
    from andrea_course.release import ReleaseError, build
    try:
        return build(tmp_path_factory.mktemp("release") / "course", quiet=True)
    except ReleaseError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def shipped(release) -> dict[str, str]:
    """{"file[, part]": text} of everything in the learner's release that a learner can read."""
    out = release
    texts = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        if rel in NOT_PROSE or not (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            continue
        if path.suffix == ".ipynb":
            texts.update({f"{rel}, {part}": t for part, t in _notebook_texts(path).items()})
        elif rel == "andrea_course/data/hints.json":
            texts[f"{rel}, every level opened"] = _hint_texts(path)
        else:
            texts[rel] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def test_the_release_ships_what_a_learner_reads(shipped):
    for part in ("README.md", "exercises/attention.py", "andrea_course/notebook/checks.py", "docs/install.md",
                 "notebooks/01_embeddings.ipynb, cell 0", "andrea_course/data/hints.json, every level opened"):
        assert part in shipped, part
    assert any(k.endswith("the quiz opened") for k in shipped)
    assert not any(k.startswith(("solutions/", "tests/", "instructor/")) for k in shipped)


def test_nothing_the_learner_reads_speaks_of_the_course_sources_or_its_making(shipped):
    found = {where: p for where, text in shipped.items() if (p := problems(text, where.startswith(LEARNER_PROSE)))}
    assert not found, "learner text about the course's sources or its making:\n" + "\n".join(
        f"{where}: {line}" for where, lines in found.items() for line in lines)


def test_the_learners_readme_describes_the_learners_copy(shipped):
    readme = shipped["README.md"]
    for absent in ("solutions/", "instructor/", "andrea-release", "hidden tests", "make exercises", "<!--"):
        assert absent not in readme, f"the learner's README mentions {absent!r}"
    for present in ("exercises/", "make grade", "check(", "hint("):
        assert present in readme, f"the learner's README lacks {present!r}"
    instructor = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "solutions/" in instructor and "andrea-release" in instructor      # the instructor's keeps them


def test_the_readme_markers_pair_and_the_release_refuses_a_leftover():
    from andrea_course.release import ReleaseError, readme_for_learners
    text = ("a <!-- instructor-only -->b `solutions/`<!-- /instructor-only -->c\n"
            "<!-- learner-only\nd\n-->\ne\n")
    assert readme_for_learners(text) == "a c\nd\ne\n"
    with pytest.raises(ReleaseError, match="unpaired"):
        readme_for_learners("<!-- instructor-only -->x\n")
    with pytest.raises(ReleaseError, match=r"\['solutions'\]"):
        readme_for_learners("ANDREA_IMPL=solutions grades the answer key\n")


def test_the_rule_catches_what_it_must_and_lets_random_seeds_through():
    """The phrases that were found in the course's text are caught; random seeds are not."""
    for bad in ("(The seed text credits this to \"ANDREA's CUDA engine, microgpt_cuda.cu\")",
                "A source of this course says the embedding layer is \"6 % of ~120M\".",
                "Post-norm's gradients explode in the early blocks, as the seed text says",
                "The token and position tables together, as the seed sums them",
                "Activities 4 to 7 carry the numbers of the course texts the course grew from.",
                "# The seed's worked example: [3, 4] has root mean square 3.54",
                "the seeds' typical mistakes make good wrong options",
                "seed 002 says ANDREA trains input embedding and output projection separately",
                "Our sources say: \"85M parameters in the trunk\"",
                "# ----- LayerNorm: keepdim (issue 15) -----"):
        assert problems(bad), bad
    for fine in ("torch.manual_seed(0)", "andrea-sample --prompt x --seed 1", "seed(0)", "def f(seed: int = 0):",
                 "Three runs per wiring (seeds 0, 1, 2), and within a seed the same weights and batches",
                 "run it with another random seed and it wanders somewhere else",
                 "The same data, the same seed, the same batches, the same optimizer",
                 "Two generators with the same seed give the same mask; different seeds, different masks.",
                 "The data order depends only on the seed, T and the global batch",
                 "an untrained andrea-tiny (random weights, seed 0)", "a seeded generator gives the same mask",
                 "f\"{len(seeds)} seeds each\"", "SEED = 2026", "if seed is not None:",
                 "for s in seeds for name in runs", "__all__ = [\"seed\", \"timed\"]"):
        assert not problems(fine), (fine, problems(fine))


def test_the_making_of_rule_catches_what_was_found_in_learner_text():
    """Phrases once shipped to learners (the README, docs/kernels.md, the exercise banners, a
    notebook's assert message) are caught in prose; the subject's own words are not."""
    for bad in ("installs it next to Colab's own PyTorch (10 to 21 s in our simulated Colab)",
                "That is over our 1.5 GB aim because of Triton",
                "Not yet measured on a GPU: the sessions that wrote these kernels had none.",
                "- `python bench/kernels.py --markdown`: the table above, per kernel and pass.",
                "Paste both here, with the date, when a GPU has run them.",
                "# GENERATED from solutions/bpe.py by `make exercises`. Write your code where a",
                "`exercises/` is generated from these files.",
                "assert ok, \"the text below says pre-norm ends lower in every run: rewrite it\"",
                "(Not checked here: these machines have no VS Code.)",
                "the course's install test runs the cell on a simulated Colab",
                "Measured on this course's machines (Linux, the CPU build of torch)"):
        assert problems(bad, prose=True), bad
    for fine in ("installs it next to Colab's own PyTorch.", "Binder's machine is temporary: download your work",
                 "44 tokens generated with the KV cache equal those recomputed without it",
                 "on this machine: lookup 0.12 ms, one-hot product 45.6 ms (302x slower)",
                 "Rather than trust the eye, let us measure"):
        assert not problems(fine, prose=True), (fine, problems(fine, prose=True))


def _taught_later() -> set[tuple[str, str]]:
    """(exercise, activity) of every graded test that a later notebook teaches (taught=...)."""
    from andrea_course.paths import ACTIVITY_TESTS
    found = set()
    for path in ACTIVITY_TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "graded" and node.args:
                taught = [k.value.value for k in node.keywords if k.arg == "taught" and isinstance(k.value, ast.Constant)]
                if taught:
                    found.add((node.args[0].value, taught[0]))
    return found


def test_a_check_that_says_later_tests_run_in_a_later_notebook_is_right():
    """check() tells the learner that tests taught later "run there (check(..., upto=...))": some
    notebook of that activity or a later one must make such a call (notebook 06 promised two
    tests of model.ANDREA to notebook 07, which did not run them)."""
    from andrea_course.grading.markers import LESSONS, later_or_same
    calls = set()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                         if c["cell_type"] == "code")
        calls |= set(re.findall(r"""\bcheck\(\s*["']([\w.]+)["']\s*,\s*upto=["'](\w+)["']""", code))
    pairs = _taught_later()
    assert pairs, "no graded test is taught later: the rule checks nothing"
    broken = sorted((exercise, taught) for exercise, taught in pairs
                    if taught in LESSONS and not any(e == exercise and later_or_same(taught, upto) for e, upto in calls))
    assert not broken, f"tests left for a later notebook that no notebook runs (check(exercise, upto=...)): {broken}"


# A path into the course's tree, as prose names one ("see `andrea_course/train/corpus.py`").
CITED_PATH = re.compile(r"(?<![\w/.<-])((?:solutions|tests|instructor|tools|docs|andrea_course|exercises|notebooks|bench|"
                        r"configs|binder)/[\w./-]*\w)(?![\w<*])")


def test_the_notebooks_exercises_and_readme_cite_only_files_the_learner_has(release, shipped):
    """A file a notebook, an exercise or the learner's README names is in the learner's copy (the
    exercises once sent learners to tests/test_bpe.py and to solutions/)."""
    missing = {}
    for where, text in shipped.items():
        if where.startswith(("notebooks/", "exercises/", "README.md")):
            gone = sorted({p for p in CITED_PATH.findall(text) if not (release / p).exists()})
            if gone:
                missing[where] = gone
    assert not missing, f"learner text names files their copy does not have: {missing}"
    assert CITED_PATH.findall("checks it (tests/test_bpe.py), see `andrea_course/train/corpus.py`.") == \
        ["tests/test_bpe.py", "andrea_course/train/corpus.py"]
    assert not CITED_PATH.findall("notebooks/NN_<activity>.ipynb and exercises/<activity>.py")
