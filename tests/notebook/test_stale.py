"""Never stale (issue 30, item 2): a notebook that holds the learner's code in a variable (a module
in its first cell, a piece from use() in one cell called in a later one) runs, in the next cell,
the code the learner's file holds after an edit. The notebooks' own cells run here in this process,
in order, with a temporary learner's folder edited between two of them."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from andrea_course.exercises import SOLUTIONS
from andrea_course.notebook.fresh import Watched, learner_module
from andrea_course.paths import ROOT

NOTEBOOKS = ROOT / "notebooks"
EXERCISES = ROOT / "exercises"


def _cells(notebook: str) -> dict[str, str]:
    """{cell id: source} of a notebook's code cells."""
    nb = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))
    return {c["id"]: "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"}


def _run(cells: dict[str, str], cell_id: str, ns: dict) -> None:
    exec(compile(cells[cell_id], f"<{cell_id}>", "exec"), ns)


def _with_marker(source: str, function: str, marker: str) -> str:
    """source with `print(marker)` as the first statement of `function`'s body (after its docstring)."""
    head = re.search(rf"^def {function}\(.*?\"\"\".*?\"\"\"\n", source, re.S | re.M)
    assert head, function
    return source[:head.end()] + f"    print({marker!r})\n" + source[head.end():]


@pytest.fixture
def learner(tmp_path, monkeypatch):
    """A learner's folder, a copy of the untouched exercises, that the notebooks check."""
    folder = tmp_path / "exercises"
    shutil.copytree(EXERCISES, folder)
    monkeypatch.setenv("ANDREA_IMPL", str(folder))
    threads = torch.get_num_threads()
    yield folder
    torch.set_num_threads(threads)


def test_every_notebook_holds_the_learners_modules_through_the_accessor():
    """No notebook loads a learner's module itself (Overlay(...).module(...)): each goes through
    learner_module(), which reads the file again when it changes."""
    holding = {}
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        code = "\n".join(_cells(path.name).values())
        assert not re.search(r"Overlay\([^)]*\)\s*\.module\(", code), f"{path.name} loads a learner's module itself"
        holding[path.name] = re.findall(r"learner_module\(\"(\w+)\"\)", code)
    assert holding["08_kernels.ipynb"] == ["kernels"] and holding["09_capstone.ipynb"] == ["bpe"], holding


def test_a_change_of_content_is_seen_even_with_the_same_size_and_time(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    seen = Watched(lambda: [f])
    assert seen.changed() and not seen.changed()
    st = f.stat()
    f.write_text("x = 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    assert seen.changed() and not seen.changed()


def test_09_runs_the_train_bpe_written_after_its_first_cell(learner, capsys):
    """Notebook 09 loads the learner's bpe module in its first cell, when train_bpe is still the
    stub; the learner then writes it: the next cell runs theirs, not the engine's."""
    cells = _cells("09_capstone.ipynb")
    ns: dict = {}
    _run(cells, "09-capstone-002", ns)
    _run(cells, "09-capstone-006", ns)
    capsys.readouterr()
    marker = "the train_bpe written after the first cell ran"
    (learner / "bpe.py").write_text(_with_marker((SOLUTIONS / "bpe.py").read_text(encoding="utf-8"), "train_bpe", marker),
                                    encoding="utf-8")
    _run(cells, "09-capstone-016", ns)
    out = capsys.readouterr().out
    assert "your files changed: exercises/bpe.py read again" in out and marker in out, out
    assert len(ns["merges"]) == 40
    (learner / "bpe.py").write_text((EXERCISES / "bpe.py").read_text(encoding="utf-8"), encoding="utf-8")
    _run(cells, "09-capstone-016", ns)                       # back to the stub: the engine's again
    assert marker not in capsys.readouterr().out and len(ns["merges"]) == 40


@pytest.mark.slow(seconds=10)
def test_06_runs_the_sample_next_written_after_use(learner, capsys):
    """Notebook 06 takes sample_next from use() in one cell (the stub: the engine's) and calls it
    in the next; written in between, the next cell runs the learner's, after its tests pass."""
    cells = _cells("06_model.ipynb")
    ns: dict = {}
    for cell in ("06-model-002", "06-model-027", "06-model-034"):
        _run(cells, cell, ns)
    assert "model.sample_next: using the engine's (yours is not written yet)" in capsys.readouterr().out
    marker = "the sample_next written after use() ran"
    text = (SOLUTIONS / "model.py").read_text(encoding="utf-8")
    (learner / "model.py").write_text(_with_marker(text, "sample_next", marker), encoding="utf-8")
    _run(cells, "06-model-036", ns)
    out = capsys.readouterr().out
    assert "model.sample_next: your file changed: now using yours (all" in out and marker in out, out


@pytest.mark.slow(seconds=10)
def test_08_runs_the_kernel_written_after_its_first_cell(learner, capsys, monkeypatch):
    """Notebook 08 loads the learner's kernels module in its first cell, with gelu_kernel the stub
    (its cell prints the stub's NotImplementedError); written, the same cell runs it."""
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        monkeypatch.setenv("TRITON_INTERPRET", "1")          # the notebook's first cell sets it too
    cells = _cells("08_kernels.ipynb")
    ns: dict = {}
    _run(cells, "08-kernels-002", ns)
    _run(cells, "08-kernels-008", ns)
    assert "your gelu_kernel:" in capsys.readouterr().out
    shutil.copy(SOLUTIONS / "kernels.py", learner / "kernels.py")
    _run(cells, "08-kernels-008", ns)
    out = capsys.readouterr().out
    assert "your files changed: exercises/kernels.py read again" in out, out
    assert "largest error against PyTorch's GELU:" in out and "your gelu_kernel" not in out, out


def test_a_learner_module_reads_a_broken_file_as_the_engines_and_says_why(learner, capsys):
    bpe = learner_module("bpe")
    assert bpe.split_words("a b")
    (learner / "bpe.py").write_text("def broken(:\n", encoding="utf-8")
    assert bpe.train_bpe("aa aa", 1) == [(97, 97)]              # the engine's, standing in
    assert "exercises/bpe.py could not be loaded, so the engine's pieces stand in" in capsys.readouterr().out


def test_a_class_from_use_builds_the_class_its_file_holds_now(learner, capsys):
    """use() of a class, then an edit of its file: the next construction builds the new class
    (after its tests pass), and a class derived before the edit keeps what it derived from."""
    shutil.copy(SOLUTIONS / "model.py", learner / "model.py")
    from andrea_course.notebook import use
    KVCache = use("model", "KVCache")
    args = (1, 2, 8, 4, torch.float32, "cpu")
    assert isinstance(KVCache(*args), KVCache.__wrapped__) and "using yours" in capsys.readouterr().out
    marker = "the KVCache written after use() ran"
    text = (learner / "model.py").read_text(encoding="utf-8")
    head = re.search(r"^class KVCache.*?\n    def __init__\(self.*?\):\n", text, re.S | re.M)
    assert head
    (learner / "model.py").write_text(text[:head.end()] + f"        print({marker!r})\n" + text[head.end():],
                                      encoding="utf-8")
    cache = KVCache(*args)
    out = capsys.readouterr().out
    assert "model.KVCache: your file changed: now using yours (all" in out and out.count(marker) == 1, out
    assert type(cache) is KVCache.__wrapped__ and cache.pos == 0
