"""Plotting helpers (matplotlib only). Every helper draws and returns None; pass `ax` to draw
into a figure of your own (then nothing is shown until you show it).

A helper's own figure is a matplotlib.figure.Figure, not a pyplot one: it is shown as a PNG
(IPython's display) and leaves pyplot's backend and its list of open figures as they were."""
from __future__ import annotations

import math


def _np(m):
    try:
        import torch
        if isinstance(m, torch.Tensor):
            return m.detach().float().cpu().numpy()
    except ImportError:
        pass
    import numpy as np
    return np.asarray(m, dtype=float)


def _figure(figsize):
    from matplotlib.figure import Figure
    return Figure(figsize=figsize)


def _show(fig) -> None:
    """The figure as a PNG in the notebook (outside IPython: nothing to show it on)."""
    import io
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return
    if get_ipython() is not None:
        display(Image(data=buf.getvalue(), format="png"))


def heatmap(matrix, rows=None, cols=None, title: str = "", ax=None, cmap: str = "viridis",
            vmin=None, vmax=None, annotate: bool | None = None, fmt: str = ".2f",
            colorbar: bool = True, xlabel: str = "", ylabel: str = "") -> None:
    """Draw a 2-D matrix as a heat map, with token labels on its rows and columns.

    matrix: (R, C) tensor or array; -inf entries (a masked score) are drawn blank.
    annotate: write the values in the cells (default: when the matrix is at most 12 x 12).
    """
    import numpy as np

    m = _np(matrix)
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {m.shape}")
    shown = np.ma.masked_invalid(m)
    own = ax is None
    if own:
        size = (min(1.0 + 0.5 * m.shape[1], 9), min(0.8 + 0.45 * m.shape[0], 8))
        ax = _figure((max(size[0], 3.5), max(size[1], 2.5))).subplots()
    im = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if rows is not None:
        ax.set_yticks(range(len(rows)), [str(r) for r in rows])
    if cols is not None:
        ax.set_xticks(range(len(cols)), [str(c) for c in cols], rotation=45, ha="right")
    if annotate is None:
        annotate = m.shape[0] <= 12 and m.shape[1] <= 12
    if annotate:
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                v = m[i, j]
                text = format(v, fmt) if np.isfinite(v) else ("-inf" if v < 0 else str(v))
                dark = False
                if np.isfinite(v):                  # white text on dark cells, black on light
                    r, g, b, _ = im.cmap(im.norm(v))
                    dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if dark else "black")
    if title:
        ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    if own:
        _show(ax.figure)
    return None


def heatmaps(matrices, titles=None, rows=None, cols=None, ncols: int = 4, **kw) -> None:
    """Several heat maps side by side (e.g. one per attention head), sharing token labels."""
    n = len(matrices)
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig = _figure((3.2 * ncols, 3.0 * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.axis("off")
            continue
        heatmap(matrices[i], rows=rows if i % ncols == 0 else None, cols=cols,
                title=titles[i] if titles else "", ax=ax, colorbar=False, **kw)
        if i % ncols and rows is not None:
            ax.set_yticks([])
    _show(fig)
    return None


def bars(values: dict, title: str = "", ylabel: str = "", ax=None, fmt: str = "{:,.0f}",
         log: bool = False) -> None:
    """A labelled bar chart of {name: number}, the numbers written on the bars."""
    own = ax is None
    if own:
        ax = _figure((max(4, 1.2 * len(values)), 3.2)).subplots()
    names, nums = list(values), [float(v) for v in values.values()]
    b = ax.bar(names, nums, color="#4c72b0")
    ax.bar_label(b, labels=[fmt.format(v) for v in nums], fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", rotation=20)
    if own:
        _show(ax.figure)
    return None


def curves(x, ys: dict, title: str = "", xlabel: str = "", ylabel: str = "", ax=None,
           logx: bool = False, logy: bool = False) -> None:
    """Several named curves over the same x."""
    own = ax is None
    if own:
        ax = _figure((5.5, 3.5)).subplots()
    for name, y in ys.items():
        ax.plot(_np(x), _np(y), label=name, marker="o" if len(_np(x)) <= 12 else None)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    if own:
        _show(ax.figure)
    return None
