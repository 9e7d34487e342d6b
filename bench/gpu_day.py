"""A GPU day in one command: every check the course has for an NVIDIA GPU, in 8 minutes, one report.

    make gpu                                  # = python bench/gpu_day.py (runs/gpu-day/report.{json,md})
    python bench/gpu_day.py --out DIR         # the report elsewhere
    python bench/gpu_day.py --only bench,gpu-check     # some steps again
    python bench/gpu_day.py --dry-run         # no GPU: build and validate every step, stub the GPU work

The steps, each a subprocess with its own time limit (seconds; 480 in all, a step never runs past
what is left of that):
  machine            20  the GPU, its memory, dense bf16 peak (andrea_course/gpus.py), HBM peak
  kernels-engine     85  tests/engine/test_kernels.py compiled: forward and gradients, fp32, fp16, bf16
  kernels-reference  40  andrea_course/activity_tests/test_kernels.py on the answer key's kernels
  kernels-learner    40  the same graded tests on exercises/ (failures there are the learner's)
  kernels-yours      30  bench/learner_kernels.py: the learner's kernels in the package's autograd,
                         forward and gradients, fp32 and bf16 (again, the verdicts are the learner's)
  bench              75  bench/kernels.py: ms and GB/s (TFLOP/s for attention) of the Triton kernels
                         against PyTorch eager and torch.compile, and as a share of the HBM peak
  gpu-check         150  andrea-train --gpu-check: ANDREA-120M eager and compiled in bf16, tokens/s,
                         MFU, peak memory next to --plan's
  torchrun           40  two processes of andrea-tiny under torchrun on NCCL (two GPUs or more)

A step whose files this copy lacks (tests/ and solutions/ are not in a learner's copy) is skipped
and says why. The report is one JSON file in a fixed format (FORMAT, below; each step's
"results" keeps the keys of STUBS) and its Markdown rendering; each step's output is in
DIR/<step>.log. With --dry-run nothing touches a GPU: each command is built and checked (its
files, its modules, its arguments parsed by the program's own parser), the machine is probed (in
this process, without a time limit), every other step is stubbed, and the report, in the same format, says so at the top.

Exit status: 0 every step ran as expected (or was skipped, or stubbed); 1 a step failed or ran out
of time, or no GPU without --dry-run; 2 a bad argument.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import importlib.util
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMAT = "andrea-gpu-day/1"
BUDGET_S = 480
STATUSES = ("ok", "failed", "timeout", "skipped", "stubbed")
PY = sys.executable

# HBM (or GDDR) peak bandwidth from the data sheets, GB/s; matched as andrea_course/gpus.py
# matches names: every word in the device's name, the first match winning.
HBM_GBPS = [("H100 PCIe", 2000), ("H100 NVL", 3900), ("H100", 3350), ("GH200", 4000), ("H200", 4800),
            ("H20", 4000), ("B200", 8000), ("A100 80GB", 2039), ("A100", 1555), ("A800", 2039),
            ("L40S", 864), ("L40", 864), ("L4", 300), ("A10G", 600), ("A10", 600), ("RTX 6000 Ada", 960),
            ("RTX A6000", 768), ("RTX 4090", 1008), ("RTX 3090", 936), ("V100", 900), ("T4", 320)]

# step -> the keys of its "results", each None in a stub (the machine step's are the probe's)
COUNTS = dict(tests=None, passed=None, failed=None, errors=None, skipped=None, failing=None)
STUBS = {
    "machine": dict(gpu=None, gpu_count=None, memory_gib=None, peak_tflops=None, hbm_gbps=None, torch=None,
                    triton=None, cuda=None, python=None),
    "kernels-engine": COUNTS, "kernels-reference": COUNTS, "kernels-learner": COUNTS,
    "kernels-yours": dict(device=None, rows=[], right=None, checked=None),
    "bench": dict(device=None, dtype=None, rows=[]),
    "gpu-check": dict(rows=[], peak_gib_eager=None, peak_gib_compiled=None, plan_peak_gib=None,
                      tokens_per_s_eager=None, tokens_per_s_compiled=None, mfu_compiled=None, kernels_tests=None),
    "torchrun": dict(processes=None, steps=None, first_loss=None, last_loss=None),
}
BENCH_ROW = ("kernel", "mode", "triton_ms", "triton_gbps", "eager_gbps", "compile_gbps", "triton_tflops",
             "of_hbm_peak", "vs_eager", "vs_compile")


@dataclass
class Step:
    name: str
    title: str
    limit_s: int
    command: list
    env: dict = field(default_factory=dict)
    needs: tuple = ()                    # paths under ROOT the step runs on
    modules: tuple = ()                  # modules the command runs
    expect: str = "exit 0"               # or "runs": pytest ran to the end, whatever the verdicts;
                                         # or "table": --gpu-check printed its table (its tests' verdict is in it)
    skip: str | None = None              # why the step cannot run on this machine


def hbm_peak(name: str | None) -> int | None:
    if not name:
        return None
    return next((gbps for n, gbps in HBM_GBPS if all(w in name.lower() for w in n.lower().split())), None)


def probe() -> dict:
    """This machine, as the machine step reports it (no GPU: gpu None, gpu_count 0)."""
    import torch
    from andrea_course import gpus
    from importlib.metadata import PackageNotFoundError, version
    found = dict(STUBS["machine"], torch=torch.__version__, cuda=torch.version.cuda, python=platform.python_version(),
                 gpu_count=torch.cuda.device_count() if torch.cuda.is_available() else 0)
    try:
        found["triton"] = version("triton")
    except PackageNotFoundError:
        pass
    if found["gpu_count"]:
        props = torch.cuda.get_device_properties(0)
        known = gpus.find(props.name)
        found.update(gpu=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                     peak_tflops=known.peak_flops / 1e12 if known else None, hbm_gbps=hbm_peak(props.name))
    return found


def steps(out: Path, gpu_count: int) -> list[Step]:
    def pytest(name, files, impl):
        return [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={out / (name + '.xml')}", *files], \
            {"ANDREA_IMPL": impl} if impl else {}
    graded = "andrea_course/activity_tests/test_kernels.py"
    run = out / "torchrun-run"
    train = ["-m", "andrea_course.capstone", "--config", "andrea-tiny", "--max-steps", "20", "--eval-every", "0",
             "--sample-every", "0", "--checkpoint-every", "0", "--no-tensorboard", "--no-progress", "--out", str(run)]
    made = []
    for name, title, limit, files, impl, needs, expect in (
            ("kernels-engine", "the package's kernels, compiled (tests/engine/test_kernels.py)", 85,
             ["tests/engine/test_kernels.py"], None, ("tests/engine/test_kernels.py",), "exit 0"),
            ("kernels-reference", "graded kernel tests on the answer key", 40, [graded], "solutions",
             (graded, "solutions/kernels.py"), "exit 0"),
            ("kernels-learner", "graded kernel tests on exercises/", 40, [graded], "exercises",
             (graded, "exercises/kernels.py"), "runs")):
        command, env = pytest(name, files, impl)
        made.append(Step(name, title, limit, command, env, needs, ("pytest",), expect))
    return [Step("machine", "the GPU and the software", 20, [PY, str(Path(__file__).resolve()), "--probe"],
                 modules=("torch",)), *made,
            Step("kernels-yours", "exercises/kernels.py in the package's autograd, fp32 and bf16", 30,
                 [PY, "bench/learner_kernels.py", "--impl", "exercises", "--json", str(out / "kernels-yours.json")],
                 needs=("bench/learner_kernels.py", "exercises/kernels.py"), modules=("torch", "triton")),
            Step("bench", "bench/kernels.py: Triton against eager and compiled PyTorch", 75,
                 [PY, "bench/kernels.py", "--json", str(out / "bench.json")], needs=("bench/kernels.py",),
                 modules=("torch", "triton")),
            Step("gpu-check", "andrea-train --gpu-check: ANDREA-120M, bf16, eager and compiled", 150,
                 [PY, "-m", "andrea_course.capstone", "--gpu-check"], modules=("andrea_course.capstone",),
                 env={"ANDREA_IMPL": "solutions"} if (ROOT / "solutions").is_dir() else {}, expect="table"),
            Step("torchrun", "two processes under torchrun (NCCL)", 40,
                 [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *train],
                 modules=("torch.distributed.run", "andrea_course.capstone"),
                 skip=None if gpu_count >= 2 else
                 f"{gpu_count} GPU{'' if gpu_count == 1 else 's'}: NCCL puts each process on a GPU of its own, "
                 f"so two processes need two GPUs")]


# ----------------------------------------------------------------------------- checking a command
def problems(step: Step) -> list[str]:
    """What is wrong with a step's command, without running it: [] when nothing is."""
    found = [f"{m} is not importable" for m in step.modules if importlib.util.find_spec(m) is None]
    if found:
        return found
    args = step.command[1:]
    try:
        if args[:2] == ["-m", "pytest"]:
            files = [a for a in args if a.endswith(".py")]
            for f in files:
                if not any(isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
                           for n in ast.walk(ast.parse((ROOT / f).read_text(encoding="utf-8")))):
                    found.append(f"{f} defines no test")
        elif args[0] == "bench/kernels.py":
            _script(args[0]).parse_args(args[1:])
        elif args[0] == "bench/learner_kernels.py":
            _script(args[0]).parser().parse_args(args[1:])
        elif args[:2] == ["-m", "torch.distributed.run"]:
            from torch.distributed.run import get_args_parser
            parsed = get_args_parser().parse_args(args[2:])
            if not parsed.module or parsed.training_script != "andrea_course.capstone":
                found.append("torchrun does not start andrea_course.capstone as a module (-m)")
            _andrea_train(parsed.training_script_args)
        elif args[:2] == ["-m", "andrea_course.capstone"]:
            _andrea_train(args[2:])
    except SystemExit as exc:          # argparse refused the arguments (it printed why)
        found.append(f"its arguments do not parse (exit {exc.code}): {' '.join(args)}")
    except (OSError, SyntaxError, ImportError) as exc:
        found.append(f"{type(exc).__name__}: {exc}")
    return found


def _script(rel: str):
    """A script under ROOT, loaded as a module (its main() not run)."""
    spec = importlib.util.spec_from_file_location(Path(rel).stem + "_under_check", ROOT / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _andrea_train(argv: list) -> None:
    """andrea-train's own parser accepts argv, and its --config names a preset or a file
    (SystemExit when not)."""
    from andrea_course.capstone.cli import build_parser
    from andrea_course.presets import TRAIN_PRESETS
    args = build_parser().parse_args(argv)
    if not args.gpu_check and args.config not in TRAIN_PRESETS and not (ROOT / args.config).is_file():
        print(f"andrea-train: --config {args.config} is neither a preset nor a file", file=sys.stderr)
        raise SystemExit(2)


# ----------------------------------------------------------------------------- running a step
def execute(step: Step, out: Path, deadline: float) -> dict:
    """Run one step under its limit (and what is left of the budget); its record for the report."""
    record = dict(name=step.name, title=step.title, command=step.command, limit_s=step.limit_s, status="skipped",
                  seconds=0.0, reason="", results=dict(STUBS[step.name]), log=f"{step.name}.log")
    limit = min(step.limit_s, deadline - time.monotonic())
    if limit < 5:
        record["reason"] = "the budget of the day is spent"
        return record
    env = dict(os.environ, **step.env, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    env.pop("TRITON_INTERPRET", None)                            # compiled for the GPU, never interpreted
    start = time.monotonic()
    with open(out / record["log"], "w", encoding="utf-8") as log:
        child = subprocess.Popen(step.command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)         # its own group: a timeout stops its children too
        try:
            rc = child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            rc = None
    record["seconds"] = round(time.monotonic() - start, 1)
    text = (out / record["log"]).read_text(encoding="utf-8", errors="replace")
    try:
        record["results"].update(READERS[step.name](out, text))
    except (OSError, ValueError, KeyError, ET.ParseError) as exc:
        record["reason"] = f"its results could not be read: {type(exc).__name__}: {exc}; "
    if rc is None:
        record.update(status="timeout", reason=record["reason"] + f"stopped after {limit:.0f} s")
    elif rc == 0 or rc == 1 and (step.expect == "runs" and record["results"].get("tests")
                                 or step.expect == "table" and record["results"].get("tokens_per_s_compiled")):
        record.update(status="ok", reason="" if rc == 0 else EXIT_1[step.expect] + f": see {record['log']}")
    else:
        record.update(status="failed", reason=record["reason"] + f"exit {rc}: see {record['log']}")
    return record


EXIT_1 = {"runs": "pytest ran every test; the failures are the learner's to fix",
          "table": "measured; exit 1 because its own run of the kernels' tests failed"}


def read_probe(out: Path, text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def read_junit(name: str):
    def read(out: Path, text: str) -> dict:
        suites = ET.parse(out / f"{name}.xml").getroot()
        suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
        n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        failing = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
                   if c.find("failure") is not None or c.find("error") is not None]
        return dict(tests=n["tests"], passed=n["tests"] - n["failures"] - n["errors"] - n["skipped"],
                    failed=n["failures"], errors=n["errors"], skipped=n["skipped"], failing=failing[:10])
    return read


def read_yours(out: Path, text: str) -> dict:
    data = json.loads((out / "kernels-yours.json").read_text(encoding="utf-8"))
    return dict(device=data["device"], rows=data["rows"], right=sum(r["ok"] for r in data["rows"]),
                checked=len(data["rows"]))


def read_bench(out: Path, text: str) -> dict:
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    peak = hbm_peak(data["device"])
    rows = []
    for r in data["rows"]:
        ms = r["ms"]
        rate = lambda who: r["bytes"] / ms[who] / 1e6 if r["bytes"] and who in ms else None    # GB/s
        rows.append(dict(kernel=r["kernel"], mode=r["mode"], triton_ms=ms["triton"], triton_gbps=rate("triton"),
                         eager_gbps=rate("eager"), compile_gbps=rate("compile"),
                         triton_tflops=r["flops"] / ms["triton"] / 1e9 if r["flops"] else None,
                         of_hbm_peak=rate("triton") / peak if peak and r["bytes"] else None,
                         vs_eager=ms["eager"] / ms["triton"] if "eager" in ms else None,
                         vs_compile=ms["compile"] / ms["triton"] if "compile" in ms else None))
    return dict(device=data["device"], dtype=data["dtype"], rows=rows)


GPU_CHECK_ROWS = {"peak memory, eager": "peak_gib_eager", "peak memory, compiled": "peak_gib_compiled",
                  "tokens/s, eager": "tokens_per_s_eager", "tokens/s, compiled": "tokens_per_s_compiled",
                  "MFU, compiled": "mfu_compiled"}


def _number(cell: str) -> float | None:
    m = re.match(r"\s*([\d,.]+)\s*(k|M|GiB|%)?", cell)
    if not m:
        return None
    value = float(m.group(1).replace(",", ""))
    return value * {"k": 1e3, "M": 1e6, "%": 1e-2}.get(m.group(2), 1)


def read_gpu_check(out: Path, text: str) -> dict:
    """andrea-train --gpu-check's Markdown table, row by row, and its figures as numbers."""
    found = dict(rows=[])
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("kernels' tests:"):
            found["kernels_tests"] = line.split(":", 1)[1].strip()
        key = next((k for label, k in GPU_CHECK_ROWS.items() if cells[0].startswith(label)), None)
        if len(cells) == 3 and key:
            found["rows"].append(dict(measure=cells[0], plan=cells[1], measured=cells[2]))
            found[key] = _number(cells[2])
            if key == "peak_gib_eager":
                found["plan_peak_gib"] = _number(cells[1])
    return found


def read_torchrun(out: Path, text: str) -> dict:
    losses = [r["loss"] for r in map(json.loads, (out / "torchrun-run" / "log.jsonl").read_text().splitlines())
              if isinstance(r, dict) and "loss" in r]
    return dict(processes=2, steps=len(losses), first_loss=losses[0] if losses else None,
                last_loss=losses[-1] if losses else None)


READERS = {"machine": read_probe, "kernels-engine": read_junit("kernels-engine"),
           "kernels-reference": read_junit("kernels-reference"), "kernels-learner": read_junit("kernels-learner"),
           "kernels-yours": read_yours, "bench": read_bench, "gpu-check": read_gpu_check, "torchrun": read_torchrun}


# ----------------------------------------------------------------------------- the day
def day(out: Path, dry_run: bool, only: set, budget: float = BUDGET_S) -> dict:
    started = datetime.datetime.now(datetime.timezone.utc)
    deadline = time.monotonic() + budget
    out.mkdir(parents=True, exist_ok=True)
    machine_step = steps(out, gpu_count=2)[0]
    if dry_run:                    # this process, no time limit: the dry run keeps no budget
        start, wrong = time.monotonic(), problems(machine_step)
        records = [dict(name="machine", title=machine_step.title, command=machine_step.command,
                        limit_s=machine_step.limit_s, status="failed" if wrong else "ok", seconds=0.0,
                        reason="; ".join(wrong), results=dict(STUBS["machine"], **({} if wrong else probe())), log=None)]
        records[0]["seconds"] = round(time.monotonic() - start, 1)
    else:
        records = [execute(machine_step, out, deadline)]
    machine = records[0]["results"]
    gpu_count = machine.get("gpu_count") or 0
    for step in steps(out, gpu_count)[1:]:
        if only and step.name not in only:
            continue
        missing = [n for n in step.needs if not (ROOT / n).exists()]
        wrong = problems(step)
        record = dict(name=step.name, title=step.title, command=step.command, limit_s=step.limit_s,
                      status="skipped", seconds=0.0, reason="", results=dict(STUBS[step.name]), log=None)
        if missing:
            record["reason"] = f"this copy of the course has no {', '.join(missing)}"
        elif wrong:
            record.update(status="failed", reason="the command is wrong: " + "; ".join(wrong))
        elif dry_run:
            record.update(status="stubbed", reason="dry run: command built and checked, not run"
                          + (f" (on this machine it would be skipped: {step.skip})" if step.skip else ""))
        elif step.skip:
            record["reason"] = step.skip
        else:
            record = execute(step, out, deadline)
        records.append(record)
        print(f"gpu-day: {record['name']}: {record['status']}"
              + (f" in {record['seconds']:.0f} s" if record["seconds"] else "")
              + (f" ({record['reason']})" if record["reason"] else ""), file=sys.stderr, flush=True)
    return dict(format=FORMAT, dry_run=dry_run,
                note=("DRY RUN: no GPU work ran; every step but the machine's is a stub, and no figure in "
                      "this report was measured on a GPU") if dry_run else "",
                started=started.isoformat(timespec="seconds"),
                seconds=round(sum(r["seconds"] for r in records), 1), budget_s=budget,
                machine=machine, steps=records)


# ----------------------------------------------------------------------------- the Markdown
def fmt(value, spec: str = ",.0f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [f"# GPU day: {m.get('gpu') or 'no GPU'}", ""]
    if report["dry_run"]:
        lines += [f"**{report['note']}.**", ""]
    lines += [f"{report['started']}; {m.get('gpu_count') or 0} GPU(s), {fmt(m.get('memory_gib'), '.1f', ' GiB')}, "
              f"dense bf16 peak {fmt(m.get('peak_tflops'), '.0f', ' TFLOP/s')}, HBM peak {fmt(m.get('hbm_gbps'), ',.0f', ' GB/s')}; "
              f"torch {m.get('torch') or '-'}, Triton {m.get('triton') or '-'}, CUDA {m.get('cuda') or '-'}, "
              f"Python {m.get('python') or '-'}; {report['seconds']:.0f} s of a {report['budget_s']:.0f} s budget "
              f"(format {report['format']})", "",
              "| step | status | seconds (limit) | what it says |", "|---|---|---:|---|"]
    for r in report["steps"]:
        lines.append(f"| {r['name']} | {r['status']} | {r['seconds']:.0f} ({r['limit_s']}) | {_summary(r)} |")
    by = {r["name"]: r for r in report["steps"]}
    rows = by.get("bench", {}).get("results", {}).get("rows") or []
    lines += ["", "## Kernels (bench/kernels.py)", "",
              "| kernel | pass | Triton ms | Triton GB/s | eager GB/s | compiled GB/s | Triton TFLOP/s | of HBM peak | vs eager | vs compiled |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['kernel']} | {r['mode']} | {fmt(r['triton_ms'], '.3f')} | {fmt(r['triton_gbps'])} | "
              f"{fmt(r['eager_gbps'])} | {fmt(r['compile_gbps'])} | {fmt(r['triton_tflops'], '.1f')} | "
              f"{fmt(r['of_hbm_peak'] and 100 * r['of_hbm_peak'], '.0f', ' %')} | {fmt(r['vs_eager'], '.2f', 'x')} | "
              f"{fmt(r['vs_compile'], '.2f', 'x')} |" for r in rows] or ["| - | - | - | - | - | - | - | - | - | - |"]
    yours = by.get("kernels-yours", {}).get("results", {}).get("rows") or []
    lines += ["", "## Your kernels in the package's autograd (bench/learner_kernels.py)", "",
              "| kernel | dtype | written | forward (share of tolerance) | gradients (share of tolerance) | verdict |",
              "|---|---|---|---:|---:|---|"]
    lines += [f"| {r['kernel']} | {r['dtype']} | {'yes' if r['written'] else 'no'} | {fmt(r['forward'], '.2f')} | "
              f"{fmt(r['gradients'], '.2f')} | {'ok' if r['ok'] else (r['error'] or ('wrong' if r['written'] else 'not written'))} |"
              for r in yours] or ["| - | - | - | - | - | - |"]
    check = by.get("gpu-check", {}).get("results", {}).get("rows") or []
    lines += ["", "## ANDREA-120M (andrea-train --gpu-check)", "", "| measure | plan | measured |", "|---|---:|---:|"]
    lines += [f"| {r['measure']} | {r['plan']} | {r['measured']} |" for r in check] or ["| - | - | - |"]
    return "\n".join(lines) + "\n"


def _summary(r: dict) -> str:
    res, why = r["results"], r["reason"]
    if r["status"] in ("skipped", "stubbed", "timeout") or res is None:
        return why
    if "tests" in res and res["tests"] is not None:
        said = f"{res['passed']} of {res['tests']} passed, {res['failed']} failed, {res['errors']} errors, {res['skipped']} skipped"
    elif r["name"] == "machine":
        said = res.get("gpu") or "no CUDA GPU"
    elif r["name"] == "gpu-check":
        said = (f"compiled {fmt(res['tokens_per_s_compiled'])} tokens/s, MFU {fmt(res['mfu_compiled'] and 100 * res['mfu_compiled'], '.1f', ' %')}, "
                f"eager peak {fmt(res['peak_gib_eager'], '.2f', ' GiB')} (plan {fmt(res['plan_peak_gib'], '.2f', ' GiB')})")
    elif r["name"] == "torchrun":
        said = f"{res['steps']} steps, loss {fmt(res['first_loss'], '.3f')} to {fmt(res['last_loss'], '.3f')}"
    elif r["name"] == "kernels-yours":
        said = f"{res['right']} of {res['checked']} right (kernel × dtype, forward and gradients)"
    elif r["name"] == "bench":
        said = f"{len(res['rows'])} rows on {res['device']}"
    else:
        said = ""
    return "; ".join(s for s in (said, why) if s)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/gpu_day.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "runs" / "gpu-day"), help="the report's folder (default: runs/gpu-day)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: build and check every step, stub the GPU work")
    p.add_argument("--only", default="", help=f"comma-separated steps (default: all): {', '.join(list(STUBS)[1:])}")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        print(json.dumps(probe()))
        return 0
    only = {s for s in args.only.split(",") if s}
    if only - set(STUBS):
        p.error(f"--only: no step named {', '.join(sorted(only - set(STUBS)))}; the steps: {', '.join(list(STUBS)[1:])}")
    if not args.dry_run:
        import torch
        if not torch.cuda.is_available():
            print("bench/gpu_day.py: no CUDA GPU here (torch.cuda.is_available() is False), nothing measured; "
                  "--dry-run checks the script on this machine", file=sys.stderr)
            return 1
    out = Path(args.out).resolve()               # the steps run in the course's folder
    report = day(out, args.dry_run, only)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    print(f"wrote {out / 'report.json'} and {out / 'report.md'}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "skipped", "stubbed") for r in report["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
