"""`make grade` prints what a learner needs, and the instructors' guide and `andrea-grade --help`
say what the suite and the grader really are."""
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from andrea_course.grading import cli
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.paths import ROOT



# ----------------------------------------------------------------------------- make grade and the docs
def _collected(folders: dict[str, Path], tmp_path: Path) -> dict[str, tuple[int, float]]:
    """{tag: (graded tests, points)} of each folder, as the grader collects them (one pytest run)."""
    jsonl = tmp_path / "collected.jsonl"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "-m", "exercise",
                    "-o", "addopts=", "-p", "andrea_course.grading.plugin", "--results-jsonl", str(jsonl),
                    *map(str, folders.values())],
                   capture_output=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, cwd=tmp_path)
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    records = {r["nodeid"]: r for r in records if r["kind"] == "collected"}
    out = {}
    for tag, folder in folders.items():
        mine = [r for nodeid, r in records.items() if nodeid.split("::")[0].startswith(folder.name + "/")
                or f"/{folder.name}/" in nodeid.split("::")[0]]
        out[tag] = (len(mine), sum(r["points"] for r in mine))
    return out


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> dict[str, tuple[int, float]]:
    """_collected() of the suite and the hidden tests, collected once for this module's tests."""
    folders = {tag: folder for tag, folder in (("suite", ACTIVITY_TESTS), ("hidden", ROOT / "instructor" / "hidden_tests"))
               if folder.is_dir()}                            # a learner's release has no hidden tests
    return _collected(folders, tmp_path_factory.mktemp("collected"))


def test_the_instructors_guide_counts_the_suite(counted):
    text = (ROOT / "docs" / "instructors.md").read_text()
    assert sum(n for n, _ in counted.values()) > 0, "no graded test collected"
    for tag, (n, points) in counted.items():
        said = re.search(rf"<!-- {tag} -->(\d+) (?:graded )?tests worth (\d+) points<!-- /{tag} -->", text)
        assert said, f"docs/instructors.md does not say how many {tag} tests there are"
        assert (int(said.group(1)), float(said.group(2))) == (n, points), \
            f"docs/instructors.md says {said.group(0)}; the {tag} tests are {n}, worth {points:g} points"


def test_the_help_says_the_defaults():
    import contextlib
    out = io.StringIO()
    with pytest.raises(SystemExit), contextlib.redirect_stdout(out):
        cli.parse(["--help"])
    text = " ".join(out.getvalue().split())
    assert "andrea_course/activity_tests/" in text and "course's tests/" not in text
    for words in ("--isolation", "auto", "sandbox", "container", "--own-work", "(default: 60.0)"):
        assert words in text, words


@pytest.mark.slow(seconds=30)
def test_make_grade_prints_what_a_learner_needs(counted):
    """`make grade` (its recipe, run as the Makefile runs it): for the untouched exercises, the score
    table and one line per failing test, no traceback, exit 0 (it graded)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    recipe = subprocess.run(["make", "-n", "-s", "grade", "LAB_STAMP=", "BIN=BIN"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert recipe == "BIN/andrea-grade exercises --own-work", recipe
    done = subprocess.run([sys.executable, "-m", "andrea_course.grading.cli", *recipe.split()[1:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ANDREA_")})
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    n, points = counted["suite"]
    assert "Traceback" not in out, out
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert re.search(rf"TOTAL +0 / {points:g}\b", out), out[-500:]
    failing = [line for line in out.splitlines() if line.startswith("      x ")]
    assert len(failing) == n and all("not implemented yet" in line for line in failing), failing[:3]
    assert "isolation: a worker process as you (your own work" in out and "graded in" in out
    assert len(out.splitlines()) < n + 30
