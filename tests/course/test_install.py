"""Installing the course the ways learners do (issue 14).

Fast: every notebook carries the Colab badge and set-up cell that tools/nb.py writes, with the
address of pyproject.toml; the README's links agree; the set-up keeps a learner's edited files
when it updates the course; reveal() needs no widget; andrea-make-exercises --version; the
package lists its packages and carries the workspace's files; andrea-start writes and reuses a
workspace, and checks inside one judge its exercises.

Slow (marked `nightly`, run by `make test-nightly`, not by
`make test`), each in a fresh virtual environment (no system site-packages; pip's own
cache is reused; --no-compile): the first cell on a simulated Colab, each extra alone doing what
it is for, a non-editable `pip install` from a folder outside the repository, and the same with
[notebooks] then andrea-start and notebook 01 in the workspace. torch is installed as
torch==2.13.0 (the build on this machine's disk; a bare `torch>=2.4` would fetch a CUDA build).
One fixture builds every venv the selected tests need, in parallel threads.

Nightly, the torch range: the lowest torch and Triton pyproject.toml allows, on the oldest
Python it allows, and the newest the package index serves, on the newest Python here, each in
its own venv (CUDA builds of several GB each: PyPI has no CPU build of torch for Linux).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from andrea_course.paths import WORKSPACE_FILES, WORKSPACE_MARK

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TORCH = "torch==2.13.0"
CELL_TIMEOUT = 300                                  # seconds: a stuck cell fails the test, says which
PARALLEL = 3                                        # venv builds at once (pip waits on disk a lot)


def _load_nb_tool():
    spec = importlib.util.spec_from_file_location("nb_tool", ROOT / "tools" / "nb.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nb_tool = _load_nb_tool()


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- fast: what the files say
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_the_colab_badge_and_set_up_cell(path):
    cells = _nb(path)["cells"]
    title, first_code = "".join(cells[0]["source"]), next(c for c in cells if c["cell_type"] == "code")
    assert nb_tool.colab_badge(path.name) in title, (
        f"{path.name}: no Open-in-Colab badge for {nb_tool.repository()}; run `python tools/nb.py colab {path}`")
    assert first_code.get("id") == nb_tool.COLAB_CELL_ID and "".join(first_code["source"]) == (
        nb_tool.COLAB_CELL.format(repo=nb_tool.repository())), (
        f"{path.name}: the first code cell must be tools/nb.py's Colab set-up cell; run `python tools/nb.py colab {path}`")


def test_readme_links_every_notebook_to_colab():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert nb_tool.colab_url(path.name) in readme, f"README.md: no Colab link for {path.name}"
    stale = set(re.findall(r"https://colab\.research\.google\.com/github/[^)\s]+", readme)) - {
        nb_tool.colab_url(p.name) for p in NOTEBOOKS}
    assert not stale, f"README.md links notebooks that are not the course's: {sorted(stale)}"
    assert nb_tool.binder_url() in readme, "README.md: no Binder link for the repository in pyproject.toml"


def test_colab_cell_does_nothing_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = (list(sys.path), set(sys.modules))
    exec(nb_tool.COLAB_CELL.format(repo="https://example.invalid/x"), {})
    assert (list(sys.path), set(sys.modules)) == before and not any(tmp_path.iterdir())


def test_colab_setup_file_needs_only_the_standard_library():
    """The first cell loads colab.py on its own, before the course's dependencies are installed:
    no import of the package (relative or by name), nothing outside the standard library."""
    tree = ast.parse((ROOT / "andrea_course" / "notebook" / "colab.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] if not n.level else "." for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
    assert imported - {"google"} <= set(sys.stdlib_module_names), imported


def _git(folder, *args):
    subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True, text=True)


def _commit_file(repo: Path, name: str, text: str) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text, encoding="utf-8")
    _git(repo, "add", name)
    _git(repo, "commit", "-q", "-m", f"change {name}")


def test_drive_copy_is_updated_without_touching_the_learners_files(tmp_path):
    """place(): the first visit copies the VM's clone into Drive; later visits fast-forward it,
    keeping the learner's edits, and refuse (keeping everything) when an update would touch them."""
    from andrea_course.notebook.colab import place
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "-q", "-b", "main")
    _commit_file(origin, "exercises/embeddings.py", "def lookup(): raise NotImplementedError\n")
    vm = tmp_path / "content" / "andrea"
    subprocess.run(["git", "clone", "-q", "--depth=1", origin.as_uri(), str(vm)], check=True)
    drive = tmp_path / "content" / "drive" / "MyDrive" / "andrea"
    assert place(vm, drive) == "copied there now"
    mine = "def lookup(): return 'mine'\n"
    (drive / "exercises" / "embeddings.py").write_text(mine, encoding="utf-8")

    _commit_file(origin, "README.md", "new text\n")                     # the course moves on
    assert place(vm, drive) == "up to date with the course"
    assert (drive / "README.md").read_text() == "new text\n"
    assert (drive / "exercises" / "embeddings.py").read_text() == mine

    _commit_file(origin, "exercises/embeddings.py", "def lookup(): raise NotImplementedError('v2')\n")
    news = place(vm, drive)
    assert news.startswith("kept as it is, not updated") and "embeddings.py" in news
    assert (drive / "exercises" / "embeddings.py").read_text() == mine

    other = tmp_path / "content" / "drive" / "MyDrive" / "other"
    (other / "andrea").mkdir(parents=True)
    (other / "andrea" / "notes.txt").write_text("x")
    with pytest.raises(RuntimeError, match="is not a copy of the course"):
        place(vm, other / "andrea")


def test_reveal_is_collapsed_markdown_not_a_widget():
    from andrea_course.notebook import reveal_widget
    shown = reveal_widget("Model answer <1>", "Because $\\sqrt{K}$ **grows**.")
    assert type(shown).__name__ == "Markdown"
    assert shown.data.startswith("<details>\n<summary><b>Model answer &lt;1&gt;</b>")
    assert "\n\nBecause $\\sqrt{K}$ **grows**.\n\n</details>" in shown.data


def test_make_exercises_version(capsys):
    import andrea_course
    from andrea_course.exercises import main
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"andrea-make-exercises {andrea_course.__version__}"


# ---------------------------------------------------------------- fast: a learner's workspace (andrea-start)
def test_the_package_lists_every_package_and_carries_the_workspace_files():
    """pyproject.toml lists the packages (find cannot map folders): every package under
    andrea_course/, and notebooks/ and exercises/ mapped to andrea_course/_workspace/, which
    exists only in a built package (the repository keeps one copy)."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "andrea_course").rglob("__init__.py")}
    listed = set(config["packages"])
    assert found <= listed, f"pyproject.toml's [tool.setuptools] packages lacks {sorted(found - listed)}"
    mapped = {f"andrea_course._workspace.{name}": name for name in WORKSPACE_FILES}
    assert config["package-dir"] == mapped and listed - found == set(mapped), (config["package-dir"], listed - found)
    assert config["package-data"]["andrea_course._workspace.notebooks"] == ["*.ipynb"]
    assert not (ROOT / "andrea_course" / "_workspace").exists()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["andrea-start"] == "andrea_course.start:main"


def _course_files() -> dict[str, bytes]:
    return {**{f"{name}/{p.name}": p.read_bytes() for name, suffix in (("notebooks", ".ipynb"), ("exercises", ".py"))
               for p in sorted((ROOT / name).glob(f"*{suffix}"))},
            **{name: (ROOT / name).read_bytes() for name in ("AGENTS.md", "CLAUDE.md")}}   # the assistants' guide


def _files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != WORKSPACE_MARK}


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Path:
    """A process in an empty folder: in no workspace, no $ANDREA_WORKSPACE nor $ANDREA_IMPL."""
    for name in ("ANDREA_WORKSPACE", "ANDREA_IMPL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_andrea_start_writes_a_workspace_then_adds_to_it_without_touching_a_file(outside, capsys):
    from andrea_course.start import main
    ws = outside / "andrea"
    assert main([str(ws), "--no-lab"]) == 0
    said = capsys.readouterr().out
    course = _course_files()
    n_notebooks, n_exercises = (sum(k.startswith(f"{name}/") for k in course) for name in ("notebooks", "exercises"))
    assert f"ANDREA workspace: {ws} (made now: {n_notebooks} notebooks, {n_exercises} exercise files)" in said
    assert {k: v for k, (v, _) in _files_of(ws).items()} == course       # the course's files, byte for byte
    assert json.loads((ws / WORKSPACE_MARK).read_text())["course"] == "andrea-course"

    # The learner works; a notebook goes missing; the course has changed notebook 01 since.
    mine = ws / "exercises" / "embeddings.py"
    mine.write_text(mine.read_text() + "\n# my work\n")
    (ws / "notes.md").write_text("my notes")
    gone = f"notebooks/{NOTEBOOKS[1].name}"
    (ws / gone).unlink()
    marker = json.loads((ws / WORKSPACE_MARK).read_text())
    marker["written"][f"notebooks/{NOTEBOOKS[0].name}"] = "0" * 64     # as if written by an older course
    (ws / WORKSPACE_MARK).write_text(json.dumps(marker))
    before = _files_of(ws)

    assert main([str(ws), "--no-lab"]) == 0
    said = capsys.readouterr().out
    assert f"your {len(course) - 1} course files kept as they are; added 1 new: {gone})" in said, said
    assert f"This version of the course changed notebooks/{NOTEBOOKS[0].name}: yours is kept" in said, said
    after = _files_of(ws)
    assert {k: v for k, v in after.items() if k != gone} == before and after[gone][0] == course[gone]


def test_andrea_start_opens_jupyterlab_on_notebook_01_in_the_workspace(outside, monkeypatch, capsys):
    import andrea_course.start as start
    ran = []
    monkeypatch.setattr(start.os, "execv", lambda path, argv: ran.append((path, argv)))
    ws = outside / "andrea"
    assert start.main([str(ws)]) == 0
    assert ran == [(sys.executable, [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={ws}",
                                     str(ws / "notebooks" / NOTEBOOKS[0].name)]
                    + (["--allow-root"] if os.geteuid() == 0 else []))]
    assert Path.cwd() == ws
    monkeypatch.setattr(start, "has_jupyterlab", lambda: False)
    capsys.readouterr()
    assert start.main([str(ws)]) == 1 and len(ran) == 1
    assert "JupyterLab is not installed here: pip install 'andrea-course[notebooks]'" in capsys.readouterr().err


def test_andrea_start_refuses_a_file_and_a_folder_that_is_not_a_workspace(outside, capsys):
    from andrea_course.start import main
    (outside / "a_file").write_text("x")
    (outside / "mine").mkdir()
    (outside / "mine" / "thesis.tex").write_text("x")
    cases = [(outside / "a_file", "is a file, not a folder"),
             (outside / "mine", f"holds other files and is not a workspace of the course (no {WORKSPACE_MARK})"),
             (ROOT, "is a copy of the course's repository, not a workspace")]
    for folder, phrase in cases:
        before = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
        assert main([str(folder), "--no-lab"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("andrea-start: error: ") and phrase in err[0], err
        assert (sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None) == before


def test_inside_a_workspace_checks_judge_its_exercises(outside, monkeypatch):
    """From the workspace's notebooks/ (a notebook's current folder) or any folder under it, or
    anywhere with $ANDREA_WORKSPACE: "exercises" is the workspace's exercises/."""
    from andrea_course.notebook import notebook_impl, run_graded
    from andrea_course.overlay import ImplementationError, resolve
    from andrea_course.paths import workspace
    from andrea_course.start import write_workspace
    ws = write_workspace(outside / "andrea")["folder"]
    monkeypatch.chdir(ws / "notebooks")
    assert workspace() == ws and resolve("exercises") == ws / "exercises"
    assert notebook_impl() == str(ws / "exercises")
    assert run_graded("embeddings.embed_lookup").status == "unwritten"
    (ws / "exercises" / "embeddings.py").write_bytes((ROOT / "solutions" / "embeddings.py").read_bytes())
    assert run_graded("embeddings.embed_lookup").status == "passed"      # the workspace's file, not the checkout's

    monkeypatch.chdir(outside)
    assert workspace() is None and resolve("exercises") == ROOT / "exercises"   # a checkout's, outside
    monkeypatch.setenv("ANDREA_WORKSPACE", str(ws))
    assert workspace() == ws and notebook_impl() == str(ws / "exercises")
    monkeypatch.setenv("ANDREA_IMPL", "solutions")
    assert notebook_impl() == "solutions"
    monkeypatch.setenv("ANDREA_WORKSPACE", str(outside))
    with pytest.raises(ImplementationError, match=f"is not a workspace of the course .*andrea-start {re.escape(str(outside))}"):
        resolve("exercises")


def test_outside_a_workspace_an_installed_course_says_what_to_do(outside, monkeypatch, capsys):
    """A package installed by pip (no checkout around it), run outside a workspace: check() and
    use() say how to make one; nothing raises."""
    from andrea_course import paths
    from andrea_course.notebook import check, use
    monkeypatch.setattr(paths, "is_checkout", lambda root=None: False)
    check("embeddings.embed_lookup")
    said = capsys.readouterr().out
    assert said.startswith("[COULD NOT CHECK] embeddings.embed_lookup") and paths.MAKE_ONE in said, said
    assert "Error" not in said and f"{outside} is not in a workspace of the course" in said
    use("embeddings", "embed_lookup")
    assert paths.MAKE_ONE in capsys.readouterr().out


# ---------------------------------------------------------------- slow: fresh venvs
def _working_tree_files() -> list[str]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True, text=True).stdout
    return [f for f in listed.split("\0") if f and (ROOT / f).is_file()]


def _run(cmd, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _env(**extra) -> dict:
    """The environment of a learner's process: no course variables, one torch thread."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANDREA_", "PYTEST_", "VIRTUAL_ENV")) and k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


# name -> what pip installs into it; "{src}" is that venv's own copy of the course (a clone of
# `origin`), outside the repository. Colab's stand-in gets its own torch (the CPU 2.13.0 on
# disk), numpy, ipywidgets 7.7.1 (Colab's) and a kernel, and its own pip (the first cell calls
# it). The others read one shared torch==2.13.0 (installed once, read-only, through a .pth file)
# and get everything else fresh, from the test process's pip (`pip --python`): the extras are
# what they test, and installing torch eight times would take most of the time.
VENVS = {
    "colab": [TORCH, "numpy", "ipywidgets==7.7.1", "ipykernel", "matplotlib"],
    "plain": ["{src}"],                            # non-editable; {src} is deleted afterwards
    "workspace": ["{src}[notebooks]"],             # non-editable, as a learner without a clone
    "notebooks": ["-e", "{src}[notebooks]"],
    "kernels": ["-e", "{src}[kernels]"],
    "train": ["-e", "{src}[train,datasets]"],
    "hf": ["-e", "{src}[hf]"],
    "test": ["-e", "{src}[test]"],
    "browser": ["-e", "{src}[browser]"],
}
PIP = [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    """The course as a git repository outside this one: the working tree's files, committed
    (so what is tested is what is on disk, committed or not)."""
    repo = tmp_path_factory.mktemp("origin") / "andrea"
    for name in _working_tree_files():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the course")
    return repo


def _build(name: str, base: Path, origin_repo: Path, shared_torch) -> Path:
    """A fresh venv `base/name` with VENVS[name] installed; returns its python."""
    folder, src, started = base / name, base / f"{name}-src", time.monotonic()
    if any("{src}" in a for a in VENVS[name]):
        _run(["git", "clone", "-q", origin_repo.as_uri(), src])
    own_pip = name == "colab"
    venv.EnvBuilder(with_pip=own_pip).create(folder)
    python = folder / "bin" / "python"
    if not own_pip:
        site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
        Path(site, "_shared_torch.pth").write_text(str(shared_torch.result()) + "\n")
    pip = [python, "-m", "pip"] if own_pip else [*PIP[:3], "--python", python]
    _run([*pip, *PIP[3:], *[a.replace("{src}", str(src)) for a in VENVS[name]]], env=_env())
    if "-e" not in VENVS[name] and src.exists():
        shutil.rmtree(src)                  # a non-editable install: nothing may read the source folder
    print(f"venv {name}: built in {time.monotonic() - started:.0f} s")    # pytest -s shows it
    return python


def _install_shared_torch(target: Path) -> Path:
    _run([*PIP, "--target", target, TORCH], env=_env())
    return target


@pytest.fixture(scope="module")
def venvs(request, tmp_path_factory, origin):
    """{name: future of its python}: every venv that a selected test of this module needs,
    built in parallel threads; a test waits for its own."""
    needed = sorted({m.args[0] for item in request.session.items if item.module is request.module
                     for m in item.iter_markers("venv")})
    base = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(PARALLEL) as pool:
        shared_torch = pool.submit(_install_shared_torch, base / "torch") if set(needed) - {"colab"} else None
        # the Colab and the notebooks' venvs first: their tests take longest
        order = sorted(needed, key=lambda n: (n not in ("colab", "notebooks"), n))
        yield {name: pool.submit(_build, name, base, origin, shared_torch) for name in order}


def python_of(venvs, name) -> Path:
    return venvs[name].result()


def _snapshot(python: Path, names) -> dict:
    """For each installed distribution: its version and, for every file of its RECORD, the
    file's size and modification time (ns): a reinstall or an upgrade changes them."""
    code = textwrap.dedent("""
        import importlib.metadata as md, json, os, sys
        out = {}
        for name in sys.argv[1:]:
            d = md.distribution(name)
            files = {str(f): (os.stat(f.locate()).st_size, os.stat(f.locate()).st_mtime_ns)
                     for f in d.files if os.path.exists(f.locate())}
            out[name] = {"version": d.version, "files": files}
        print(json.dumps(out))""")
    return json.loads(_run([python, "-c", code, *names]).stdout)


FAKE_COLAB = '''
import os, sys, types
google, colab, drive = (types.ModuleType(n) for n in ("google", "google.colab", "google.colab.drive"))
def mount(mountpoint, **kwargs):                  # Drive: a folder that outlives the "VM"
    os.makedirs(os.path.join(mountpoint, "MyDrive"), exist_ok=True)
drive.mount, colab.drive, google.colab = mount, drive, colab
sys.modules.update({"google": google, "google.colab": colab, "google.colab.drive": drive})
'''


def _colab_notebook(path: Path, origin_repo: Path, content: Path, upto: int | None = None) -> dict:
    """The notebook as Colab would run it here: a fake google.colab first, then its cells (all,
    or the first `upto`), the first code cell pointed at `origin_repo` and `content`/andrea
    instead of the network and /content/andrea."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    repo_literal, vm_literal = f'"{nb_tool.repository()}"', '"/content/andrea"'
    assert cell.source.count(repo_literal) == 1 and cell.source.count(vm_literal) == 1, cell.source
    cell.source = cell.source.replace(repo_literal, json.dumps(origin_repo.as_uri())).replace(
        vm_literal, json.dumps(str(content / "andrea")))
    nb.cells = [nbformat.v4.new_code_cell(FAKE_COLAB)] + nb.cells[:upto]
    return nb


def _execute(nb, python: Path, cwd: Path, jupyter_dir: Path, monkeypatch, **env) -> list[str]:
    """Run `nb` in a kernel of `python` (nbclient raises on the first failing cell); the text
    each code cell printed or displayed (a check's box as its plain text)."""
    nbclient = pytest.importorskip("nbclient")
    if not (jupyter_dir / "kernels" / "sim").is_dir():
        _run([python, "-m", "ipykernel", "install", "--prefix", jupyter_dir.parent.parent, "--name", "sim"])
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_dir))          # where the kernel "sim" is found
    client = nbclient.NotebookClient(nb, kernel_name="sim", timeout=CELL_TIMEOUT, startup_timeout=120,
                                     resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute(env=_env(**env))
    except nbclient.exceptions.CellTimeoutError as exc:
        raise AssertionError(f"a cell of {nb.metadata.get('name', 'the notebook')} ran longer than "
                             f"{CELL_TIMEOUT} s in the simulated Colab (every cell takes seconds when "
                             f"nothing is stuck): {str(exc).splitlines()[0]}") from None
    return ["".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.get("outputs", []))
            for c in nb.cells if c.cell_type == "code"]


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("colab")
def test_colab_first_cell_keeps_colabs_packages_and_runs_notebook_01(venvs, origin, tmp_path, monkeypatch):
    """Colab, simulated: a venv with its own torch, numpy and ipywidgets 7 and a kernel; a fake
    google.colab; the course "on GitHub" is a local repository. Notebook 01 runs top to bottom
    after the first cell; torch, numpy and ipywidgets are exactly the files they were; the
    course lives in "Drive". The next day (a new VM: the VM's clone is gone, the course has moved
    on) the cell updates the Drive copy and the learner's exercise is still there."""
    python = python_of(venvs, "colab")
    kept = ("torch", "numpy", "ipywidgets")
    before = _snapshot(python, kept)
    assert before["ipywidgets"]["version"].startswith("7.")
    content, jupyter = tmp_path / "content", tmp_path / "jupyter" / "share" / "jupyter"
    content.mkdir()
    notebook = ROOT / "notebooks" / "01_embeddings.ipynb"

    printed = _execute(_colab_notebook(notebook, origin, content), python, content, jupyter, monkeypatch)
    home = content / "drive" / "MyDrive" / "andrea"
    print(printed[1])                                   # "... set up in N s." (pytest -s shows it)
    assert f"ANDREA course: {home} (in your Google Drive" in printed[1], printed[1]
    assert f"torch {before['torch']['version']}" in printed[1] and "ipywidgets 7." in printed[1]
    assert _snapshot(python, kept) == before, "the first cell changed Colab's torch, numpy or ipywidgets"
    where = _run([python, "-c", "import andrea_course; print(andrea_course.__file__)"], cwd=tmp_path, env=_env())
    assert where.stdout.strip() == str(home / "andrea_course" / "__init__.py")

    # The next day: a learner's exercise in Drive, a recycled VM, a newer course.
    exercise = home / "exercises" / "embeddings.py"
    mine = exercise.read_text(encoding="utf-8") + "\n# my work\n"
    exercise.write_text(mine, encoding="utf-8")
    shutil.rmtree(content / "andrea")
    _commit_file(origin, "NEWS.md", "a newer course\n")
    check = "import andrea_course, pathlib; print('from', pathlib.Path(andrea_course.__file__).parent.parent)"
    nb = _colab_notebook(notebook, origin, content, upto=2)
    nb.cells.append(__import__("nbformat").v4.new_code_cell(check))
    printed = _execute(nb, python, content, jupyter, monkeypatch)
    assert "up to date with the course" in printed[1] and printed[-1].strip() == f"from {home}"
    assert exercise.read_text(encoding="utf-8") == mine and (home / "NEWS.md").is_file()
    assert _snapshot(python, kept) == before


def _venv_run(python: Path, code: str, cwd: Path, **env) -> str:
    return _run([python, "-c", textwrap.dedent(code)], cwd=cwd, env=_env(**env)).stdout


def _notebook_imports() -> set[str]:
    """Top-level modules the notebooks' code cells import (besides the standard library), except
    those imported under a `try` that catches ImportError (an optional part, skipped without them)."""
    found = set()
    for path in NOTEBOOKS:
        for cell in _nb(path)["cells"]:
            if cell["cell_type"] != "code":
                continue
            src = "\n".join(r for r in "".join(cell["source"]).splitlines() if not r.lstrip().startswith(("!", "%")))
            tree = ast.parse(src)
            optional = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and _catches_import_error(t)
                        for stmt in t.body for n in ast.walk(stmt)}
            for node in ast.walk(tree):
                if id(node) in optional:
                    continue
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"google"}


def _catches_import_error(node: ast.Try) -> bool:
    names = {n.id for h in node.handlers if h.type is not None for n in ast.walk(h.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("notebooks")
def test_notebooks_extra_opens_and_checks_every_notebook(venvs, tmp_path):
    """[notebooks] alone: JupyterLab starts, every module a notebook imports is there, and
    check() runs graded tests, including a Triton kernel exercise in the interpreter."""
    python = python_of(venvs, "notebooks")
    modules = sorted(_notebook_imports() | {"pytest", "tokenizers", "ipykernel"})
    assert {"torch", "ipywidgets", "matplotlib", "triton", "andrea_course"} <= set(modules)
    _venv_run(python, f"import {', '.join(modules)}", tmp_path)
    assert _run([python.parent / "jupyter-lab", "--version"], env=_env()).stdout.strip()
    out = _venv_run(python, """
        from andrea_course.notebook import check
        check("embeddings.embed_lookup", impl="solutions")
        check("kernels.gelu_kernel", impl="solutions")
        """, tmp_path)
    assert out.count("[PASSED]") == 2, out


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("kernels")
def test_kernels_extra_runs_a_triton_kernel(venvs, tmp_path):
    python = python_of(venvs, "kernels")
    out = _venv_run(python, """
        import torch
        from andrea_course.engine import kernels as K
        x, w = torch.randn(4, 64), torch.rand(64)
        print(torch.allclose(K.softmax(x), K.softmax_reference(x), atol=1e-6),
              torch.allclose(K.rms_norm(x, w), K.rms_norm_reference(x, w), atol=1e-5))
        """, tmp_path, TRITON_INTERPRET="1")
    assert out.split() == ["True", "True"], out


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("train")
def test_train_extra_prepares_trains_logs_and_reads_a_dataset(venvs, tmp_path):
    """[train] and [datasets] alone: andrea-prepare on text files and on a `datasets` dataset (a local one: no
    network), andrea-train with TensorBoard logs and the loss plot."""
    python = python_of(venvs, "train")
    bin_ = python.parent
    stories = ["Once upon a time there was a small robot who liked to read. " * 3 + str(i) for i in range(40)]
    (tmp_path / "text.txt").write_text("\n\n".join(stories), encoding="utf-8")
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "train.jsonl").write_text("".join(json.dumps({"text": s}) + "\n" for s in stories), encoding="utf-8")
    offline = dict(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    _run([bin_ / "andrea-prepare", tmp_path / "text.txt", "--out", tmp_path / "shards", "--no-progress"],
         env=_env(), cwd=tmp_path)
    _run([bin_ / "andrea-prepare", "--hf-dataset", dataset, "--out", tmp_path / "hf-shards", "--no-progress"],
         env=_env(**offline), cwd=tmp_path)
    for shards in ("shards", "hf-shards"):
        meta = json.loads((tmp_path / shards / "meta.json").read_text())
        assert meta, f"{shards}: empty meta.json"
    _run([bin_ / "andrea-train", "--config", "andrea-tiny", "--out", tmp_path / "run", "--data", tmp_path / "shards",
          "--max-steps", "3", "--batch-size", "2", "--seq-len", "32", "--eval-every", "3", "--no-progress"],
         env=_env(), cwd=tmp_path)
    assert list((tmp_path / "run").rglob("events.out.tfevents.*")), "no TensorBoard log"
    assert list((tmp_path / "run").rglob("loss.png")), "no loss plot"


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("hf")
def test_hf_extra_exports_to_transformers(venvs, tmp_path):
    python = python_of(venvs, "hf")
    out = _venv_run(python, """
        import torch
        from andrea_course import ANDREA
        from andrea_course.engine.hf import to_hf
        model = ANDREA("andrea-tiny").eval()
        ids = torch.randint(0, 8449, (1, 8))
        with torch.no_grad():
            print(torch.allclose(model(ids), to_hf(model).eval()(ids).logits, atol=1e-4))
        """, tmp_path)
    assert out.strip() == "True", out


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("test")
def test_test_extra_runs_graded_tests(venvs, tmp_path):
    """[test] alone: pytest runs graded tests against the reference; xdist, hypothesis and nbval
    (for `make test`'s workers, properties and notebook runs) are there."""
    python = python_of(venvs, "test")
    src = python.parent.parent.parent / "test-src"
    out = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "andrea_course/activity_tests/test_embeddings.py"],
               cwd=src, env=_env(ANDREA_IMPL="solutions")).stdout
    assert re.search(r"\b\d+ passed", out) and " failed" not in out, out
    _venv_run(python, "import hypothesis, nbval, xdist", tmp_path)


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("browser")
def test_browser_extra_brings_playwright(venvs, tmp_path):
    python = python_of(venvs, "browser")
    _venv_run(python, "from playwright.sync_api import sync_playwright", tmp_path)


@pytest.mark.nightly              # two minutes; tests/course/test_layers.py checks in CI that andrea-train loads no test tools
@pytest.mark.venv("plain")
def test_plain_install_outside_the_repository_builds_trains_and_samples(venvs, tmp_path):
    """`pip install FOLDER` (not editable; the folder is deleted afterwards), run elsewhere: the
    package alone builds ANDREA-120M, trains andrea-tiny and samples from the shipped model."""
    python = python_of(venvs, "plain")
    out = _venv_run(python, """
        from andrea_course import ANDREA, count_parameters
        print(count_parameters(ANDREA("andrea-120m"))["total"])
        """, tmp_path)
    assert out.strip() == "98820096", out
    bin_ = python.parent
    _run([bin_ / "andrea-train", "--config", "andrea-tiny", "--out", tmp_path / "run", "--max-steps", "5",
          "--batch-size", "2", "--seq-len", "32", "--no-progress", "--no-tensorboard"], env=_env(), cwd=tmp_path)
    for source in (["--ckpt", tmp_path / "run"], ["--pretrained"]):
        text = _run([bin_ / "andrea-sample", *source, "--prompt", "Once upon a time", "--max-new-tokens", "8"],
                    env=_env(), cwd=tmp_path).stdout
        assert text.strip().startswith("Once upon a time"), text


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.venv("workspace")
def test_pip_install_then_andrea_start_runs_notebook_01_on_the_untouched_exercises(venvs, tmp_path, monkeypatch):
    """A learner without a clone: `pip install FOLDER[notebooks]` (not editable; the folder is
    deleted afterwards), `andrea-start ws --no-lab`, then notebook 01 runs from ws/notebooks in a
    kernel of that venv, and every check judges the workspace's untouched exercises."""
    python = python_of(venvs, "workspace")
    installed = time.monotonic()
    ws = tmp_path / "ws"
    said = _run([python.parent / "andrea-start", ws, "--no-lab"], cwd=tmp_path, env=_env()).stdout
    course = _course_files()
    assert f"ANDREA workspace: {ws} (made now:" in said, said
    assert {k: v for k, (v, _) in _files_of(ws).items()} == course       # the installed package's copies
    shipped = _venv_run(python, "from andrea_course.paths import course_files; print(course_files('notebooks'))", tmp_path)
    assert "site-packages" in shipped, shipped

    nb = __import__("nbformat").read(ws / "notebooks" / NOTEBOOKS[0].name, as_version=4)
    printed = "\n".join(_execute(nb, python, ws / "notebooks", tmp_path / "jupyter" / "share" / "jupyter", monkeypatch))
    checks = re.findall(r'^check\("([a-z_]+\.[A-Za-z_]+)"', "\n".join(c.source for c in nb.cells if c.cell_type == "code"), re.M)
    assert len(checks) >= 5 and f"checking the code in: {ws / 'exercises'}" in printed, printed[:2000]
    for exercise in checks:
        assert f"[NOT WRITTEN YET] {exercise}: the notebook uses the reference for now" in printed, exercise
    assert printed.count(f"checked: {ws / 'exercises'}; write it in exercises/") == len(checks)
    assert "using the engine's (yours is not written yet)" in printed and "[COULD NOT CHECK]" not in printed
    print(f"andrea-start and notebook 01: {time.monotonic() - installed:.0f} s")    # pytest -s shows it


# ---------------------------------------------------------------- nightly: the torch and Triton range
def _floor(name: str) -> str:
    """The lowest version of `name` that pyproject.toml allows (its one `name>=X`)."""
    found = set(re.findall(rf'"{name}>=([0-9][0-9.]*)', (ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    assert len(found) == 1, f"pyproject.toml should state one floor for {name}, found {sorted(found)}"
    return found.pop()


def _interpreter(version: str) -> Path | None:
    """A Python `version` ("3.10") on this machine: pythonX.Y on PATH, else pyenv's."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}"), *sorted(root.glob(f"versions/{version}.*/bin/python{version}"))]
    for candidate in filter(None, candidates):
        done = subprocess.run([str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == version:
            return Path(candidate)
    return None


def _newest_python() -> str:
    """The newest Python 3 on this machine, from 3.14 down to this one."""
    this = sys.version_info[1]
    return next((f"3.{m}" for m in range(14, this, -1) if _interpreter(f"3.{m}")), f"3.{this}")


# Each end of the range: which Python, and what pip installs in a fresh venv, step by step
# ("{src}": the course, editable; PIP_CONSTRAINT=/dev/null lifts a machine's pip constraints,
# e.g. a cap on torch, for these installs only). The lowest end: the floors pyproject.toml
# states, torch first, then Triton without its dependencies, as beside a CPU build of torch
# (which requires no Triton; PyPI's CUDA build of torch 2.4 pins Triton 3.0.0). The newest end:
# what pip resolves with no pins, on the newest Python here.
TORCH_RANGE = {
    "lowest": lambda: (re.search(r'requires-python = ">=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1),
                       [[f"torch=={_floor('torch')}", "-e", "{src}[colab]"],
                        ["--no-deps", f"triton=={_floor('triton')}"]]),
    "newest": lambda: (_newest_python(), [["-e", "{src}[notebooks]"]]),
}
RANGE_NOTEBOOK = "08_kernels.ipynb"          # Triton's interpreter, torch's ops, plots, checks


@pytest.mark.slow
@pytest.mark.nightly
@pytest.mark.parametrize("end", sorted(TORCH_RANGE))
def test_torch_range_runs_the_graded_tests_and_a_notebook(end, origin, tmp_path, monkeypatch):
    """Both ends of the torch and Triton range pyproject.toml allows, each in a fresh venv:
    every graded test passes against the reference and notebook 08 runs top to bottom with its
    checks passing. Downloads several GB (CUDA builds of torch: PyPI has no CPU build of most)."""
    version, steps = TORCH_RANGE[end]()
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine for the {end} end of the range")
    src, folder = tmp_path / "src", tmp_path / "venv"
    _run(["git", "clone", "-q", origin.as_uri(), src])
    _run([python, "-m", "venv", folder])
    venv_python = folder / "bin" / "python"
    for step in steps:
        _run([venv_python, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
              *[a.replace("{src}", str(src)) for a in step]], env=_env(PIP_CONSTRAINT=os.devnull))
    versions = _venv_run(venv_python, "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, "
                                      "triton.__version__)", tmp_path).split()
    print(f"{end}: Python {versions[0]}, torch {versions[1]}, Triton {versions[2]}")     # pytest -s shows it

    graded = _run([venv_python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "andrea_course/activity_tests"], cwd=src,
                  env=_env(ANDREA_IMPL="solutions", TRITON_INTERPRET="1"), check=False)
    tail = graded.stdout[-3000:]
    assert graded.returncode == 0 and re.search(r"\b\d+ passed", tail) and " failed" not in tail, (versions, tail)

    nb = __import__("nbformat").read(src / "notebooks" / RANGE_NOTEBOOK, as_version=4)
    printed = "\n".join(_execute(nb, venv_python, src / "notebooks", tmp_path / "jupyter" / "share" / "jupyter",
                                 monkeypatch, ANDREA_IMPL="solutions", TRITON_INTERPRET="1"))
    assert "[PASSED]" in printed and "[COULD NOT CHECK]" not in printed and "[NOT YET RIGHT]" not in printed, (
        versions, printed[-3000:])
