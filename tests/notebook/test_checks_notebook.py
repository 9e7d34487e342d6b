"""Done-when of issue 15, item 3: a notebook whose exercise loops forever still finishes under
nbval, and its check cell shows the timeout's box. A copy of exercises/ with an infinite loop in
attention.softmax; a notebook that checks it, uses it and reads on; nbval runs it in a real
kernel (where check() forks the kernel's process)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from andrea_course.exercises import SOLUTIONS
from andrea_course.paths import ROOT


LIMIT = 1        # seconds per graded test in this notebook ($ANDREA_CHECK_TIMEOUT): each test of softmax loops


def _cell(src: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}


@pytest.mark.slow(seconds=15)
def test_a_notebook_with_an_infinite_loop_finishes_with_the_timeout_box(tmp_path):
    pytest.importorskip("nbval")
    sub = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", sub)
    text = (SOLUTIONS / "attention.py").read_text(encoding="utf-8")
    last = "    return e / e.sum(dim=-1, keepdim=True)\n"
    assert last in text
    (sub / "attention.py").write_text(text.replace(last, "    while True:\n        e = e + 0\n"), encoding="utf-8")
    cells = [
        _cell("from IPython.utils.capture import capture_output\n"
              "from andrea_course.notebook import check, use"),
        _cell(f"with capture_output() as cap:\n"                                   # a learner's check cell,
              f"    check('attention.softmax', impl={str(sub)!r})\n"                # its box read, then shown
              f"cap.show()\n"
              f"html = cap.outputs[0].data['text/html']\n"
              f"assert 'your code ran longer than {LIMIT} s: an infinite loop?' in html, html\n"
              f"assert 'attention.py, line' in html and 'in softmax' in html, html\n"
              f"assert '\\x1b[' not in html"),
        _cell(f"import torch\n"
              f"softmax = use('attention', 'softmax', impl={str(sub)!r})\n"
              f"assert torch.allclose(softmax(torch.zeros(2, 4)), torch.full((2, 4), 0.25))   # the reference"),
        _cell("print('the notebook read on to its end')"),
    ]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    for i, c in enumerate(nb["cells"]):
        c["id"] = f"loop-{i}"
    path = tmp_path / "loop.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    env = {**os.environ, "ANDREA_CHECK_TIMEOUT": str(LIMIT), "ANDREA_IMPL": str(sub)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", str(path),
                           "-p", "no:cacheprovider", "-q", "-o", "addopts=", f"--rootdir={tmp_path}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "4 passed" in proc.stdout, proc.stdout[-2000:]
