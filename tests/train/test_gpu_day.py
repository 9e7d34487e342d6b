"""bench/gpu_day.py, the GPU day: its dry run checks every step end to end on a CPU and writes the
report in its fixed format; a wrong command fails the dry run; the readers take what the tools
write (andrea-train --gpu-check's table, pytest's JUnit XML, bench/kernels.py --json, the
trainer's log); a step past its limit is stopped; docs/cloud.md's table of steps is the script's."""
from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest

from andrea_course.paths import ROOT

spec = importlib.util.spec_from_file_location("gpu_day", ROOT / "bench" / "gpu_day.py")
gpu_day = sys.modules.setdefault("gpu_day", importlib.util.module_from_spec(spec))
spec.loader.exec_module(gpu_day)

RECORD = {"name", "title", "command", "limit_s", "status", "seconds", "reason", "results", "log"}


@pytest.mark.slow(seconds=10)
def test_the_dry_run_checks_every_step_and_writes_the_report_in_its_format(tmp_path, capsys):
    assert gpu_day.main(["--dry-run", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report) == {"format", "dry_run", "note", "started", "seconds", "budget_s", "machine", "steps"}
    assert report["format"] == gpu_day.FORMAT and report["dry_run"] is True and "DRY RUN" in report["note"]
    assert [s["name"] for s in report["steps"]] == list(gpu_day.STUBS)
    for step in report["steps"]:
        assert set(step) == RECORD and step["status"] in gpu_day.STATUSES, step
        assert set(step["results"]) == set(gpu_day.STUBS[step["name"]]), step["name"]
        assert all(isinstance(a, str) for a in step["command"]) and step["command"][0] == sys.executable
    machine, *rest = report["steps"]
    assert machine["status"] == "ok" and report["machine"] == machine["results"]
    assert report["machine"]["torch"] and report["machine"]["gpu_count"] == 0       # this machine, probed
    assert {s["status"] for s in rest} == {"stubbed"}, [(s["name"], s["reason"]) for s in rest]
    assert all(v in (None, []) for s in rest for v in s["results"].values())       # a stub measures nothing
    assert sum(s["limit_s"] for s in report["steps"]) == report["budget_s"] == gpu_day.BUDGET_S

    md = (tmp_path / "report.md").read_text()
    assert md == gpu_day.markdown(report) and md in capsys.readouterr().out
    assert "**DRY RUN" in md.splitlines()[2]
    for step in report["steps"]:
        assert re.search(rf"^\| {step['name']} \| {step['status']} \| {step['seconds']:.0f} \({step['limit_s']}\) \|", md, re.M), step["name"]


def test_a_wrong_command_fails_the_dry_run(tmp_path):
    made = {s.name: s for s in gpu_day.steps(tmp_path, gpu_count=2)}
    assert {name: gpu_day.problems(s) for name, s in made.items()} == {name: [] for name in made}
    made["gpu-check"].command.append("--no-such-flag")
    made["bench"].command.append("--no-such-flag")
    made["kernels-yours"].command.append("--no-such-flag")
    made["torchrun"].command[made["torchrun"].command.index("--max-steps") + 1] = "zero"
    made["kernels-engine"].modules = ("no_such_module",)
    conftest = made["kernels-reference"].command.index("andrea_course/activity_tests/test_kernels.py")
    made["kernels-reference"].command[conftest] = "tests/conftest.py"                  # a file without tests
    for name in ("gpu-check", "bench", "kernels-yours", "torchrun", "kernels-engine", "kernels-reference"):
        assert gpu_day.problems(made[name]), name
    assert "no_such_module is not importable" in gpu_day.problems(made["kernels-engine"])[0]
    assert "tests/conftest.py defines no test" in gpu_day.problems(made["kernels-reference"])


@pytest.mark.slow(seconds=6)
def test_the_readers_take_what_the_tools_write(tmp_path):
    from andrea_course.train.gpu_check import B, T, report, settings
    from andrea_course.train.plan import make_plan
    from andrea_course.train.trainer import TrainConfig
    plan = make_plan(TrainConfig(**settings("bf16", False, 1)), gpu="H100")
    eager = dict(tokens_per_s=123_456.0, mfu=0.2, peak_bytes=9.5 * 2**30, seconds=1.0)
    compiled = dict(tokens_per_s=654_321.0, mfu=0.4321, peak_bytes=7.25 * 2**30, seconds=1.0)
    text = report("NVIDIA H100 80GB HBM3", "bf16", "57 passed in 30.00s", eager, compiled, plan)
    got = gpu_day.read_gpu_check(tmp_path, text)
    assert len(got["rows"]) == 5 and got["kernels_tests"] == "57 passed in 30.00s"
    assert got["tokens_per_s_compiled"] == pytest.approx(654e3) and got["tokens_per_s_eager"] == pytest.approx(123e3)
    assert got["mfu_compiled"] == pytest.approx(0.432) and got["peak_gib_compiled"] == pytest.approx(7.25)
    assert got["peak_gib_eager"] == pytest.approx(9.5) and got["plan_peak_gib"] == pytest.approx(plan.memory.peak / 2**30, abs=0.01)
    assert set(got) == set(gpu_day.STUBS["gpu-check"])

    (tmp_path / "k.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1" '
        'skipped="1" tests="5"><testcase classname="tests.test_kernels" name="test_gelu[fp32]"/>'
        '<testcase classname="tests.test_kernels" name="test_softmax[bf16]"><failure message="x"/></testcase>'
        '</testsuite></testsuites>')
    counts = gpu_day.read_junit("k")(tmp_path, "")
    assert counts == dict(tests=5, passed=2, failed=1, errors=1, skipped=1, failing=["tests.test_kernels::test_softmax[bf16]"])

    rows = [dict(kernel="gelu_tanh", mode="fwd", ms=dict(triton=0.1, eager=0.2, compile=0.125), bytes=4e8, flops=None,
                 max_abs_diff=0.0),
            dict(kernel="attention", mode="fwd", ms=dict(triton=2.0, eager=4.0), bytes=None, flops=6e12, max_abs_diff=0.0)]
    (tmp_path / "bench.json").write_text(json.dumps(dict(device="NVIDIA H100 80GB HBM3", dtype="bfloat16", shapes={},
                                                         rows=rows)))
    bench = gpu_day.read_bench(tmp_path, "")
    gelu, attention = bench["rows"]
    assert set(gelu) == set(gpu_day.BENCH_ROW) and gelu["triton_gbps"] == pytest.approx(4e8 / 0.1 / 1e6)
    assert gelu["compile_gbps"] == pytest.approx(3200) and gelu["vs_compile"] == pytest.approx(1.25)
    assert gelu["of_hbm_peak"] == pytest.approx(4000 / 3350)                        # H100 SXM: 3.35 TB/s
    assert attention["triton_tflops"] == pytest.approx(3000) and attention["triton_gbps"] is None

    (tmp_path / "torchrun-run").mkdir()
    (tmp_path / "torchrun-run" / "log.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"event": "start"}, {"step": 1, "loss": 6.5}, {"step": 2, "loss": 6.25})))
    assert gpu_day.read_torchrun(tmp_path, "") == dict(processes=2, steps=2, first_loss=6.5, last_loss=6.25)
    assert gpu_day.markdown(dict(format=gpu_day.FORMAT, dry_run=False, note="", started="t", seconds=1.0, budget_s=480,
                                 machine=dict(gpu_day.STUBS["machine"], gpu="NVIDIA H100 80GB HBM3"),
                                 steps=[dict(name="bench", title="", command=[], limit_s=90, status="ok", seconds=1.0,
                                             reason="", results=bench, log="bench.log")])).count("| gelu_tanh | fwd |") == 1


@pytest.mark.slow(seconds=8)
def test_a_step_is_stopped_at_its_limit_and_judged_by_its_exit(tmp_path):
    import time
    sleeper = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    step = gpu_day.Step("torchrun", "", 5, [sys.executable, "-c", sleeper])
    record = gpu_day.execute(step, tmp_path, time.monotonic() + 60)
    assert record["status"] == "timeout" and "stopped after 5 s" in record["reason"], record
    failing = gpu_day.Step("bench", "", 30, [sys.executable, "-c", "raise SystemExit(3)"])
    record = gpu_day.execute(failing, tmp_path, time.monotonic() + 60)
    assert record["status"] == "failed" and "exit 3: see bench.log" in record["reason"], record
    spent = gpu_day.execute(failing, tmp_path, time.monotonic() + 2)
    assert spent["status"] == "skipped" and spent["reason"] == "the budget of the day is spent"


def test_docs_cloud_md_lists_the_scripts_steps_and_limits(tmp_path):
    text = (ROOT / "docs" / "cloud.md").read_text(encoding="utf-8")
    section = text[text.index("## 6. A GPU day in one command"):]
    listed = dict(re.findall(r"^\| ([a-z-]+) \| (\d+) s \|", section, re.M))
    assert listed == {s.name: str(s.limit_s) for s in gpu_day.steps(tmp_path, gpu_count=2)}
    assert f"{gpu_day.BUDGET_S} s in all" in section and gpu_day.FORMAT in section


def test_without_a_gpu_a_real_day_refuses_in_one_line_and_a_bad_step_name_is_a_usage_error(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the day would run")
    assert gpu_day.main(["--out", str(tmp_path / "day")]) == 1
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "no CUDA GPU here" in said[0] and "--dry-run" in said[0]
    assert not (tmp_path / "day").exists()
    with pytest.raises(SystemExit) as exc:
        gpu_day.main(["--dry-run", "--only", "bench,nosuch"])
    assert exc.value.code == 2 and "no step named nosuch" in capsys.readouterr().err


@pytest.mark.slow(seconds=5)
@pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a learner's release)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")     # the interpreter's sigmoid, exp(-z) -> inf -> 0
def test_learner_kernels_pass_the_reference_and_catch_a_wrong_or_unwritten_kernel(tmp_path):
    """bench/learner_kernels.py in Triton's interpreter (fp32): the answer key's three kernels are
    right, forward and gradients; a GELU with a wrong constant is caught; stubs are not launched."""
    spec = importlib.util.spec_from_file_location("learner_kernels", ROOT / "bench" / "learner_kernels.py")
    lk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lk)
    line = "z = 0.7978845608028654 * (x + 0.044715 * x * x * x)      #"
    source = (ROOT / "solutions" / "kernels.py").read_text(encoding="utf-8")
    assert source.count(line) == 1
    (tmp_path / "kernels.py").write_text(source.replace(line, line.replace("0.044715", "0.06")), encoding="utf-8")
    right = {r["kernel"]: r for r in lk.check(ROOT / "solutions", ["fp32"], "cpu")}
    assert set(right) == {"gelu_kernel", "layer_norm_kernel", "softmax_kernel"}
    assert all(r["ok"] and r["forward"] <= 1 and r["gradients"] <= 1 for r in right.values()), right
    wrong = {r["kernel"]: r for r in lk.check(tmp_path, ["fp32"], "cpu")}
    assert not wrong["gelu_kernel"]["ok"] and wrong["gelu_kernel"]["forward"] > 1 and wrong["gelu_kernel"]["written"]
    assert wrong["softmax_kernel"]["ok"] and wrong["layer_norm_kernel"]["ok"]
    untouched = lk.check(ROOT / "exercises", ["fp32"], "cpu")
    assert [r["written"] for r in untouched] == [False] * 3 and not any(r["ok"] or r["error"] for r in untouched)

    (tmp_path / "kernels-yours.json").write_text(json.dumps(dict(device="cpu (interpreter)", impl="x",
                                                                 rows=list(right.values()) + list(wrong.values()))))
    read = gpu_day.read_yours(tmp_path, "")
    assert (read["right"], read["checked"]) == (5, 6) and set(read) == set(gpu_day.STUBS["kernels-yours"])
    assert "| gelu_kernel | fp32 | yes |" in gpu_day.markdown(dict(
        format=gpu_day.FORMAT, dry_run=False, note="", started="t", seconds=1.0, budget_s=480,
        machine=dict(gpu_day.STUBS["machine"]), steps=[dict(name="kernels-yours", title="", command=[], limit_s=30,
                                                            status="ok", seconds=1.0, reason="", results=read, log="")]))


def test_a_step_that_may_exit_1_is_judged_by_what_it_wrote(tmp_path):
    """pytest on the learner's kernels exits 1 when a test fails (their work, not the day's);
    --gpu-check exits 1 when its own kernel tests fail, after measuring: both count as ran, with
    the reason said; without their results an exit 1 is a failure."""
    import time
    xml = tmp_path / "kernels-learner.xml"
    write = f"open({str(xml)!r}, 'w').write('<testsuites><testsuite tests=\"3\" failures=\"3\" errors=\"0\" skipped=\"0\"/></testsuites>')"
    ran = gpu_day.execute(gpu_day.Step("kernels-learner", "", 30, [sys.executable, "-c", write + "; raise SystemExit(1)"],
                                       expect="runs"), tmp_path, time.monotonic() + 60)
    assert ran["status"] == "ok" and "the learner's to fix" in ran["reason"] and ran["results"]["failed"] == 3, ran
    xml.unlink()
    crashed = gpu_day.execute(gpu_day.Step("kernels-learner", "", 30, [sys.executable, "-c", "raise SystemExit(1)"],
                                           expect="runs"), tmp_path, time.monotonic() + 60)
    assert crashed["status"] == "failed" and "could not be read" in crashed["reason"], crashed
    table = "| tokens/s, compiled | 1k – 2k | 654k |"
    measured = gpu_day.execute(gpu_day.Step("gpu-check", "", 30, [sys.executable, "-c", f"print({table!r}); raise SystemExit(1)"],
                                            expect="table"), tmp_path, time.monotonic() + 60)
    assert measured["status"] == "ok" and measured["results"]["tokens_per_s_compiled"] == pytest.approx(654e3), measured
