"""The course's lessons, in the order the notebooks teach them: one table, read by every layer.

Each row is one activity: its name (the file a learner writes, exercises/<activity>.py, with the
engine's versions in pieces/<activity>.py and the graded tests in activity_tests/test_<activity>.py), its
number ("Activity 7.1 · ..." as solutions/, pieces/, the graded tests and the README say it; the
notebook's title says "Activity 7", part 1 of 3), the notebook that teaches it and the pieces the
learner writes there, in the order of the exercise file.

A leaf module: it imports nothing of the package, so the engine's pieces, the overlay, the
grader and the notebooks all read the same table (tests/course/test_lessons.py checks it against the
files it names).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    activity: str                 # exercises/<activity>.py, pieces/<activity>.py, activity_tests/test_<activity>.py
    number: str                   # "7.1": activity 7, part 1 (notebook title "Activity 7 · ... (part 1 of 3 ...)")
    notebook: str                 # notebooks/<notebook>.ipynb
    pieces: tuple[str, ...]       # what the learner writes, "activity.piece" without the activity
    title: str                    # the notebook's title after "Activity N · "

    @property
    def exercises(self) -> tuple[str, ...]:
        """The pieces as exercise names, "activity.piece"."""
        return tuple(f"{self.activity}.{piece}" for piece in self.pieces)

    @property
    def heading(self) -> str:
        """The notebook's title line without its "# ": "Activity 4 · Embeddings"."""
        return f"Activity {self.number.partition('.')[0]} · {self.title}"


_CAPSTONE = "The capstone (tokenizer, data, training, sampling)"
_BLOCK = "The transformer block (part {} of 3: {})"
LESSONS: tuple[Lesson, ...] = (
    Lesson("embeddings", "4", "01_embeddings",
           ("embed_lookup", "embed_onehot", "add_positions", "cosine_similarity", "nearest_tokens", "Embeddings"),
           "Embeddings"),
    Lesson("attention", "5", "02_attention",
           ("average_past", "causal_average_weights", "causal_softmax_weights", "attention_scores",
            "scale_scores", "causal_mask", "apply_causal_mask", "softmax", "weighted_sum", "attention",
            "AttentionHead"), "Attention"),
    Lesson("multihead", "6", "03_multihead", ("split_heads", "merge_heads", "MultiHeadAttention", "head_entropy"),
           "Multi-head attention"),
    Lesson("mlp", "7.1", "04_mlp", ("gelu_tanh", "gelu_erf", "gelu_grad", "MLP"), _BLOCK.format(1, "the MLP and GELU")),
    Lesson("block", "7.2", "05_block", ("layer_norm", "dropout", "Block", "PostNormBlock"), _BLOCK.format(2, "the block")),
    Lesson("model", "7.3", "06_model", ("ANDREA", "count_parameters", "sample_next", "KVCache"),
           _BLOCK.format(3, "twelve blocks make ANDREA-120M")),
    Lesson("modern", "8", "07_modern",
           ("rms_norm", "swiglu_hidden_dim", "swiglu", "SwiGLU", "kv_cache_bytes", "rope_frequencies",
            "apply_rope", "rope_attention"), "The modern block (RMSNorm, SwiGLU, weight tying, grouped key/value heads)"),
    Lesson("kernels", "9", "08_kernels", ("gelu_kernel", "layer_norm_kernel", "softmax_kernel",
                                       "flash_attention_kernel"), "Triton kernels"),
    Lesson("bpe", "10", "09_capstone", ("pair_counts", "merge_pair", "most_frequent_pair", "train_bpe", "encode",
                                        "decode"), _CAPSTONE),
    Lesson("optim", "10", "09_capstone", ("lr_at", "adamw_step"), _CAPSTONE),
    Lesson("inside", "11", "10_inside", ("residual_stream", "attention_patterns", "logit_lens", "induction_scores"),
           "Inside your model"),
)

ACTIVITIES: tuple[str, ...] = tuple(lesson.activity for lesson in LESSONS)
_BY_ACTIVITY = {lesson.activity: lesson for lesson in LESSONS}


def lesson(activity: str) -> Lesson:
    """The row of one activity; a clear KeyError naming the activities for any other name."""
    try:
        return _BY_ACTIVITY[activity]
    except KeyError:
        raise KeyError(f"no activity named {activity!r}; activities: {', '.join(ACTIVITIES)}") from None


def later_or_same(first: str, then: str) -> bool:
    """Whether the notebook of activity `then` comes at or after that of `first` (False when
    either is not an activity, unless they are the same)."""
    if first == then:
        return True
    return first in _BY_ACTIVITY and then in _BY_ACTIVITY and ACTIVITIES.index(then) >= ACTIVITIES.index(first)
