"""The LMS gradebooks (grading/gradebook.py, andrea-grade --batch ... --gradebook canvas|moodle):
each file has its LMS's documented import columns, a roster maps submission folders to LMS
identities, and a folder the roster does not know is left out with one line naming it.

Canvas's gradebook import (Grades > Import; its importer's specs): "Student", "ID", "SIS User
ID", "SIS Login ID", "Section", then assignment columns ("Name (ID)" for an existing one), and a
"Points Possible" row. Moodle's CSV grade import: one user-field column mapped at import
(useremail, username, useridnumber), one column per grade item, no points row, grades above 100
refused unless the site allows unlimited grades."""
import csv
import json
import shutil

import pytest

from andrea_course.exercises import EXERCISES, SOLUTIONS
from andrea_course.grading import cli, gradebook
from grading_helpers import FIXTURES


def _test(exercise, points, score, visibility="visible"):
    return {"name": f"{exercise}: test_x", "score": score, "max_score": points, "status": "passed" if score == points
            else "failed", "visibility": visibility, "tags": [exercise.split(".")[0], exercise]}


# ana full marks, bo half the attention and no MLP, cy unknown to the roster
RESULTS = {
    "ana": {"score": 9, "tests": [_test("attention.softmax", 2, 2), _test("attention.attention", 4, 4),
                                  _test("mlp.gelu_tanh", 3, 3, "after_due_date")]},
    "bo": {"score": 2.5, "tests": [_test("attention.softmax", 2, 2), _test("attention.attention", 4, 0.5),
                                   _test("mlp.gelu_tanh", 3, 0, "after_due_date")]},
    "cy": {"score": 0, "tests": [_test("attention.softmax", 2, 0), _test("attention.attention", 4, 0),
                                 _test("mlp.gelu_tanh", 3, 0)]},
}


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _canvas_roster(tmp_path):
    """A Canvas gradebook export (its Points Possible row, a Root Account column) with a folder column."""
    path = tmp_path / "roster.csv"
    path.write_text("\ufeffStudent,ID,SIS User ID,SIS Login ID,Root Account,Section,folder,Quiz 1 (77)\n"
                    "    Points Possible,,,,,,,10\n"
                    '"Lovelace, Ada",101,S-1,ada@uni.edu,uni,Sec A,ana,7\n'
                    '"Boole, George",102,S-2,bo@uni.edu,uni,Sec B,bo,9\n'
                    '"Hopper, Grace",103,S-3,grace@uni.edu,uni,Sec A,gh,8\n', encoding="utf-8")
    return gradebook.read_roster(path)


def test_canvas_gradebook_has_the_import_columns_and_a_points_row(tmp_path):
    done = gradebook.write("canvas", tmp_path / "canvas.csv", RESULTS, _canvas_roster(tmp_path),
                           assignment="ANDREA (1234)")
    header, points, *students = _rows(done.path)
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "ANDREA (1234)"]
    assert points == ["Points Possible", "", "", "", "", "9"]
    assert students == [["Lovelace, Ada", "101", "S-1", "ada@uni.edu", "Sec A", "9"],
                        ["Boole, George", "102", "S-2", "bo@uni.edu", "Sec B", "2.5"]]
    assert done.missing == ["cy"] and done.absent == ["gh"]
    lines = gradebook.describe(done)
    assert any("'cy'" in line and "left out of canvas.csv" in line for line in lines), lines
    assert any("1 roster row(s) have no submission folder" in line and "gh" in line for line in lines), lines


def test_canvas_per_activity_columns_and_no_roster(tmp_path):
    done = gradebook.write("canvas", tmp_path / "c.csv", RESULTS, None, items="activities", assignment="ANDREA")
    header, points, *students = _rows(done.path)
    assert header[5:] == ["ANDREA: attention", "ANDREA: mlp"] and points[5:] == ["6", "3"]
    assert [s[3] for s in students] == ["ana", "bo", "cy"] and students[1][5:] == ["2.5", "0"]
    assert any("SIS Login ID" in n for n in done.notes)
    with pytest.raises(gradebook.GradebookError, match="names one Canvas assignment by its ID"):
        gradebook.write("canvas", tmp_path / "c.csv", RESULTS, None, items="activities", assignment="A (12)")


def test_moodle_gradebook_maps_a_user_field_and_says_which(tmp_path):
    roster = tmp_path / "moodle.csv"
    roster.write_text("First name,Last name,Email,folder\nAda,Lovelace,ada@uni.edu,ana\nGeorge,Boole,,bo\n")
    done = gradebook.write("moodle", tmp_path / "m.csv", RESULTS, gradebook.read_roster(roster), scale_to=100)
    header, *students = _rows(done.path)
    assert header == ["First name", "Last name", "Email address", "ANDREA autograder"]
    assert students == [["Ada", "Lovelace", "ada@uni.edu", "100"]]          # no points row in Moodle's
    assert done.missing == ["bo", "cy"]                                        # bo: no email, no user to find
    assert "at import, map 'Email address' to useremail" in done.notes


def test_moodle_says_when_a_grade_would_pass_its_limit(tmp_path):
    big = {s: {**d, "tests": [{**t, "max_score": t["max_score"] * 20, "score": t["score"] * 20}
                              for t in d["tests"]]} for s, d in RESULTS.items()}
    done = gradebook.write("moodle", tmp_path / "m.csv", big)
    assert _rows(done.path)[0] == ["Username", "ANDREA autograder"]
    assert any("goes up to 180 points" in n and "--scale-to 100" in n for n in done.notes), done.notes
    scaled = gradebook.write("moodle", tmp_path / "p.csv", big, scale_to=100)
    assert [r[1] for r in _rows(scaled.path)[1:]] == ["100", "27.78", "0"]     # 50 / 180 = 27.78 %
    assert not any("goes up to" in n for n in scaled.notes)


def test_a_roster_that_cannot_map_is_refused_in_one_line(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("name,login\nAda,ana\n")
    with pytest.raises(gradebook.GradebookError, match="has no column 'folder' .*--roster-key"):
        gradebook.read_roster(path)
    roster = gradebook.read_roster(path, key="login")
    for kind, finds in (("canvas", "SIS Login ID"), ("moodle", "Email address")):
        with pytest.raises(gradebook.GradebookError, match=f"none of the columns .*{finds}"):
            gradebook.identity_columns(kind, roster)
    path.write_text("folder,email\nana,a@x\nana,b@x\n")
    with pytest.raises(gradebook.GradebookError, match="'ana' is in column 'folder' on rows 2 and 3"):
        gradebook.read_roster(path)
    assert cli.main(["--batch", str(tmp_path), "--csv", str(tmp_path / "g.csv"), "--gradebook", "moodle",
                     "--roster", str(path), "--own-work"]) == 2                 # before anything is graded
    assert cli.main(["--batch", str(tmp_path), "--csv", str(tmp_path / "g.csv"), "--gradebook", "canvas",
                     "--grade-items", "activities", "--assignment", "A (12)", "--own-work"]) == 2
    with pytest.raises(SystemExit):
        cli.parse([str(tmp_path), "--gradebook", "canvas"])                      # not a batch


@pytest.mark.slow(seconds=15)
@pytest.mark.skipif(not SOLUTIONS.is_dir(), reason="a student release has no answer key")
def test_a_batch_writes_both_gradebooks_and_hidden_tests_come_later(tmp_path, capsys):
    """andrea-grade --batch over the small fixture suite (7 points) with a hidden folder: the
    reference's score in both gradebooks, a folder missing from the roster left out with its
    line, and a hidden folder's test that says nothing of its visibility is after_due_date."""
    tests, hidden, students = tmp_path / "tests", tmp_path / "hidden", tmp_path / "class"
    tests.mkdir()
    hidden.mkdir()
    shutil.copy(FIXTURES / "fake_test_small.py", tests / "test_small.py")
    text = (FIXTURES / "hidden" / "fake_test_hidden.py").read_text()
    (hidden / "test_hidden.py").write_text(text.replace(', visibility="hidden"', ""))
    shutil.copytree(SOLUTIONS, students / "ana")
    shutil.copytree(EXERCISES, students / "zed")
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,Email address,SIS Login ID\nana,ana@uni.edu,ana01\n")
    book = tmp_path / "book.csv"
    assert cli.main(["--batch", str(students), "--csv", str(book), "--tests", str(tests), "--hidden-tests",
                     str(hidden), "--own-work", "--quiet", "--gradebook", "canvas", "--gradebook", "moodle",
                     "--roster", str(roster)]) == 0
    said = capsys.readouterr()
    assert "submission folder 'zed' has no roster row" in said.err
    canvas = _rows(tmp_path / "book-canvas.csv")
    assert canvas[1] == ["Points Possible", "", "", "", "", "8"]
    assert canvas[2:] == [["", "", "", "ana01", "", "8"]]
    assert _rows(tmp_path / "book-moodle.csv") == [["Email address", "ANDREA autograder"], ["ana@uni.edu", "8"]]
    data = json.loads((tmp_path / "book-results" / "ana.json").read_text())
    shown = {t["name"].split(": ")[1]: t["visibility"] for t in data["tests"]}
    assert shown["test_rms_norm_hidden"] == "after_due_date" and shown["test_softmax"] == "visible"
    assert "Score on the 4 test(s) shown now: 6 / 6." in data["output"]
    assert "Still to come: 2 more point(s) from 2 test(s)" in data["output"], data["output"]
