"""The quiz rules (issue 15, item 7), over EVERY quiz in every notebook, and the quiz mechanics.

Rules: no answer (index or text), no explanation and no "why" in a quiz cell's source, only a
sealed token that opens to one of the options; every wrong option of every question has one
sentence of why it is wrong, which does not give the answer away; the right option is the
strictly longest in at most a third of a notebook's questions; the right answers do not all sit
at one position; every notebook's quiz has a "predict the number or the shape" item.
Mechanics: options shuffled per learner, deterministically; no answer at the first wrong try,
but the why of the option chosen; the answer after MAX_TRIES wrong tries or on request; numbers
and shapes read the way a learner types them; without widgets, every why beside the answer.
The answers that the code can compute are checked against it in tests/notebook/test_quiz_answers.py.
"""
from __future__ import annotations

import ast
import json
import math
import re

import pytest

from andrea_course.paths import ROOT
from andrea_course.notebook.quizzes import (MAX_TRIES, as_question, grade, parse_number, parse_shape, quiz,
                                            quiz_html, quiz_widget, seal, sealed_source, shuffled, unseal)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _quiz_calls(path):
    """[(cell source, [question dict, ...])] for every quiz(...) call in a notebook's code cells."""
    found = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or "quiz(" not in src:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "quiz":
                found.append((src, ast.literal_eval(node.args[0])))
    return found


def _longest(q) -> bool:
    return len(q.answer) > max(len(o) for o in q.options if o != q.answer)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_quiz_follows_the_rules(path):
    calls = _quiz_calls(path)
    assert calls, f"{path.name}: no quiz(...)"
    questions = []
    for src, raw in calls:
        for q in raw:
            assert "answer" not in q and "explain" not in q, (
                f"{path.name}: {q['question']!r} shows its answer in the cell; seal it (sealed_source())")
            assert "sealed" in q, f"{path.name}: {q['question']!r} has no sealed answer"
            opened = as_question(q)                      # raises when the token does not open
            questions.append(opened)
            if opened.kind == "choice":
                assert opened.answer in opened.options
                wrong = [o for o in opened.options if o != opened.answer]
                missing = [o for o in wrong if not opened.why.get(o, "").strip()]
                assert not missing, (f"{path.name}: {q['question']!r}: wrong options without one sentence "
                                     f"of why they are wrong: {missing}")
                for o, why in opened.why.items():
                    assert why not in src, f"{path.name}: the why of {o!r} is readable in the cell"
                    assert not re.search(rf"(?<![\w.,]){re.escape(opened.answer)}(?![\w,])", why), (
                        f"{path.name}: the why of {o!r} gives the answer away")
                    assert len(why) < 240 and why.rstrip()[-1] in ".!?)", (
                        f"{path.name}: the why of {o!r} is one short sentence, ending with a stop: {why!r}")
            if opened.explain:
                assert opened.explain not in src, f"{path.name}: the explanation of {q['question']!r} is readable"
    choices = [q for q in questions if q.kind == "choice"]
    longest = sum(map(_longest, choices))
    assert longest <= max(1, round(len(choices) / 3)), (
        f"{path.name}: the right option is the longest in {longest} of {len(choices)} questions: "
        f"{[q.question for q in choices if _longest(q)]}")
    positions = [q.options.index(q.answer) for q in choices]
    assert len(choices) < 3 or len(set(positions)) > 1, f"{path.name}: every answer is option {positions[0]}"
    assert any(q.kind in ("number", "shape") for q in questions), (
        f"{path.name}: the quiz has no 'predict the number or the shape' item")


def test_the_course_has_enough_predict_items_and_few_tells():
    questions = [as_question(q) for p in NOTEBOOKS for _, raw in _quiz_calls(p) for q in raw]
    choices = [q for q in questions if q.kind == "choice"]
    assert sum(q.kind != "choice" for q in questions) >= len(NOTEBOOKS)
    assert sum(map(_longest, choices)) <= len(choices) / 3


# ------------------------------------------------------------------ mechanics
Q = {"question": "Why divide by sqrt(K)?", "options": ["speed", "keep scores near unit scale", "masking"],
     "answer": 1, "explain": "dot products grow like sqrt(K).",
     "why": {"speed": "One division per score costs time; it saves none.",
             "masking": "The mask is a separate step, before the softmax."}}
SHAPE = {"question": "Shape of q after split_heads?", "predict": "shape", "answer": (2, 12, 16, 64),
         "explain": "(B, H, T, K)."}
NUMBER = {"question": "How many parameters?", "predict": "number", "answer": 98820096, "tolerance": 0.001}


def test_sealing_hides_and_keeps_the_answer():
    token = seal(Q["question"], "keep scores near unit scale", Q["explain"], why=Q["why"])
    assert "unit scale" not in token and "sqrt" not in token and "separate" not in token
    sealed = {"question": Q["question"], "options": Q["options"], "sealed": token}
    q = as_question(sealed)
    assert q.answer == "keep scores near unit scale" and q.explain == Q["explain"] and q.why == Q["why"]
    with pytest.raises(ValueError, match="does not open|not one of the options"):
        as_question({**sealed, "question": "an edited question"})
    assert unseal([sealed])[0]["answer"] == "keep scores near unit scale"
    assert unseal([sealed])[0]["why"] == Q["why"]
    source = sealed_source([Q, SHAPE, NUMBER])
    assert "unit scale\"" not in source.split("options")[0] and "explain" not in source and "answer" not in source
    assert "why" not in source and "separate step" not in source
    cell = ast.parse(source).body[0].value
    assert [as_question(d).answer for d in ast.literal_eval(cell.args[0])] == [
        "keep scores near unit scale", (2, 12, 16, 64), 98820096.0]


def test_no_answer_at_the_first_wrong_try_but_why_that_option_is_wrong():
    right, text = grade(Q, "speed", tries=1)
    assert not right and "Try again" in text and "unit scale" not in text and "sqrt" not in text
    assert Q["why"]["speed"] in text
    assert Q["why"]["masking"] in grade(Q, 2, tries=1)[1]                  # an option's index works too
    right, text = grade(Q, "masking", tries=MAX_TRIES)
    assert not right and "keep scores near unit scale" in text and "sqrt(K)" in text
    assert Q["why"]["masking"] in text
    assert grade(Q, None, give_up=True)[1].startswith("The answer: keep scores near unit scale.")
    assert grade(Q, "keep scores near unit scale") == (True, "Right. dot products grow like sqrt(K).")
    assert grade(Q, None)[0] is False


def test_predict_items_read_what_a_learner_types():
    assert grade(SHAPE, "(2, 12, 16, 64)")[0] and grade(SHAPE, "torch.Size([2, 12, 16, 64])")[0]
    assert grade(SHAPE, "2x12x16x64")[0]
    right, text = grade(SHAPE, "(2, 16, 12, 64)")
    assert not right and "sizes" in text and "(2, 12, 16, 64)" not in text
    assert "4 axes" in grade(SHAPE, "(2, 16, 768)")[1]
    for typed in ("98,820,096", "98_820_096", "9.882e7", "98.82e6"):
        assert grade(NUMBER, typed)[0], typed
    assert "too large" in grade(NUMBER, "120e6")[1] and "too small" in grade(NUMBER, "85054464")[1]
    assert "is not a number" in grade(NUMBER, "lots")[1]
    assert parse_number("768/12") == 64 and parse_number("6.6 %") == 6.6 and parse_number("2**10") == 1024
    assert parse_shape("[3, 4]") == (3, 4)
    exact = {"question": "K?", "predict": "number", "answer": 64}
    assert grade(exact, "64")[0] and not grade(exact, "64.5")[0]
    assert math.isclose(as_question(NUMBER).tolerance, 0.001)


def test_options_are_shuffled_per_learner_and_stay_put():
    q = as_question({"question": "Pick one", "options": list("abcdefgh"), "answer": 0})
    assert shuffled(q, "ada") == shuffled(q, "ada")
    orders = {tuple(shuffled(q, name)) for name in ("ada", "bob", "cy", "dee", "eve")}
    assert len(orders) > 1 and all(sorted(o) == list("abcdefgh") for o in orders)


def test_malformed_questions_are_refused_in_one_line():
    with pytest.raises(ValueError, match="why must map wrong options"):
        as_question({"question": "q", "options": ["a", "b"], "answer": 0, "why": {"a": "the answer has no why"}})
    with pytest.raises(ValueError, match="why must map wrong options"):
        as_question({"question": "q", "options": ["a", "b"], "answer": 0, "why": {"c": "not an option"}})
    with pytest.raises(ValueError, match="no options and no why"):
        as_question({"question": "q", "predict": "number", "answer": 1, "why": {"2": "too large"}})
    with pytest.raises(ValueError, match="not one of the options"):
        as_question({"question": "q", "options": ["a", "b"], "answer": "c"})
    with pytest.raises(ValueError, match="has no answer"):
        as_question({"question": "q", "options": ["a", "b"]})
    with pytest.raises(ValueError, match="unknown quiz fields"):
        as_question({"question": "q", "options": ["a", "b"], "answer": 0, "hint": "x"})
    with pytest.raises(ValueError, match="two different options"):
        as_question({"question": "q", "options": ["a", "a"], "answer": 0})


def test_the_widget_retries_then_explains():
    pytest.importorskip("ipywidgets")
    box = quiz_widget([Q, SHAPE], who="ada")
    title, radio, row = box.children[0].children
    check, show, feedback = row.children
    check.click()
    assert "Pick or type an answer first" in feedback.value
    radio.value = "speed"
    check.click()
    assert "Try again" in feedback.value and "unit scale" not in feedback.value
    assert "it saves none" in feedback.value
    radio.value = "keep scores near unit scale"
    check.click()
    assert "Right." in feedback.value and "sqrt(K)" in feedback.value
    title, text, row = box.children[1].children
    check, show, feedback = row.children
    text.value = "(2, 12, 16, 64)"
    check.click()
    assert "Right." in feedback.value
    show.click()
    assert "The answer: (2, 12, 16, 64)." in feedback.value


def test_without_widgets_the_quiz_is_html_or_text_and_says_why_each_wrong_option_is_wrong(capsys):
    html = quiz_html([Q, SHAPE], who="ada")
    assert html.count("<details>") == 2 and "Predict the shape" in html
    assert "Why not the others" in html and "it saves none" in html and "before the softmax" in html
    assert quiz([Q, SHAPE]) is None
    out = capsys.readouterr().out
    assert "1. Why divide by sqrt(K)?" in out and "keep scores near unit scale -- dot products" in out
    assert out.count("   not ") == 2 and "it saves none" in out
    assert "2. Shape of q after split_heads? (predict the shape)" in out and "answer: (2, 12, 16, 64)" in out
