"""andrea-grade: grade one submission, or a whole class.

    andrea-grade SUBMISSION [--out results.json] [--hidden-tests DIR]
                 [--timeout-per-test S] [--timeout-total S] [--jobs N] [--worker-user USER]
    andrea-grade --batch FOLDER --csv gradebook.csv [--out RESULTS_DIR] [same options]

A submission is a folder shaped like exercises/ (one .py file per activity). In a batch every
subfolder of FOLDER is one student; each gets RESULTS_DIR/<student>.json (default: the CSV's
name without .csv, plus "-results") and a row in the CSV: student, total, one column per test.
"""
from __future__ import annotations

import argparse
import csv
import signal
import sys
from pathlib import Path

from .gradescope import table
from .runner import DEFAULT_TIMEOUT_PER_TEST, DEFAULT_TIMEOUT_TOTAL, Course, grade


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="andrea-grade", description=__doc__.split("\n")[0])
    p.add_argument("submission", nargs="?", help="the submission folder (or 'solutions', 'exercises')")
    p.add_argument("--out", help="results.json to write (batch: a folder of <student>.json)")
    p.add_argument("--hidden-tests", help="a private folder of graded tests to run as well")
    p.add_argument("--tests", help="the graded tests folder (default: the course's tests/)")
    p.add_argument("--timeout-per-test", type=float, default=DEFAULT_TIMEOUT_PER_TEST,
                   help=f"seconds of learner code per test (default {DEFAULT_TIMEOUT_PER_TEST:g})")
    p.add_argument("--timeout-total", type=float, default=DEFAULT_TIMEOUT_TOTAL,
                   help=f"seconds for one submission in all (default {DEFAULT_TIMEOUT_TOTAL:g})")
    p.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers per submission (default 1)")
    p.add_argument("--worker-user", help="when run as root: run learner code as this user (e.g. nobody)")
    p.add_argument("--batch", help="a folder with one subfolder per student")
    p.add_argument("--csv", help="with --batch: the gradebook CSV to write")
    p.add_argument("--quiet", action="store_true", help="print only the totals")
    args = p.parse_args(argv)
    if bool(args.batch) == bool(args.submission):
        p.error("give either a SUBMISSION folder or --batch FOLDER")
    if args.batch and not args.csv:
        p.error("--batch needs --csv gradebook.csv")
    if args.csv and not args.batch:
        p.error("--csv goes with --batch")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    args = parse(argv)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)    # a killed grader still writes results.json
    options = dict(timeout_per_test=args.timeout_per_test, timeout_total=args.timeout_total,
                   jobs=args.jobs, worker_user=args.worker_user)
    kwargs = {"hidden": args.hidden_tests}
    if args.tests:
        kwargs["tests"] = args.tests
    try:
        course = Course(**kwargs)
    except (OSError, ValueError) as exc:
        print(f"andrea-grade: {exc}", file=sys.stderr)
        return 2
    if args.submission:
        if not Path(args.submission).is_dir() and args.submission not in ("solutions", "exercises"):
            print(f"andrea-grade: submission folder {args.submission!r} does not exist", file=sys.stderr)
            if args.out:
                grade(args.submission, args.out, course=course, **options)   # a results.json that says so
            return 2
        results = grade(args.submission, args.out, course=course, **options)
        print(table(results, f"{args.submission}:") if not args.quiet
              else f"{args.submission}: {results.score:g} / {results.max_score:g}")
        return 0
    return batch(Path(args.batch), Path(args.csv), args.out, course, options, args.quiet)


def batch(folder: Path, csv_path: Path, out_dir, course: Course, options: dict, quiet: bool) -> int:
    if not folder.is_dir():
        print(f"andrea-grade: batch folder {str(folder)!r} does not exist", file=sys.stderr)
        return 2
    out_dir = Path(out_dir) if out_dir else csv_path.with_name(csv_path.stem + "-results")
    students = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    rows, columns = {}, []
    for i, student in enumerate(students, start=1):
        results = grade(student, out_dir / f"{student.name}.json", course=course, **options)
        print(f"[{i}/{len(students)}] " + (table(results, f"{student.name}:") if not quiet else
                                            f"{student.name}: {results.score:g} / {results.max_score:g}"))
        row = {"student": student.name, "total": f"{results.score:g}"}
        for t in results.tests:
            column = f"{t.exercise}: {t.name}"
            if column not in columns:
                columns.append(column)
            row[column] = f"{t.score:g}"
        rows[student.name] = row
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "total", *columns], restval="0")
        writer.writeheader()
        writer.writerows(rows.values())
    print(f"{len(students)} submission(s) graded: {csv_path}, {out_dir}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
