#!/usr/bin/env python3
"""Notebooks from readable text, and back; and stripping outputs before a commit.

The text form is the "percent" format: a line `# %%` starts a code cell, `# %% [markdown]`
a markdown cell whose lines carry a leading `# ` (removed in the notebook).

    python tools/nb.py build notebooks/src.py notebooks/01_embeddings.ipynb
    python tools/nb.py text notebooks/01_embeddings.ipynb > /tmp/01.py    # edit, then build
    python tools/nb.py strip notebooks/*.ipynb                            # no outputs, no counts

Every notebook gets the course's kernelspec (name "andrea", display "ANDREA course") and is
written without outputs or execution counts.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

KERNELSPEC = {"name": "andrea", "display_name": "ANDREA course", "language": "python"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3",
                 "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                 "mimetype": "text/x-python", "nbconvert_exporter": "python"}


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
        write(with_ids(notebook(cells_from_text(src.read_text(encoding="utf-8"))), dst.stem), dst)
        print(f"wrote {dst}")
    elif len(argv) == 2 and argv[0] == "text":
        sys.stdout.write(to_text(json.loads(Path(argv[1]).read_text(encoding="utf-8"))))
    elif len(argv) >= 2 and argv[0] == "strip":
        for p in map(Path, argv[1:]):
            write(strip(json.loads(p.read_text(encoding="utf-8"))), p)
            print(f"stripped {p}")
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
