"""Every notebook cell meant to show a plot shows one: a pytest plugin for nbval's runs of the
notebooks (`-p plot_outputs`), and the rule that tests/notebook/test_browser.py applies to JupyterLab's.

A code cell is meant to show a plot when its code (a function it defines and runs through a
widget included) calls plt.show(), display(fig...) or one of andrea_course.notebook.plots'
helpers (heatmap, heatmaps, bars, curves) without an `ax=` of the caller's. Such a cell must
leave an image/png among its outputs; nbval's run of the notebook fails the cell otherwise
(a figure that never drew: the trainer once switched matplotlib's backend to Agg while saving
its loss plot, and every later plt.show() of notebook 09 showed nothing).
"""
from __future__ import annotations

import ast
import re

import pytest

PLOT_HELPERS = frozenset({"heatmap", "heatmaps", "bars", "curves"})
MAGIC = re.compile(r"^\s*[%!].*$", re.M)


def _shows_a_plot(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "show" and getattr(f.value, "id", None) == "plt":
        return True
    name = getattr(f, "id", None) or (f.attr if isinstance(f, ast.Attribute) else None)
    if name == "display":
        return any(isinstance(a, ast.Name) and a.id.startswith("fig") for a in call.args)
    return name in PLOT_HELPERS and not any(k.arg == "ax" for k in call.keywords)


def meant_to_plot(source: str) -> bool:
    """Whether a code cell's source calls something that shows a figure (see the module's text)."""
    try:
        tree = ast.parse(MAGIC.sub("", source))
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Call) and _shows_a_plot(node) for node in ast.walk(tree))


def has_image(outputs) -> bool:
    """Whether a cell's outputs (nbformat dicts) hold a PNG."""
    return any("image/png" in (out.get("data") or {}) for out in outputs)


def missing_plot(source: str, outputs) -> str | None:
    """Why a cell falls short of the rule, or None."""
    if meant_to_plot(source) and not has_image(outputs):
        return "this cell is meant to show a plot (it calls plt.show(), display(fig) or a plots helper) " \
               "but its outputs hold no image/png: the figure never drew"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After nbval has run a cell (its outputs in item.test_outputs): fail it if its plot is missing."""
    result = yield
    cell, outputs = getattr(item, "cell", None), getattr(item, "test_outputs", None)
    if cell is not None and outputs is not None and cell.get("cell_type") == "code":
        why = missing_plot(cell.source, outputs)
        if why:
            pytest.fail(why, pytrace=False)
    return result
