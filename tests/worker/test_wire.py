"""The wire between a graded test and the learner's worker (andrea_course/worker/wire.py), and
the worker seen from a test: a tensor arrives as the test made it (strides, offset, the storage
it views), what the learner changes in place comes back into the test's own objects, an answer
that is an argument is that argument's memory, the learner's prints and exceptions come back, a
reply's cost to the grader is the reply's own size, and nothing malformed or oversized is read.

The worker tests run the process tier (a worker process forked from this one): the same worker
as andrea-grade's sandbox, without the wall (tests/worker/test_isolation.py has the walls)."""
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

from andrea_course import ModelConfig
from andrea_course.exercises import SOLUTIONS
from andrea_course.worker import wire
from andrea_course.worker.client import IsolatedStudent, LearnerCodeError, rebuild
from andrea_course.worker.tiers import Isolation, Limits
from andrea_course.paths import ROOT

# Helpers appended to a copy of the answer key's attention.py: names that are not pieces come
# to a test as written (Overlay.isolated), so a test can ask the worker what it received.
PROBES = '''

def geometry(*xs):
    """What arrived: (shape, stride, offset, the bytes of its storage, storage id) per tensor."""
    return [(tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.untyped_storage().nbytes(),
             x.untyped_storage().data_ptr()) for x in xs]


def scale_in_place(x, generator):
    x.mul_(2)
    torch.rand(3, generator=generator)
    return x[1:]


def scale_then_raise(x):
    x.add_(1)
    raise ValueError("after the change")


def returns_the_argument(x):
    return x


def shout(n):
    for i in range(n):
        print("row", i)
    return n


def big_reply(n):
    return torch.zeros(n, dtype=torch.uint8)


def many_references(n):
    return [1] * n


def broadcast(n):
    return torch.ones(1).expand(n, n)


def strided_answer():
    return torch.arange(12.0).reshape(3, 4).t()


def fails_inside():
    def inner():
        raise RuntimeError("deep down")
    inner()


class Counter:
    def __init__(self):
        self.items = []

    def add(self, x):
        self.items.append(x.clone())
        return len(self.items)
'''


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probes")
    for path in SOLUTIONS.glob("*.py"):
        shutil.copy(path, folder / path.name)
    with open(folder / "attention.py", "a") as f:
        f.write(PROBES)
    return folder


@pytest.fixture(scope="module")
def student(probes):
    s = IsolatedStudent(probes, isolation=Isolation("process", timeout=30, start="fork"))
    yield s
    s.close()


def piece(student, name):
    student.begin_test()
    return student.piece("attention", name)


def _roundtrip(writer, fields, **read):
    head, blobs = writer.frame(fields)
    data = io.BytesIO(head + b"".join(bytes(b) for b in blobs))

    def readinto(view):
        if data.readinto(view) != len(view):
            raise EOFError
    return wire.read(readinto, **read)


# ----------------------------------------------------------------------------- the format
def test_values_cross_as_values_and_nothing_else():
    cfg = ModelConfig.preset("andrea-tiny")
    value = {"x": torch.arange(6.0).reshape(2, 3)[:, 1], "n": [1, 2.5, True, None, "s", float("nan"), float("-inf")],
             "t": (torch.float16, torch.device("cpu")), "cfg": cfg, 3: slice(1, None), "big": 2 ** 80}
    w = wire.Writer()
    m = _roundtrip(w, {"v": w.value(value)})
    back = wire.tree(m, m.fields["v"])
    assert torch.equal(back["x"], torch.tensor([1.0, 4.0])) and back["x"].stride() == (3,)
    assert back["n"][:5] == [1, 2.5, True, None, "s"] and back["n"][5] != back["n"][5] and back["n"][6] == float("-inf")
    assert back["t"] == (torch.float16, torch.device("cpu")) and back["cfg"] == cfg and back[3] == slice(1, None)
    assert back["big"] == 2 ** 80
    with pytest.raises(TypeError, match="can pass only"):
        wire.Writer().value(object())
    generator = torch.Generator().manual_seed(7)
    w = wire.Writer()
    m = _roundtrip(w, {"g": w.value(generator)})
    copy = wire.tree(m, m.fields["g"])                           # a sampler's generator: by its state
    assert torch.equal(torch.rand(3, generator=copy), torch.rand(3, generator=generator))


def test_views_keep_their_geometry_and_share_one_span():
    """wide[:, :256] keeps its row stride of 320 (a clone would not); two views of one storage
    arrive as views of one storage; an expanded view stays a view (the test made it so)."""
    wide = torch.randn(6, 320)
    views = [wide[:, :256], wide[2:4, 10:20], wide.t(), torch.zeros(1).expand(5, 3), wide[1, 3:]]
    w = wire.Writer()
    m = _roundtrip(w, {"v": w.value(views)})
    back = wire.tree(m, m.fields["v"])
    for got, want in zip(back, views):
        assert torch.equal(got, want) and got.stride() == want.stride() and got.shape == want.shape
    assert back[0].untyped_storage().data_ptr() == back[1].untyped_storage().data_ptr() == back[4].untyped_storage().data_ptr()
    assert back[1].storage_offset() - back[0].storage_offset() == 2 * 320 + 10
    assert len(m.storages) == 2 and m.storages[0].numel() == 6 * 320 * 4      # the span, sent once


def test_malformed_or_oversized_messages_are_refused_before_they_are_read():
    import struct

    def reader(data):
        buf = io.BytesIO(data)

        def readinto(view):
            if buf.readinto(view) != len(view):
                raise EOFError("short")
        return readinto

    with pytest.raises(wire.WireError, match="at most"):                 # 2 GiB announced: nothing read
        wire.read(reader(struct.pack("<QQ", 10, 2 << 30)))
    w = wire.Writer()                                   # 300,000 small values: 3 MiB, 50 MiB once parsed
    head, _ = w.frame({"ok": w.value([1] * 300_000)})
    assert len(head) < 4 << 20
    with pytest.raises(wire.WireError, match=r"once read.*at most 32 MiB"):
        wire.read(reader(bytes(head)), limit=32 << 20)
    m = wire.read(reader(bytes(head)), limit=64 << 20)                 # under a larger cap it is read
    assert wire.tree(m, m.fields["ok"]) == [1] * 300_000
    with pytest.raises(ValueError, match="more than 524,288 values"):
        wire.Writer().value([1] * (wire.MAX_NODES + 1))
    with pytest.raises(wire.WireError, match="header"):
        wire.read(reader(struct.pack("<QQ", 64 << 20, 0)))
    for header in (b"[1, 2]", b'{"tensors": [], "storages": [{"bytes": -1, "device": "cpu"}]}', b"not json",
                   b'{"tensors": [], "storages": [{"bytes": 4, "device": "cpu"}]}'):
        with pytest.raises((wire.WireError, EOFError)):
            wire.read(reader(struct.pack("<QQ", len(header), 0) + header))
    # a tensor reaching past its storage, a stride-0 answer, a misnamed dtype, a bad tree
    w = wire.Writer()
    m = _roundtrip(w, {"v": w.value(torch.zeros(4))})
    for record, strict in (({"size": [5]}, False), ({"size": [1000], "stride": [0]}, True), ({"dtype": "object"}, False)):
        m.fields["tensors"][0] = {**m.fields["tensors"][0], **record}
        m._tensors.clear()
        with pytest.raises((wire.WireError, KeyError)):
            wire.tree(m, ["tensor", 0], strict=strict)
        m.fields["tensors"][0] = {"s": ["blob", 0], "dtype": "float32", "size": [4], "stride": [1], "offset": 0, "grad": False}
    for bad in (["int", 1.5], ["bool", 1], ["config", ["str", "x"]], ["handle", 3], ["eval", "1"], [],
                ["float", "1e5"], ["dict", [[["list", []], ["int", 1]]]]):
        with pytest.raises(wire.WireError):
            wire.tree(m, bad)


def test_learner_exceptions_keep_their_types_and_never_exit_the_grader():
    assert type(rebuild("NotImplementedError", "attention.softmax: not implemented yet")) is NotImplementedError
    assert type(rebuild("ValueError", "bad")) is ValueError
    assert type(rebuild("torch.OutOfMemoryError", "x")) in (torch.OutOfMemoryError, LearnerCodeError)
    for name in ("SystemExit", "KeyboardInterrupt", "mymodule.MyOwnError", "os.system"):
        assert isinstance(rebuild(name, ""), LearnerCodeError)
    assert rebuild("SystemExit", "0").kind == "exit" and "sys.exit" in str(rebuild("SystemExit", "0"))
    assert "out of memory" in str(rebuild("RuntimeError", "DefaultCPUAllocator: can't allocate memory"))


# ----------------------------------------------------------------------------- the worker
def test_a_tensor_arrives_in_the_worker_as_the_test_made_it(student):
    wide = torch.randn(6, 320)
    x, y = wide[:, :256], wide[2:4, 10:20]
    (gx, gy, gt) = piece(student, "geometry")(x, y, wide.t())
    assert gx[:3] == ((6, 256), (320, 1), 0) and gy[:3] == ((2, 10), (320, 1), 650) and gt[1] == (1, 320)
    assert gx[4] == gy[4] and gx[3] >= 6 * 320 * 4          # one storage, as in the test's process


def test_in_place_changes_come_back_as_in_one_process(student):
    """x.mul_(2) doubles the test's own tensor (the rest of its storage untouched); the draws
    advance the test's generator; the answer x[1:] is a view of the test's tensor."""
    wide = torch.arange(12.0).reshape(3, 4)
    x = wide[:, :2]
    generator = torch.Generator().manual_seed(3)
    got = piece(student, "scale_in_place")(x, generator)
    assert torch.equal(x, torch.tensor([[0.0, 2], [8, 10], [16, 18]])) and torch.equal(wide[:, 2:], torch.tensor([[2.0, 3], [6, 7], [10, 11]]))
    twin = torch.Generator().manual_seed(3)
    torch.rand(3, generator=twin)
    assert torch.equal(torch.rand(4, generator=generator), torch.rand(4, generator=twin))
    assert got.untyped_storage().data_ptr() == wide.untyped_storage().data_ptr() and got.storage_offset() == 4
    x2 = torch.zeros(3)
    with pytest.raises(ValueError, match="after the change"):          # changed, then raised: both seen
        piece(student, "scale_then_raise")(x2)
    assert torch.equal(x2, torch.ones(3))
    same = torch.randn(5)
    assert piece(student, "returns_the_argument")(same).data_ptr() == same.data_ptr()


def test_answers_prints_handles_and_errors(student, capsys):
    assert piece(student, "shout")(3) == 3
    assert capsys.readouterr().out == "row 0\nrow 1\nrow 2\n"
    t = piece(student, "strided_answer")()
    assert t.stride() == (1, 4) and torch.equal(t, torch.arange(12.0).reshape(3, 4).t())
    b = piece(student, "broadcast")(50)                 # a stride-0 answer comes as real values
    assert torch.equal(b, torch.ones(50, 50)) and b.is_contiguous()
    counter = piece(student, "Counter")()
    assert counter.add(torch.ones(2)) == 1 and counter.add(torch.ones(2)) == 2 and len(counter.items) == 2
    with pytest.raises(RuntimeError, match="deep down") as caught:
        piece(student, "fails_inside")()
    (path, line, func, code), = caught.value.frames[-1:]
    assert path.endswith("attention.py") and func == "inner" and code == 'raise RuntimeError("deep down")'


PEAK = '''
import json, sys, torch
from andrea_course.worker.client import IsolatedStudent
from andrea_course.worker.tiers import Isolation, Limits

def hwm():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) << 10

folder, piece, n, reply = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
limits = Limits() if reply is None else Limits(reply=reply)
student = IsolatedStudent(folder, isolation=Isolation("process", timeout=120, start="exec", limits=limits))
student.begin_test()
call = student.piece("attention", piece)
call(1 << 10)
base = hwm()
try:
    got, said = call(n), None
except Exception as exc:             # LearnerCodeError, or the ValueError of a value not sent
    got, said = None, str(exc)
size = None if got is None else (got.numel() if isinstance(got, torch.Tensor) else len(got))
print(json.dumps({"base": base, "peak": hwm(), "n": size, "said": said, "limit": limits.reply}))
student.close()
'''


def _grader_peak(probes, piece: str, n: int, reply: int | None = None) -> dict:
    """The grader's memory around one call of the learner's `piece(n)`, in a fresh process."""
    done = subprocess.run([sys.executable, "-c", PEAK, str(probes), piece, str(n), json.dumps(reply)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {**found, "growth": found["peak"] - found["base"]}


def test_the_graders_memory_for_a_reply_is_the_replys_size(probes):
    """A 256 MiB answer, where an instructor allows one that large, raises the grader's peak
    memory by 256 MiB and a little, not a multiple of it (it is read straight into the tensor
    that keeps it)."""
    n = 256 << 20
    found = _grader_peak(probes, "big_reply", n, reply=512 << 20)
    assert found["n"] == n and found["growth"] <= 1.1 * n + (32 << 20), f"peak grew by {found['growth'] / n:.2f} x"


@pytest.mark.parametrize("piece, n", [("big_reply", 3 << 28), ("many_references", 40_000_000)])
def test_a_reply_over_the_cap_costs_the_grader_nothing(probes, piece, n):
    """A 0.75 GiB tensor and a list of 40 M references to one int, each refused: the first
    unread (its size is announced first), the second in the worker, before it is sent. The
    grader's own peak grows by less than twice the cap on one reply."""
    found = _grader_peak(probes, piece, n)
    assert found["n"] is None and found["said"], found
    assert "MiB" in found["said"] or "values" in found["said"], found["said"]
    assert found["growth"] < 2 * found["limit"], f"the grader grew by {found['growth'] >> 20} MiB"


def test_the_learners_memory_fits_the_machine_or_its_cgroup(tmp_path):
    """The learner tier's default memory is what the machine, or the cgroup this grader runs
    in, allows, less the grader's own room: inside a 768 MiB container the learner gets 384 MiB,
    on a large machine at most 6 GiB."""
    from andrea_course.worker.tiers import GRADER_ROOM, MEMORY_CAP, machine_memory

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683568 kB\nMemFree: 1 kB\n")
    own = tmp_path / "cgroup"
    root = tmp_path / "sys"
    for version, line, folder, name in (("v1", "4:memory:/grading/run", root / "memory" / "grading" / "run",
                                         "memory.limit_in_bytes"),
                                        ("v2", "0::/grading/run", root / "grading" / "run", "memory.max")):
        own.write_text(f"9:pids:/\n{line}\n")
        folder.mkdir(parents=True)
        (folder / name).write_text("max\n" if version == "v2" else "9223372036854771712\n")
        assert machine_memory(root, meminfo, own) == 24683568 << 10, version
        (folder.parent / name).write_text(f"{768 << 20}\n")            # the container, one level up
        assert machine_memory(root, meminfo, own) == 768 << 20, version
        shutil.rmtree(root)
    assert GRADER_ROOM < 768 << 20 and MEMORY_CAP == 6 << 30
    assert 256 << 20 <= Limits().memory <= MEMORY_CAP
