"""The wire between a graded test and the learner's worker process: values as the test made them.

Every runner (check(), `make grade`, andrea-grade) sends the learner's code its arguments and
reads its answers through this module, so that a graded test sees exactly what it would see if
the learner's code ran in its own process:

- a tensor arrives as the test made it: its dtype, shape, strides and storage offset, and a view
  arrives as a view of the same memory (the span of the base storage that the message's views
  reach, sent once however many views share it): `wide[:, :256]` keeps its row stride of 320;
- what the learner's code changes in place (any tensor argument or a view of it, a random
  generator it draws from) comes back with the answer and is written into the test's own
  objects before the test reads the answer: an in-place dropout overwrites the test's tensor
  here as it would in one process;
- an answer that is an argument, or a view of one, is that argument's memory again;
- anything that is not a value (a module, a function, a class) stays in the worker and comes
  back as a handle, which the test uses through a proxy (client.py).

A message is a frame: a 16-byte prefix (header length, blob length), a JSON header, then the
raw bytes of each storage span. JSON holds the structure ("tagged trees": ["int", 3],
["tensor", i], ["list", [...]], ...), the tensor table (storage, dtype, size, stride, offset)
and the storage table; nothing is unpickled and nothing inflates. The reader checks every
field, refuses a header over MAX_HEADER or a message over its limit before reading it, and
reads each blob straight into the tensor that keeps it: the grader's memory for an answer of
N bytes is N bytes (plus the header), never a copy of it.
"""
from __future__ import annotations

import builtins
import json
import math
import struct
from typing import Callable

import torch

from ..engine.config import ModelConfig

PREFIX = struct.Struct("<QQ")        # header bytes, blob bytes
MAX_HEADER = 4 << 20                 # the JSON part: structure, numbers, strings, tables
MAX_MESSAGE = 1 << 30                # header + blobs: a bigger answer is refused, not read
NODE_COST = 160                      # bytes the reader holds per tagged node once parsed ("[" in JSON)
MAX_NODES = MAX_HEADER // 8         # values in one message: each takes at least 8 bytes of its header
MAX_DEPTH = 64
MAX_DIMS = 64
MAX_PRINTED = 64 << 10               # characters of the learner's prints carried by one answer

DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)}
_SCALARS = {bool: "bool", int: "int", float: "float", str: "str"}
_ALIGN = 16                          # a span starts on a multiple of the widest element


class WireError(ValueError):
    """A message that breaks the format: malformed, too large, or a tensor outside its storage."""


def _storage_key(t: torch.Tensor):
    s = t.untyped_storage()
    return (s.data_ptr(), str(t.device)) if s.data_ptr() else ("empty", id(s))


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """[lo, hi) in bytes of the storage that the view t reaches (strides are never negative)."""
    es = t.element_size()
    lo = t.storage_offset() * es
    if t.numel() == 0:
        return lo, lo
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return lo, (last + 1) * es


def _plain(value: torch.Tensor) -> torch.Tensor:
    t = value.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)
    if t.layout is not torch.strided or t.is_quantized or t.is_nested or t.is_meta:
        raise TypeError(f"only dense tensors cross to the learner's code, not a {t.layout} tensor")
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if str(t.dtype).removeprefix("torch.") not in DTYPES:
        raise TypeError(f"tensors of dtype {t.dtype} do not cross to the learner's code")
    return t


class Writer:
    """Builds one message. `value()` turns a value into a tree (tensors into table entries);
    `frame()` lays out the storages and returns the bytes to send (header) and the blobs.

    handle_of (worker side): turns anything that is not a value into a handle id; without it
    (grader side) anything else is a TypeError. aliases (worker side): {storage key: index} of
    the request's storages: an answer on one of them refers to it instead of sending it.
    materialize (worker side): an answer tensor larger than the memory it reaches (a stride-0
    view, an expand) is sent as a copy; the grader refuses such views.
    """

    def __init__(self, handle_of: Callable | None = None, aliases: dict | None = None,
                 materialize: bool = False, keep_grad: bool = False):
        self.handle_of, self.aliases, self.materialize = handle_of, aliases or {}, materialize
        self.keep_grad = keep_grad                       # (grader side) a tensor that requires grad arrives so
        self.grads: set[int] = set()                     # the tensors sent with requires_grad
        self.tensors: list[torch.Tensor] = []
        self.generators: list[torch.Generator] = []      # in the order they were written
        self.copies: set[int] = set()                    # tensors sent as bytes even when aliased
        self.nodes = 0                                   # values written: a long list stops early

    def copy(self, t: torch.Tensor):
        """A tree for tensor t whose bytes travel in the message, even when it is an argument."""
        self.tensors.append(_plain(t))
        self.copies.add(len(self.tensors) - 1)
        return ["tensor", len(self.tensors) - 1]

    def _key(self, i: int, t: torch.Tensor):
        return ("copy", i) if i in self.copies else _storage_key(t)

    def value(self, value, depth: int = 0):
        if depth > MAX_DEPTH:
            raise ValueError(f"value nested more than {MAX_DEPTH} levels deep")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ValueError(f"it holds more than {MAX_NODES:,} values (numbers, strings, lists, ...)")
        kind = type(value)
        if value is None:
            return ["none"]
        if kind in _SCALARS:
            if kind is float and not math.isfinite(value):
                return ["float", repr(value)]                 # "nan", "inf", "-inf"
            return [_SCALARS[kind], value]
        if isinstance(value, torch.Tensor):
            t = _plain(value)
            if self.materialize and t.numel() * t.element_size() > max(_extent(t)[1] - _extent(t)[0], 0):
                t = t.contiguous()
            if self.keep_grad and value.requires_grad:
                self.grads.add(len(self.tensors))
            self.tensors.append(t)
            return ["tensor", len(self.tensors) - 1]
        if isinstance(value, torch.dtype):
            return ["dtype", str(value).removeprefix("torch.")]
        if isinstance(value, torch.device):
            return ["device", str(value)]
        if isinstance(value, torch.Generator):
            self.generators.append(value)
            return ["generator", str(value.device), self.value(value.get_state(), depth + 1)]
        if isinstance(value, ModelConfig):
            return ["config", self.value(value.to_dict(), depth + 1)]
        if kind in (list, tuple) or (isinstance(value, tuple) and hasattr(value, "_fields")):
            return ["list" if kind is list else "tuple", [self.value(v, depth + 1) for v in value]]
        if isinstance(value, dict):
            return ["dict", [[self.value(k, depth + 1), self.value(v, depth + 1)] for k, v in value.items()]]
        if isinstance(value, slice):
            return ["slice", [self.value(v, depth + 1) for v in (value.start, value.stop, value.step)]]
        hid = _handle_id(value)
        if hid is not None:
            return ["handle", hid]
        if self.handle_of is not None:
            return ["handle", self.handle_of(value), kind_of(value)]
        raise TypeError(f"a graded test can pass only tensors, numbers, strings, None, dtypes, "
                        f"generators, ModelConfig and lists/tuples/dicts of these to learner code, "
                        f"not {type(value).__name__}")

    def frame(self, fields: dict) -> tuple[bytes, list[memoryview]]:
        """(prefix + header, blobs) of a message carrying `fields` (whose trees came from value())."""
        spans: dict = {}                          # storage key -> [lo, hi, tensor]
        for i, t in enumerate(self.tensors):
            key = self._key(i, t)
            if key in self.aliases:
                continue
            lo, hi = _extent(t)
            span = spans.setdefault(key, [lo, hi, t])
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
        storages, blobs, index = [], [], {}
        self.spans = []                           # (tensor on the storage, lo, hi) per storage sent
        for key, (lo, hi, t) in spans.items():
            lo -= lo % _ALIGN
            hi = max(hi, lo)
            raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage(), lo, (hi - lo,), (1,))
            index[key] = len(storages)
            storages.append({"bytes": hi - lo, "device": str(t.device)})
            blobs.append(_bytes_of(raw))
            self.spans.append((raw, lo))
        table = []
        for i, t in enumerate(self.tensors):
            key = self._key(i, t)
            if key in self.aliases:
                where, base = ["arg", self.aliases[key][0]], self.aliases[key][1]
            else:
                where, base = ["blob", index[key]], self.spans[index[key]][1]
            offset_bytes = t.storage_offset() * t.element_size() - base
            table.append({"s": where, "dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape),
                          "stride": list(t.stride()), "offset": offset_bytes // t.element_size(),
                          "grad": i in self.grads})
        header = json.dumps({**fields, "tensors": table, "storages": storages},
                            separators=(",", ":")).encode()
        total = len(header) + sum(b.nbytes for b in blobs)
        if len(header) > MAX_HEADER:
            raise ValueError(f"a message header of {len(header) >> 10} KiB (more than {MAX_HEADER >> 20} MiB)")
        if total > MAX_MESSAGE:
            raise ValueError(f"a message of {total >> 20} MiB (more than {MAX_MESSAGE >> 20} MiB)")
        return PREFIX.pack(len(header), total - len(header)) + header, blobs


def _bytes_of(raw: torch.Tensor) -> memoryview:
    """The bytes of a uint8 tensor without copying them (on the CPU)."""
    if raw.device.type != "cpu":
        raw = raw.cpu()
    if raw.numel() == 0:
        return memoryview(b"")
    return memoryview(raw.numpy()).cast("B")


def _handle_id(value):
    """The id of a learner object the test got back as a proxy (isolated.Proxy), else None."""
    hid = getattr(type(value), "_wire_handle", None)
    return hid(value) if hid is not None else None


def kind_of(obj) -> str:
    """The type of a value in words, as a box names it: "class X" for a class, a torch type by its
    module (torch.return_types.max), any other by its name."""
    if isinstance(obj, type):
        return f"class {obj.__name__}"
    cls = type(obj)
    return f"{cls.__module__}.{cls.__name__}" if cls.__module__.startswith("torch.") else cls.__name__


# ----------------------------------------------------------------------------- reading
class Message:
    """A message read from the wire: `fields` (the JSON header), the storages (uint8 tensors that
    own the bytes read), and the tensors of its table, built lazily as views of them."""

    def __init__(self, fields: dict, storages: list[torch.Tensor]):
        self.fields, self.storages = fields, storages
        self._tensors: dict[int, torch.Tensor] = {}
        self.generators: list[torch.Generator] = []

    def tensor(self, i, strict: bool, args: list | None = None) -> torch.Tensor:
        """Tensor i of the table. strict (the grader reading the learner's answer): a view may
        not be larger than the memory it reaches. args: the storages of the request this answers,
        [(uint8 span, its byte offset in the test's storage)], for ["arg", k] tensors."""
        if type(i) is not int or not 0 <= i < len(self.fields["tensors"]):
            raise WireError("malformed tensor reference")
        if i in self._tensors:
            return self._tensors[i]
        rec = self.fields["tensors"][i]
        try:
            where, dtype = rec["s"], DTYPES[rec["dtype"]]
            size, stride, offset, grad = rec["size"], rec["stride"], rec["offset"], rec["grad"]
        except (KeyError, TypeError):
            raise WireError("malformed tensor record") from None
        if not (isinstance(size, list) and isinstance(stride, list) and len(size) == len(stride) <= MAX_DIMS
                and all(type(v) is int and 0 <= v < 1 << 62 for v in [*size, *stride, offset])
                and type(grad) is bool and isinstance(where, list) and len(where) == 2
                and where[0] in ("blob", "arg") and type(where[1]) is int):
            raise WireError("malformed tensor record")
        if where[0] == "blob":
            if not 0 <= where[1] < len(self.storages):
                raise WireError("a tensor on a storage the message does not carry")
            raw, base = self.storages[where[1]], 0
        else:
            if args is None or not 0 <= where[1] < len(args):
                raise WireError("a tensor on an argument the request did not carry")
            raw, base = args[where[1]]
        es = torch.empty((), dtype=dtype).element_size()
        numel = math.prod(size)
        nbytes = raw.numel()
        if numel:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if (last + 1) * es > nbytes:
                raise WireError("a tensor reaches past the end of its storage")
            if strict and numel * es > nbytes:
                raise WireError("a tensor larger than its storage (a stride-0 view): send real values")
        if (base + offset * es) % es or base % es:
            raise WireError("a misaligned tensor")
        storage = raw.untyped_storage()
        start = raw.storage_offset() + base
        if start % es:
            raise WireError("a misaligned tensor")
        t = torch.empty(0, dtype=dtype, device=raw.device).set_(storage, start // es + offset, size, stride)
        if grad:
            if not (t.is_floating_point() or t.is_complex()):
                raise WireError("requires_grad on a tensor that cannot have a gradient")
            t.requires_grad_(True)
        self._tensors[i] = t
        return t


def _device_ok(name: str) -> bool:
    try:
        device = torch.device(name)
    except RuntimeError:
        return False
    return device.type == "cuda" and torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()


def read(readinto: Callable[[memoryview], None], limit: int = MAX_MESSAGE,
         device_ok: Callable[[str], bool] = _device_ok) -> Message:
    """One message, read with `readinto(view)` (which fills the whole view or raises). A message
    over `limit` bytes, a header over MAX_HEADER or a malformed header raises WireError before
    its blobs are read; each blob is read into the uint8 tensor that keeps it. What counts
    against `limit` is what the reader will hold: the bytes, plus NODE_COST for each value of
    the header's structure (a list of a million references to one int is small in bytes and
    large once parsed), counted before the header is parsed."""
    prefix = bytearray(PREFIX.size)
    readinto(memoryview(prefix))
    n_header, n_blobs = PREFIX.unpack(prefix)
    if n_header > MAX_HEADER:
        raise WireError(f"a message header of {n_header >> 20} MiB (at most {MAX_HEADER >> 20} MiB)")
    if n_header + n_blobs > limit:
        raise WireError(f"a message of {(n_header + n_blobs) >> 20} MiB (at most {limit >> 20} MiB)")
    header = bytearray(n_header)
    readinto(memoryview(header))
    held = n_header + n_blobs + NODE_COST * header.count(b"[")
    if held > limit:
        raise WireError(f"a message that takes {held >> 20} MiB once read, its {header.count(b'[')} "
                        f"values included (at most {limit >> 20} MiB)")
    try:
        fields = json.loads(header)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a malformed message header ({type(exc).__name__})") from None
    if not isinstance(fields, dict) or not isinstance(fields.get("tensors"), list) \
            or not isinstance(fields.get("storages"), list):
        raise WireError("a malformed message header")
    sizes = []
    for s in fields["storages"]:
        if not (isinstance(s, dict) and type(s.get("bytes")) is int and s["bytes"] >= 0
                and isinstance(s.get("device"), str)):
            raise WireError("a malformed storage record")
        sizes.append(s["bytes"])
    if sum(sizes) != n_blobs:
        raise WireError("the storages do not add up to the message's length")
    storages = []
    for size in sizes:
        raw = torch.empty(size, dtype=torch.uint8)
        if size:
            readinto(memoryview(raw.numpy()).cast("B"))
        storages.append(raw)
    for i, s in enumerate(fields["storages"]):
        if s["device"] != "cpu" and device_ok(s["device"]):
            storages[i] = storages[i].to(s["device"])
    return Message(fields, storages)


def tree(message: Message, node, proxy_of: Callable | None = None, strict: bool = False,
         args: list | None = None, depth: int = 0):
    """The value a tagged tree of `message` stands for; a malformed tree raises WireError."""
    if depth > MAX_DEPTH + 2 or not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise WireError("malformed value")
    tag, rest = node[0], node[1:]
    sub = lambda n: tree(message, n, proxy_of, strict, args, depth + 1)        # noqa: E731
    if tag == "none" and not rest:
        return None
    if tag in ("bool", "int", "float", "str") and len(rest) == 1:
        v = rest[0]
        if tag == "float" and type(v) is str and v in ("nan", "inf", "-inf"):
            return float(v)
        if tag == "float" and type(v) is int:          # JSON writes 1.0 as 1.0, but be lenient on ints
            return float(v)
        if type(v) is not getattr(builtins, tag):
            raise WireError(f"malformed {tag}")
        return v
    if tag == "tensor" and len(rest) == 1:
        return message.tensor(rest[0], strict, args)
    if tag == "dtype" and len(rest) == 1 and rest[0] in DTYPES:
        return DTYPES[rest[0]]
    if tag == "device" and len(rest) == 1 and type(rest[0]) is str:
        try:
            return torch.device(rest[0])
        except RuntimeError:
            raise WireError("malformed device") from None
    if tag == "generator" and len(rest) == 2 and type(rest[0]) is str:
        state = sub(rest[1])
        try:
            generator = torch.Generator(device=rest[0])
            generator.set_state(state.clone() if isinstance(state, torch.Tensor) else state)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise WireError(f"malformed generator: {exc}") from None
        message.generators.append(generator)
        return generator
    if tag == "config" and len(rest) == 1:
        fields = sub(rest[0])
        if not isinstance(fields, dict):
            raise WireError("malformed config")
        try:
            return ModelConfig.from_dict(fields)
        except (TypeError, ValueError) as exc:
            raise WireError(f"malformed config: {exc}") from None
    if tag in ("list", "tuple") and len(rest) == 1 and type(rest[0]) is list:
        items = [sub(v) for v in rest[0]]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and len(rest) == 1 and type(rest[0]) is list:
        out = {}
        for pair in rest[0]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise WireError("malformed dict")
            key = sub(pair[0])
            try:
                hash(key)
            except TypeError:
                raise WireError("unhashable dict key") from None
            if isinstance(key, torch.Tensor):
                raise WireError("unhashable dict key")
            out[key] = sub(pair[1])
        return out
    if tag == "slice" and len(rest) == 1 and type(rest[0]) is list and len(rest[0]) == 3:
        return slice(*(sub(v) for v in rest[0]))
    if tag == "handle" and proxy_of is not None and len(rest) in (1, 2) and type(rest[0]) is int:
        return proxy_of(rest[0], rest[1] if len(rest) == 2 and type(rest[1]) is str else "object")
    raise WireError(f"malformed value (tag {tag!r})")


# ----------------------------------------------------------------------------- in-place changes
class Watch:
    """The worker's record of a request's arguments, to send back what the learner's code changed
    in place: each storage span (compared byte for byte afterwards) and each generator's state."""

    def __init__(self, message: Message):
        self.storages = message.storages
        self.before = [s.clone() for s in message.storages]
        self.generators = message.generators
        self.states = [g.get_state() for g in message.generators]

    def aliases(self) -> dict:
        """{storage key: (index, 0)}: answers that are (views of) an argument refer to it."""
        out = {}
        for i, s in enumerate(self.storages):
            if s.numel():
                out[_storage_key(s)] = (i, 0)
        return out

    def changes(self, writer: Writer) -> dict:
        """{"mutated": [[storage index, tree of its new bytes]], "generators": [[i, state tree]]}."""
        mutated = [[i, writer.copy(s)] for i, (s, b) in enumerate(zip(self.storages, self.before))
                   if not torch.equal(s, b)]
        states = [[i, writer.copy(g.get_state())] for i, (g, b) in enumerate(zip(self.generators, self.states))
                  if not torch.equal(g.get_state(), b)]
        return {"mutated": mutated, "generators": states}


def apply_changes(message: Message, sent: Writer) -> None:
    """Write what the learner's code changed in place into the test's own tensors and
    generators (the grader side of Watch): the same bytes, in the same memory, as in one process."""
    mutated, states = message.fields.get("mutated", []), message.fields.get("generators", [])
    if not (isinstance(mutated, list) and isinstance(states, list)):
        raise WireError("malformed changes")
    spans = getattr(sent, "spans", [])
    for item in mutated:
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int and 0 <= item[0] < len(spans)):
            raise WireError("a change to an argument the request did not carry")
        new = tree(message, item[1], strict=True)
        raw = spans[item[0]][0]
        if not isinstance(new, torch.Tensor) or new.dtype != torch.uint8 or new.shape != raw.shape:
            raise WireError("a change of another size than the argument")
        raw.copy_(new)
    for item in states:
        if not (isinstance(item, list) and len(item) == 2 and type(item[0]) is int
                and 0 <= item[0] < len(sent.generators)):
            raise WireError("a change to a generator the request did not carry")
        state = tree(message, item[1], strict=True)
        generator = sent.generators[item[0]]
        if not isinstance(state, torch.Tensor) or state.shape != generator.get_state().shape:
            raise WireError("a generator state of another size")
        try:
            generator.set_state(state.clone())
        except (RuntimeError, TypeError, ValueError) as exc:
            raise WireError(f"a generator state the grader cannot use ({exc})") from None


def argument_spans(sent: Writer) -> list:
    """[(uint8 span, byte offset)] of a request's storages, for answers that refer to them."""
    return [(raw, 0) for raw, _ in getattr(sent, "spans", [])]
