"""The capstone: your model trained, and the proof that it is the model the engine trains.

    from andrea_course.capstone import learner_parts, engine_parts, compare_runs
    mine = learner_parts("exercises", tc).trainer(tc, "runs/mine")     # your pieces that pass
    mine.fit(); engine_parts().trainer(tc, "runs/engine").fit()        # the same run, the engine's
    print(compare_runs("runs/mine", "runs/engine"))                    # agree, or which piece to suspect

Above the grading layer (it asks grading.passing which pieces pass) and the overlay (which
builds the model with them); the trainer below (train/) takes every piece it is handed and
knows nothing of learners. The command line: andrea-train (cli.py), also `python -m
andrea_course.capstone` for torchrun.
"""
from .compare import Comparison, compare_runs
from .parts import Parts, engine_parts, learner_parts, with_tokenizer

__all__ = ["Comparison", "Parts", "compare_runs", "engine_parts", "learner_parts", "with_tokenizer"]
# Nothing here imports the grading layer (and so pytest) until a learner's pieces are asked for:
# andrea-train without --impl runs where only the package's requirements are installed.
