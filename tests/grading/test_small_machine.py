"""The autograder on Gradescope's default machine (768 MB of memory, half a CPU) in its default
container (Docker's defaults: no namespaces, no cgroup of the grader's own): the reference, the
untouched exercises and a submission that hoards memory each end with a results.json, and the
hoarder's tests say plainly that it ran out of memory, within the learner tier's share."""
import os
import shutil

import pytest

from andrea_course.exercises import EXERCISES, SOLUTIONS

from grading_helpers import make_submission, small_machine  # noqa: F401  (small_machine: a fixture)
from test_gradescope import _autograde, bundle  # noqa: F401  (bundle: a fixture)

GRADESCOPE_MEMORY = 768 << 20
GRADESCOPE_CPUS = 0.5


@pytest.mark.nightly
@pytest.mark.slow(seconds=400)
def test_each_submission_gets_a_results_json_on_gradescopes_default_machine(bundle, small_machine, tmp_path):
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("the simulated container needs root and bubblewrap")
    hoarder = make_submission(tmp_path / "hoarder", ["attention__hoards_memory"])
    for name, files, full in (("reference", sorted(SOLUTIONS.glob("*.py")), True),
                              ("untouched", sorted(EXERCISES.glob("*.py")), False),
                              ("hoarder", sorted(hoarder.glob("*.py")), None)):
        machine = small_machine(GRADESCOPE_MEMORY, GRADESCOPE_CPUS)
        data, _ = _autograde(bundle, files, container=True, machine=machine)
        peak = machine.peak()
        assert 0 < peak <= GRADESCOPE_MEMORY, (name, peak)
        top = sum(t["max_score"] for t in data["tests"])
        print(f"{name}: {data['score']} / {top}, peak {peak >> 20} MiB")
        assert len(data["tests"]) >= 40, (name, data["output"][-1000:])
        if full is True:
            assert data["score"] == top, [t["output"] for t in data["tests"] if t["status"] != "passed"][:3]
        elif full is False:
            assert data["score"] == 0
        else:
            said = {t["name"]: t["output"] for t in data["tests"] if "attention.softmax" in t["name"]}
            assert said and all("ran out of memory" in text and "MiB" in text for text in said.values()), said
            assert 0 < data["score"] < top
