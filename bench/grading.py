"""Benchmark the autograder against the same graded tests in one process, and say where its time goes.

Back to back, each `--repeat` times (the best of each is kept, as the least disturbed by other
work on the machine), wall time and CPU time of:

  in-process     ANDREA_IMPL=solutions pytest andrea_course/activity_tests --isolation in-process
                 (the learner's code in pytest's own process; pytest's installed plugins loaded,
                 as a plain `pytest` loads them)
  in-process, no plugins   the same with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
  plain pytest   ANDREA_IMPL=solutions pytest andrea_course/activity_tests (its default: each test's
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
    python bench/grading.py --complete 1 --profile --repeat 0  # and where one such submission's time goes

With --complete N, the instructor's real case: N complete submissions (the reference) graded with
the hidden tests and the capstone leaderboard (instructor/hidden_tests), --jobs J, then the same
class with --no-leaderboard; the time per submission and what the leaderboard took of it, and the
time 100 such submissions would take at that rate. With --profile too, where one such
submission's time goes (graded alone, in a process of its own, after one grading that warms what
a batch warms once, with the batch's warm worker process: andrea-grade --batch forks each
submission's worker parent from it): the worker parents started and their CPU (start, warm-up,
workers; a forked one's start is its fork and confinement), the warm process's own CPU (once per
batch), pytest's start and collection, the graded tests and the slowest of them, pytest's end, the leaderboard's
training and validation, and the whole submission's wall and CPU (the grader, pytest, the sandboxes).

Run it on an idle machine. CPU: as root with cgroup v1, every process of the command (the
sandboxes' included, read from a cpuacct cgroup of its own); else what the command waited for.
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
    p.add_argument("--profile-one", action="store_true", help=argparse.SUPPRESS)   # profile_one(), in its own process
    return p.parse_args(argv)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDREA_", "PYTEST_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return env


CPUACCT = Path("/sys/fs/cgroup/cpuacct")        # cgroup v1's CPU accounting (root only)


def _cpuacct() -> Path | None:
    """A fresh cpuacct cgroup below this process's own (every process started in it and below it
    counted, the sandboxed ones too), or None where none can be made (not root, no cgroup v1)."""
    try:
        own = next(line.split(":", 2)[2].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if "cpuacct" in line.split(":", 2)[1].split(","))
        group = CPUACCT / own.lstrip("/") / f"andrea-bench-{os.getpid()}-{time.monotonic_ns()}"
        group.mkdir()
        return group
    except (OSError, StopIteration, IndexError):
        return None


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of it and every process below it, the output's last line). The
    CPU is a cpuacct cgroup's where one can be made (the sandboxes' processes, which the grader
    does not wait for, included), else what the command's own waits collected."""
    group = _cpuacct()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    enter = (lambda: (group / "cgroup.procs").write_text(str(os.getpid()))) if group else None
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, preexec_fn=enter)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if group is not None:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        try:
            group.rmdir()
        except OSError:                   # a process of it still ends
            pass
    lines = [line for line in (done.stdout + done.stderr).strip().splitlines() if line.strip()]
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd[:6])}... failed ({done.returncode}):\n" + "\n".join(lines[-15:]))
    return wall, cpu, lines[-1] if lines else ""


def best(runs: list[tuple[float, float, str]]) -> tuple[float, float, str]:
    return min(runs, key=lambda r: r[0])


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.profile_one:
        profile_one()
        return 0
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "andrea_course/activity_tests"]
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
    if args.profile and args.complete:
        done = subprocess.run([sys.executable, __file__, "--profile-one"], env=_env(), cwd=ROOT, text=True,
                              capture_output=True)
        print(done.stdout.rstrip() or done.stderr[-3000:])
    elif args.profile:
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
            print(f"{n} complete submissions {label}, --jobs {jobs}: {wall:.0f} s wall, {cpu:.0f} s CPU "
                  f"({cpu / n:.1f} s per submission); "
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
    wall, _, last = timed([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "andrea_course/activity_tests"],
                          _env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    print(f"  pytest's start and collection (no plugins)       {wall:6.2f} s   ({last})")
    wall, _, _ = timed([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "andrea_course/activity_tests"],
                       _env())
    print(f"  the same with pytest's installed plugins         {wall:6.2f} s")

    import torch

    from andrea_course.grading.staging import choose_tier, sandbox_uid
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



# ----------------------------------------------------------------------------- the real case, profiled
class _Events:
    """Timed events of one grading, written as JSON lines by this process and by its forks (pytest)."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, name: str, /, **fields) -> None:
        import json
        with open(self.path, "a") as f:
            f.write(json.dumps({"t": time.monotonic(), "pid": os.getpid(), "name": name, **fields}) + "\n")

    def read(self) -> list[dict]:
        import json
        return [json.loads(line) for line in self.path.read_text().splitlines()] if self.path.is_file() else []


def _tree_cpu(root: int) -> float:
    """CPU seconds of `root` and every process below it now (what they reaped included)."""
    tick, kids, own = os.sysconf("SC_CLK_TCK"), {}, {}
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(entry))
        own[int(entry)] = sum(map(int, fields[11:15])) / tick
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += own.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total


def _own_cpu(pid: int) -> float:
    """CPU seconds of process `pid` itself (not its children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(map(int, fields[11:13])) / os.sysconf("SC_CLK_TCK")


def _cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _instrument(ev: _Events) -> None:
    """Wrap the grading's stages so that each says when it began and ended (and the CPU of the
    worker parents: their whole process tree, read before they are stopped)."""
    from andrea_course.capstone import leaderboard
    from andrea_course.grading import pipeline, runner, staging
    from andrea_course.worker.client import IsolatedStudent

    def wrap(owner, name, label, cpu=None):
        plain = getattr(owner, name)

        def wrapped(*args, **kwargs):
            ev(f"begin {label}", **(cpu(*args) if cpu else {}))
            try:
                return plain(*args, **kwargs)
            finally:
                ev(f"end {label}", **(cpu(*args) if cpu else {}))
        setattr(owner, name, wrapped)

    def tier(student, *_):
        parent, inner = student._parent, getattr(student, "warm_pid", None)
        cpu = _tree_cpu(parent.pid) + (_tree_cpu(inner) if inner and inner != parent.pid else 0.0) \
            if parent is not None else None
        return {"tier": cpu,
                "prepared": bool(student._prepare), "parent": parent.pid if parent is not None else None}
    wrap(staging, "probe", "probe")
    wrap(pipeline, "warm", "warm")
    wrap(pipeline, "start_pytest", "pytest start")
    wrap(pipeline, "run", "pipeline", cpu=lambda *_: {"self": _cpu_self(), "children": _cpu_children()})
    wrap(IsolatedStudent, "_start_parent", "parent start", cpu=tier)
    wrap(IsolatedStudent, "_await_parent", "parent ready", cpu=tier)
    wrap(IsolatedStudent, "_stop_parent", "parent stop", cpu=tier)
    wrap(IsolatedStudent, "run", "training", cpu=tier)
    wrap(leaderboard, "validation_loss", "validation", cpu=lambda *_: {"self": _cpu_self()})
    plain_add = pipeline.Run.add

    def add(run, rec):
        if rec.kind in ("start", "result"):
            ev(f"test {rec.kind}", test=rec.nodeid)
        return plain_add(run, rec)
    pipeline.Run.add = add


def profile_one() -> None:
    """(In a process of its own) grade the reference with the hidden tests and the leaderboard
    twice, as one batch would, instrumented; print where the second one's time went."""
    from andrea_course.exercises import SOLUTIONS
    from andrea_course.grading import runner
    from andrea_course.worker.warm import WarmStart
    hidden = ROOT / "instructor" / "hidden_tests"
    with tempfile.TemporaryDirectory(prefix="andrea-bench-profile-") as top:
        ev = _Events(Path(top) / "events.jsonl")
        _instrument(ev)
        course, warm = runner.Course(hidden=hidden), WarmStart()
        try:
            for i in range(2):
                folder = Path(top) / f"student{i}"
                shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
                ev("grade begin", self=_cpu_self(), children=_cpu_children())
                results = runner.grade(folder, Path(top) / f"r{i}.json", course=course, warm=warm)
                ev("grade end", self=_cpu_self(), children=_cpu_children(), score=results.score)
            zygotes = [p.proc.pid for p in warm._processes.values()]
            own = sum(_own_cpu(pid) for pid in zygotes)
        finally:
            warm.close()
        _report(ev.read(), results)
        print(f"  once per batch: the warm worker process (andrea-grade --batch): {len(zygotes)} started, "
              f"{own:.1f} s CPU of their own (Python, torch, the course, the leaderboard's warm-up)")


def _spans(events: list[dict], name: str) -> list[tuple[dict, dict]]:
    """(begin, end) event pairs of `name`, by process, in order."""
    open_, out = {}, []
    for e in events:
        if e["name"] == f"begin {name}":
            open_.setdefault(e["pid"], []).append(e)
        elif e["name"] == f"end {name}" and open_.get(e["pid"]):
            out.append((open_[e["pid"]].pop(), e))
    return out


def _report(events: list[dict], results) -> None:
    """Print the profile of the second grading of `events` (the first: what a batch does once)."""
    grades = [i for i, e in enumerate(events) if e["name"] == "grade begin"]
    first, second = events[:grades[1]], events[grades[1]:]
    once = {n: sum(e["t"] - b["t"] for b, e in _spans(first, n)) for n in ("warm", "probe")}
    parents, board = _parents(second), _board(second)
    print("where one complete submission's time goes (the reference, the hidden tests and the leaderboard;"
          " graded alone, the second of two gradings in one process; wall, CPU):")
    print(f"  once per batch (the first grading): the grader's imports {once['warm']:.2f} s, "
          f"the sandbox's probe {once['probe']:.2f} s")
    print(f"  worker parents started: {len(parents)}")
    for one in parents.values():
        warm = ", the leaderboard's warm-up" if one["prepared"] else ""
        print(f"    one {'prepared' if one['prepared'] else 'plain'}: {one['boot'] or 0:.1f} s CPU to start (started: "
              f"Python, torch, the course, PyTorch's meta-device stack{warm}; forked from the warm process: the "
              f"fork, its sandbox and its confinement); {one['cpu']:.1f} s CPU in all, its workers' included")
    workers = sum(one["cpu"] - (one["boot"] or 0) for one in parents.values()) - (board["cpu"] if board else 0)
    waited = min(_spans(second, "parent ready"), key=lambda span: span[0]["t"])   # the first test's wait
    _report_tests(second, workers, waited[1]["t"] - waited[0]["t"])
    if board:
        print(f"  the leaderboard's training (a fresh worker, its steps): {board['wall']:.2f} s, {board['cpu']:.1f} s "
              f"CPU; its validation (the grader): {board['check wall']:.2f} s, {board['check cpu']:.1f} s CPU")
    else:
        print("  the leaderboard: no training")
    begin, end = second[0], next(e for e in second if e["name"] == "grade end")
    grader, pytest = end["self"] - begin["self"], end["children"] - begin["children"]
    tier = sum(one["cpu"] for one in parents.values())
    print(f"  the whole submission: {end['t'] - begin['t']:.1f} s wall, {grader + pytest + tier:.1f} s CPU "
          f"(the grader {grader:.1f}, pytest {pytest:.1f}, the sandbox {tier:.1f}); score {results.score:g}; "
          f"{results.leaderboard.note if results.leaderboard else 'no leaderboard'}")


def _parents(events: list[dict]) -> dict[int, dict]:
    """{pid: {"prepared", "boot" (CPU when first greeted), "waited" (the first greeting's wait),
    "cpu" (CPU in all, read before it stopped)}} of each worker parent started."""
    found = {e["parent"]: {"prepared": e["prepared"], "boot": None, "waited": None, "cpu": 0.0}
             for _, e in _spans(events, "parent start") if e.get("parent")}
    for b, e in _spans(events, "parent ready"):
        one = found.get(e.get("parent"))
        if one is not None and one["boot"] is None:
            one.update(boot=e["tier"], waited=e["t"] - b["t"])
    for b, _ in _spans(events, "parent stop"):
        one = found.get(b.get("parent"))
        if one is not None:
            one["cpu"] = max(one["cpu"], b.get("tier") or 0.0)
    return found


def _board(events: list[dict]) -> dict | None:
    """The leaderboard's training (wall, the tier's CPU) and validation (wall, the grader's CPU)."""
    train, check = _spans(events, "training"), _spans(events, "validation")
    if not train or not check:
        return None
    (b, e), (vb, ve) = train[0], check[0]
    return {"wall": e["t"] - b["t"], "cpu": (e.get("tier") or 0) - (b.get("tier") or 0),
            "check wall": ve["t"] - vb["t"], "check cpu": ve["self"] - vb["self"]}


def _report_tests(events: list[dict], workers: float, waited: float) -> None:
    pipe = _spans(events, "pipeline")[0]
    fork = _spans(events, "pytest start")[0][1]["t"]
    starts = {e["test"]: e["t"] for e in events if e["name"] == "test start"}
    ends = {e["test"]: e["t"] for e in events if e["name"] == "test result"}
    took = sorted(((ends[t] - starts[t], t) for t in ends if t in starts), reverse=True)
    first, last = min(starts.values()), max(ends.values())
    print(f"  pytest's start and collection (its fork to the first test's start): {first - fork:.2f} s; "
          f"the first test then waited {waited:.2f} s for the worker parent")
    print(f"  the graded tests: {len(took)} in {last - first:.1f} s ({(last - first) / len(took) * 1e3:.0f} ms each); "
          f"CPU: their workers {workers:.1f} s, pytest {pipe[1]['children'] - pipe[0]['children']:.1f} s (its start "
          f"included); the slowest:")
    for seconds, test in took[:4]:
        print(f"    {seconds:5.2f} s  {test}")
    print(f"  pytest's end (the last result to the run's end): {pipe[1]['t'] - last:.2f} s")

if __name__ == "__main__":
    sys.exit(main())
