"""The notebooks' toolkit: inline checks, quizzes, model answers and plots.

    from andrea_course.notebook import check, use, quiz, reveal, heatmap

    check("attention.softmax")            # run its graded tests on your exercises/, one box
    softmax = use("attention", "softmax") # yours if its graded tests pass, else the reference
    quiz([{"question": ..., "options": [...], "sealed": ...}])   # see quizzes.py
    reveal("Model answer", "markdown ...")
    hint("attention.softmax")             # more help, one level each call: idea, API, line
    reveal_piece("attention.softmax")     # the reference code of one piece: the answer
    kernels = learner_module("kernels")   # your module, read again whenever its file changes

Whose code is checked: $ANDREA_IMPL if set, else "exercises" (your files). Everything here
returns None (a returned widget or bool would be printed) except use() and the *_widget
builders, and works outside Jupyter too, printing the same content as text.
"""
from .checks import (CheckResult, Outcome, check, notebook_impl, run_graded, run_graded_many, show_result,
                     use)
from .fresh import learner_module
from .hints import hint, reveal_piece
from .plots import bars, curves, heatmap, heatmaps
from .util import human, seed, timed
from .quizzes import grade, quiz, quiz_widget
from .widgets import reveal, reveal_widget

__all__ = ["CheckResult", "Outcome", "bars", "check", "curves", "grade", "heatmap", "heatmaps",
           "hint", "human", "learner_module", "notebook_impl", "quiz", "quiz_widget", "reveal", "reveal_piece", "reveal_widget", "run_graded", "run_graded_many",
           "seed", "show_result", "timed", "use"]
