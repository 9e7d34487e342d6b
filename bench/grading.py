"""Benchmark the autograder against the same graded tests in one process, and say where its time goes.

Back to back, each `--repeat` times (the best of each is kept, as the least disturbed by other
work on the machine), wall time and CPU time of:

  in-process     ANDREA_IMPL=solutions pytest andrea_course/graded --isolation in-process
                 (the learner's code in pytest's own process; pytest's installed plugins loaded,
                 as a plain `pytest` loads them)
  in-process, no plugins   the same with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
  plain pytest   ANDREA_IMPL=solutions pytest andrea_course/graded (its default: each test's
                 learner code in a worker process forked from pytest; what `make grade` runs)
  andrea-grade   andrea-grade solutions (the strongest isolation here: a sandbox, or the
                 container tier), results.json written

then the ratio of andrea-grade to each in-process run, and with --class N a class of N
submissions (half the reference, half the untouched exercises) graded with --jobs J. With
--profile, where one submission's time goes: Python and torch's import, pytest's start and
collection, the sandbox's start (the worker's parent importing torch and the course), one test's
worker (taking the spare and its greeting), one call's messages (a small and a 4 MiB tensor).

    python bench/grading.py                       # the ratio
    python bench/grading.py --class 20 --jobs 2   # and a class of 20 on 2 cores
    python bench/grading.py --profile --repeat 1  # and where the time goes
    python bench/grading.py --complete 10 --jobs 2 --repeat 0   # the instructor's real case only

With --complete N, the instructor's real case: N complete submissions (the reference) graded with
the hidden tests and the capstone leaderboard (instructor/hidden_tests), --jobs J, then the same
class with --no-leaderboard; the time per submission and what the leaderboard took of it, and the
time 100 such submissions would take at that rate.

Run it on an idle machine: every number is wall time.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the best kept")
    p.add_argument("--class", dest="students", type=int, default=0, help="also grade a class of this many")
    p.add_argument("--jobs", type=int, default=2, help="students graded at once in --class")
    p.add_argument("--profile", action="store_true", help="say where one submission's time goes")
    p.add_argument("--skip-plain", action="store_true", help="leave out the plain-pytest runs")
    p.add_argument("--complete", type=int, default=0, metavar="N",
                   help="grade N complete submissions with the hidden tests and the leaderboard")
    return p.parse_args(argv)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDREA_", "PYTEST_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return env


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of it and its children, the output's last line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in (done.stdout + done.stderr).strip().splitlines() if line.strip()]
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd[:6])}... failed ({done.returncode}):\n" + "\n".join(lines[-15:]))
    return wall, cpu, lines[-1] if lines else ""


def best(runs: list[tuple[float, float, str]]) -> tuple[float, float, str]:
    return min(runs, key=lambda r: r[0])


def main(argv=None) -> int:
    args = parse_args(argv)
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "andrea_course/graded"]
    grade_cmd = [py, "-m", "andrea_course.grading.cli", "solutions", "--quiet"]
    rows = {"in-process": [], "in-process, no plugins": [], "plain pytest (its worker)": [], "andrea-grade": []}
    out = tempfile.mkdtemp(prefix="andrea-bench-")
    try:
        for i in range(args.repeat if args.repeat > 0 else 0):
            rows["in-process"].append(timed(pytest + ["--isolation", "in-process"], _env(ANDREA_IMPL="solutions")))
            rows["in-process, no plugins"].append(timed(pytest + ["--isolation", "in-process"],
                                                        _env(ANDREA_IMPL="solutions", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")))
            if not args.skip_plain:
                rows["plain pytest (its worker)"].append(timed(pytest, _env(ANDREA_IMPL="solutions")))
            rows["andrea-grade"].append(timed(grade_cmd + ["--out", os.path.join(out, f"r{i}.json")], _env()))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"the graded tests against the reference, best of {args.repeat} (wall, CPU of the process and its children):")
    for name, runs in rows.items():
        if runs:
            wall, cpu, last = best(runs)
            print(f"  {name:28s} {wall:6.1f} s   CPU {cpu:6.1f} s   ({last})")
    if rows["andrea-grade"]:
        grade = best(rows["andrea-grade"])[0]
        for name in ("in-process", "in-process, no plugins"):
            print(f"  andrea-grade / {name:24s} {grade / best(rows[name])[0]:.2f}x")
    with open("/proc/loadavg") as f:
        print(f"  load average at the end: {f.read().split()[0]} (on {os.cpu_count()} cores)")
    if args.students:
        grade_class(args.students, args.jobs)
    if args.complete:
        grade_complete(args.complete, args.jobs)
    if args.profile:
        profile()
    return 0


def grade_class(n: int, jobs: int) -> None:
    from andrea_course.exercises import EXERCISES, SOLUTIONS
    top = Path(tempfile.mkdtemp(prefix="andrea-bench-class-"))
    try:
        for i in range(n):
            folder = top / "class" / f"student{i:02d}"
            folder.mkdir(parents=True)
            for path in (SOLUTIONS if i % 2 == 0 else EXERCISES).glob("*.py"):
                shutil.copy(path, folder / path.name)
        wall, cpu, last = timed([sys.executable, "-m", "andrea_course.grading.cli", "--batch", str(top / "class"),
                                 "--csv", str(top / "book.csv"), "--jobs", str(jobs), "--quiet"], _env())
        print(f"a class of {n} ({(n + 1) // 2} reference, {n // 2} untouched) with --jobs {jobs}: "
              f"{wall:.0f} s wall, {cpu:.0f} s CPU ({last})")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def grade_complete(n: int, jobs: int) -> None:
    """n copies of the reference with the hidden tests, with and without the leaderboard."""
    import json
    import re
    from andrea_course.exercises import SOLUTIONS
    hidden = ROOT / "instructor" / "hidden_tests"
    if not (hidden / "leaderboard.json").is_file():
        print("--complete needs the instructor's hidden tests and leaderboard.json (instructor/hidden_tests)")
        return
    top = Path(tempfile.mkdtemp(prefix="andrea-bench-complete-"))
    try:
        for i in range(n):
            folder = top / "class" / f"student{i:02d}"
            folder.mkdir(parents=True)
            for path in SOLUTIONS.glob("*.py"):
                shutil.copy(path, folder / path.name)
        seen = {}
        for label, extra in (("with the leaderboard", []), ("without the leaderboard", ["--no-leaderboard"])):
            out = top / label.replace(" ", "-")
            wall, cpu, last = timed([sys.executable, "-m", "andrea_course.grading.cli", "--batch", str(top / "class"),
                                     "--hidden-tests", str(hidden), "--csv", str(top / "book.csv"), "--out", str(out),
                                     "--jobs", str(jobs), "--quiet", *extra], _env())
            results = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
            each = [float(r.get("execution_time") or 0) for r in results]
            board = [float(m.group(1)) for r in results for m in [re.search(r"Leaderboard: .*; (\d+) s\)", r.get("output", ""))] if m]
            seen[label] = wall
            print(f"{n} complete submissions {label}, --jobs {jobs}: {wall:.0f} s wall, {cpu:.0f} s CPU; "
                  f"{sum(each) / max(1, len(each)):.1f} s each in its own run"
                  + (f", {sum(board) / len(board):.1f} s of it the leaderboard's training and measure" if board else "")
                  + f"; 100 at this rate: {100 * wall / n:.0f} s ({last})")
        if len(seen) == 2:
            print(f"  the leaderboard's share of the wall time: "
                  f"{1 - seen['without the leaderboard'] / seen['with the leaderboard']:.0%}")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def profile() -> None:
    """Where one submission's time goes, each part measured on its own."""
    py = sys.executable
    print("where the time goes (one submission):")
    wall, _, _ = timed([py, "-c", "pass"], _env())
    print(f"  Python's start                                   {wall:6.2f} s")
    wall, _, _ = timed([py, "-c", "import torch"], _env())
    print(f"  Python's start and import torch                  {wall:6.2f} s")
    wall, _, last = timed([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "andrea_course/graded"],
                          _env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    print(f"  pytest's start and collection (no plugins)       {wall:6.2f} s   ({last})")
    wall, _, _ = timed([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "andrea_course/graded"],
                       _env())
    print(f"  the same with pytest's installed plugins         {wall:6.2f} s")

    import torch

    from andrea_course.grading.runner import choose_tier, sandbox_uid
    from andrea_course.worker import wire
    from andrea_course.worker.client import IsolatedStudent
    from andrea_course.worker.server import warm_up
    from andrea_course.worker.tiers import Isolation, Limits
    warm_up()
    uid = sandbox_uid() if os.geteuid() == 0 else None
    tier, _ = choose_tier("auto", ROOT / "solutions", uid, {}, Limits(), False)
    for iso in ([Isolation(tier, uid=uid if tier != "process" else None)] if tier else []) + \
            [Isolation("process", start="fork")]:
        student = IsolatedStudent("solutions", isolation=iso)
        try:
            start = time.perf_counter()
            student.boot()
            student._await_parent()
            boot = time.perf_counter() - start
            takes, calls, big = [], [], []
            x, y = torch.randn(4, 8), torch.randn(1 << 20)
            for _ in range(10):
                student.begin_test()
                time.sleep(0.05)                          # the test's own work, while the spare is made
                start = time.perf_counter()
                student._start()
                takes.append(time.perf_counter() - start)
                softmax = student.piece("attention", "softmax")
                start = time.perf_counter()
                softmax(x)
                calls.append(time.perf_counter() - start)
                start = time.perf_counter()
                softmax(y)
                big.append(time.perf_counter() - start)
        finally:
            student.close()
        med = lambda v: sorted(v)[len(v) // 2]               # noqa: E731
        print(f"  {iso.tier} tier ({iso.start}): the worker's parent ready    {boot:6.2f} s")
        print(f"    one test's worker (take the spare, its greeting)   {med(takes) * 1e3:6.1f} ms")
        print(f"    one call, (4, 8) in and out                        {med(calls) * 1e3:6.1f} ms")
        print(f"    one call, 4 MiB in and out                         {med(big) * 1e3:6.1f} ms")
    w = wire.Writer()
    t = torch.randn(1 << 20)
    start = time.perf_counter()
    for _ in range(20):
        head, blobs = w.frame({"v": w.value(t)})
    print(f"  writing a 4 MiB tensor's message (no copy)       {(time.perf_counter() - start) / 20 * 1e3:6.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
