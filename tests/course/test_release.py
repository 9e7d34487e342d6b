"""andrea-release: the learner's copy holds the package, the notebooks and stub exercises, and
nothing of the answer key; it refuses to overwrite or to leak."""
import pytest

from andrea_course.paths import ROOT
from andrea_course.release import ReleaseError, build, main, verify

pytestmark = pytest.mark.skipif(not (ROOT / "solutions").is_dir(), reason="no solutions/ (a learner's release)")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    try:
        return build(tmp_path_factory.mktemp("rel") / "course", quiet=True)
    except ReleaseError as exc:
        pytest.skip(str(exc))


def test_the_release_has_the_learners_files_and_no_answer_key(release):
    for kept in ("andrea_course/engine/model.py", "andrea_course/activity_tests/test_attention.py", "notebooks/01_embeddings.ipynb",
                 "exercises/attention.py", "README.md", "pyproject.toml", "Makefile"):
        assert (release / kept).is_file(), kept
    for gone in ("solutions", "instructor", "tests", ".ci", "docs/instructors.md", "docs/notebooks.md", "docs/gradescope"):
        assert not (release / gone).exists(), gone              # the instructors' documents stay behind
    for kept in ("docs/install.md", "docs/kernels.md", "docs/cloud.md"):
        assert (release / kept).is_file(), kept
    text = (release / "exercises" / "attention.py").read_text()
    assert "not implemented yet" in text and "### BEGIN SOLUTION" not in text


def test_verify_refuses_a_leak(release, tmp_path):
    leak = release / "andrea_course" / "leak.py"
    leak.write_text("def f():\n    ### BEGIN SOLUTION\n    ### HINT: x\n    return 1\n    ### END SOLUTION\n")
    hidden = release / "andrea_course" / "activity_tests" / "test_leak.py"
    hidden.write_text('@graded("attention.softmax", points=1, visibility="hidden")\ndef test_x(student):\n    pass\n')
    try:
        with pytest.raises(ReleaseError, match=r"leak\.py holds a solution region.*test_leak\.py holds tests "
                                                r"learners must not see: \['test_x'\]"):
            verify(ROOT, release)
    finally:
        leak.unlink()
        hidden.unlink()


def test_release_refuses_to_overwrite_or_to_write_inside_the_repository(release, capsys):
    assert main([str(release)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main([str(ROOT / "notebooks" / "release")]) == 2
    assert "inside the course's repository" in capsys.readouterr().err


def test_a_release_for_a_fork_points_every_link_there(tmp_path):
    """andrea-release OUT --repo URL: no placeholder left anywhere in the copy, every link (Colab
    badges and cells, Binder, git clone, pip, citation) and pyproject.toml's setting at URL."""
    import re
    from andrea_course import links
    fork = "https://github.com/a-teacher/andrea-course"
    try:
        out = build(tmp_path / "fork", quiet=True, repo=fork + "/")
    except ReleaseError as exc:
        pytest.skip(str(exc))
    placeholder = re.compile(r"\bOWNER\b")
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".ipynb", ".py", ".toml", ".txt", ".cfg", ".sh", ""):
            assert not placeholder.search(path.read_text(encoding="utf-8", errors="replace")), path
    found = links.links(out)
    assert links.repository(out) == fork and {link.target for link in found} == {fork}
    assert {link.kind for link in found} == {kind for kind, _ in links.KINDS}
    assert main([str(tmp_path / "other"), "--repo", "https://example.com/x"]) == 2


def test_make_test_in_a_release_grades_and_runs_the_notebooks(release, tmp_path):
    """In a learner's copy `make test` is what a learner needs: their grade and their notebooks,
    with the set `make lab` installs (not the course's whole suite and its `.[all]`)."""
    import os
    import shutil
    import subprocess
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    copy = tmp_path / "course"
    shutil.copytree(release, copy)
    (copy / ".venv").mkdir()
    stamp = copy / ".venv" / ".lab-installed"
    stamp.touch()
    later = (copy / "pyproject.toml").stat().st_mtime + 60
    os.utime(stamp, (later, later))                         # `make lab` has run
    plan = subprocess.run(["make", "-n", "test"], cwd=copy, capture_output=True, text=True, check=True).stdout
    assert "andrea-grade exercises --own-work" in plan and "nbconvert" in plan and "--execute" in plan, plan
    assert "[all]" not in plan and "pip install" not in plan and "solutions" not in plan, plan
