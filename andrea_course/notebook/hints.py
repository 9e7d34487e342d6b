"""hint() and reveal_piece(): more help on one exercise piece, on request.

    hint("attention.softmax")          # 1st call: the idea; 2nd: what to reach for, with an
                                       # example on other data; 3rd: the line
    reveal_piece("attention.softmax")  # the reference code of that one piece: the answer

The stub in exercises/ and the check box give a one-line summary only; each level of hint says
something they do not. The summary, the three levels and the reference code come from
andrea_course/data/hints.json, which `andrea-make-exercises` generates from the answer key
(solutions/ is not needed at run time); all but the summary are sealed there like a quiz's
answers, so that opening the file does not show them at a glance (obfuscation, not a safe: it
is a self-study aid). Both return None and never raise.
"""
from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path

from ._display import box, in_notebook
from .quizzes import _open

HINTS = Path(__file__).resolve().parent.parent / "data" / "hints.json"
LEVELS = (("idea", "the idea"), ("api", "what to reach for"), ("line", "the line"))
_given: dict[str, int] = {}       # exercise -> levels shown so far in this kernel


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(HINTS.read_text(encoding="utf-8"))


def levels(exercise: str) -> dict:
    """{"summary", "idea", "api", "line", "code"} of one exercise piece ("activity.piece"). Raises KeyError
    (with the known names) for an unknown piece, OSError when the hints are not installed."""
    table = _table()
    if exercise not in table:
        close = difflib.get_close_matches(str(exercise), table, n=3)
        raise KeyError(f"no exercise piece named {exercise!r}" +
                       (f"; did you mean {' or '.join(map(repr, close))}?" if close else
                        f"; write it as 'activity.piece', e.g. 'attention.softmax'"))
    entry = table[exercise]
    return {"summary": entry["summary"], **_open(exercise, entry["sealed"])["a"]}


def _failed(exercise: str, exc: Exception) -> None:
    reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
    box("error", f"{exercise}: no hint", [("", [("", reason)])])


def hint(exercise: str, level: int | None = None) -> None:
    """Show the next level of help for one piece (each call one more: the idea, what to reach
    for, the line), or every level up to `level` (1 to 3)."""
    try:
        found = levels(exercise)
    except Exception as exc:                             # noqa: BLE001 - a hint must not break a notebook
        return _failed(exercise, exc)
    n = _given.get(exercise, 0) + 1 if level is None else int(level)
    n = max(1, min(len(LEVELS), n))
    _given[exercise] = max(n, _given.get(exercise, 0))
    rows = [(label, found[key]) for key, label in LEVELS[:n]]
    footer = (f'run hint("{exercise}") again for {LEVELS[n][1]}' if n < len(LEVELS) else
              f'that is every hint; reveal_piece("{exercise}") shows the reference code, which is the answer')
    box("note", f"{exercise}: hint {n} of {len(LEVELS)}", [("", rows)], footer)
    return None


def reveal_piece(exercise: str) -> None:
    """Show the reference code of one piece, saying plainly that it is the answer."""
    try:
        code = levels(exercise)["code"]
    except Exception as exc:                             # noqa: BLE001
        return _failed(exercise, exc)
    _given[exercise] = len(LEVELS)
    head = (f"The answer: the reference code of {exercise}, as the answer key writes it. Read it, "
            f"close it, then write your own version in exercises/{exercise.split('.')[0]}.py "
            f'and run check("{exercise}").')
    if in_notebook():
        from IPython.display import Markdown, display
        display(Markdown(f"**{head}**\n\n```python\n{code}\n```"))
    else:
        print(f"{head}\n\n{code}")
    return None
