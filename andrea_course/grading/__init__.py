"""Grading: how graded tests are written (this file), run (pipeline.py with plugin.py; student.py in
this process, worker/client.py in a worker process) and reported (records.py, runner.py,
gradescope.py, cli.py).

A graded test names its exercise, its points and its visibility, asks the `student` fixture for
the learner's piece, and judges the output in the grader's own process with `expect_close`:

    @graded("attention.softmax", points=2)
    def test_softmax_rows_sum_to_one(student):
        softmax = student.piece("attention", "softmax")
        expect_close(softmax(scores), reference, "softmax(scores)",
                     mistakes={"softmax over the wrong axis (dim=-2)": reference_wrong_axis},
                     second=Second(lambda: softmax(scores2), reference2, {"softmax over ...": wrong_axis2}))

A typical mistake is named only when it reproduces the learner's output on both inputs (expect.py);
an error the learner's code raises is explained in words (explain.py).
"""
from .expect import (Case, Mismatch, Second, expect_cases, expect_close, expect_equal, expect_fresh_calls, expect_runs,
                     expect_true, expect_unchanged, load_weights, type_name)
from .markers import VISIBILITIES, graded

__all__ = ["Case", "Mismatch", "Second", "VISIBILITIES", "expect_cases", "expect_close", "expect_equal",
           "expect_fresh_calls", "expect_runs", "expect_true", "expect_unchanged", "graded", "load_weights", "type_name"]
