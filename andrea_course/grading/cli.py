"""andrea-grade: grade one submission, or a whole class, each isolated from the grader.

    andrea-grade SUBMISSION [--out results.json] [--hidden-tests DIR] [options]
    andrea-grade --batch FOLDER --csv gradebook.csv [--out RESULTS_DIR] [--jobs N] [options]
                 [--similarity] [--report class.html | class.md]
                 [--gradebook canvas|moodle ... [--roster roster.csv] [--roster-key folder]]
    andrea-grade exercises --own-work          # a learner grading their own exercises/ (make grade)

A submission is a folder shaped like exercises/ (one .py file per activity). In a batch every
subfolder of FOLDER is one student, graded in a tier of their own that shows only their own
files, --jobs students at a time (as root, each student's worker parent is forked from one warm
process of the batch that imported torch and the course once, and only then confined:
worker/warm.py); each gets RESULTS_DIR/<student>.json (default: the CSV's
name without .csv, plus "-results") and a row in the CSV: student, total, one column per test.
--similarity adds a last column, "similar": the pieces that look copied from the engine, the
answer key or a classmate (similarity.py; listed, never zeroed). --report writes the class
report (report.py): each piece's successes, the typical mistakes, the similar pieces, the time
per student. --gradebook canvas (or moodle; both may be given) writes that LMS's gradebook import
CSV beside the CSV, <csv name>-canvas.csv (gradebook.py): --roster maps each submission folder
to the student's LMS identity, and a folder with no roster row is left out with one line saying so.

The capstone's leaderboard (capstone/leaderboard.py), when the hidden tests folder holds a leaderboard.json
(or --leaderboard FILE names one; --no-leaderboard turns it off): after the graded tests, each
learner's andrea-tiny is trained from their pieces that passed, in their own worker, and its
validation loss on held-out stories goes to results.json's "leaderboard" (Gradescope's), to the
output, and to the CSV's "validation loss" column; never into the score.

Isolation (--isolation, default auto: the strongest this machine allows; the output and
results.json say which ran and what it does not give): sandbox (bubblewrap namespaces), else as
root container (a uid of its own, seccomp, no capabilities: Docker's defaults, Gradescope);
process (a worker process as you) only with --own-work or --unsafe-no-sandbox.

Library shortcuts (--library-shortcuts, default refuse: shortcuts.py): a piece written as the
library call that is the piece (torch.softmax as attention.softmax, F.layer_norm as
block.layer_norm) gets no points for its tests under refuse, keeps them with a note under
warn, and is not looked at under allow; each test's output says which call on which line.

Memory: a learner's code may use what the machine (or the container's cgroup) has, less the
grader's own room, shared by the --jobs students graded at once, and at most 6 GiB; its running
out says so in the test's output. An answer of more than --reply-limit MiB fails its test
unread, so no submission makes the grader itself hold much more than that.

Exit status: 0 graded; 1 no graded test was collected; 2 bad usage, or nothing graded (no
isolation on this machine that keeps the hidden tests and results safe, a missing submission).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import __version__
from . import gradebook, shortcuts, similarity
from .gradescope import Results, table, to_gradescope
from .report import summarize, write_report
from .runner import DEFAULT_TIMEOUT_PER_TEST, DEFAULT_TIMEOUT_TOTAL, ISOLATIONS, Course, grade
from ..worker.tiers import Limits, default_memory
from ..worker.warm import WarmStart


LOSS_COLUMN = "validation loss"          # the gradebook's leaderboard column (empty: no value)


class _Defaults(argparse.HelpFormatter):
    """Shows each option's default, except where there is none or the help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _parser() -> argparse.ArgumentParser:
    """andrea-grade's options, each with its help text, in the order --help prints them."""
    p = argparse.ArgumentParser(prog="andrea-grade", description=__doc__.split("\n")[0],
                                formatter_class=_Defaults)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("submission", nargs="?", help="the submission folder (or 'solutions', 'exercises')")
    p.add_argument("--out", help="results.json to write (default: none; batch: a folder of "
                                  "<student>.json, default: the CSV's name + '-results')")
    p.add_argument("--hidden-tests", help="a private folder of graded tests to run as well (default: none)")
    p.add_argument("--tests", help="the graded tests folder (default: the package's andrea_course/activity_tests/)")
    board = p.add_mutually_exclusive_group()
    board.add_argument("--leaderboard", metavar="FILE",
                       help="the capstone leaderboard's settings, leaderboard.json (default: the hidden tests "
                            "folder's, if it has one; else no leaderboard)")
    board.add_argument("--no-leaderboard", action="store_true", help="no leaderboard, even with a leaderboard.json")
    p.add_argument("--timeout-per-test", type=float, default=DEFAULT_TIMEOUT_PER_TEST,
                   help="seconds of learner code per test")
    p.add_argument("--timeout-total", type=float, default=DEFAULT_TIMEOUT_TOTAL,
                   help="seconds for one submission in all")
    p.add_argument("--jobs", type=int, default=None,
                   help="batch: students graded at once (default: the number of cores); "
                        "one submission: pytest-xdist workers (default 1)")
    p.add_argument("--worker-uid", type=int, default=None,
                   help="when run as root: the worker's uid in the sandbox and container tiers "
                        "(default: a fresh uid per run, from 2000000000 up)")
    p.add_argument("--isolation", choices=ISOLATIONS, default="auto",
                   help="how the learner's code is isolated: auto (sandbox, else container as root, else "
                        "nothing runs), sandbox, container, or process (a worker process as you)")
    p.add_argument("--own-work", action="store_true",
                   help="you grade your own work (make grade): a worker process as you, no sandbox, "
                        "also as root")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="same as --isolation process: the learner's code runs as you in a worker "
                        "process only; refused as root (use --own-work for your own code)")
    p.add_argument("--batch", help="a folder with one subfolder per student")
    p.add_argument("--csv", help="with --batch: the gradebook CSV to write")
    p.add_argument("--similarity", action="store_true",
                   help="with --batch: a last CSV column listing the pieces that look copied (never zeroed)")
    p.add_argument("--report", help="with --batch: the class report to write, class.html or class.md")
    p.add_argument("--gradebook", action="append", choices=gradebook.FORMATS, default=[],
                   help="with --batch: also write this LMS's gradebook import CSV, <csv name>-<lms>.csv "
                        "(give it twice for both)")
    p.add_argument("--roster", help="with --gradebook: a CSV mapping each submission folder to the student's "
                                    "LMS identity (default: the folder name is the SIS Login ID / Username)")
    p.add_argument("--roster-key", default=gradebook.ROSTER_KEY,
                   help="the roster's column holding the submission folder names")
    p.add_argument("--assignment", default=gradebook.DEFAULT_ASSIGNMENT,
                   help="with --gradebook: the grade column's name; Canvas: 'Name (1234)' fills assignment 1234")
    p.add_argument("--grade-items", choices=gradebook.ITEMS, default="total",
                   help="with --gradebook: one grade column for the total, or one per activity")
    p.add_argument("--scale-to", type=float, default=None,
                   help="with --gradebook: scale each grade column to this many points, e.g. 100 for "
                        "percentages (default: points as graded)")
    p.add_argument("--quiet", action="store_true", help="print only the totals")
    p.add_argument("--library-shortcuts", choices=shortcuts.POLICIES, default="refuse",
                   help="a piece written as the library call that is the piece (torch.softmax as "
                        "attention.softmax): refuse (its tests score nothing, the output says why), "
                        "warn (the output says so, the score stands) or allow")
    p.add_argument("--reply-limit", type=int, metavar="MIB", default=Limits().reply >> 20,
                   help="the most data, in MiB, the grader reads back from one call of a learner's "
                        "code: a larger answer fails its test unread")
    return p


def parse(argv=None) -> argparse.Namespace:
    """andrea-grade's options, checked together."""
    p = _parser()
    args = p.parse_args(argv)
    if bool(args.batch) == bool(args.submission):
        p.error("give either a SUBMISSION folder or --batch FOLDER")
    if args.batch and not args.csv:
        p.error("--batch needs --csv gradebook.csv")
    if args.csv and not args.batch:
        p.error("--csv goes with --batch")
    if (args.report or args.similarity or args.gradebook) and not args.batch:
        p.error("--report, --similarity and --gradebook go with --batch")
    if args.roster and not args.gradebook:
        p.error("--roster goes with --gradebook canvas|moodle")
    if args.scale_to is not None and args.scale_to <= 0:
        p.error(f"--scale-to must be > 0 points, got {args.scale_to:g}")
    if args.report and Path(args.report).suffix.lower() not in (".html", ".htm", ".md", ".markdown"):
        p.error(f"--report must name a .html or a .md file, got {args.report!r}")
    if args.unsafe_no_sandbox or args.own_work:
        if args.isolation not in ("auto", "process"):
            p.error(f"--{'own-work' if args.own_work else 'unsafe-no-sandbox'} runs the process tier, "
                    f"not --isolation {args.isolation}")
        args.isolation = "process"
    if args.jobs is not None and args.jobs < 1:
        p.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.reply_limit < 1:
        p.error(f"--reply-limit must be at least 1 MiB, got {args.reply_limit}")
    for name in ("timeout_per_test", "timeout_total"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0 seconds, got {getattr(args, name):g}")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    args = parse(argv)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)    # a killed grader still writes results.json
    options = dict(timeout_per_test=args.timeout_per_test, timeout_total=args.timeout_total,
                   isolation=args.isolation, own_work=args.own_work, uid=args.worker_uid,
                   limits=Limits(reply=args.reply_limit << 20), library_shortcuts=args.library_shortcuts)
    kwargs = {"hidden": args.hidden_tests, "leaderboard": False if args.no_leaderboard else args.leaderboard}
    if args.tests:
        kwargs["tests"] = args.tests
    try:
        course = Course(**kwargs)
    except (OSError, ValueError) as exc:
        print(f"andrea-grade: {exc}", file=sys.stderr)
        return 2
    if course.leaderboard is not None and not args.quiet:
        print(f"leaderboard: {course.leaderboard.describe()} ({course.leaderboard_file})")
    if args.batch:
        try:
            books = _gradebooks(args)
        except gradebook.GradebookError as exc:
            print(f"andrea-grade: {exc}", file=sys.stderr)
            return 2
        jobs = args.jobs or os.cpu_count() or 1
        options["limits"] = Limits(memory=default_memory(jobs), reply=args.reply_limit << 20)
        return batch(Path(args.batch), Path(args.csv), args.out, course, options, args.quiet,
                     jobs=jobs, similar=args.similarity, report=args.report, gradebooks=books)
    if not Path(args.submission).is_dir() and args.submission not in ("solutions", "exercises"):
        print(f"andrea-grade: submission folder {args.submission!r} does not exist", file=sys.stderr)
        if args.out:
            grade(args.submission, args.out, course=course, **options)   # a results.json that says so
        return 2
    results = grade(args.submission, args.out, course=course, jobs=args.jobs or 1, **options)
    print(table(results, f"{args.submission}:") if not args.quiet
          else f"{args.submission}: {results.score:g} / {results.max_score:g}")
    print(f"graded in {results.execution_time:.1f} s" + (f"; results: {results.written}" if results.written else ""))
    return _status(results)


def _gradebooks(args) -> dict:
    """The LMS gradebooks asked for, their roster read (and refused) before any grading."""
    if not args.gradebook:
        return {}
    roster = gradebook.read_roster(args.roster, args.roster_key) if args.roster else None
    for kind in dict.fromkeys(args.gradebook):
        gradebook.check(kind, roster, args.grade_items, args.assignment)
    csv_path = Path(args.csv)
    return {kind: dict(path=csv_path.with_name(f"{csv_path.stem}-{kind}.csv"), roster=roster,
                       items=args.grade_items, assignment=args.assignment, scale_to=args.scale_to)
            for kind in dict.fromkeys(args.gradebook)}


def _status(results: Results) -> int:
    if results.refused and "no .py file" not in results.refused:
        print(f"andrea-grade: {results.refused}", file=sys.stderr)
        return 2
    if not results.tests:
        print("andrea-grade: no graded test was collected (see the notes above)", file=sys.stderr)
        return 1
    return 0


def batch(folder: Path, csv_path: Path, out_dir, course: Course, options: dict, quiet: bool,
          jobs: int = 1, similar: bool = False, report: str | None = None, gradebooks: dict | None = None) -> int:
    if not folder.is_dir():
        print(f"andrea-grade: batch folder {str(folder)!r} does not exist", file=sys.stderr)
        return 2
    if options["isolation"] == "process" and jobs > 1:
        print("andrea-grade: in the process tier a batch is graded one student at a time", file=sys.stderr)
        jobs = 1
    out_dir = Path(out_dir) if out_dir else csv_path.with_name(csv_path.stem + "-results")
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    students = [p for p in entries if p.is_dir() and not p.is_symlink()]
    for p in sorted(set(entries) - set(students)):
        print(f"andrea-grade: skipped {p.name!r}: not a folder (links are not followed)", file=sys.stderr)
    start = time.monotonic()
    done = 0

    warm = WarmStart()               # one warm worker process for the class, forked per student

    def one(student: Path) -> Results:
        return grade(student, out_dir / f"{student.name}.json", course=course, warm=warm, **options)

    rows, columns, statuses, graded = {}, [], [], {}
    with ThreadPoolExecutor(max_workers=jobs) as pool, contextlib.closing(warm):
        for student, results in zip(students, pool.map(one, students)):
            graded[student.name] = to_gradescope(results)
            done += 1
            print(f"[{done}/{len(students)}] " + (table(results, f"{student.name}:") if not quiet else
                                                   f"{student.name}: {results.score:g} / {results.max_score:g}"))
            statuses.append(_status(results))
            row = {"student": student.name, "total": f"{results.score:g}"}
            if course.leaderboard is not None:
                value = results.leaderboard.value if results.leaderboard is not None else None
                row[LOSS_COLUMN] = f"{value:.4f}" if value is not None else ""
            for t in results.tests:
                column = f"{t.exercise}: {t.name}"
                if column not in columns:
                    columns.append(column)
                row[column] = f"{t.score:g}"
            rows[student.name] = row
    pairs = similarity.compare({s.name: s for s in students}) if (similar or report) else None
    if similar:
        columns.append("similar")
        for name, row in rows.items():
            row["similar"] = pairs.note(name)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        board = [LOSS_COLUMN] if course.leaderboard is not None else []
        writer = csv.DictWriter(f, fieldnames=["student", "total", *board, *columns], restval="0")
        writer.writeheader()
        writer.writerows(rows.values())
    minutes = (time.monotonic() - start) / 60
    print(f"{len(students)} submission(s) graded in {minutes * 60:.0f} s with {jobs} job(s) "
          f"({len(students) / max(minutes, 1e-9):.1f} students/minute): {csv_path}, {out_dir}/")
    if pairs is not None and pairs.pairs:
        print(f"{len(pairs.pairs)} piece(s) look copied (similarity >= {pairs.threshold:g}; no score changed):")
        for p in pairs.pairs[:20]:
            print(f"  {p.exercise}: {p.student} ~ {p.other} {p.score:.2f}")
    if report:
        print(f"class report: {write_report(report, summarize(graded, pairs))}")
    for kind, how in (gradebooks or {}).items():
        try:
            done = gradebook.write(kind, results=graded, **how)
        except OSError as exc:
            print(f"andrea-grade: the {kind} gradebook could not be written: {exc}", file=sys.stderr)
            statuses.append(2)
            continue
        for i, line in enumerate(gradebook.describe(done)):
            print(line, file=sys.stderr if i and "left out" in line else sys.stdout)
    return max([s for s in statuses if s != 1] or [0])


if __name__ == "__main__":
    sys.exit(main())
