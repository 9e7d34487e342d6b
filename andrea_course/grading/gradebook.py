"""The gradebooks an LMS imports, written from a batch's results: Canvas's and Moodle's CSV.

    andrea-grade --batch class/ --csv book.csv --gradebook canvas --gradebook moodle \\
                 [--roster roster.csv [--roster-key folder]] [--assignment "ANDREA (1234)"] \\
                 [--grade-items total|activities] [--scale-to 100]

A student of a batch is a submission folder; an LMS knows them by its own identity. The roster
(optional) maps one to the other: a CSV with one row per student, whose --roster-key column
(default "folder") holds the submission folder names and whose other columns are the LMS's own.
A Canvas gradebook export is such a roster once a "folder" column is added, or as it is with
--roster-key "SIS Login ID" when the folders are named by login. A folder with no roster row is
left out of the LMS gradebooks with one line saying so (Moodle aborts a whole import on one
unknown user). Without a roster the folder name is the identity: Canvas's "SIS Login ID",
Moodle's "Username".

Canvas (Grades > Import): the columns "Student", "ID", "SIS User ID", "SIS Login ID", "Section"
(Canvas finds the student by any of the first four), then one column per assignment, then a
"Points Possible" row under the header. An assignment column named "Name (1234)" fills the
existing assignment 1234; a name without an ID makes a new assignment at import.

Moodle (Grades > Import > CSV file): a header row and one row per student; at import the
instructor maps one column to a user field ("Map from" -> useremail, username or useridnumber)
and each grade column to a grade item (or "new grade item"). No points row: the grade item's
maximum is Moodle's setting. Moodle refuses a grade above 100 unless the site allows unlimited
grades: --scale-to 100 writes percentages.

The scores are the full scores, hidden tests included (results.json's "score"); the
capstone's validation loss is never a grade and stays in andrea-grade's own CSV.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from .report import exercise_of

FORMATS = ("canvas", "moodle")
ITEMS = ("total", "activities")
DEFAULT_ASSIGNMENT = "ANDREA autograder"
ROSTER_KEY = "folder"
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_FINDS_BY = CANVAS_IDENTITY[:4]
CANVAS_POINTS = "Points Possible"
# Moodle's column names (its gradebook export's) -> the roster headers read as them
MOODLE_IDENTITY = {"First name": ("first name", "firstname"), "Last name": ("last name", "lastname"),
                   "ID number": ("id number", "idnumber", "useridnumber"),
                   "Email address": ("email address", "email", "useremail"), "Username": ("username",)}
MOODLE_FINDS_BY = {"Email address": "useremail", "Username": "username", "ID number": "useridnumber"}
MOODLE_MAX = 100                         # Moodle's $CFG->gradepointmax without unlimited grades


class GradebookError(ValueError):
    """A roster or an option the gradebooks cannot use; the message says what, in one line."""


# ----------------------------------------------------------------------------- the roster
@dataclass
class Roster:
    source: str                          # the file, as named on the command line
    key: str                             # the column holding the submission folder names
    columns: list[str]
    rows: dict[str, dict[str, str]]      # folder name -> that row


def read_roster(path: str | Path, key: str = ROSTER_KEY) -> Roster:
    """The roster CSV (a Canvas export's "Points Possible" row skipped); GradebookError when
    the key column is missing or one folder name is on two rows."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            table = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as exc:
        raise GradebookError(f"--roster {path}: cannot be read ({exc})") from None
    if not table:
        raise GradebookError(f"--roster {path} is empty: it needs a header row")
    columns = [c.strip() for c in table[0]]
    if key not in columns:
        raise GradebookError(f"--roster {path} has no column {key!r} (its columns: {', '.join(columns)}): "
                             f"name the column of submission folder names with --roster-key")
    rows, seen = {}, {}
    for number, cells in enumerate(table[1:], start=2):
        row = {c: (cells[i].strip() if i < len(cells) else "") for i, c in enumerate(columns)}
        if not row[key] or row.get("Student", "") == CANVAS_POINTS:
            continue
        if row[key] in rows:
            raise GradebookError(f"--roster {path}: {row[key]!r} is in column {key!r} on rows {seen[row[key]]} "
                                 f"and {number}: one row per student")
        rows[row[key]], seen[row[key]] = row, number
    return Roster(str(path), key, columns, rows)


def identity_columns(kind: str, roster: Roster | None) -> list[str]:
    """The identity columns a `kind` gradebook gets from this roster (or without one)."""
    if kind == "canvas":
        if roster is not None and not set(CANVAS_FINDS_BY) & set(roster.columns):
            raise GradebookError(f"--roster {roster.source} has none of the columns Canvas finds a student "
                                 f"by: {', '.join(CANVAS_FINDS_BY)}")
        return list(CANVAS_IDENTITY)
    if roster is None:
        return ["Username"]
    found = [name for name, aliases in MOODLE_IDENTITY.items() if _moodle_column(roster, aliases)]
    if not set(found) & set(MOODLE_FINDS_BY):
        raise GradebookError(f"--roster {roster.source} has none of the columns Moodle finds a user by: "
                             f"{', '.join(MOODLE_FINDS_BY)} (or email, username, idnumber)")
    return found


def _moodle_column(roster: Roster, aliases: tuple[str, ...]) -> str | None:
    return next((c for c in roster.columns if c.lower() in aliases), None)


def identity(kind: str, roster: Roster | None, folder: str, columns: list[str]) -> dict[str, str] | None:
    """The student's identity cells; None when the roster has no row for the folder, or its row
    has none of the cells the LMS finds a student by."""
    if roster is None:
        return {c: (folder if c in ("SIS Login ID", "Username") else "") for c in columns}
    row = roster.rows.get(folder)
    if row is None:
        return None
    if kind == "canvas":
        cells = {c: row.get(c, "") for c in columns}
        finds = CANVAS_FINDS_BY
    else:
        cells = {c: row[_moodle_column(roster, MOODLE_IDENTITY[c])] for c in columns}
        finds = MOODLE_FINDS_BY
    return cells if any(cells.get(c) for c in finds) else None


# ----------------------------------------------------------------------------- the grade columns
@dataclass
class Column:
    name: str
    points: float                        # the most a student can get (the largest max_score)
    scores: dict[str, float] = field(default_factory=dict)


def columns(results: dict[str, dict], items: str = "total", assignment: str = DEFAULT_ASSIGNMENT,
            scale_to: float | None = None) -> list[Column]:
    """One column for the total, or one per activity (in the order the tests ran), from
    {student: results.json dict}; scaled so each column's most is `scale_to` when given."""
    if items not in ITEMS:
        raise GradebookError(f"--grade-items must be one of {', '.join(ITEMS)}, got {items!r}")
    out: dict[str, Column] = {}
    for student, data in results.items():
        mine: dict[str, list[float]] = {}
        for t in data.get("tests", []):
            name = assignment if items == "total" else f"{assignment}: {exercise_of(t).split('.')[0]}"
            got = mine.setdefault(name, [0.0, 0.0])
            got[0] += float(t.get("score", 0) or 0)
            got[1] += float(t.get("max_score", 0) or 0)
        for name, (score, most) in mine.items():
            column = out.setdefault(name, Column(name, 0.0))
            column.points = max(column.points, most)
            column.scores[student] = score
    if scale_to is not None:
        for column in out.values():
            factor = scale_to / column.points if column.points else 0.0
            column.scores = {s: v * factor for s, v in column.scores.items()}
            column.points = float(scale_to) if column.points else 0.0
    return list(out.values())


def number(value: float) -> str:
    """12.5, 3, 0.33: two decimals at most, no trailing zeros (both LMSs read a plain number)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


# ----------------------------------------------------------------------------- writing
@dataclass
class Written:
    kind: str
    path: Path
    students: list[str]                  # the folders written, in order
    missing: list[str]                   # folders without a roster row (left out)
    absent: list[str]                    # roster rows without a folder (not written)
    notes: list[str]


def check(kind: str, roster: Roster | None, items: str = "total", assignment: str = DEFAULT_ASSIGNMENT) -> None:
    """GradebookError, in one line, for what `write` could not use: asked before any grading."""
    if kind not in FORMATS:
        raise GradebookError(f"--gradebook must be one of {', '.join(FORMATS)}, got {kind!r}")
    if items not in ITEMS:
        raise GradebookError(f"--grade-items must be one of {', '.join(ITEMS)}, got {items!r}")
    if items == "activities" and re.search(r"\(\d+\)\s*$", assignment):
        raise GradebookError(f"--assignment {assignment!r} names one Canvas assignment by its ID: "
                             f"use it with --grade-items total")
    identity_columns(kind, roster)


def write(kind: str, path: str | Path, results: dict[str, dict], roster: Roster | None = None,
          items: str = "total", assignment: str = DEFAULT_ASSIGNMENT, scale_to: float | None = None) -> Written:
    """Write the `kind` gradebook of {student folder: results.json dict} to `path`."""
    check(kind, roster, items, assignment)
    ident = identity_columns(kind, roster)
    grades = columns(results, items, assignment, scale_to)
    rows, written, missing = [], [], []
    for folder in sorted(results):
        cells = identity(kind, roster, folder, ident)
        if cells is None:
            missing.append(folder)
            continue
        written.append(folder)
        rows.append([cells[c] for c in ident] + [number(g.scores[folder]) if folder in g.scores else ""
                                                 for g in grades])
    header = ident + [g.name for g in grades]
    if kind == "canvas":
        rows.insert(0, [CANVAS_POINTS] + [""] * (len(ident) - 1) + [number(g.points) for g in grades])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    absent = sorted(set(roster.rows) - set(results)) if roster is not None else []
    return Written(kind, path, written, missing, absent, _notes(kind, roster, ident, grades, scale_to))


def _notes(kind, roster, ident, grades, scale_to) -> list[str]:
    notes = []
    if roster is None:
        field_ = "SIS Login ID" if kind == "canvas" else "Username"
        notes.append(f"no --roster: each submission folder's name is written as the {field_}")
    if kind == "moodle":
        found = [c for c in ident if c in MOODLE_FINDS_BY]
        notes.append(f"at import, map {found[0]!r} to {MOODLE_FINDS_BY[found[0]]}")
        high = [g for g in grades if g.points > MOODLE_MAX]
        if high and scale_to is None:
            notes.append(f"{high[0].name!r} goes up to {number(high[0].points)} points and Moodle refuses a grade "
                         f"above {MOODLE_MAX} unless the site allows unlimited grades: --scale-to 100 writes "
                         f"percentages")
    return notes


def describe(done: Written) -> list[str]:
    """What the command line prints: the file, then one line per folder left out, then notes."""
    lines = [f"{done.kind} gradebook: {done.path} ({len(done.students)} student(s))"]
    for folder in done.missing:
        lines.append(f"  {done.kind}: submission folder {folder!r} has no roster row naming its {done.kind} "
                     f"identity: left out of {done.path.name} (add it to the roster)")
    if done.absent:
        lines.append(f"  {done.kind}: {len(done.absent)} roster row(s) have no submission folder, not written: "
                     + ", ".join(done.absent[:10]) + (" ..." if len(done.absent) > 10 else ""))
    lines += [f"  {done.kind}: {n}" for n in done.notes]
    return lines
