"""The class report: what a class got right, the mistakes it made, the pieces that look copied,
and how long each student's grading took, as one self-contained HTML page or Markdown.

    results = load_results("gradebook-results/")        # {student: results.json as a dict}
    summary = summarize(results, similarity.compare(folders))
    write_report("class.html", summary)                  # or class.md

Everything here is a pure function of the per-student results (Gradescope's results.json, as
andrea-grade writes it: tests named "activity.piece: test_name") and of a similarity.Report;
andrea-grade --batch ... --report class.html calls it after grading. The HTML has no script and
loads nothing: every value from a submission is escaped.

- Pieces, in the course's order: how many students got each (all its tests passed), how many
  got part of it, how many none, and the class's mean score on it.
- Mistakes: the typical mistakes the graded tests named ("Looks like a typical mistake: ..."),
  most common first (students who made it), each with the piece and one example message.
- Similar pieces: the pairs similarity.compare listed, highest first (for the instructor to
  look at: nothing is ever zeroed because of it).
- Time: each student's grading time, slowest first (with the capstone leaderboard's validation
  loss when the results have one).
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import pieces
from .similarity import Report as SimilarityReport

MISTAKE_LINE = "Looks like a typical mistake: "
EXAMPLE_LINES = 6                   # lines of an example message shown


def mistake_of(test: dict) -> str | None:
    """The typical mistake a failed test named: its "mistake" field when the grader wrote one,
    else the "Looks like a typical mistake: ..." line of its output; None when it named none."""
    if test.get("mistake"):
        return str(test["mistake"]).strip()
    for line in str(test.get("output") or "").splitlines():
        line = line.strip()
        if line.startswith(MISTAKE_LINE):
            return line[len(MISTAKE_LINE):].strip() or None
    return None


def exercise_of(test: dict) -> str:
    """"attention.softmax" from a results.json test (its name is "exercise: test_name")."""
    tags = test.get("tags") or []
    if len(tags) >= 2 and "." in str(tags[1]):
        return str(tags[1])
    return str(test.get("name", "")).split(": ", 1)[0]


def load_results(folder: str | Path) -> dict[str, dict]:
    """{student: results.json dict} for every <student>.json in `folder` (others skipped)."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("tests"), list):
            out[path.stem] = data
    return out


# ----------------------------------------------------------------------------- the summary
@dataclass
class PieceRow:
    exercise: str
    got: int = 0                     # students with every test of the piece passed
    partly: int = 0                  # some points, not all
    none: int = 0                    # no point
    points: float = 0.0              # the piece's points (one student's maximum)
    mean: float = 0.0                # the class's mean score on it


@dataclass
class MistakeRow:
    mistake: str
    exercise: str
    students: list[str] = field(default_factory=list)
    example: str = ""                # one failing test's message that named it
    test: str = ""                   # that test's name


@dataclass
class StudentRow:
    student: str
    score: float
    max_score: float
    seconds: float
    loss: float | None = None        # the capstone leaderboard's validation loss (None: no value)


def leaderboard_value(data: dict) -> float | None:
    """The validation loss of a results.json's Gradescope "leaderboard" field, if it has one."""
    for entry in data.get("leaderboard") or []:
        if isinstance(entry, dict) and entry.get("name") == "Validation loss" \
                and type(entry.get("value")) in (int, float):
            return float(entry["value"])
    return None


@dataclass
class Summary:
    students: list[StudentRow]
    pieces: list[PieceRow]
    mistakes: list[MistakeRow]
    pairs: list                      # similarity.Pair, highest first
    threshold: float | None = None   # the similarity threshold the pairs were listed at


def _loss(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def _order(exercise: str) -> tuple:
    activity, _, name = exercise.partition(".")
    try:
        return (pieces.ACTIVITIES.index(activity), pieces.names(activity).index(name), exercise)
    except (ValueError, KeyError):
        return (len(pieces.ACTIVITIES), 0, exercise)


def summarize(results: dict[str, dict], similar: SimilarityReport | None = None) -> Summary:
    """The report's numbers from {student: results.json dict} (and the similarity pairs)."""
    students, by_piece, mistakes = [], {}, {}
    for student, data in sorted(results.items()):
        tests = [t for t in data.get("tests", []) if isinstance(t, dict)]
        students.append(StudentRow(student, float(data.get("score", sum(t.get("score", 0) for t in tests)) or 0),
                                   float(sum(t.get("max_score", 0) for t in tests)),
                                   float(data.get("execution_time", 0) or 0), leaderboard_value(data)))
        mine: dict[str, list[dict]] = {}
        for t in tests:
            mine.setdefault(exercise_of(t), []).append(t)
            named = mistake_of(t) if t.get("status") != "passed" else None
            if named:
                row = mistakes.setdefault((exercise_of(t), named), MistakeRow(named, exercise_of(t)))
                if student not in row.students:
                    row.students.append(student)
                if not row.example:
                    lines = str(t.get("output", "")).strip().splitlines()
                    row.example, row.test = "\n".join(lines[:EXAMPLE_LINES]), str(t.get("name", ""))
        for exercise, ts in mine.items():
            row = by_piece.setdefault(exercise, PieceRow(exercise))
            score, most = sum(float(t.get("score", 0)) for t in ts), sum(float(t.get("max_score", 0)) for t in ts)
            row.points = max(row.points, most)
            row.mean += score
            if ts and all(t.get("status") == "passed" for t in ts) and score >= most:
                row.got += 1
            elif score > 0:
                row.partly += 1
            else:
                row.none += 1
    for row in by_piece.values():
        row.mean = row.mean / max(row.got + row.partly + row.none, 1)
    ordered = sorted(mistakes.values(), key=lambda m: (-len(m.students), _order(m.exercise), m.mistake))
    return Summary(students=sorted(students, key=lambda s: s.student),
                   pieces=sorted(by_piece.values(), key=lambda r: _order(r.exercise)),
                   mistakes=ordered,
                   pairs=list(similar.pairs) if similar is not None else [],
                   threshold=similar.threshold if similar is not None else None)


# ----------------------------------------------------------------------------- Markdown
def _cell(text) -> str:
    """Text for a Markdown table cell: one line, pipes and markup escaped."""
    text = " ".join(str(text).split())
    for ch in "\\|*_`<>[]":
        text = text.replace(ch, "\\" + ch)
    return text


def to_markdown(summary: Summary, title: str = "Class report") -> str:
    n = len(summary.students)
    lines = [f"# {_cell(title)}", "", f"{n} student(s). Nothing here changes a score.", "",
             "## Pieces", "", "| piece | got it | partly | none | mean score |", "|---|---:|---:|---:|---:|"]
    for r in summary.pieces:
        lines.append(f"| {_cell(r.exercise)} | {r.got} of {n} | {r.partly} | {r.none} | "
                     f"{r.mean:.2f} / {r.points:g} |")
    lines += ["", "## Mistakes, most common first", ""]
    if not summary.mistakes:
        lines.append("No graded test named a typical mistake.")
    for m in summary.mistakes:
        lines += [f"- **{_cell(m.mistake)}** ({_cell(m.exercise)}): {len(m.students)} student(s): "
                  f"{_cell(', '.join(m.students))}", "", "  Example, from " + _cell(m.test) + ":", "",
                  *["      " + line for line in m.example.splitlines()], ""]
    lines += ["", "## Similar pieces", ""]
    if summary.threshold is None:
        lines.append("Not computed (andrea-grade --batch ... --similarity).")
    elif not summary.pairs:
        lines.append(f"No pair at or above {summary.threshold:g}.")
    else:
        lines += [f"Listed at or above {summary.threshold:g}, for you to look at; no score was changed.", "",
                  "| piece | student | similar to | score |", "|---|---|---|---:|"]
        lines += [f"| {_cell(p.exercise)} | {_cell(p.student)} | {_cell(p.other)} | {p.score:.2f} |"
                  for p in summary.pairs]
    board = any(s.loss is not None for s in summary.students)
    lines += ["", "## Students and time", "", "| student | score | seconds |" + (" validation loss |" if board else ""),
              "|---|---:|---:|" + ("---:|" if board else "")]
    for s in sorted(summary.students, key=lambda s: (-s.seconds, s.student)):
        lines.append(f"| {_cell(s.student)} | {s.score:g} / {s.max_score:g} | {s.seconds:.0f} |"
                     + (f" {_loss(s.loss)} |" if board else ""))
    if summary.students:
        times = sorted(s.seconds for s in summary.students)
        lines += ["", f"Median {times[len(times) // 2]:.0f} s, longest {times[-1]:.0f} s, "
                      f"{sum(times):.0f} s in all."]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- HTML
_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.bar { background: #e8e8e8; width: 10em; height: 0.8em; display: inline-block; }
.bar span { background: #3a7; height: 100%; display: block; }
pre { background: #f6f6f6; padding: 0.5em; white-space: pre-wrap; margin: 0.3em 0 0; }
li { margin-bottom: 0.8em; }
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def to_html(summary: Summary, title: str = "Class report") -> str:
    n = len(summary.students)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1><p>{n} student(s). Nothing here changes a score.</p>",
           "<h2>Pieces</h2><table><tr><th>piece</th><th>got it</th><th></th><th>partly</th><th>none</th>"
           "<th>mean score</th></tr>"]
    for r in summary.pieces:
        width = 100 * r.got / n if n else 0
        out.append(f'<tr><td>{_e(r.exercise)}</td><td class="n">{r.got} of {n}</td>'
                   f'<td><span class="bar"><span style="width:{width:.0f}%"></span></span></td>'
                   f'<td class="n">{r.partly}</td><td class="n">{r.none}</td>'
                   f'<td class="n">{r.mean:.2f} / {r.points:g}</td></tr>')
    out.append("</table><h2>Mistakes, most common first</h2>")
    if not summary.mistakes:
        out.append("<p>No graded test named a typical mistake.</p>")
    else:
        out.append("<ol>")
        for m in summary.mistakes:
            out.append(f"<li><strong>{_e(m.mistake)}</strong> ({_e(m.exercise)}): {len(m.students)} student(s): "
                       f"{_e(', '.join(m.students))}<br>Example, from {_e(m.test)}:<pre>{_e(m.example)}</pre></li>")
        out.append("</ol>")
    out.append("<h2>Similar pieces</h2>")
    if summary.threshold is None:
        out.append("<p>Not computed (andrea-grade --batch ... --similarity).</p>")
    elif not summary.pairs:
        out.append(f"<p>No pair at or above {summary.threshold:g}.</p>")
    else:
        out.append(f"<p>Listed at or above {summary.threshold:g}, for you to look at; no score was changed.</p>"
                   "<table><tr><th>piece</th><th>student</th><th>similar to</th><th>score</th></tr>")
        out += [f'<tr><td>{_e(p.exercise)}</td><td>{_e(p.student)}</td><td>{_e(p.other)}</td>'
                f'<td class="n">{p.score:.2f}</td></tr>' for p in summary.pairs]
        out.append("</table>")
    board = any(s.loss is not None for s in summary.students)
    out.append("<h2>Students and time</h2><table><tr><th>student</th><th>score</th><th>seconds</th>"
               + ("<th>validation loss</th>" if board else "") + "</tr>")
    for s in sorted(summary.students, key=lambda s: (-s.seconds, s.student)):
        out.append(f'<tr><td>{_e(s.student)}</td><td class="n">{s.score:g} / {s.max_score:g}</td>'
                   f'<td class="n">{s.seconds:.0f}</td>'
                   + (f'<td class="n">{_loss(s.loss)}</td>' if board else "") + "</tr>")
    out.append("</table>")
    if summary.students:
        times = sorted(s.seconds for s in summary.students)
        out.append(f"<p>Median {times[len(times) // 2]:.0f} s, longest {times[-1]:.0f} s, "
                   f"{sum(times):.0f} s in all.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(path: str | Path, summary: Summary, title: str = "Class report") -> Path:
    """HTML for .html/.htm, Markdown for .md/.markdown; another suffix is refused."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        text = to_html(summary, title)
    elif suffix in (".md", ".markdown"):
        text = to_markdown(summary, title)
    else:
        raise ValueError(f"--report {path}: give a .html or a .md file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
