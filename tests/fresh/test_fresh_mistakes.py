"""The fresh mistakes (tests/fresh/fresh_mistakes*/mistakes.py, each set written without the course's
lists of typical mistakes) are named, never misnamed, and never pass; the correct variants pass.
tools/fresh_mistakes.py grades them all: minutes per set, so nightly only."""
import json
import subprocess
import sys

import pytest

from andrea_course.paths import ROOT

SETS = sorted((p.parent.name for p in (ROOT / "tests" / "fresh").glob("fresh_mistakes*/mistakes.py")),
              key=lambda name: int(name.removeprefix("fresh_mistakes") or 1))


@pytest.mark.nightly
@pytest.mark.parametrize("name", SETS)
def test_fresh_mistakes_are_named_and_variants_pass(tmp_path, name):
    out = tmp_path / "results.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "fresh_mistakes.py"),
                          "--set", str(ROOT / "tests" / "fresh" / name), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads(out.read_text())
    mistakes, variants = results["mistakes"], results["variants"]
    assert not [r["id"] for r in mistakes + variants if "patch_error" in r], run.stdout[-3000:]
    verdicts = [r["verdict"] for r in mistakes]
    table = run.stdout[run.stdout.find("file "):]
    assert [r["id"] for r in variants if not r["passed"]] == [], table
    assert [r["id"] for r in mistakes if r["verdict"] == "passed"] == [], table
    assert [r["id"] for r in mistakes if r["verdict"] == "wrong"] == [], table
    assert verdicts.count("named") >= 0.95 * len(verdicts), table
