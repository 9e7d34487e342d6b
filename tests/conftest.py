import os
import sys
from pathlib import Path

import pytest

# tests/ is grouped by layer (tests/engine/, tests/grading/, ...; docs/architecture.md). The
# helpers the groups share (grading_helpers, learner_kernels, softmax_kernels, piece_calls,
# plot_outputs) stay here, and a test module may import one of another group (test_report reads
# activity_tests/test_attention_mutants' mutants, test_hints activity_tests/mutant_checks' graded
# files): all are imported by their bare names, from any group, however pytest is started (every
# file name under tests/ is unique).
TESTS = Path(__file__).resolve().parent
for folder in [TESTS, *sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))]:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
# activity_tests/mutant_checks.py holds the tests that each test_<activity>_mutants.py makes from its
# tables: its asserts are rewritten as a test file's are (registered before anything imports it).
pytest.register_assert_rewrite("mutant_checks")

# Triton reads this when a kernel is defined: without a GPU, run kernels in its interpreter.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch
        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:
        pass

# Tests use small tensors; on 2 cores, two pytest-xdist workers with one torch thread each
# are several times faster than threads fighting over the cores.
try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    pass

# The `student` fixture and the graded markers: pyproject.toml loads andrea_course.grading.plugin.


def _seconds(item) -> float:
    """About how long a test takes on a 2-core CI machine: a `slow` mark's seconds= (measured there;
    20 if not given), else a fraction of a second."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return 0.2
    return float(mark.kwargs.get("seconds", 20))


@pytest.hookimpl(trylast=True)          # after `-m` has deselected what does not run
def pytest_collection_modifyitems(session, config, items):
    """The longest scopes first (the sum of their tests' _seconds), each scope's tests kept
    together and in order: pytest-xdist (`--dist loadscope --no-loadscope-reorder`, as the
    Makefile runs it) hands scopes out in collection order, so the longest work starts early,
    beside other work, and the end of the run is many short scopes that keep both workers busy.
    (Its default order, by number of tests, left the one-test scopes that take a minute or two
    to the end, with the other worker idle.)"""
    def scope(item):
        return item.nodeid.rsplit("::", 1)[0]
    cost, first = {}, {}
    for i, item in enumerate(items):
        cost[scope(item)] = cost.get(scope(item), 0.0) + _seconds(item)
        first.setdefault(scope(item), i)
    items.sort(key=lambda item: (-cost[scope(item)], first[scope(item)]))
