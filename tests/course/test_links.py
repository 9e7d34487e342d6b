"""One setting for every link (andrea_course/links.py): each Colab badge and set-up cell, Binder
link, git clone and pip line and the citation in the checkout points at pyproject.toml's
[project.urls] Repository; `python -m andrea_course.links URL` repoints all of them for a fork,
and nothing else in those files changes."""
import shutil

from andrea_course import links
from andrea_course.paths import ROOT

FORK = "https://github.com/a-teacher/andrea-course-2027"


def _copy(tmp_path):
    """The files whose links follow the setting, and pyproject.toml, copied as they are."""
    for path in [ROOT / links.PYPROJECT, *links.linked_files(ROOT)]:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    return tmp_path


def test_every_link_of_the_checkout_is_the_setting():
    found = links.links(ROOT)
    assert {link.kind for link in found} == {kind for kind, _ in links.KINDS}, found    # every kind is seen
    assert links.problems(ROOT) == []
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    cells = [link for link in found if link.kind == "Colab cell"]
    assert sorted(link.file for link in cells) == [f"notebooks/{p.name}" for p in notebooks]


def test_a_fork_repoints_every_link_and_nothing_else(tmp_path, capsys):
    root = _copy(tmp_path)
    before = {p: p.read_text(encoding="utf-8") for p in root.rglob("*") if p.is_file()}
    old = links.repository(root)
    assert links.main([FORK + ".git", "--root", str(root)]) == 0
    assert "links point at " + FORK in capsys.readouterr().out
    assert links.repository(root) == FORK and links.problems(root) == []
    assert {link.target for link in links.links(root)} == {FORK}
    for path, text in before.items():
        now = path.read_text(encoding="utf-8")
        assert old not in now and "OWNER" not in now.replace("FOWNER", ""), path
        changed = [(a, b) for a, b in zip(text.splitlines(), now.splitlines()) if a != b]
        assert len(text.splitlines()) == len(now.splitlines())
        assert all(links._path(FORK) in b for _, b in changed), changed[:3]              # link lines only
    assert links.main([old, "--root", str(root)]) == 0                                  # and back again
    assert all(path.read_text(encoding="utf-8") == text for path, text in before.items())


def test_a_wrong_address_or_a_stray_link_is_named_in_one_line(tmp_path, capsys):
    root = _copy(tmp_path)
    assert links.main(["https://gitlab.com/x/andrea", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a GitHub repository's address" in err
    readme = root / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\ngit clone https://github.com/someone/else x\n",
                      encoding="utf-8")
    assert links.main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "README.md:" in err and "git clone -> https://github.com/someone/else" in err
    assert links.main([FORK, "--root", str(root)]) == 2                                 # refused, not half-done
    assert "point elsewhere" in capsys.readouterr().err and links.repository(root) != FORK
