"""AGENTS.md, the guide that coding assistants read (CLAUDE.md imports it): it names only what the
course has, and it travels with the learner: in the release (andrea-release) and in a workspace
(andrea-start, from the package's data/, which links to the repository's two files)."""
from __future__ import annotations

import re
import tomllib

import pytest

from andrea_course.paths import PACKAGE, ROOT

GUIDES = ("AGENTS.md", "CLAUDE.md")
TEXT = (ROOT / "AGENTS.md").read_text(encoding="utf-8")
CODE = re.findall(r"`([^`\n]+)`", TEXT)                       # every `...` span of the guide


def test_claude_md_imports_agents_md_and_the_package_carries_both():
    """One text: CLAUDE.md holds only an import of AGENTS.md (Claude Code's `@file`), and the
    package's data/ copies are the repository's files (a link here, a copy in a built package)."""
    claude = (ROOT / "CLAUDE.md").read_text(encoding="utf-8")
    assert re.search(r"^@AGENTS\.md$", claude, re.M) and len(claude) < 200, claude
    for name in GUIDES:
        assert (PACKAGE / "data" / name).read_bytes() == (ROOT / name).read_bytes(), name


def test_the_guide_names_only_paths_functions_and_commands_the_course_has():
    paths = [p.rstrip("/") for c in CODE for p in re.findall(r"(?<![\w/])(?:andrea_course|notebooks|exercises)/[\w./<>]*", c)]
    assert "andrea_course/activity_tests/test_attention.py" in paths and "andrea_course/data/hints.json" in paths
    for path in paths:
        if "<activity>" in path:
            assert (ROOT / path.replace("<activity>", "attention")).is_file(), path
        else:
            assert (ROOT / path).exists(), f"AGENTS.md names {path}, which the course does not have"

    import andrea_course
    import andrea_course.notebook as notebook
    called = {m.group(1) for c in CODE for m in [re.match(r"(\w+)\(", c)] if m}
    assert {"check", "hint", "reveal_piece", "learner_model"} <= called, called
    for name in called:
        assert hasattr(notebook, name) or hasattr(andrea_course, name), f"AGENTS.md calls {name}(), which is not there"
    for c in CODE:                                           # exercise pieces named as "activity.piece"
        for piece in re.findall(r'"(\w+\.\w+)"', c):
            if piece != "activity.piece":
                assert piece in __import__("json").loads((PACKAGE / "data" / "hints.json").read_text()), piece

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    for command in {c.split()[0] for c in CODE if c.startswith("andrea-")}:
        assert command in scripts, f"AGENTS.md runs {command}, which the package does not install"
    assert "andrea-grade exercises --own-work" in CODE and "--own-work" in _source("grading/cli.py")
    assert "make grade" in CODE and re.search(r"^grade:", (ROOT / "Makefile").read_text(), re.M)


def test_the_guide_tells_an_assistant_to_teach_and_not_to_write_the_pieces():
    sections = dict(re.findall(r"^## ([^\n]+)\n(.*?)(?=^## |\Z)", TEXT, re.M | re.S))
    assert {"What to do", "What not to do"} <= set(sections), list(sections)
    do, dont = sections["What to do"], sections["What not to do"]
    for idea in ("**Explain", "**Ask", "failing check", "hint("):
        assert idea in do, idea
    assert "**Do not write a piece's solution**" in dont and "NotImplementedError" in dont


def _source(rel: str) -> str:
    return (PACKAGE / rel).read_text(encoding="utf-8")


@pytest.mark.slow(seconds=8)
@pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a learner's release)")
def test_the_release_and_a_workspace_hold_the_guide(tmp_path, monkeypatch):
    from andrea_course.release import build
    from andrea_course.start import write_workspace
    for name in ("ANDREA_WORKSPACE", "ANDREA_IMPL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    release = build(tmp_path / "release", quiet=True)
    done = write_workspace(tmp_path / "ws")
    for name in GUIDES:
        assert (release / name).read_bytes() == (ROOT / name).read_bytes(), name
        assert (done["folder"] / name).read_bytes() == (ROOT / name).read_bytes(), name
        assert not (done["folder"] / name).is_symlink() and name in done["added"]
