"""Relations that run the engine's version of the piece again on the learner's own call, with one
thing changed: an argument (input_in_another_place), a layer's weights (weights_in_another_place),
one step of its computation (function_swapped), or its output taken early (intermediate_returned).

The call is student.call_giving's (a function's arguments, or a module's forward call with its
construction): the engine's piece gives the expected output on it, or nothing is run again.
Each change runs inside a TorchDispatchMode that sees every ATen step, fused ones taken apart by
PyTorch's own decompositions.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import itertools
import math

import torch
from torch._decomp import decomposition_table
from torch.utils._python_dispatch import TorchDispatchMode

from .seen import CALL, Seen
from .seen import near as _near
from .seen import tensors as _tensors
from .student import safe_copy

_STEP_NUMEL = 1 << 22          # the most a recorded run of the engine's piece keeps of its steps
_MOVES = {"to", "broadcast_in_dim", "view_of", "empty_strided", "full_like", "contiguous", "clone", "expand",
          "view", "unsafe_view", "alias", "detach", "convert_element_type", "copy", "empty_like"}   # not a step of the formula


def _engine_call(got, want, inputs):
    """(the engine's version of the function piece the learner's call ran, that call's arguments by
    name), when the engine's version gives `want` on them: otherwise the test's output is not the
    piece's own (a sum of it, a shape of it) and nothing is run again."""
    call = inputs.get(CALL)
    if call is None or not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor) or (
            got.is_floating_point() and not bool(torch.isfinite(got).all())):    # NaN matches NaN too readily
        return None
    activity, name = call.piece.split(".")
    fn = getattr(importlib.import_module(f"andrea_course.pieces.{activity}"), name, None)
    if call.module is not None:
        if _LAST_TWIN[0] is not call:                   # the relations of one failure share one twin
            _LAST_TWIN[:] = [call, _twin_forward(fn, call)]
        fn = _LAST_TWIN[1]
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return None
    signature = inspect.signature(fn)
    try:
        bound = signature.bind(*call.args, **call.kwargs)
    except TypeError:
        return None
    bound.apply_defaults()                              # start=0 left out by the test: start + 1 is a change too
    varying = [n for n, p in signature.parameters.items()
               if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    if any(bound.arguments.get(n) for n in varying):    # *args, **kwargs given: not rerun by name
        return None
    args = {n: v for n, v in bound.arguments.items() if n not in varying}
    out = _run(fn, args)
    for i, part in enumerate(out if isinstance(out, (tuple, list)) else (out,)):   # (cos, sin): the one tested
        if isinstance(part, torch.Tensor) and part.shape == want.shape and _near(part, want, want, loose=10):
            whole = fn if isinstance(out, torch.Tensor) else _part_of(fn, i)
            return whole, args
    return None


_LAST_TWIN: list = [None, None]      # (the call, its engine twin's forward): _engine_call's last


def _twin_forward(cls, call):
    """The forward of the engine's class `cls`, built as the learner's module was (call.made) and
    holding that module's parameters and buffers as they are now, in its mode (train or eval); None
    when it cannot be built, or the call passes anything but tensors, numbers, strings and None (a
    cache object the engine's forward would change)."""
    plain = (torch.Tensor, int, float, bool, str, type(None))
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)) or not all(
            isinstance(v, plain) for v in (*call.args, *call.kwargs.values())):
        return None
    try:
        state, training = dict(call.module.state_dict()), bool(call.module.training)
        twin = cls(*call.made[0], **call.made[1])
        floats = [v.dtype for v in state.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        twin.to(floats[0] if floats else torch.get_default_dtype())
        twin.load_state_dict(state, assign=True)
    except Exception:                                   # noqa: BLE001  (a module the engine's class cannot hold)
        return None
    return twin.train(training).forward


def _part_of(fn, i: int):
    """fn whose output is the i-th of what fn returns."""
    def part(**args):
        return fn(**args)[i]
    part.__name__, part.__wrapped__, part.index = fn.__name__, fn, i
    return part


def _run(fn, args: dict, mode=None):
    """fn(**args) on copies of the arguments, without autograd, inside a dispatch mode (_Steps records
    the steps, _Swap replaces one); None where it raises (a change the piece refuses says nothing)."""
    copies = {n: safe_copy(v) for n, v in args.items()}
    try:
        with torch.no_grad(), (mode if mode is not None else contextlib.nullcontext()):
            return fn(**copies)
    except Exception:                                   # noqa: BLE001
        return None


class _Steps(TorchDispatchMode):
    """Records every ATen operation's tensor output (a copy) with the operation's name, the fused
    ones (softmax, layer_norm, gelu) taken apart into their steps by PyTorch's own decompositions."""

    def __init__(self, steps: list):
        super().__init__()
        self.steps, self.numel = steps, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = _apart(self, func, args, kwargs)
        if out is not NotImplemented:
            return out
        out = func(*args, **kwargs)
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > 1 and self.numel + t.numel() <= _STEP_NUMEL:
                self.numel += t.numel()
                self.steps.append((func.overloadpacket.__name__.strip("_"), t.detach().clone()))
        return out


def _same_output(out, got, want) -> bool:
    return isinstance(out, torch.Tensor) and out.shape == got.shape and _near(got, out, want, loose=10) and not (
        out.shape == want.shape and _near(out, want, want, loose=10))


SWAPS = {"silu": ("hardswish", "gelu", "relu", "sigmoid", "mish", "softplus", "tanh"), "gelu": ("silu", "relu", "sigmoid"),
         "relu": ("gelu", "silu"), "sigmoid": ("tanh", "silu"), "tanh": ("sigmoid",), "exp": ("exp2",),
         "log": ("log2", "log10", "log1p"), "sqrt": ("rsqrt",), "rsqrt": ("sqrt", "reciprocal"), "sin": ("cos",),
         "cos": ("sin",), "amax": ("amin",), "amin": ("amax",), "sum": ("mean",), "mean": ("sum",), "var": ("std",),
         "std": ("var",), "tril": ("triu",), "triu": ("tril",), "maximum": ("minimum",), "minimum": ("maximum",),
         "var_mean": ("std_mean",), "std_mean": ("var_mean",), "erf": ("tanh",)}
# (each operation, and those a learner may reach for in its place; as said: _SAID)
_SAID = {"var_mean": "var", "std_mean": "std"}
_ARITHMETIC = ("mul", "div", "add", "sub")         # steps a learner may do twice, or leave out
_REDUCTIONS = ("amax", "amin", "sum", "mean", "var", "std", "var_mean", "std_mean", "logsumexp", "prod")
_REDONE = {"twice": "done twice", "skipped": "left out"}
_OVERLOADS = {("sum", "mean"): "dim", ("mean", "sum"): "dim_IntList"}
_MOST_SWAPS = 200                                   # runs of the engine's piece one relation may make


class _Swap(TorchDispatchMode):
    """Counts every ATen call (names: each call's operation, in order); where `at` is given, the call
    of that number runs `alt` in its place. Fused operations are taken apart as _Steps does."""

    def __init__(self, at: int | None = None, alt: str | None = None):
        super().__init__()
        self.at, self.alt, self.names = at, alt, []
        self.axes: dict = {}                # a reduction's number -> (its input's rank, the axes it reduces)
        self.scalars: dict = {}             # an arithmetic step's number -> the number it multiplies, adds, ...

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs, name = kwargs or {}, func.overloadpacket.__name__
        self.names.append(name)
        if name in _REDUCTIONS and len(args) > 1 and isinstance(args[0], torch.Tensor) and isinstance(args[1], (list, tuple)):
            self.axes[len(self.names) - 1] = (args[0].dim(), [d % max(args[0].dim(), 1) for d in args[1]])
        if name in _ARITHMETIC and len(args) > 1 and _number(args[1]) is not None:
            self.scalars[len(self.names) - 1] = _number(args[1])
        if len(self.names) - 1 == self.at:
            return _swapped(func, self.alt, args, kwargs)
        out = _apart(self, func, args, kwargs)
        return func(*args, **kwargs) if out is NotImplemented else out


def _number(value):
    """A python number, or a one-element tensor's value; None for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_complex else None


def _apart(mode, func, args, kwargs):
    """func run as its steps, inside `mode`: by PyTorch's decomposition of it, else by its composite
    kernel (scaled_dot_product_attention's math); NotImplemented where it has neither."""
    parts = decomposition_table.get(func)
    with mode:
        out = parts(*args, **kwargs) if parts is not None else NotImplemented
        if out is NotImplemented and torch._C._dispatch_has_kernel_for_dispatch_key(
                func.name(), torch._C.DispatchKey.CompositeImplicitAutograd):
            out = func.decompose(*args, **kwargs)
    return out


def _swapped(func, alt: str, args, kwargs):
    if alt.startswith("axis "):                        # the reduction over another axis, as given
        return func(args[0], [int(alt[5:])], *args[2:], **kwargs)
    if alt in _RANGES:
        return _range_moved(func, alt, args, kwargs)
    if alt in _REDONE:                                 # the step done twice, or left out
        out = func(*args, **kwargs)
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if first is None or first.shape != out.shape:
            return out
        return func(out, *args[1:], **kwargs) if alt == "twice" else first.to(out.dtype)
    packet, name = getattr(torch.ops.aten, alt), func.overloadpacket.__name__
    overload = _OVERLOADS.get((name, alt), func._overloadname)
    if overload in packet.overloads():
        return getattr(packet, overload)(*args, **kwargs)
    return packet.default(args[0])                     # an elementwise function of one tensor


_RANGES = {"start + 1": (1, 0), "start - 1": (-1, 0), "end + 1": (0, 1), "end - 1": (0, -1), "both + 1": (1, 1)}


def _range_moved(func, alt: str, args, kwargs):
    """An arange whose start or end (or both) is one off: 1-based counting, or an end read as inclusive."""
    start, end, step = {"default": (0, args[0], 1), "start": (*args[:2], 1)}.get(func._overloadname, tuple(args[:3]))
    a, b = _RANGES[alt]
    return torch.ops.aten.arange.start_step(start + a, end + b, step, **kwargs)


def function_swapped(got, want, inputs):
    """got is what the right piece gives with one of its operations replaced by another a learner may
    reach for (hardswish for silu, mean for sum, amin for amax, triu for tril), a reduction over
    another axis, or an arange one off at its start or end."""
    def tries(counted):
        found = [(i, name, alt) for i, name in enumerate(counted.names) for alt in SWAPS.get(name, ())]
        found += [(i, counted.names[i], f"axis {k}") for i, (rank, axes) in counted.axes.items() if len(axes) == 1
                  for k in range(rank) if k != axes[0]]
        return found + [(i, name, alt) for i, name in enumerate(counted.names) if name == "arange" for alt in _RANGES]
    return _one_step_changed(got, want, inputs, tries)


def step_redone(got, want, inputs):
    """got is what the right piece gives with one arithmetic step (a product, a sum, a division)
    done twice, or left out: less particular than the other relations, so tried after them."""
    def tries(counted):
        return [(i, name, how) for i, name in enumerate(counted.names) if name in _ARITHMETIC for how in _REDONE]
    return _one_step_changed(got, want, inputs, tries)


def _one_step_changed(got, want, inputs, tries):
    """A Seen of every change of one step (tries(counted): (its number, its operation, the change))
    after which the engine's piece gives the learner's output; None where none does."""
    if not _tensors(got, want) or (found := _engine_call(got, want, inputs)) is None:
        return None
    fn, args = found
    counted = _Swap()
    _run(fn, args, counted)
    keys = frozenset(_swap_key(name, alt, counted.scalars.get(i)) for i, name, alt in tries(counted)[:_MOST_SWAPS]
                     if _same_output(_run(fn, args, _Swap(i, alt)), got, want))
    if not keys:
        return None
    piece = inputs[CALL].piece.split('.')[1]
    return Seen(keys, lambda k: f"your output is exactly what the right {piece} gives with {_say_swap(k)}.")


def _swap_key(name: str, alt: str, scalar) -> str:
    if alt in _REDONE:
        return f"{name}{f' by {scalar:.4g}' if scalar is not None else ''} {alt}"
    return f"{name} {alt}" if alt in _RANGES or alt.startswith("axis ") else f"{alt} for {name}"


def _say_swap(key: str) -> str:
    name, _, how = key.partition(" ")
    if how in _RANGES:
        said = {"start + 1": "starting one later (counting from 1?)", "start - 1": "starting one earlier",
                "end + 1": "ending one later (an end read as inclusive?)", "end - 1": "ending one early",
                "both + 1": "counting from 1 instead of 0 (1 .. n for 0 .. n - 1)"}[how]
        return f"its `arange` {said}"
    if how.startswith("axis "):
        return f"its `{name}` taken over {how} instead of the axis it belongs to: a dim= on the wrong axis"
    how, by = how.rsplit(" ", 1)[-1], (f" by {how.split(' ')[1]}" if how.startswith("by ") else "")
    if how in _REDONE:
        return (f"its `{name}`{by} step {_REDONE[how]}: a step "
                f"{'repeated (done once here and once again elsewhere?)' if how == 'twice' else 'missing'}")
    alt, name = [_SAID.get(n, n) for n in key.split(" for ")]
    return f"{alt} in the place of {name}: {alt} where {name} belongs"


def input_in_another_place(got, want, inputs):
    """got is what the right piece gives on the learner's own call with one argument passed where
    another belongs (q @ qᵀ for q @ kᵀ: q in k's place), two arguments swapped, or an argument left
    at its default (the bias passed, never used)."""
    if not _tensors(got, want) or (found := _engine_call(got, want, inputs)) is None:
        return None
    fn, args = found
    defaults = {n: p.default for n, p in inspect.signature(inspect.unwrap(fn)).parameters.items()
                if p.default is not p.empty}
    tensors = [n for n, v in args.items() if isinstance(v, torch.Tensor)]
    tries = {f"{b} in {a}'s place": {**args, a: args[b]} for a, b in itertools.permutations(tensors, 2)}
    tries.update({f"{a} and {b} swapped": {**args, a: args[b], b: args[a]}
                  for a, b in itertools.combinations(tensors, 2)})
    tries.update({f"{a} left at its default": {**args, a: defaults[a]} for a in args
                  if a in defaults and not _is_default(args[a], defaults[a])})
    tries.update({f"{a} {'+' if step > 0 else '-'} 1": {**args, a: v + step} for a, v in args.items()
                  if type(v) is int and v >= 0 for step in (1, -1) if v + step >= 0})
    floats = [n for n in tensors if args[n].is_floating_point() and args[n].shape[-1:] != (1,)]
    tries.update({f"{a} centred": {**args, a: args[a] - args[a].mean(dim=-1, keepdim=True)} for a in floats})
    if len(floats) > 1:
        tries[f"{' and '.join(floats)} centred"] = {**args, **{a: args[a] - args[a].mean(dim=-1, keepdim=True)
                                                             for a in floats}}
    tries.update({f"{a} times {c}": {**args, a: args[a] * v} for a in floats for c, v in _BASES.items()})
    turned = [n for n in tensors if args[n].dim() >= 2]
    tries.update({f"{a} transposed": {**args, a: args[a].mT} for a in turned})
    if len(turned) > 1:
        tries[f"{' and '.join(turned)} transposed"] = {**args, **{a: args[a].mT for a in turned}}
    keys = frozenset(k for k, changed in tries.items() if _same_output(_run(fn, changed), got, want))
    if not keys:
        return None
    name = inputs[CALL].piece.split(".")[1]
    return Seen(keys, lambda k: f"your output is exactly what the right {name} gives with {_say_place(k)}.")


# a change of base or of unit: 10 ** x is exp(x · ln 10), log10(x) is ln(x) / ln 10, cosd(x) is cos(x · π/180)
_BASES = {"ln 10": math.log(10), "ln 2": math.log(2), "1/ln 10": 1 / math.log(10), "1/ln 2": 1 / math.log(2),
          "π/180": math.pi / 180, "180/π": 180 / math.pi}


def _is_default(value, default) -> bool:
    return value is default or (not isinstance(value, torch.Tensor) and type(value) is type(default)
                                and value == default)


def _say_place(key: str) -> str:
    if key.endswith(" left at its default"):
        arg = key[:-len(" left at its default")]
        return f"{arg} left at its default: the {arg} it is given is never used"
    if key.endswith(" swapped"):
        a, b = key[:-len(" swapped")].split(" and ")
        return f"{a} and {b} swapped: each is used where the other belongs"
    if " times " in key and key.rsplit(" times ", 1)[1] in _BASES:
        arg, c = key.rsplit(" times ", 1)
        return (f"{arg} multiplied by {c} = {_BASES[c]:.4g}: a change of base or of unit (10 ** x is exp(x · ln 10), "
                f"2 ** x is exp(x · ln 2), log10 is ln / ln 10, and degrees are radians · 180/π)")
    if key.endswith(" centred"):
        names = key[:-len(" centred")]
        return (f"{names} centred (the mean over the last axis subtracted from {'each' if ' and ' in names else 'it'}"
                f", as a correlation does): nothing asks for that here")
    if key.endswith(" transposed"):
        names = key[:-len(" transposed")]
        return (f"{names} transposed (the last two axes of {'each' if ' and ' in names else 'it'} swapped): "
                f"{'they are' if ' and ' in names else 'it is'} used as if laid out the other way round")
    if key.endswith(" 1") and key[-3] in "+-":
        arg, sign = key[:-4], key[-3]
        return (f"{arg} one {'more' if sign == '+' else 'less'} than it is given: an index or a count off by one "
                f"(counting from 1, or a range that {'starts' if sign == '+' else 'stops'} one early?)")
    b, a = key[:-len("'s place")].split(" in ")
    return f"{b} passed as {a} too: {b} is used where {a} belongs"


def weights_in_another_place(got, want, inputs):
    """got is what the right module gives on the learner's call with one of its layers' weights used
    where another layer's belong (w_q's where w_k's belong; ln1 and ln2 swapped; the token table
    looked up as the position table), a layer's bias left out, or a square weight transposed."""
    if not _tensors(got, want) or (found := _engine_call(got, want, inputs)) is None or inputs[CALL].module is None:
        return None
    fn, args = found
    twin, index = inspect.unwrap(fn).__self__, getattr(fn, "index", None)
    layers = _layers(twin)
    alike = [(a, b) for a, b in itertools.permutations(layers, 2) if _shapes(layers[a]) == _shapes(layers[b])]
    tries = {f"the bias of {a or 'the module'} left out": {f"{a}.bias".lstrip("."): torch.zeros_like(layers[a]["bias"])}
             for a in layers if "bias" in layers[a]}
    tries.update({f"the weight of {a or 'the module'} transposed": {f"{a}.weight".lstrip("."): layer["weight"].mT}
                  for a, layer in layers.items() if layer.get("weight", torch.empty(0)).dim() == 2
                  and layer["weight"].shape[0] == layer["weight"].shape[1]})
    tries.update({f"{a} and {b} swapped": {**_moved(layers[b], a), **_moved(layers[a], b)} for a, b in alike if a < b})
    tries.update({f"{b} in {a}'s place": _moved(layers[b], a) for a, b in alike})

    def run(changed):
        def forward(**given):
            out = torch.func.functional_call(twin, changed, args=(), kwargs=given)
            return out if index is None else out[index]
        return forward
    keys = frozenset(k for k, changed in list(tries.items())[:_MOST_SWAPS]
                     if _same_output(_run(run(changed), args), got, want))
    if not keys:
        return None
    name = inputs[CALL].piece.split(".")[1]
    return Seen(keys, lambda k: f"your output is exactly what the right {name} gives with {_say_weights(k)}.")


def _layers(module) -> dict:
    """{layer's name: {"weight": ..., "bias": ...}} of a module's parameters, by the layer that holds them."""
    layers: dict = {}
    for name, p in module.named_parameters():
        layer, _, kind = name.rpartition(".")
        layers.setdefault(layer, {})[kind] = p.detach()
    return layers


def _shapes(layer: dict) -> dict:
    return {k: tuple(v.shape) for k, v in layer.items()}


def _moved(layer: dict, to: str) -> dict:
    """A layer's parameters under another layer's names ("" is the module's own)."""
    return {f"{to}.{k}".lstrip("."): v for k, v in layer.items()}


def _say_weights(key: str) -> str:
    if key.startswith("the bias of "):
        layer = key[len("the bias of "):-len(" left out")]
        return f"{key}: {layer} computes x @ W.T + b, and its b is missing here"
    if key.endswith(" transposed"):
        return (f"{key}: x @ W where x @ W.T is meant (nn.Linear keeps its weight as (out, in), so calling the "
                f"layer multiplies by the transpose)")
    if key.endswith(" swapped"):
        a, b = key[:-len(" swapped")].split(" and ")
        return f"the weights of {a} and {b} swapped: each layer is used where the other belongs"
    b, a = key[:-len("'s place")].split(" in ")
    return f"{b} used in {a}'s place: {b}'s weights where {a}'s belong"


def intermediate_returned(got, want, inputs):
    """got is a value the right piece computes on its way to the output (exp(x - max) before the
    division; the scores before the softmax): the steps after it are missing, or a `return` came early."""
    if not _tensors(got, want) or (found := _engine_call(got, want, inputs)) is None:
        return None
    fn, args = found
    steps: list = []
    _run(fn, args, _Steps(steps))
    given = [v for v in args.values() if isinstance(v, torch.Tensor)]
    last = max((i for i, (_, t) in enumerate(steps) if _same_output(t, got, want)
                and not any(t.shape == g.shape and _near(t, g.to(t.dtype), want) for g in given)), default=None)
    if last is None:
        return None
    op = steps[last][0]
    after = list(dict.fromkeys(o for o, _ in steps[last + 1:] if o not in _MOVES))
    rest = ", ".join(after[:4]) + (", ..." if len(after) > 4 else "")
    return Seen(frozenset({op}), lambda k: f"your output equals a value the right {inputs[CALL].piece.split('.')[1]} computes on its "
                f"way to the answer: the result of its `{op}` step, before {rest or 'its last step'}: a step after "
                f"it is missing, or a `return` comes too early?")
