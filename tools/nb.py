#!/usr/bin/env python3
"""Notebooks from readable text, and back; and stripping outputs before a commit.

The text form is the "percent" format: a line `# %%` starts a code cell, `# %% [markdown]`
a markdown cell whose lines carry a leading `# ` (removed in the notebook).

    python tools/nb.py build notebooks/src.py notebooks/01_embeddings.ipynb   # Colab cell included
    python tools/nb.py text notebooks/01_embeddings.ipynb > /tmp/01.py    # edit, then build
    python tools/nb.py strip notebooks/*.ipynb                            # no outputs, no counts
    python tools/nb.py colab notebooks/*.ipynb                            # the Colab badge and cell

Every notebook gets the kernelspec `python3` (what Colab, Binder and VS Code recognise; `make lab`
registers the course's venv under that name) and is written without outputs or execution
counts. `colab` puts an "Open in Colab" badge under each notebook's title and, as its first code
cell, the set-up cell that runs on Colab only (andrea_course/notebook/colab.py); both take the
repository's address from pyproject.toml's [project.urls] Repository (andrea_course/links.py;
`python -m andrea_course.links URL` sets it and rewrites every link of the checkout).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3",
                 "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                 "mimetype": "text/x-python", "nbconvert_exporter": "python"}


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The badge, the set-up cell and the addresses: andrea_course/links.py (one setting for every link).
from andrea_course.links import (COLAB_BADGE, COLAB_CELL, COLAB_CELL_ID, binder_url, colab_badge,  # noqa: E402,F401
                                 colab_url, repository)


def with_colab(nb: dict, notebook_name: str, repo: str | None = None) -> dict:
    """The badge as the title cell's third line, the set-up cell right after the title cell;
    replaced in place when they are there already (other cells untouched)."""
    repo = repo or repository()
    title = nb["cells"][0]
    lines = [r for r in title["source"] if COLAB_BADGE not in r]
    if len(lines) > 2 and lines[1] == "\n" and lines[2] == "\n":      # the badge's blank line
        del lines[2]
    title["source"] = lines[:2] + [colab_badge(notebook_name, repo) + "\n", "\n"] + lines[2:]
    cell = {"cell_type": "code", "execution_count": None, "id": COLAB_CELL_ID, "metadata": {},
            "outputs": [], "source": _lines(COLAB_CELL.format(repo=repo))}
    first_line = COLAB_CELL.split("\n")[0]
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != COLAB_CELL_ID and
                   not "".join(c["source"]).startswith(first_line)]
    nb["cells"].insert(1, cell)
    return nb


def _lines(text: str) -> list[str]:
    rows = text.split("\n")
    return [r + "\n" for r in rows[:-1]] + ([rows[-1]] if rows[-1] else [])


def cells_from_text(text: str) -> list[dict]:
    cells, kind, buf = [], None, []

    def flush():
        if kind is None:
            return
        body = "\n".join(buf).strip("\n")
        if kind == "markdown":
            body = "\n".join(r[2:] if r.startswith("# ") else r.lstrip("#") for r in body.split("\n"))
            cells.append({"cell_type": "markdown", "metadata": {}, "source": _lines(body)})
        else:
            cells.append({"cell_type": "code", "execution_count": None, "metadata": {},
                          "outputs": [], "source": _lines(body)})

    for row in text.split("\n"):
        if row.startswith("# %%"):
            flush()
            kind, buf = ("markdown" if "[markdown]" in row else "code"), []
        elif kind is not None:
            buf.append(row)
    flush()
    return cells


def notebook(cells: list[dict]) -> dict:
    return {"cells": cells, "metadata": {"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO},
            "nbformat": 4, "nbformat_minor": 5}


def with_ids(nb: dict, stem: str) -> dict:
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"{stem[:40]}-{i:03d}".replace("_", "-")
    return nb


def strip(nb: dict) -> dict:
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items()
                            if k not in ("execution", "collapsed", "scrolled")}
    nb["metadata"]["kernelspec"] = KERNELSPEC
    nb["metadata"].pop("widgets", None)
    return nb


def write(nb: dict, path: Path) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def to_text(nb: dict) -> str:
    out = []
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            out.append("# %% [markdown]\n" + "\n".join(("# " + r) if r else "#" for r in src.split("\n")))
        else:
            out.append("# %%\n" + src)
    return "\n\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "build":
        src, dst = Path(argv[1]), Path(argv[2])
        nb = with_ids(notebook(cells_from_text(src.read_text(encoding="utf-8"))), dst.stem)
        write(with_colab(nb, dst.name), dst)
        print(f"wrote {dst}")
    elif len(argv) == 2 and argv[0] == "text":
        sys.stdout.write(to_text(json.loads(Path(argv[1]).read_text(encoding="utf-8"))))
    elif len(argv) >= 2 and argv[0] == "strip":
        for p in map(Path, argv[1:]):
            write(strip(json.loads(p.read_text(encoding="utf-8"))), p)
            print(f"stripped {p}")
    elif len(argv) >= 2 and argv[0] == "colab":
        for p in map(Path, argv[1:]):
            write(with_colab(json.loads(p.read_text(encoding="utf-8")), p.name), p)
            print(f"Colab badge and set-up cell in {p}")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
