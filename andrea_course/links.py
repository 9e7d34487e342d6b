"""The course's links, from one setting: pyproject.toml's [project.urls] Repository.

Every link a learner follows to the course's repository is written from that address: each
notebook's "Open in Colab" badge and its Colab set-up cell (which clones the repository), and,
in README.md and docs/, the Colab and Binder badges, the `git clone` and `pip install ... @
git+` lines and the citation. A fork sets its own address and rewrites all of them at once:

    python -m andrea_course.links https://github.com/you/andrea-course   # set it, rewrite every link
    python -m andrea_course.links                                         # rewrite them from pyproject.toml
    python -m andrea_course.links --check                                 # exit 1 if a link disagrees

and a release is written for the address it will be published at (andrea-release OUT --repo URL).
A rewrite replaces the old address's forms only (https://github.com/O/N, Colab's github/O/N/,
Binder's gh/O/N/), so a file's other lines stay as they are. Standard library only.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .paths import ROOT

LINKED = ("README.md", "docs/*.md", "notebooks/*.ipynb")     # the files whose links follow the setting
PYPROJECT = "pyproject.toml"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
GITHUB = re.compile(rf"https://github\.com/({_NAME}/{_NAME}?)(?:\.git)?/?")
SETTING = re.compile(r'^(Repository\s*=\s*")([^"]*)(")', re.M)
FORMS = ("https://github.com/{}", "https://colab.research.google.com/github/{}/", "https://mybinder.org/v2/gh/{}/")

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
COLAB_CELL_ID = "colab-setup"
COLAB_CELL = """\
# Google Colab only (elsewhere this cell does nothing): keeps the course in your Google Drive,
# where your exercises survive the VM, and installs it next to Colab's own torch and widgets.
# drive=False keeps it on the VM instead (lost when Colab recycles the VM).
import sys
if "google.colab" in sys.modules:
    import importlib.util, os, subprocess
    REPO, VM_COPY = "{repo}", "/content/andrea"
    if not os.path.isdir(VM_COPY):
        subprocess.run(["git", "clone", "-q", "--depth=1", REPO, VM_COPY], check=True)
    # the set-up file alone: the course's own dependencies are not installed yet
    spec = importlib.util.spec_from_file_location("andrea_colab", f"{{VM_COPY}}/andrea_course/notebook/colab.py")
    colab = importlib.util.module_from_spec(spec); spec.loader.exec_module(colab)
    colab.setup(REPO, VM_COPY, drive=True)"""

# (what, the pattern whose group 1 is the owner/name or the address it points at)
KINDS = (
    ("Colab link", re.compile(rf"https://colab\.research\.google\.com/github/({_NAME}/{_NAME})/blob/")),
    ("Binder link", re.compile(rf"https://mybinder\.org/v2/gh/({_NAME}/{_NAME})/")),
    ("git clone", re.compile(rf"git clone (?:-\S+ )*https://github\.com/({_NAME}/{_NAME}?)(?:\.git)?(?![\w./-])")),
    ("pip line", re.compile(rf"git\+https://github\.com/({_NAME}/{_NAME}?)(?:\.git)?(?![\w./-])")),
    ("Colab cell", re.compile(r'REPO, VM_COPY = \\?"https://github\.com/([^"\\]+)\\?"')),
    ("citation", re.compile(rf"\\url\{{https://github\.com/({_NAME}/{_NAME})\}}")),
)


class LinkError(ValueError):
    """An address the links cannot use, or a file that lacks the setting; one line says which."""


def normalize(url: str) -> str:
    """https://github.com/owner/name, from that address with or without ".git" or a last "/"."""
    found = GITHUB.fullmatch(url.strip())
    if not found:
        raise LinkError(f"{url!r} is not a GitHub repository's address like https://github.com/you/andrea-course "
                        f"(Colab opens notebooks from GitHub only)")
    return f"https://github.com/{found.group(1)}"


def repository(root: Path = ROOT) -> str:
    """The repository's address, from `root`'s pyproject.toml ([project.urls] Repository)."""
    path = Path(root) / PYPROJECT
    found = SETTING.search(path.read_text(encoding="utf-8")) if path.is_file() else None
    if not found:
        raise LinkError(f"{path} has no [project.urls] Repository = \"https://github.com/you/andrea-course\"")
    return normalize(found.group(2))


def _path(repo: str) -> str:
    return normalize(repo).removeprefix("https://github.com/")


def colab_url(notebook_name: str, repo: str | None = None) -> str:
    """Colab's address for notebooks/<notebook_name> on the repository's main branch."""
    return f"https://colab.research.google.com/github/{_path(repo or repository())}/blob/main/notebooks/{notebook_name}"


def binder_url(notebook_name: str = "01_embeddings.ipynb", repo: str | None = None) -> str:
    """Binder's address: the repository's main branch in JupyterLab, at notebooks/<notebook_name>."""
    return f"https://mybinder.org/v2/gh/{_path(repo or repository())}/main?urlpath=lab/tree/notebooks/{notebook_name}"


def colab_badge(notebook_name: str, repo: str | None = None) -> str:
    return f"[![Open In Colab]({COLAB_BADGE})]({colab_url(notebook_name, repo)})"


def colab_cell(repo: str | None = None) -> str:
    return COLAB_CELL.format(repo=normalize(repo or repository()))


# ----------------------------------------------------------------------------- rewriting
def linked_files(root: Path) -> list[Path]:
    return sorted({p for pattern in LINKED for p in Path(root).glob(pattern) if p.is_file()})


def retarget(text: str, old: str, new: str) -> str:
    """`text` with every form of the address `old` made the same form of `new`."""
    for form in FORMS:
        before, after = form.format(_path(old)).rstrip("/"), form.format(_path(new)).rstrip("/")
        text = re.sub(re.escape(before) + r"(?![\w.-])", after.replace("\\", "\\\\"), text)
    return text


def rewrite(root: Path, repo: str | None = None) -> list[str]:
    """Point every link of `root`'s files at `repo` (default: its pyproject.toml's address),
    pyproject.toml's setting included. Returns the files changed (relative to `root`).
    Links that disagree with the setting before the rewrite are refused: say which to fix."""
    root = Path(root)
    old = repository(root)
    new = normalize(repo) if repo else old
    stray = problems(root)
    if stray:
        raise LinkError(f"{len(stray)} link(s) point elsewhere than pyproject.toml's {old}, first {stray[0]}: "
                        f"fix them to {old}, then rewrite")
    changed = []
    setting = root / PYPROJECT
    text = setting.read_text(encoding="utf-8")
    fresh = SETTING.sub(lambda m: m.group(1) + new + m.group(3), text, count=1)
    if fresh != text:
        setting.write_text(fresh, encoding="utf-8")
        changed.append(PYPROJECT)
    for path in linked_files(root):
        text = path.read_text(encoding="utf-8")
        fresh = retarget(text, old, new)
        if fresh != text:
            path.write_text(fresh, encoding="utf-8")
            changed.append(str(path.relative_to(root)))
    return changed


# ----------------------------------------------------------------------------- checking
@dataclass(frozen=True)
class Link:
    file: str
    line: int
    kind: str
    target: str                      # https://github.com/owner/name

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.kind} -> {self.target}"


def links(root: Path = ROOT) -> list[Link]:
    """Every link to a repository in `root`'s linked files, of every kind in KINDS."""
    root, out = Path(root), []
    for path in linked_files(root):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for kind, pattern in KINDS:
                for found in pattern.finditer(line):
                    target = found.group(1)
                    target = target if target.startswith("https://") else f"https://github.com/{target}"
                    out.append(Link(str(path.relative_to(root)), number, kind, target.rstrip("/")))
    return out


def problems(root: Path = ROOT) -> list[str]:
    """The links of `root` that do not point at its pyproject.toml's address."""
    repo = repository(root)
    return [f"{link} (not {repo})" for link in links(root) if link.target.removesuffix(".git") != repo]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m andrea_course.links", description=__doc__.split("\n")[0])
    p.add_argument("repo", nargs="?", help="the repository's new address, https://github.com/you/andrea-course "
                                           "(default: keep pyproject.toml's and rewrite the links from it)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a link disagrees with the setting")
    p.add_argument("--root", default=str(ROOT), help="the checkout (default: this one)")
    args = p.parse_args(argv)
    try:
        if args.check:
            found = problems(Path(args.root))
            for line in found:
                print(line, file=sys.stderr)
            print(f"{len(links(Path(args.root)))} link(s) checked against {repository(Path(args.root))}: "
                  f"{len(found)} disagree")
            return 1 if found else 0
        changed = rewrite(Path(args.root), args.repo)
    except (LinkError, OSError) as exc:
        print(f"andrea_course.links: {exc}", file=sys.stderr)
        return 2
    print(f"links point at {repository(Path(args.root))}: {len(changed)} file(s) changed"
          + (": " + ", ".join(changed) if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
