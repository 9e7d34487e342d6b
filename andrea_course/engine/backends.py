"""Back-ends of the hot operations, by name: one row per op slot, one column per back-end; and
apply(), which fills every slot of a model by module type.

A *slot* is a function a module calls through an attribute of the slot's name
(MultiHeadAttention.attention, LayerNorm.layer_norm, RMSNorm.rms_norm, MLP.gelu, SwiGLU.swiglu,
ANDREA.cross_entropy, and Rotary's rope_frequencies, apply_rope, rope_attention). Which module
types carry which slots is a table the caller passes in (model.MODULE_SLOTS, with the overlay's
additions for a learner's classes): apply() never guesses from attribute names. It sets each slot
of TABLE to a back-end's function, as Liger-Kernel's apply_liger_kernel_to_* swaps its kernels
in; `mine` puts another function in a slot (a learner's piece, overlay.py), and a slot that no
module of the model carries is refused. All back-ends compute the same thing. observe() counts
what runs, slot by slot and module by module, while its block runs, and nothing outside it: what
overlay.build reports as model.slots is read off its counts.

Adding a kernel: its file in kernels/, one row here, its tests, its bench line (docs/architecture.md).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
from collections import Counter
from collections.abc import Callable, Mapping

import torch.nn as nn

BACKENDS = ("torch", "triton")
# What apply() reports, per slot: which code runs it.
ENGINE, YOURS, TRITON, YOURS_IN_TRITON = "engine", "yours", "Triton kernel", "yours in Triton"
WHO = (ENGINE, YOURS, TRITON, YOURS_IN_TRITON)

#  slot            torch: PyTorch's fused op           triton: the course's kernel (a slot without
#                                                       one runs its torch function under both)
TABLE: dict[str, dict[str, str]] = {
    "attention":     {"torch": "andrea_course.engine.ops:attention",     "triton": "andrea_course.engine.kernels.attention:attention"},
    "layer_norm":    {"torch": "andrea_course.engine.ops:layer_norm",    "triton": "andrea_course.engine.kernels.layernorm:layer_norm"},
    "rms_norm":      {"torch": "andrea_course.engine.ops:rms_norm",      "triton": "andrea_course.engine.kernels.rmsnorm:rms_norm"},
    "gelu":          {"torch": "andrea_course.engine.ops:gelu",          "triton": "andrea_course.engine.kernels.gelu:gelu_tanh"},
    "swiglu":        {"torch": "andrea_course.engine.ops:swiglu",        "triton": "andrea_course.engine.kernels.swiglu:swiglu"},
    "cross_entropy": {"torch": "andrea_course.engine.ops:cross_entropy", "triton": "andrea_course.engine.kernels.cross_entropy:cross_entropy"},
}


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"kernels must be one of {BACKENDS}, got {backend!r}")


def op(slot: str, backend: str = "torch"):
    """The function of one slot on one back-end (imported on first use: Triton only when asked)."""
    check_backend(backend)
    if slot not in TABLE:
        raise KeyError(f"no op slot {slot!r}; slots: {', '.join(TABLE)}")
    module, _, name = TABLE[slot].get(backend, TABLE[slot]["torch"]).partition(":")
    return getattr(importlib.import_module(module), name)


def slots_of(module: nn.Module, carriers: Mapping[type, tuple[str, ...]]) -> tuple[str, ...]:
    """The slots a module carries: those of the first of its classes (its own, then its bases)
    that `carriers` names."""
    for cls in type(module).__mro__:
        if cls in carriers:
            return carriers[cls]
    return ()


def apply(model: nn.Module, backend: str, carriers: Mapping[type, tuple[str, ...]],
          mine: Mapping[str, tuple[Callable, str]] | None = None) -> dict[str, str]:
    """Fill every slot that a module of `model` carries (by its type, `carriers`): with
    mine[slot] = (function, who) where given, else, for an op slot of TABLE, with `backend`'s
    function; any other slot keeps the function its module was built with (the engine's).
    Returns {slot: who runs it} for every slot the model carries ("engine", "Triton kernel", or
    mine's "yours" / "yours in Triton"). A slot of `mine` that no module carries is refused."""
    check_backend(backend)
    mine = dict(mine or {})
    bad = [who for _, who in mine.values() if who not in WHO]
    if bad:
        raise ValueError(f"who runs a slot must be one of {WHO}, got {bad[0]!r}")
    carried = {slot for m in model.modules() for slot in slots_of(m, carriers)}
    stray = sorted(set(mine) - carried)
    if stray:
        raise ValueError(f"no module of this {type(model).__name__} carries the slot {stray[0]!r}; "
                         f"its slots: {', '.join(sorted(carried))}")
    fns = {slot: op(slot, backend) for slot in carried & TABLE.keys()}
    fns.update({slot: fn for slot, (fn, _) in mine.items()})
    for module in model.modules():
        for slot in slots_of(module, carriers):
            if slot in fns:
                setattr(module, slot, fns[slot])
    return {slot: mine[slot][1] if slot in mine else (TRITON if backend != "torch" and backend in TABLE.get(slot, {}) else ENGINE)
            for slot in sorted(carried, key=_order)}


class Calls:
    """What ran during a probe (observe): calls of each module's forward by its name in the model
    ("" the model itself), of each slot attribute by (module name, slot), and of each counted
    function by id(function), whatever called it (a slot attribute or a name a function reads).
    `last` is the key of the counted learner's code that most recently finished a call."""

    def __init__(self):
        self.modules: Counter = Counter()
        self.slots: Counter = Counter()
        self.functions: Counter = Counter()
        self.last = None

    def wrap(self, fn: Callable, *keys, mark=None) -> Callable:
        """fn, counting each call under id(fn) and under each of `keys` of self.slots."""
        def counted(*args, **kwargs):
            self.functions[id(fn)] += 1
            for key in keys:
                self.slots[key] += 1
            out = fn(*args, **kwargs)
            if mark is not None:
                self.last = mark
            return out
        return functools.update_wrapper(counted, fn, updated=())   # its name and doc, not a class's dict


@contextlib.contextmanager
def observe(model: nn.Module, carriers: Mapping[type, tuple[str, ...]], marks: Mapping[int, object] = ()):
    """Count, while the block runs, every module's forward calls and every slot's calls (each slot
    attribute swapped for a counting wrapper, pre-hooks on every module), then put everything back:
    the model's own forward pays nothing outside the block. A None slot (Rotary's rope_attention in
    the engine) is not wrapped: its module's own steps run. marks: {id(fn or module): key}, the
    learner's code, whose last finished call Calls.last names. Yields a Calls."""
    calls = Calls()
    handles, swapped = [], []
    try:
        for name, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(
                lambda m, a, name=name: calls.modules.update((name,))))
            if id(module) in marks:
                handles.append(module.register_forward_hook(
                    lambda m, a, o, key=marks[id(module)]: setattr(calls, "last", key)))
            for slot in slots_of(module, carriers):
                fn = getattr(module, slot, None)
                if callable(fn):
                    swapped.append((module, slot, fn, slot in vars(module)))
                    setattr(module, slot, calls.wrap(fn, (name, slot), mark=marks.get(id(fn))))
        yield calls
    finally:
        for handle in handles:
            handle.remove()
        for module, slot, fn, own in reversed(swapped):
            if own:
                setattr(module, slot, fn)
            else:
                delattr(module, slot)


def _order(slot: str):
    return (list(TABLE).index(slot) if slot in TABLE else len(TABLE), slot)
