"""One verdict in every runner: student mistakes that once got full marks from andrea-grade while
pytest and check() caught them fail the same tests under andrea-grade (sandbox), plain pytest,
check() and, where the learner's code cannot crash it, one process."""
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from andrea_course.grading import cli
from andrea_course.grading.runner import Course
from andrea_course.worker.tiers import Limits
from andrea_course.paths import ACTIVITY_TESTS
from andrea_course.worker import process

from grading_helpers import by_test, make_submission, sandboxed  # noqa: F401  (sandboxed: a fixture)


# ----------------------------------------------------------------------------- one verdict
# Student mistakes that once got full marks from andrea-grade while pytest and check() caught
# them: (file, the answer key's line, the mistaken line) or code appended to the file.
KERNEL_LOAD = '    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)'
KERNEL_STORE = "    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)"
ONE_VERDICT = {
    # the test's own tensor overwritten: the test's expected values change with it, in one process
    "dropout_in_place": ("block.py", None, """

def dropout(x, p, training, generator=None):
    if not training or p == 0:
        return x
    if p == 1:
        return x.zero_()
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return x.mul_(keep).div_(1 - p)
"""),
    # rows read n_cols apart: wrong only where x is a slice of a wider matrix
    "softmax_loads_rows_n_cols_apart": ("kernels.py", KERNEL_LOAD, KERNEL_LOAD.replace("row * x_row_stride", "row * n_cols")),
    # y stepped by x's row stride: writes past y where x is a slice (in one process: abort)
    "softmax_stores_with_x_stride": ("kernels.py", KERNEL_STORE, KERNEL_STORE.replace("row * y_row_stride", "row * x_row_stride")),
}
ONE_VERDICT_EXERCISES = ["block.dropout", "kernels.softmax_kernel"]


def _mistaken(folder: Path, file: str, old, new) -> Path:
    make_submission(folder)
    text = (folder / file).read_text()
    if old is None:
        text += new
    else:
        assert old in text, old
        text = text.replace(old, new)
    (folder / file).write_text(text)
    return folder


def _pytest_verdicts(impl: Path, isolation: str) -> dict:
    """{test name: passed} of the two test files' dropout and softmax-kernel tests, by plain pytest:
    its command line (the plugin with its own defaults, none of a runner's options), run as
    `python -m pytest` runs it, pytest.main in a process of its own: a fork of this one
    (process.start_pytest, which has imported torch and Triton already), not a new interpreter."""
    args = [str(ACTIVITY_TESTS / "test_block.py"), str(ACTIVITY_TESTS / "test_kernels.py"), "-q", "-rA", "-p", "no:cacheprovider",
            "-k", "dropout or softmax_kernel", "--impl", str(impl), "--isolation", isolation,
            "-o", "addopts=", "-p", "andrea_course.grading.plugin", "--rootdir", str(impl)]
    log = impl.parent.parent / f"{impl.name}.{isolation}.log"
    with open(log, "wb") as out:
        proc = process.start_pytest(args, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, cwd=impl, log=out)
    try:
        proc.wait(timeout=900)
    finally:
        process.end(proc, None)
    stdout = log.read_text(errors="replace")
    found = {}
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and "::" in rest:
            found[rest.split("::")[1].split(" ")[0]] = word == "PASSED"
    assert found, stdout[-5000:]
    return found


@pytest.mark.slow(seconds=80)
def test_one_verdict_in_every_runner(tmp_path, sandboxed):
    """The dropout done in place and the two row-stride mistakes of the softmax kernel fail the
    same tests under andrea-grade (sandbox), plain pytest (its worker), check() and, where the
    learner's code cannot crash the process, in one process; the reference passes them all."""
    from andrea_course.notebook import run_graded_many
    subs = {name: _mistaken(tmp_path / "class" / name, *spec) for name, spec in ONE_VERDICT.items()}
    subs["reference"] = make_submission(tmp_path / "class" / "reference")
    tests = tmp_path / "activity_tests"
    tests.mkdir()
    for name in ("test_block.py", "test_kernels.py"):
        shutil.copy(ACTIVITY_TESTS / name, tests / name)
    out = tmp_path / "results"
    options = dict(timeout_per_test=60, timeout_total=900, isolation="auto", own_work=False, uid=None, limits=Limits())
    assert cli.batch(tmp_path / "class", tmp_path / "book.csv", out, Course(tests, guard=[]), options,
                     quiet=True, jobs=2) == 0
    for name, sub in subs.items():
        _, graded = by_test(out / f"{name}.json")
        checked = run_graded_many(ONE_VERDICT_EXERCISES, impl=sub)
        in_check = {o.name: o.status == "passed" for r in checked.values() for o in r.outcomes}
        ours = lambda verdicts: {n: v for n, v in verdicts.items() if n in in_check}     # noqa: E731
        grader = ours({n: t["status"] == "passed" for n, t in graded.items()})
        in_worker = ours(_pytest_verdicts(sub, "process"))
        assert len(in_check) >= 10 and grader == in_worker == in_check, (name, grader, in_worker, in_check)
        if name != "softmax_stores_with_x_stride":          # this one may abort a process it runs in
            assert ours(_pytest_verdicts(sub, "in-process")) == grader, name
        failed = sorted(n for n, ok in grader.items() if not ok)
        if name == "reference":
            assert not failed
        else:
            assert failed and all(("dropout" in n) == (name == "dropout_in_place") for n in failed), (name, failed)
            assert name == "dropout_in_place" or failed == ["test_softmax_kernel_reads_and_writes_only_its_own_rows",
                                                            "test_softmax_kernel_strided_rows"], (name, failed)


# ----------------------------------------------------------------------------- one verdict per piece
KV_START = ("        x = self.embed(ids, start)                                   # (B, T, D)\n",
            "        x = self.embed(ids, 0)\n")          # the cache's start position dropped


def _verdict_folders(root: Path) -> dict[str, Path]:
    """The answer key, the untouched exercises, a learner half way (three activities written, one
    file that does not compile) and the answer key with mistakes that only some tests catch: the
    model's forward dropping the cache's start position (a test notebook 07 teaches), dropout in
    place, the softmax kernel's rows read n_cols apart."""
    from andrea_course.paths import ROOT
    half = make_submission(root / "half", base=ROOT / "exercises")
    for name in ("embeddings.py", "attention.py", "multihead.py"):
        shutil.copy(ROOT / "solutions" / name, half / name)
    (half / "mlp.py").write_text((half / "mlp.py").read_text() + "\ndef oops(:\n")
    mistakes = _mistaken(root / "mistakes", "model.py", *KV_START)
    for file, old, new in (ONE_VERDICT["dropout_in_place"], ONE_VERDICT["softmax_loads_rows_n_cols_apart"]):
        text = (mistakes / file).read_text()
        (mistakes / file).write_text(text + new if old is None else text.replace(old, new))
    return {"solutions": ROOT / "solutions", "exercises": ROOT / "exercises", "half": half, "mistakes": mistakes}


@pytest.mark.slow(seconds=90)
def test_check_use_and_model_pieces_agree_on_every_piece(tmp_path, capsys):
    """For every piece of the course on each folder: check()'s box is green exactly when use()
    hands out the learner's piece, passing() says "yours", and every model built from the
    folder (classic, modern, with Triton kernels) lists it as "yours" where it runs."""
    from andrea_course import learner_model, pieces
    from andrea_course.grading.passing import passing
    from andrea_course.notebook import check, run_graded_many, use
    # What a graded test's first use of the meta device imports (torch._dynamo: a second or two),
    # imported once here: each graded run below (pytest and its workers, forks of this process)
    # starts with it, instead of a worker importing it under the authorship guard in each run.
    importlib.import_module("torch._dynamo")
    every = [f"{a}.{n}" for a in pieces.ACTIVITIES for n in pieces.names(a)]
    kernels = ["torch"] + (["triton"] if importlib.util.find_spec("triton") else [])
    seen = set()
    for name, folder in _verdict_folders(tmp_path).items():
        verdicts = passing(folder, every)
        seen |= {(name, v == "yours") for v in verdicts.values()}
        # The pieces passing() did not run (not written, or a file that does not compile), in ONE
        # pytest run: check() and use() below reuse a result while the files keep their content,
        # as in a notebook, so each check() shows this run's result instead of forking a pytest of
        # its own. (check() of one unwritten piece in a run of its own: tests/notebook/test_checks.py and
        # tests/notebook/test_notebooks.py.)
        run_graded_many(every, impl=folder, reuse=True)
        for cfg in ("andrea-tiny", "andrea-tiny-modern"):
            for k in kernels:
                for piece, who in learner_model(cfg, folder, kernels=k).pieces.items():
                    if not who.startswith(("not run: kernels=", "engine: kernels=")):
                        assert (who == "yours") == (verdicts[piece] == "yours"), (name, cfg, k, piece, who, verdicts[piece])
        for piece in every:
            capsys.readouterr()
            check(piece, impl=folder)
            box = capsys.readouterr().out
            activity, _, piece_name = piece.partition(".")
            chosen = use(activity, piece_name, impl=folder, quiet=True)
            mine = getattr(chosen, "__wrapped__", chosen) is not pieces.get(activity, piece_name)
            assert box.startswith("[PASSED]") == mine == (verdicts[piece] == "yours"), (name, piece, verdicts[piece], box[:600])
        if name == "mistakes":
            assert verdicts["model.ANDREA"].startswith("engine: 1 of its ") and verdicts["block.dropout"] != "yours"
            assert verdicts["kernels.softmax_kernel"] != "yours" or "triton" not in kernels
    assert {("solutions", True), ("exercises", False), ("half", True), ("half", False), ("mistakes", False)} <= seen
