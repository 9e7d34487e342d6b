"""The house's layers (docs/architecture.md, "What may import what"): lower layers never import
upper ones, no import cycle runs through the engine, and importing the package loads nothing it
does not need (no torch for `import andrea_course`, no import hook until a learner's folder is used).

Imports are read from every module's source (the AST, lazy imports inside functions included),
and checked again by importing in a fresh interpreter and looking at sys.modules.
"""
import ast
import json
import re
import subprocess
import sys

import pytest

from andrea_course.paths import PACKAGE, ROOT

# layer -> the modules of andrea_course in it (a name ending in "." is a package: every module under it)
LAYERS = {
    "leaf": ("paths", "lessons", "contracts", "presets", "gpus", "links"),
    "engine": ("engine.",),
    "train": ("train.",),
    "pieces": ("pieces.",),
    "overlay": ("overlay", "authorship", "inputs"),
    "worker": ("worker.",),
    "grading": ("grading.", "activity_tests."),
    "notebook": ("notebook.",),
    "capstone": ("capstone.",),
    "tools": ("exercises", "release", "start"),
}
# layer -> the layers it may import
MAY_IMPORT = {
    "leaf": {"leaf"},
    "engine": {"leaf", "engine"},
    "train": {"leaf", "engine", "train"},
    "pieces": {"leaf", "engine", "pieces"},                     # + the two leaves of train/ below
    "overlay": {"leaf", "engine", "pieces", "overlay"},
    "worker": {"leaf", "engine", "pieces", "overlay", "worker"},
    "grading": {"leaf", "engine", "train", "pieces", "overlay", "worker", "grading"},
    "notebook": {"leaf", "engine", "train", "pieces", "overlay", "worker", "grading", "notebook"},
    "capstone": {"leaf", "engine", "train", "pieces", "overlay", "worker", "grading", "capstone"},
    "tools": set(LAYERS),
}
# pieces import only these modules of train/: what a piece shares with the trainer, never the trainer
PIECES_MAY_IMPORT_OF_TRAIN = {"train.schedule", "train.tokenizer"}
# Imports that still run up, each named so that no other can join it (and checked to exist, so
# that each line goes once its import does):
KNOWN_UPWARD: set[tuple[str, str]] = set()


# docs/architecture.md's names of the layers that LAYERS names otherwise
DOC_NAMES = {"leaves": "leaf", "training": "train", "notebooks": "notebook"}


def _table() -> dict[str, tuple[tuple[str, ...], list[str]]]:
    """docs/architecture.md's layer table: {layer: (its files as LAYERS names them, the tests/ paths
    its tests column names)}. A file is a backquoted name outside parentheses: `engine/` is the
    package engine., `overlay.py` the module overlay."""
    rows = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 4 or cells[0] in ("layer", "---"):
            continue
        files = re.findall(r"`([^`]+)`", re.sub(r"\([^()]*\)", "", cells[1]))
        rows[DOC_NAMES.get(cells[0], cells[0])] = (tuple(f.removesuffix(".py").replace("/", ".") for f in files),
                                                   re.findall(r"`(tests/[^`]*)`", cells[2]))
    return rows


def test_the_table_in_the_docs_is_the_one_enforced_here():
    """The layer table's files are LAYERS; each layer names its tests, which exist; every folder of
    tests/ that holds tests is named in some row."""
    table = _table()
    assert {layer: files for layer, (files, _) in table.items()} == LAYERS
    for layer, (_, tests) in table.items():
        missing = [path for path in tests if not (ROOT / path).exists()]
        assert tests and not missing, f"docs/architecture.md: the {layer} layer's tests {missing or '(none named)'}"
    named = {path.split("/")[1] for _, tests in table.values() for path in tests}
    groups = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert groups <= named, f"tests/{sorted(groups - named)} is in no row of docs/architecture.md's layer table"


def _modules() -> dict[str, object]:
    """{dotted name under andrea_course (package __init__ as the package's name): path}."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts and parts[0] != "data":
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(name: str) -> str:
    for layer, members in LAYERS.items():
        for m in members:
            if name == m or (m.endswith(".") and (name + ".").startswith(m)):
                return layer
    raise AssertionError(f"andrea_course.{name} belongs to no layer of tests/course/test_layers.py: add it")


def _imports(name: str) -> set[str]:
    """The andrea_course modules `name` imports anywhere in its source (lazy imports included),
    resolved to module names (an imported function names its module)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
                if not (mod == "andrea_course" or mod.startswith("andrea_course.")):
                    continue
                mod = mod.removeprefix("andrea_course").lstrip(".")
            names = [f"{mod}.{a.name}".strip(".") for a in node.names]
            # `from . import files` imports the submodule; the package itself only when a name is not one
            targets = names + ([mod] if any(n.removeprefix("andrea_course.") not in MODULES for n in names) else [])
        for target in targets:
            target = target.removeprefix("andrea_course.") if target.startswith("andrea_course.") else target
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def test_every_module_has_a_layer():
    for name in MODULES:
        if name:
            _layer(name)


def _violations(graph: dict) -> list[str]:
    bad = []
    for name, targets in graph.items():
        if not name:
            continue
        layer = _layer(name)
        for target in targets:
            if not target or (name, target) in KNOWN_UPWARD:
                continue
            other = _layer(target)
            if layer == "pieces" and other == "train":
                if target not in PIECES_MAY_IMPORT_OF_TRAIN:
                    bad.append(f"{name} imports {target}: pieces import only {sorted(PIECES_MAY_IMPORT_OF_TRAIN)} of train/")
            elif other not in MAY_IMPORT[layer]:
                bad.append(f"{name} ({layer}) imports {target} ({other})")
    return bad


def test_no_layer_imports_one_above_it():
    bad = _violations(GRAPH)
    assert not bad, "\n".join(bad)


def test_every_known_upward_import_still_exists():
    stale = sorted(pair for pair in KNOWN_UPWARD if pair[1] not in GRAPH.get(pair[0], ()))
    assert not stale, f"no longer imported: delete {stale} from KNOWN_UPWARD"


def test_the_engine_config_params_kernels_and_train_import_no_learner_layer():
    """The issue's never-list, spelled out: the engine (engine/: model, config, params, kernels, ...)
    and train (any module under them) import neither the overlay, nor the grader, nor the notebooks."""
    above = ("overlay", "authorship", "grading", "activity_tests", "notebook", "pieces")
    for name, targets in GRAPH.items():
        if name.split(".")[0] in ("engine", "train"):
            up = sorted(t for t in targets if t.split(".")[0] in above)
            assert not up, f"andrea_course.{name} imports {up}"


def test_no_import_cycle_runs_through_the_engine():
    engine = {n for n in MODULES if n and _layer(n) in ("leaf", "engine")}
    for start in engine:
        seen, stack = set(), [(start, (start,))]
        while stack:
            node, path = stack.pop()
            for nxt in GRAPH.get(node, ()):
                if nxt == start:
                    raise AssertionError("import cycle through the engine: " + " -> ".join(path + (start,)))
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + (nxt,)))


def _cycle(graph: dict) -> list[str] | None:
    """One import cycle of `graph` (a path that ends where it starts), or None."""
    done, active = set(), []

    def visit(node):
        if node in active:
            return active[active.index(node):] + [node]
        if node in done:
            return None
        active.append(node)
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt)
            if found:
                return found
        active.pop()
        done.add(node)
        return None
    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


def test_no_import_cycle_anywhere():
    """No module of the package imports, through any chain, a module that imports it back
    (a package's __init__ importing its own submodules lazily is no cycle: they import the
    package by being in it)."""
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(f"andrea_course.{m}" for m in cycle)
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_rule_itself_catches_a_piece_importing_the_trainer(tmp_path):
    """The AST reader sees a lazy, relative import of the trainer inside a function of pieces/."""
    source = "def lr_at(step):\n    from ..train.trainer import lr_at as f\n    return f(step)\n"
    MODULES["pieces._probe"] = tmp_path / "_probe.py"
    (tmp_path / "_probe.py").write_text(source, encoding="utf-8")
    try:
        assert _imports("pieces._probe") == {"train.trainer"}
        assert _violations({"pieces._probe": {"train.trainer"}, "pieces.bpe": {"train.tokenizer"},
                            "engine.model": {"overlay"}}) == [
            "pieces._probe imports train.trainer: pieces import only ['train.schedule', 'train.tokenizer'] of train/",
            "engine.model (engine) imports overlay (overlay)"]
    finally:
        del MODULES["pieces._probe"]


def _fresh(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


REPORT = """
import json, sys
loaded = sorted(m for m in sys.modules if m.startswith("andrea_course"))
hook = any(type(f).__name__ == "_Finder" for f in sys.meta_path)
print(json.dumps({"loaded": loaded, "torch": "torch" in sys.modules, "hook": hook}))
"""


def test_importing_the_package_loads_nothing_heavy():
    got = _fresh("import andrea_course\n" + REPORT)
    assert got == {"loaded": ["andrea_course"], "torch": False, "hook": False}, got
    got = _fresh("from andrea_course import ModelConfig, count_parameters\n" + REPORT)
    assert not got["hook"] and not any(m.split(".")[1] in ("overlay", "grading", "notebook", "pieces")
                                       for m in got["loaded"] if "." in m), got


def test_the_engine_and_the_trainer_load_no_learner_layer_and_no_import_hook():
    code = ("import andrea_course.engine.model, andrea_course.engine.params, andrea_course.engine.config, "
            "andrea_course.engine.kernels, andrea_course.engine.weights, andrea_course.train.trainer, "
            "andrea_course.train.sample\n"
            "m = andrea_course.engine.model.ANDREA('andrea-tiny', kernels='triton')\n" + REPORT)
    got = _fresh(code)
    up = [m for m in got["loaded"] if m.split(".")[1:2] and m.split(".")[1] in ("overlay", "authorship", "grading",
                                                                                 "notebook", "pieces")]
    assert not up and not got["hook"], got


def test_andrea_train_without_impl_loads_no_grading_and_no_pytest():
    """andrea-train's command line trains the engine where only the package's requirements are
    installed: the grading layer (and pytest with it) loads only for --impl."""
    got = _fresh("import sys, json\nimport andrea_course.capstone.cli, andrea_course.capstone\n"
                 "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('andrea_course', 'pytest', '_pytest')))))")
    up = [m for m in got if m.startswith(("andrea_course.grading", "andrea_course.notebook", "pytest", "_pytest"))]
    assert "andrea_course.capstone.cli" in got and not up, up


@pytest.mark.skipif(not (ROOT / "exercises").is_dir(), reason="no exercises/")
def test_the_import_hook_comes_with_a_learners_folder():
    got = _fresh("from andrea_course.overlay import Overlay\nimport sys\n"
                 "before = any(type(f).__name__ == '_Finder' for f in sys.meta_path)\n"
                 "Overlay('exercises')\nassert not before\n" + REPORT)
    assert got["hook"], got
