"""quiz(): self-check questions that make the learner think before they see the answer.

- Options are shuffled per learner (the same order every time for one learner: seeded by the
  learner's name, $ANDREA_LEARNER or the login, and the question).
- The answer and its explanation are sealed: the cell holds an opaque token, not the index, so
  reading the cell does not give the answer away (it is obfuscation, not a safe: a self-check).
- A wrong option gets one sentence of why it is wrong (its own "why", without the answer) and
  a "try again"; the answer and the explanation come after a right answer, after MAX_TRIES
  wrong ones, or when the learner clicks "Show the answer". Without widgets the HTML and the
  printed forms show every wrong option's why beside the answer.
- "Predict" items ask for a number or a shape, typed in a box, checked to a tolerance.

A question: {"question": str, "options": [str, ...], "sealed": seal(question, answer, explain, why=...)},
or, to predict: {"question": str, "predict": "number" | "shape", "sealed": seal(...)}. While
writing a notebook, plain {"answer": ..., "explain": ..., "why": {wrong option: why}} works too;
sealed_source() turns such a list into the cell's source, unseal() back. tests/notebook/test_quiz.py
holds the course's quiz rules.
"""
from __future__ import annotations

import ast
import base64
import getpass
import hashlib
import html as _html
import json
import math
import os
import operator
import random
import re
from dataclasses import dataclass, field

from ._display import in_notebook

MAX_TRIES = 2                    # wrong answers before the answer is shown
SALT = "andrea-quiz-1"
KINDS = ("choice", "number", "shape")
FIELDS = {"question", "options", "answer", "explain", "why", "sealed", "predict", "tolerance"}


@dataclass
class Question:
    question: str
    options: list[str]               # [] for a predict item
    answer: object                   # the right option's text; a number; a shape (tuple of ints)
    explain: str = ""                # shown once the question is answered or given up
    kind: str = "choice"             # choice | number | shape
    tolerance: float = 0.0           # relative, for numbers
    why: dict = field(default_factory=dict)   # wrong option -> one sentence of why it is wrong

    @property
    def answer_text(self) -> str:
        if self.kind == "shape":
            return "(" + ", ".join(map(str, self.answer)) + ")"
        if self.kind == "number":
            return f"{self.answer:,}" if float(self.answer).is_integer() else f"{self.answer:g}"
        return str(self.answer)


# ------------------------------------------------------------------ sealing
def _stream(question: str, n: int) -> bytes:
    out, block = b"", 0
    while len(out) < n:
        out += hashlib.sha256(f"{SALT}|{question}|{block}".encode()).digest()
        block += 1
    return out[:n]


def seal(question: str, answer, explain: str = "", tolerance: float | None = None,
         why: dict | None = None) -> str:
    """The token that stands for (answer, explain, why) in a quiz cell; `question` keys it."""
    data = {"a": list(answer) if isinstance(answer, tuple) else answer, "e": explain}
    if tolerance:
        data["t"] = tolerance
    if why:
        data["w"] = dict(why)
    raw = json.dumps(data, ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(bytes(b ^ k for b, k in zip(raw, _stream(question, len(raw))))).decode()


def _open(question: str, token: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        return json.loads(bytes(b ^ k for b, k in zip(raw, _stream(question, len(raw)))).decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the sealed answer of {question!r} does not open: was the question edited "
                         f"after sealing? Seal it again with seal()") from exc


# ------------------------------------------------------------------ questions
def as_question(q) -> Question:
    """A Question from the dict a notebook writes (sealed or plain); ValueError when malformed."""
    if isinstance(q, Question):
        return q
    if not isinstance(q, dict):
        raise TypeError(f"a quiz question is a dict with question, options and sealed; got {type(q).__name__}")
    unknown = set(q) - FIELDS
    if unknown:
        raise ValueError(f"unknown quiz fields {sorted(unknown)}: use {sorted(FIELDS)}")
    text = str(q["question"])
    if "sealed" in q:
        data = _open(text, q["sealed"])
        answer, explain, tolerance, why = data["a"], data.get("e", ""), data.get("t", 0.0), data.get("w", {})
    elif "answer" in q:
        answer, explain, tolerance = q["answer"], str(q.get("explain", "")), q.get("tolerance", 0.0)
        why = q.get("why", {})
    else:
        raise ValueError(f"{text!r} has no answer: give 'sealed' (or, while writing, 'answer')")
    kind = "choice" if "predict" not in q else q["predict"]
    if kind not in KINDS[1:] and "predict" in q:
        raise ValueError(f"predict must be 'number' or 'shape', got {kind!r} in {text!r}")
    if kind == "choice":
        options = [str(o) for o in q.get("options", [])]
        if len(options) < 2 or len(set(options)) != len(options):
            raise ValueError(f"a quiz question needs at least two different options: {text!r}")
        if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(options):
            answer = options[answer]
        if answer not in options:
            raise ValueError(f"answer {answer!r} is not one of the options of {text!r}")
        if not isinstance(why, dict) or set(why) - set(options) or answer in why:
            raise ValueError(f"why must map wrong options of {text!r} to a sentence each; "
                             f"got keys {sorted(why) if isinstance(why, dict) else why!r}")
        return Question(text, options, answer, str(explain), why={o: str(w) for o, w in why.items()})
    if "options" in q or why:
        raise ValueError(f"a predict item has no options and no why: {text!r}")
    if kind == "shape":
        return Question(text, [], tuple(int(s) for s in answer), str(explain), "shape")
    return Question(text, [], float(answer), str(explain), "number", float(tolerance or 0.0))


def learner() -> str:
    """Who answers: $ANDREA_LEARNER, else the login name."""
    name = os.environ.get("ANDREA_LEARNER", "").strip()
    if not name:
        try:
            name = getpass.getuser()
        except Exception:                                   # noqa: BLE001 - no login name here
            name = "learner"
    return name


def shuffled(q: Question, who: str | None = None) -> list[str]:
    """q's options in this learner's order (the same every time for one learner)."""
    seed = hashlib.sha256(f"{who or learner()}|{q.question}".encode()).digest()
    order = list(q.options)
    random.Random(seed).shuffle(order)
    return order


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def parse_number(text: str) -> float:
    """A number the learner typed: 98,820,096 · 98_820_096 · 9.88e7 · 768/12 · 2**10 · 6.6 %."""
    cleaned = str(text).strip().replace(",", "").replace("_", "").replace("×", "*").replace("·", "*")
    cleaned = cleaned.rstrip("%").strip()

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(text)

    try:
        return float(ev(ast.parse(cleaned, mode="eval")))
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a number") from exc


def parse_shape(text: str) -> tuple[int, ...]:
    """A shape the learner typed: (2, 12, 16, 64) · [2, 12, 16, 64] · 2x12x16x64 · torch.Size([2, 12])."""
    found = re.findall(r"-?\d+", str(text).replace("torch.Size", ""))
    if not found:
        raise ValueError(f"{text!r} is not a shape")
    return tuple(int(n) for n in found)


def is_right(q, given) -> bool:
    """Whether `given` (an option's text or index, a number, a shape, or the text typed) is right."""
    q = as_question(q)
    if given is None or given == "":
        return False
    if q.kind == "choice":
        given = q.options[given] if isinstance(given, int) and not isinstance(given, bool) else given
        return given == q.answer
    if q.kind == "shape":
        return (tuple(given) if isinstance(given, (tuple, list)) else parse_shape(given)) == q.answer
    value = float(given) if isinstance(given, (int, float)) else parse_number(given)
    return math.isclose(value, q.answer, rel_tol=max(q.tolerance, 1e-9), abs_tol=1e-12)


def grade(q, given, tries: int = 1, give_up: bool = False) -> tuple[bool, str]:
    """(right?, feedback) for the learner's `tries`-th answer. The answer and the explanation
    are shown after a right answer, after MAX_TRIES wrong ones, or when the learner gives up."""
    q = as_question(q)
    if give_up:
        return False, f"The answer: {q.answer_text}." + (f" {q.explain}" if q.explain else "")
    if given is None or str(given).strip() == "":
        return False, "Pick or type an answer first."
    try:
        right = is_right(q, given)
    except ValueError as exc:
        return False, f"{exc}: type {'a number' if q.kind == 'number' else 'a shape such as (2, 3, 4)'}."
    if right:
        return True, ("Right." + (f" {q.explain}" if q.explain else ""))
    nudge = ""
    if q.kind == "choice":
        chosen = q.options[given] if isinstance(given, int) and not isinstance(given, bool) else given
        nudge = f" {q.why[chosen]}" if q.why.get(chosen) else ""
    if tries >= MAX_TRIES:
        return False, f"Not quite.{nudge} The answer: {q.answer_text}." + (f" {q.explain}" if q.explain else "")
    if q.kind == "number":
        nudge = " Yours is too large." if parse_number(given) > q.answer else " Yours is too small."
    elif q.kind == "shape":
        got = parse_shape(given)
        nudge = (f" The shape has {len(q.answer)} axes." if len(got) != len(q.answer) else
                 " The number of axes is right; check their sizes.")
    left = MAX_TRIES - tries
    return False, f"Not quite.{nudge} Try again ({left} more tr{'y' if left == 1 else 'ies'} before the answer shows)."


# ------------------------------------------------------------------ showing
def quiz_widget(questions, who: str | None = None):
    """The quiz as an ipywidgets VBox (ipywidgets 7 or 8); quiz() displays it."""
    import ipywidgets as w

    rows = []
    for i, q in enumerate(map(as_question, questions), 1):
        if q.kind == "choice":
            answer = w.RadioButtons(options=shuffled(q, who), value=None, layout=w.Layout(width="auto"))
        else:
            answer = w.Text(value="", placeholder="a number, e.g. 768/12" if q.kind == "number"
                            else "a shape, e.g. (2, 3, 4)", layout=w.Layout(width="260px"))
        check = w.Button(description="Check", button_style="primary", layout=w.Layout(width="90px"))
        show = w.Button(description="Show the answer", layout=w.Layout(width="150px"))
        feedback = w.HTML(value="")
        state = {"tries": 0}

        def say(right, text, feedback=feedback, given=True):
            colour = "#2e7d32" if right else ("#c62828" if given else "#555")
            feedback.value = f'<span style="color:{colour}">{_html.escape(text)}</span>'

        def on_check(_, q=q, answer=answer, state=state, say=say):
            given = answer.value
            if given is None or str(given).strip() == "":
                return say(False, "Pick or type an answer first.", given=False)
            state["tries"] += 1
            say(*grade(q, given, state["tries"]))

        def on_show(_, q=q, say=say):
            say(False, grade(q, None, give_up=True)[1], given=False)

        check.on_click(on_check)
        show.on_click(on_show)
        kind = "" if q.kind == "choice" else f" <i>(predict the {q.kind})</i>"
        title = w.HTML(value=f"<b>{i}. {_html.escape(q.question)}</b>{kind}")
        rows.append(w.VBox([title, answer, w.HBox([check, show, feedback])], layout=w.Layout(margin="0 0 12px 0")))
    return w.VBox(rows)


def quiz_html(questions, who: str | None = None) -> str:
    """The quiz as HTML, for a notebook without ipywidgets: each answer behind a click."""
    parts = ['<div class="andrea-quiz" style="font-family:sans-serif;font-size:14px">']
    for i, q in enumerate(map(as_question, questions), 1):
        parts.append(f"<p><b>{i}. {_html.escape(q.question)}</b></p>")
        options = shuffled(q, who) if q.kind == "choice" else []
        if q.kind == "choice":
            parts.append("<ol type='a'>" + "".join(f"<li>{_html.escape(o)}</li>" for o in options) + "</ol>")
        else:
            parts.append(f"<p><i>Predict the {q.kind}, write it down, then open the answer.</i></p>")
        whys = "".join(f"<li>{'abcdefghij'[j]}) {_html.escape(q.why[o])}</li>"
                       for j, o in enumerate(options) if q.why.get(o))
        parts.append(f"<details><summary>the answer</summary>{_html.escape(grade(q, None, give_up=True)[1])}"
                     + (f"<p>Why not the others:</p><ul>{whys}</ul>" if whys else "") + "</details>")
    parts.append("</div>")
    return "".join(parts)


def quiz(questions) -> None:
    """Show self-check questions. In a notebook: widgets (radio buttons or a box to type in,
    Check, Show the answer), else HTML with each answer behind a click; elsewhere the questions
    are printed with their answers. Returns None."""
    qs = [as_question(q) for q in questions]
    if in_notebook():
        from IPython.display import HTML, display
        try:
            display(quiz_widget(qs))
        except ImportError:
            display(HTML(quiz_html(qs)))
        return None
    for i, q in enumerate(qs, 1):
        print(f"{i}. {q.question}" + ("" if q.kind == "choice" else f" (predict the {q.kind})"))
        options = shuffled(q)
        for j, o in enumerate(options):
            print(f"   {'abcdefghij'[j]}) {o}")
        label = f"{'abcdefghij'[options.index(q.answer)]}) " if q.kind == "choice" else ""
        print(f"   answer: {label}{q.answer_text}" + (f" -- {q.explain}" if q.explain else ""))
        for j, o in enumerate(options):
            if q.why.get(o):
                print(f"   not {'abcdefghij'[j]}): {q.why[o]}")
    return None


# ------------------------------------------------------------------ writing quizzes
def unseal(questions) -> list[dict]:
    """The plain form of a quiz (answer and explain in the open), to edit it."""
    out = []
    for raw in questions:
        q = as_question(raw)
        d = {"question": q.question}
        if q.kind == "choice":
            d["options"] = q.options
        else:
            d["predict"] = q.kind
            if q.tolerance:
                d["tolerance"] = q.tolerance
        d["answer"] = q.answer if q.kind != "number" or not float(q.answer).is_integer() else int(q.answer)
        d["explain"] = q.explain
        if q.why:
            d["why"] = {o: q.why[o] for o in q.options if o in q.why}
        out.append(d)
    return out


def sealed_source(questions, width: int = 100) -> str:
    """The source of a quiz cell for `questions` (plain or sealed): quiz([...]) with every answer
    and explanation sealed. Print it and paste it into the notebook."""
    lines = ["quiz(["]
    for raw in questions:
        q = as_question(raw)
        token = seal(q.question, q.answer, q.explain, q.tolerance or None, q.why or None)
        lines.append(f"    {{\"question\": {_wrap(q.question, 17, width)},")
        if q.kind == "choice":
            lines.append("     \"options\": [" + (",\n                 ".join(_wrap(o, 17, width) for o in q.options)) + "],")
        else:
            lines.append(f"     \"predict\": \"{q.kind}\",")
        chunks = [token[i:i + width - 20] for i in range(0, len(token), width - 20)]
        lines.append("     \"sealed\": " + ("(" if len(chunks) > 1 else "")
                     + "\n                ".join(f'"{c}"' for c in chunks) + (")" if len(chunks) > 1 else "") + "},")
    lines.append("])")
    return "\n".join(lines)


def _wrap(text: str, indent: int, width: int) -> str:
    """A string literal, split into adjacent literals to keep lines under `width`."""
    pieces, line = [], ""
    for word in re.split(r"(?<= )", text):
        if line and indent + len(json.dumps(line + word, ensure_ascii=False)) > width:
            pieces.append(line)
            line = ""
        line += word
    pieces.append(line)
    return ("\n" + " " * indent).join(json.dumps(p, ensure_ascii=False) for p in pieces)
