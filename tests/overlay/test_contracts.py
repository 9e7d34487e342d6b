"""contracts.py: one row per piece, complete, and read by the overlay and authorship.

problems(rows) checks a table of rows against the engine, the answer key and the package's
other code; the real table has none, and clearing any part of a filling row's contract (or a
twin) gives one. Among its checks: what the engine passes each slot in a model of every value of
every option (recorded in tiny models) is what the answer key's piece takes, or its row's
supports leaves that value out; every slot a learner's class carries has its row in
overlay.DOES_THE_JOB. Each back-end's function of a slot takes what the engine passes it too, or
the engine refuses that back-end for the option, naming it.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import itertools
import re
from pathlib import Path
from types import MappingProxyType

import pytest
import torch

from andrea_course import authorship, contracts, lessons, overlay, pieces
from andrea_course.engine import backends
from andrea_course.engine import model as engine
from andrea_course.engine.config import ModelConfig
from andrea_course.paths import ROOT, STUB_MARK
from model_options import option_values

PACKAGE = ROOT / "andrea_course"
ENGINE_ONLY_SLOTS = {"cross_entropy"}      # the loss: no learner's piece fills it
OPTIONS = set(option_values())              # the model's options: its str and bool fields


def _split(piece):
    return piece.split(".")


def _engine_class(row):
    target = getattr(engine, row.replaces, None) if row.replaces else None
    return target if isinstance(target, type) else None


def _fill_problems(row) -> list[str]:
    out = []
    if row.replaces and not hasattr(engine, row.replaces):
        out.append(f"{row.piece}: model.py has no {row.replaces}")
    if row.slot:
        carried = {s for slots in engine.MODULE_SLOTS.values() for s in slots}
        if row.slot not in carried:
            out.append(f"{row.piece}: no module carries slot {row.slot!r} (model.MODULE_SLOTS)")
    name = _split(row.piece)[1]
    if hasattr(engine, name) and name not in (row.replaces, row.slot):
        out.append(f"{row.piece}: model.py's {name} is what it fills, but its row says neither")
    return out


def _step_problems(row, rows) -> list[str]:
    out = [f"{row.piece}: step {s} is no piece" for s in row.steps if s not in contracts.CONTRACTS]
    slot_steps = all(rows.get(s, contracts.Contract(s)).slot for s in row.steps)
    if row.steps and not row.by_steps and not slot_steps:
        out.append(f"{row.piece}: steps that fill no slot run the learner's only in an engine version "
                   f"written step by step (by_steps)")
    if row.by_steps:
        code = getattr(pieces.module(row.by_steps[0]), row.by_steps[1]).__code__
    elif row.slot:
        code = pieces.get(*_split(row.piece)).__code__
    else:
        return out
    called = {s for s in contracts.CONTRACTS if _split(s)[1] in code.co_names and s != row.piece}
    if missing := sorted(called - set(row.steps)):
        out.append(f"{row.piece}: the engine's version calls {missing}, not in its steps")
    return out


def _supports_problems(row) -> list[str]:
    """A learner's class used where the config asks for what it does not compute: each option the
    engine's class reads and the answer key's does not must be in supports."""
    out = [f"{row.piece}: {f!r} is no ModelConfig field" for f in row.supports if f not in OPTIONS]
    cls = _engine_class(row)
    if cls is None or row.piece == "model.ANDREA":
        return out
    activity, name = _split(row.piece)
    answer = getattr(importlib.import_module(f"solutions.{activity}"), name)
    read = lambda c: set(re.findall(r"cfg\.(\w+)", inspect.getsource(c))) & OPTIONS   # noqa: E731
    for option in sorted(read(cls) - read(answer) - set(row.supports)):
        out.append(f"{row.piece}: the engine's {name} reads cfg.{option}, yours does not: supports needs it")
    return out


# ----------------------------------------------------------------------------- what the engine passes each slot
Call = tuple[int, frozenset]                 # (positional arguments, keyword names) of one slot call


def _record_calls(cfg: ModelConfig) -> dict[str, set[Call]]:
    """{slot: its calls} while a model of `cfg` runs a forward with targets and generates one
    token: the engine's model, then one whose empty slots hold their pieces' engine versions
    (Rotary's rope_attention: the engine's own steps run only while it is empty)."""
    seen: dict[str, set[Call]] = {}
    ids = torch.tensor([[1, 2, 3]])
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        for fill_empty in (False, True):
            model = engine.ANDREA(cfg)
            _record_into(seen, model, fill_empty)
            model(ids, ids)
            model.generate(ids, 1, temperature=0)
    return seen


def _record_into(seen: dict[str, set[Call]], model, fill_empty: bool) -> None:
    engine_version = {row.slot: pieces.get(*_split(row.piece)) for row in contracts.filling().values() if row.slot}
    for module in model.modules():
        for slot in backends.slots_of(module, engine.MODULE_SLOTS):
            fn = getattr(module, slot) or (engine_version[slot] if fill_empty else None)
            if fn is None:
                continue

            def record(*args, _fn=fn, _slot=slot, **kwargs):
                seen.setdefault(_slot, set()).add((len(args), frozenset(kwargs)))
                return _fn(*args, **kwargs)
            setattr(module, slot, record)


def _config(option: str, value) -> ModelConfig:
    """A tiny model with one option's value, the others at the classic model's."""
    base = ModelConfig(vocab_size=11, context_length=6, d_model=8, n_layers=1, n_heads=2, d_ff=16)
    return base.replace(**{option: value})


@functools.lru_cache(maxsize=1)
def _engine_slot_calls() -> dict[tuple[str, object], dict[str, set[Call]]]:
    """{(option, value): {slot: its calls}}: how the engine's modules call each slot in a model
    of each value of each option."""
    return {(option, value): _record_calls(_config(option, value))
            for option, values in option_values().items() for value in values}


def _takes(fn, call: Call) -> bool:
    n, keywords = call
    try:
        inspect.signature(fn).bind(*[None] * n, **dict.fromkeys(keywords))
    except TypeError:
        return False
    return True


def _said(slot: str, call: Call) -> str:
    n, keywords = call
    return f"the {slot} slot with {n} arguments" + "".join(f" and {k}=" for k in sorted(keywords))


def _calls_of(slot: str, calls) -> dict[Call, list[tuple[str, object]]]:
    """{call: the (option, value) of each model that makes it}, for one slot."""
    out: dict[Call, list] = {}
    for model, seen in calls.items():
        for call in seen.get(slot, ()):
            out.setdefault(call, []).append(model)
    return dict(sorted(out.items(), key=lambda item: (item[0][0], sorted(item[0][1]))))


def _named(models) -> str:
    return " or ".join(f"{option}={value!r}" for option, value in models)


def _in(models, calls) -> str:
    """Which models make a call: "with position='rope'", or "in every model (but ...)" when most do."""
    if 2 * len(models) <= len(calls):
        return f"with {_named(models)}"
    others = [model for model in calls if model not in models]
    return "in every model" + (f" but {_named(others)}" if others else "")


def _slot_call_problems(row, calls=None) -> list[str]:
    """A learner's piece in a slot runs only where it takes what the engine passes the slot: an
    option value that makes the engine pass what the answer key's piece does not take is one its
    row's supports leaves out; the engine's version written step by step (by_steps) runs in
    every model, so it must take everything."""
    if not row.slot:
        return []
    calls = calls or _engine_slot_calls()
    activity, name = _split(row.piece)
    answer = getattr(importlib.import_module(f"solutions.{activity}"), name)
    by_steps = getattr(pieces.module(row.by_steps[0]), row.by_steps[1]) if row.by_steps else None
    out = []
    for call, models in _calls_of(row.slot, calls).items():
        said = f"the engine calls {_said(row.slot, call)}"
        used = [(option, value) for option, value in models if value in row.supports.get(option, (value,))]
        if used and not _takes(answer, call):
            where = _in(used, calls)
            fix = f": its row's supports must leave {_named(used)} out" if where.startswith("with") else ""
            out.append(f"{row.piece}: {where} {said}, which the answer key's {name} does not take{fix}")
        if by_steps is not None and not _takes(by_steps, call):
            out.append(f"{row.piece}: {_in(models, calls)} {said}, which pieces/{row.by_steps[0]}.py's "
                       f"{row.by_steps[1]} does not take")
    return out


def _given_problems(row) -> list[str]:
    """Methods of an exercise's class written for the learner (no stub) are the row's given."""
    cls = _engine_class(row)
    if cls is None or row.piece == "model.ANDREA":      # ANDREA's: model.given_model_methods()
        return []
    activity, name = _split(row.piece)
    tree = ast.parse((ROOT / "exercises" / f"{activity}.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    written = {m.name for m in node.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")
               and STUB_MARK not in ast.unparse(m)}
    return [f"{row.piece}: {m} is given in the exercise, not in its row's given"
            for m in sorted(written - set(row.given))]


def _twin_problems(twins: dict) -> list[str]:
    """Every function or class of the package outside pieces/ named as a piece is one of that
    piece's engine versions for authorship (pieces/, backends.TABLE or its row's twins)."""
    names = {_split(p)[1]: p for p in contracts.CONTRACTS}
    saved = dict(authorship.TWINS)
    authorship.TWINS.clear()
    authorship.TWINS.update(twins)
    out = []
    try:
        for path in sorted(PACKAGE.rglob("*.py")):
            rel = path.relative_to(PACKAGE)
            if rel.parts[0] in ("pieces", "activity_tests", "grading"):
                continue
            module = "andrea_course." + ".".join(rel.with_suffix("").parts)
            for node in ast.parse(path.read_text()).body:
                if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name not in names:
                    continue
                try:
                    obj = getattr(importlib.import_module(module), node.name)
                except ImportError:                  # Triton missing: nothing to reach either
                    continue
                piece = names[node.name]
                found = [authorship.python_function(o) for _, o in authorship.engine_versions(*_split(piece))]
                if obj is not pieces.get(*_split(piece)) and authorship.python_function(obj) not in found:
                    out.append(f"{piece}: {module}:{node.name} computes it but is no twin of it")
        for piece, specs in twins.items():
            authorship.TWINS.pop(piece)
            without = {id(o) for _, o in authorship.engine_versions(*_split(piece))}
            authorship.TWINS[piece] = specs
            if {id(o) for _, o in authorship.engine_versions(*_split(piece))} == without:
                out.append(f"{piece}: its twins {specs} add nothing to pieces/ and backends.TABLE")
    finally:
        authorship.TWINS.clear()
        authorship.TWINS.update(saved)
    return out


def _slots_of_class(cls: type) -> tuple[str, ...]:
    return next((engine.MODULE_SLOTS[c] for c in cls.__mro__ if c in engine.MODULE_SLOTS), ())


def _job_problems(rows) -> list[str]:
    """A learner's class that computes a slot's job itself instead of calling the slot is named
    by the call that does it (overlay.DOES_THE_JOB): every slot that a class learners write (or
    are given) carries needs its row there."""
    classes = [_engine_class(row) for row in rows.values()] + [getattr(engine, name) for name in
                                                               contracts.GIVEN_CLASSES.values()]
    carried = {slot for cls in classes if cls is not None for slot in _slots_of_class(cls)}
    return [f"slot {slot!r} is carried by a class learners write, but overlay.DOES_THE_JOB has no row for it "
            f"(the calls that do its job)" for slot in sorted(carried - set(overlay.DOES_THE_JOB))]


def problems(rows: dict[str, contracts.Contract]) -> list[str]:
    out = []
    filling = [r for r in rows.values() if r.fills]
    for row in rows.values():
        out += (_fill_problems(row) + _step_problems(row, rows) + _supports_problems(row) + _slot_call_problems(row)
                + _given_problems(row))
    slots = {s for slots in engine.MODULE_SLOTS.values() for s in slots} - ENGINE_ONLY_SLOTS
    if unfilled := sorted(slots - {r.slot for r in filling}):
        out.append(f"slots no piece fills: {unfilled}")
    kernels = {p for p in contracts.CONTRACTS if p.startswith("kernels.")}
    if unlaunched := sorted(kernels - {r.kernel for r in rows.values()}):
        out.append(f"Triton kernels no piece's row launches: {unlaunched}")
    return out + _job_problems(rows) + _twin_problems({p: r.twins for p, r in rows.items() if r.twins})


def test_every_piece_has_one_row_and_every_row_a_piece():
    pieces_ = [e for lesson in lessons.LESSONS for e in lesson.exercises]
    assert list(contracts.CONTRACTS) == pieces_
    with pytest.raises(ValueError, match="no piece"):
        contracts._table(contracts._ROWS + (contracts.Contract("attention.alibi_bias", slot="alibi"),))
    with pytest.raises(KeyError, match="no piece named"):
        contracts.contract("attention.alibi_bias")


def test_the_table_is_complete():
    found = problems(contracts.declared())
    assert not found, "\n".join(found)


def test_an_argument_a_slots_piece_does_not_take_needs_supports():
    """An option that passes a new argument to an existing slot (ALiBi's bias= to attention): the
    row must leave that option's value out of the learner's piece, and the engine's version
    written step by step must take it."""
    row = contracts.contract("attention.attention")
    calls = {("position", "learned"): {"attention": {(3, frozenset())}},
             ("position", "rope"): {"attention": {(3, frozenset({"bias"}))}}}
    said = "attention.attention: with position='rope' the engine calls the attention slot with 3 arguments and bias="
    by_steps = f"{said}, which pieces/attention.py's attention_by_steps does not take"
    assert _slot_call_problems(row, calls) == [
        f"{said}, which the answer key's attention does not take: its row's supports must leave position='rope' out",
        by_steps]
    learned_only = dataclasses.replace(row, supports=MappingProxyType({"position": frozenset({"learned"})}))
    assert _slot_call_problems(learned_only, calls) == [by_steps]


def test_a_slot_a_learners_class_carries_needs_what_does_its_job(monkeypatch):
    monkeypatch.delitem(overlay.DOES_THE_JOB, "swiglu")
    assert problems(contracts.declared()) == [
        "slot 'swiglu' is carried by a class learners write, but overlay.DOES_THE_JOB has no row for it "
        "(the calls that do its job)"]


@functools.lru_cache(maxsize=None)
def _refusal(option: str, value, backend: str) -> str | None:
    """What the engine says when it refuses to build a model of this option's value on a
    back-end, else None."""
    try:
        with torch.device("meta"):
            engine.ANDREA(_config(option, value), kernels=backend)
    except ValueError as error:
        return str(error)
    return None


def _backend_problems(calls) -> list[str]:
    """Each back-end's function of a slot takes what the engine passes the slot, in every model
    that back-end builds; a back-end that refuses a model says which option value it refuses."""
    out = []
    for slot in sorted({slot for seen in calls.values() for slot in seen} & backends.TABLE.keys()):
        for backend, where in backends.TABLE[slot].items():
            try:
                fn = backends.op(slot, backend)
            except ImportError:                      # Triton missing: nothing to call either
                continue
            built = {model: seen for model, seen in calls.items() if _refusal(*model, backend) is None}
            out += [f"{where}: {_in(models, calls)} the engine calls {_said(slot, call)}, which it does not take"
                    for call, models in _calls_of(slot, built).items() if not _takes(fn, call)]
    for (option, value), backend in itertools.product(calls, backends.BACKENDS):
        why = _refusal(option, value, backend)
        if why is not None and f"{option}={value!r}" not in why:
            out.append(f"kernels={backend!r} refuses a model with {option}={value!r} without naming it: {why}")
    return out


def test_every_back_end_takes_what_the_engine_passes_its_slot():
    """A new argument to an existing slot reaches each of its back-ends: the Triton function takes
    it and computes it, or the engine refuses that back-end for the option, naming it."""
    found = _backend_problems(_engine_slot_calls())
    assert not found, "\n".join(found)


PARTS = [(row.piece, part.name) for row in contracts.declared().values()
         for part in dataclasses.fields(contracts.Contract)
         if part.name != "piece" and getattr(row, part.name) and (row.fills or part.name == "twins")]


@pytest.mark.parametrize("piece,part", PARTS)
def test_clearing_any_part_of_a_contract_fails(piece, part):
    rows = contracts.declared()
    empty = MappingProxyType({}) if part == "supports" else (None if part in ("replaces", "slot", "by_steps",
                                                                              "kernel") else ())
    rows[piece] = dataclasses.replace(rows[piece], **{part: empty})
    assert problems(rows), f"{piece} without its {part} passed"


def test_the_overlay_and_authorship_read_the_table():
    rows = contracts.declared()
    assert {p: (r.replaces or r.slot) for p, r in rows.items() if r.fills} == {
        p: (t if isinstance(t, str) else t.__name__) for p, t in overlay.SLOTS.items()}
    assert overlay.TRITON_KERNELS == {p: r.kernel for p, r in rows.items() if r.kernel}
    assert authorship.TWINS == {p: r.twins for p, r in rows.items() if r.twins}
    assert set(backends.TABLE) <= {r.slot for r in rows.values()} | ENGINE_ONLY_SLOTS


def test_a_class_is_refused_where_the_config_asks_what_it_does_not_compute():
    rope = ModelConfig.preset("andrea-tiny").replace(position="rope")
    why = overlay._not_computed("embeddings.Embeddings", rope)
    assert why == "engine: position='rope' needs the engine's; yours computes position='learned'"
    assert overlay._not_computed("embeddings.Embeddings", rope.replace(position="learned")) is None
    both = dataclasses.replace(contracts.contract("embeddings.Embeddings"),
                               supports=MappingProxyType({"position": frozenset({"learned", "rope"})}))
    assert contracts.computes(both, rope) is None


# ----------------------------------------------------------------------------- the documented list, done
# docs/architecture.md's "new model option", step by step, in a copy of the package: a toy option
# that halves the values in the engine's MultiHeadAttention, which the answer key's does not.
_OPTION = [
    ("andrea_course/engine/config.py",                  # 1. its field
     '    position: str = "learned"',
     '    half_values: bool = False\n    position: str = "learned"'),
    ("andrea_course/engine/model.py",                   # 2. where it acts
     "        self.attention = ops.attention\n",
     "        self.attention = ops.attention\n        self.half_values = cfg.half_values\n"),
    ("andrea_course/engine/model.py",
     "        v = v.view(B, T, G, K).transpose(1, 2)\n",
     "        v = v.view(B, T, G, K).transpose(1, 2)\n        v = v * 0.5 if self.half_values else v\n"),
]
_SUPPORTS = ("andrea_course/contracts.py",       # 4. supports= of the learner's class that does not compute it
             'Contract("multihead.MultiHeadAttention", replaces="MultiHeadAttention",\n'
             '             supports=_supports(position=("learned",)),',
             'Contract("multihead.MultiHeadAttention", replaces="MultiHeadAttention",\n'
             '             supports=_supports(position=("learned",), half_values=(False,)),')

_CHECK = r'''
import sys, torch
import test_contracts
from andrea_course import contracts, overlay
from andrea_course.engine import model as engine
from andrea_course.engine.config import ModelConfig
print("problems:", test_contracts.problems(contracts.declared()))
cfg = ModelConfig(vocab_size=17, context_length=8, d_model=16, n_layers=1, n_heads=2, d_ff=32, half_values=True)
torch.manual_seed(0)
mine = overlay.build(cfg, sys.argv[1], accept=set(contracts.CONTRACTS))
torch.manual_seed(0)
theirs = engine.ANDREA(cfg)
ids = torch.tensor([[1, 2, 3, 4]])
print("piece:", mine.pieces["multihead.MultiHeadAttention"])
print("same logits:", torch.allclose(mine(ids)[0], theirs(ids)[0], atol=1e-6))
'''


def _copy_with(tmp_path, edits):
    import shutil
    for folder in ("andrea_course", "solutions", "exercises"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.safetensors", "*.gz"))
    for name, old, new in edits:
        path = tmp_path / name
        text = path.read_text()
        assert text.count(old) == 1, f"{name} no longer has the line the documented change edits: {old!r}"
        path.write_text(text.replace(old, new))


def _run(tmp_path) -> str:
    import os
    import subprocess
    import sys
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(here), str(here.parent)]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _CHECK, str(tmp_path / "solutions")], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow(seconds=15)
def test_a_new_model_option_through_the_documented_list(tmp_path):
    """With steps 1, 2 and 4 the learner's model computes the option: the engine's attention runs
    and model.pieces says why. Without step 4 the contract's test names what is missing."""
    _copy_with(tmp_path / "done", _OPTION + [_SUPPORTS])
    out = _run(tmp_path / "done")
    assert "problems: []" in out
    assert ("piece: engine: half_values=True needs the engine's; yours computes half_values=False" in out)
    assert "same logits: True" in out
    _copy_with(tmp_path / "half", _OPTION)
    out = _run(tmp_path / "half")
    assert "reads cfg.half_values, yours does not: supports needs it" in out
    assert "same logits: False" in out             # the learner's class silently dropped the option
