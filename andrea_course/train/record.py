"""RUN_DIR/pieces.json: whose pieces trained a run.

    {"whose": "yours: /home/me/andrea/exercises", "folder": "/home/me/andrea/exercises",
     "pieces": {"attention.attention": "yours", "optim.adamw_step": "engine: 2 of its 5 graded tests fail", ...},
     "tokenizer": {"merges": 256, "hash": "feb2ad67160fa08d", "seconds": 1.5},
     "changes": [{"step": 400, "piece": "optim.lr_at", "before": "engine: not written yet", "now": "yours"}]}

The trainer writes the record it is handed (the engine's alone: no pieces), adds its own
tokenizer's line, keeps the record in every checkpoint and, on resume, compares: what changed
between the stop and now is said and appended to "changes". andrea-sample reads it to say whose
model it samples; andrea-train --resume reads "folder" to go on with the same pieces.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

PIECES_FILE = "pieces.json"


def read_pieces(run_dir: str | os.PathLike) -> dict | None:
    """RUN_DIR/pieces.json (None if there is none, or it cannot be read)."""
    path = Path(run_dir) / PIECES_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def model_says(record: dict, model) -> list[str]:
    """The built model has the last word on a piece the record calls "yours": a model that
    reports whose code runs in it (a `pieces` dict, as one built with a learner's pieces does)
    and runs the engine's for such a piece, says why, and the record takes its word."""
    table, notes = record.setdefault("pieces", {}), []
    for name, status in (getattr(model, "pieces", None) or {}).items():
        if table.get(name) == "yours" and status != "yours":
            table[name] = status
            notes.append(f"{name}: the model runs the engine's ({status})")
    return notes


def resumed_record(saved: dict, now: dict, step: int) -> tuple[dict, list[str]]:
    """(the record to go on with, one note per change): whose pieces ran until the checkpoint
    at `step` against whose run now. A piece's code is read afresh on resume; the run goes on
    with it, and the change is kept in "changes"."""
    before, after = saved.get("pieces", {}), now.get("pieces", {})
    changes, notes = list(saved.get("changes", [])), []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name, "not in the run"), after.get(name, "not in the run")
        if old != new:
            changes.append({"step": step, "piece": name, "before": old, "now": new})
            notes.append(f"{name}: until step {step} {old}; from now on {new}")
    for key in sorted(set(saved) | set(now)):              # the record's own lines (whose, folder, ...)
        old, new = saved.get(key), now.get(key)
        if old != new and isinstance(old or new, str):
            notes.append(f"{key}: until step {step} {old}; from now on {new}")
    return dict(now, changes=changes), notes
