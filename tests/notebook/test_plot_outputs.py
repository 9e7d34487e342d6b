"""The rule that every cell meant to show a plot shows one (tests/plot_outputs.py): what it counts
as a plot cell, and that nbval's run fails a plot cell whose figure never drew."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from andrea_course.paths import ROOT
from plot_outputs import has_image, meant_to_plot, missing_plot

PNG = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}
TEXT = {"output_type": "stream", "name": "stdout", "text": "1.0\n"}


def test_what_counts_as_a_plot_cell():
    for plots in ("fig, ax = plt.subplots()\nax.plot([1, 2])\nplt.show()",
                  "heatmap(scores, rows=words, cols=words)",
                  "def show(layer):\n    heatmaps(w[layer])\nwidgets.interact(show, layer=(0, 3))",
                  "%time x = 1\ndisplay(fig)", "plots.curves(x, {'y': y})"):
        assert meant_to_plot(plots), plots
    for not_plots in ("fig, axes = plt.subplots(1, 2)\nheatmap(a, ax=axes[0])",
                      "print(bars)", "display(HTML('<b>x</b>'))", "plt.close(fig)", "x = (1,"):
        assert not meant_to_plot(not_plots), not_plots
    assert has_image([TEXT, PNG]) and not has_image([TEXT])
    assert missing_plot("plt.show()", [TEXT]) and missing_plot("plt.show()", [PNG]) is None
    assert missing_plot("print(1)", []) is None


def test_every_notebook_with_pictures_has_cells_the_rule_checks():
    """The course's notebooks draw with the calls the rule knows (a notebook that drew some other
    way would have its pictures go unchecked)."""
    counted = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        counted[path.stem] = sum(c["cell_type"] == "code" and meant_to_plot("".join(c["source"])) for c in cells)
        drawing = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and "plt.subplots" in "".join(c["source"])]
        unchecked = [i for i in drawing if not meant_to_plot("".join(cells[i]["source"]))]
        assert not unchecked, f"{path.name}: cells {unchecked} make a figure the rule does not see shown"
    assert counted["09_capstone"] >= 2 and sum(counted.values()) >= 20, counted


@pytest.mark.slow(seconds=15)
def test_nbval_fails_a_plot_cell_whose_figure_never_drew(tmp_path):
    """One notebook under nbval with the plugin: a plot that draws passes; a figure shown after the
    backend was switched to Agg (what the trainer once did) fails, naming why."""
    code = ["import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nplt.show()",
            "import matplotlib\nmatplotlib.use('Agg')",
            "fig, ax = plt.subplots()\nax.plot([2, 1])\nplt.show()"]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                          "language": "python"}},
          "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": s} for i, s in enumerate(code)]}
    (tmp_path / "plots.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]), OMP_NUM_THREADS="1")
    env.pop("MPLBACKEND", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "plot_outputs",
                          "--nbval-lax", "--nbval-current-env", "-q", "-rf", "plots.ipynb"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    assert "2 passed" in out and "1 failed" in out and "plots.ipynb::Cell 2" in out, out[-3000:]
    assert "the figure never drew" in out, out[-3000:]


def _touches_pyplot(source: str) -> list[int]:
    """The lines of `source` that import pyplot or call matplotlib.use(...)."""
    import ast
    lines = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
        if any(n.startswith("matplotlib.pyplot") for n in names) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "use"
                and getattr(node.func.value, "id", None) == "matplotlib"):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_package_leaves_matplotlibs_backend_and_pyplot_to_the_notebook():
    """No module of andrea_course switches matplotlib's backend or draws through pyplot: a library
    figure is a matplotlib.figure.Figure, saved or shown as a PNG, so the notebook's own
    plt.show() keeps drawing whatever the library did before it."""
    found = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "andrea_course").rglob("*.py"))
             if (lines := _touches_pyplot(path.read_text(encoding="utf-8")))}
    assert not found, f"library code that imports pyplot or switches the backend (file: lines): {found}"
    assert _touches_pyplot("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                           "from matplotlib import pyplot\nfrom matplotlib.figure import Figure\n") == [2, 3, 4]
