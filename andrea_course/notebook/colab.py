"""The course on Google Colab: what every notebook's first code cell calls there.

The cell (tools/nb.py writes the same one into every notebook) runs only when Colab's
`google.colab` module is loaded. It clones the course onto the VM if it is not there yet, loads
this file on its own (importing the package would need the dependencies this installs; so this
file uses the standard library only), then calls

    setup(REPO, "/content/andrea", drive=True)

which
1. with drive=True mounts Google Drive and keeps the course in MyDrive/andrea: copied from the
   VM's clone the first time, fast-forwarded from REPO on later visits, never overwriting a file
   you changed (your exercises survive the VM); with drive=False uses the VM's clone, which
   is lost when Colab recycles the VM;
2. installs that folder editable (`pip install -e FOLDER[colab]`) with Colab's own torch, numpy
   and ipywidgets held at their installed versions (a pip constraints file), so nothing of
   Colab's is replaced and no restart is needed;
3. points this kernel at it: the folder first on sys.path, the modules imported from the VM's
   clone forgotten, the working directory its notebooks/ (as in JupyterLab).
"""
from __future__ import annotations

import importlib
import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEPT = ("torch", "numpy", "ipywidgets")      # Colab's own: held at their installed versions
EXTRA = "colab"                              # pyproject.toml: what the notebooks need besides


def setup(repo: str, vm_copy: str | os.PathLike, drive: bool = True) -> None:
    """Make the course at `vm_copy` (or its copy in Google Drive) this kernel's course."""
    started, vm_copy = time.monotonic(), Path(vm_copy)
    home = drive_folder(vm_copy) if drive else vm_copy
    news = place(vm_copy, home) if drive else "cloned onto this VM"
    kept = held_versions()
    install(home, kept)
    point_kernel_at(home, vm_copy)
    where = ("in your Google Drive: your exercises stay there" if drive else
             "on this VM only: lost when Colab recycles it; download exercises/ before you leave")
    print(f"ANDREA course: {home} ({where}); {news}; set up in {time.monotonic() - started:.0f} s.")
    print("Kept Colab's own " + ", ".join(f"{k} {v}" for k, v in kept.items()) + ".")
    print(f"Edit your exercises in {home / 'exercises'}: Files pane (left), double-click a .py file.")


def drive_folder(vm_copy: Path) -> Path:
    """Mount Google Drive beside the VM's clone (/content/drive) and name the course's folder."""
    from google.colab import drive
    mountpoint = vm_copy.parent / "drive"
    drive.mount(str(mountpoint))
    return mountpoint / "MyDrive" / vm_copy.name


def place(vm_copy: Path, home: Path) -> str:
    """The course in `home`: a copy of the VM's clone the first time, else fast-forwarded."""
    if not (home / ".git").is_dir():
        if home.exists() and any(home.iterdir()):
            raise RuntimeError(f"{home} exists and is not a copy of the course: rename it, or use drive=False")
        shutil.copytree(vm_copy, home, dirs_exist_ok=True)
        return "copied there now"
    # --ff-only with local changes: git refuses rather than touch a file you changed.
    pull = _git(home, "pull", "--ff-only", "-q")
    if pull.returncode != 0:
        said = [r.strip() for r in pull.stderr.splitlines() if r.strip() and not r.startswith("hint:")]
        reason = " ".join(said[:2]) or "git pull failed"
        return f"kept as it is, not updated ({reason})"
    return "up to date with the course"


def held_versions() -> dict[str, str]:
    """{name: version} of the KEPT packages that are installed."""
    found = {}
    for name in KEPT:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def install(home: Path, held: dict[str, str]) -> None:
    """pip install -e home[colab], the held packages constrained to their versions."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(f"{name}=={version}\n" for name, version in held.items()))
    try:
        run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "-e", f"{home}[{EXTRA}]", "-c", f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if run.returncode != 0:
        tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"pip could not install the course next to "
                           f"{', '.join(f'{k} {v}' for k, v in held.items())}:\n{tail}")


def point_kernel_at(home: Path, vm_copy: Path) -> None:
    """Import the course from `home` from now on, in this kernel (the editable install serves
    new processes), and work in its notebooks/ folder."""
    stale = {str(vm_copy), str(vm_copy.resolve())} - {str(home), str(home.resolve())}
    sys.path[:] = [str(home)] + [p for p in sys.path if p not in stale and p != str(home)]
    for name in [m for m in sys.modules if m == "andrea_course" or m.startswith("andrea_course.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    os.chdir(home / "notebooks")


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
