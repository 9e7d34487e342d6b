"""quiz() and reveal(): self-check questions and model answers, as widgets in a notebook and
as plain text elsewhere. Both return None (a returned widget would be shown twice)."""
from __future__ import annotations

import html as _html
from dataclasses import dataclass

from ._display import in_notebook


@dataclass
class Question:
    question: str
    options: list[str]
    answer: int                     # index of the right option
    explain: str = ""               # shown after any answer


def _as_question(q) -> Question:
    if isinstance(q, Question):
        return q
    if not isinstance(q, dict):
        raise TypeError(f"a quiz question is a dict with question, options, answer, explain; got {type(q).__name__}")
    unknown = set(q) - {"question", "options", "answer", "explain"}
    if unknown:
        raise ValueError(f"unknown quiz fields {sorted(unknown)}: use question, options, answer, explain")
    options = list(q["options"])
    if len(options) < 2:
        raise ValueError(f"a quiz question needs at least two options: {q['question']!r}")
    answer = q["answer"]
    if isinstance(answer, str):
        if answer not in options:
            raise ValueError(f"answer {answer!r} is not one of the options of {q['question']!r}")
        answer = options.index(answer)
    if not isinstance(answer, int) or not 0 <= answer < len(options):
        raise ValueError(f"answer must be an option or its index, got {q['answer']!r}")
    return Question(str(q["question"]), [str(o) for o in options], answer, str(q.get("explain", "")))


def grade(q, choice) -> tuple[bool, str]:
    """(right?, feedback) for one answer; `choice` is an option's text or index, or None."""
    q = _as_question(q)
    if choice is None:
        return False, "Pick an answer first."
    index = q.options.index(choice) if isinstance(choice, str) else int(choice)
    right = index == q.answer
    head = "Right." if right else f"Not quite: the answer is \u201c{q.options[q.answer]}\u201d."
    return right, (head + (" " + q.explain if q.explain else "")).strip()


def quiz_widget(questions):
    """The quiz as an ipywidgets VBox (for tests and for embedding); quiz() displays it."""
    import ipywidgets as w

    qs = [_as_question(q) for q in questions]
    rows = []
    for i, q in enumerate(qs, 1):
        radio = w.RadioButtons(options=q.options, value=None, layout=w.Layout(width="auto"))
        button = w.Button(description="Check", button_style="primary", layout=w.Layout(width="90px"))
        feedback = w.HTML(value="")

        def on_click(_, q=q, radio=radio, feedback=feedback):
            right, text = grade(q, radio.value)
            colour = "#2e7d32" if right else ("#c62828" if radio.value is not None else "#555")
            feedback.value = f'<span style="color:{colour}">{_html.escape(text)}</span>'

        button.on_click(on_click)
        title = w.HTML(value=f"<b>{i}. {_html.escape(q.question)}</b>")
        rows.append(w.VBox([title, radio, w.HBox([button, feedback])],
                           layout=w.Layout(margin="0 0 12px 0")))
    return w.VBox(rows)


def quiz(questions) -> None:
    """Show self-check questions: radio buttons, a Check button and feedback per question.

    questions: [{"question": str, "options": [str, ...], "answer": index or option text,
                 "explain": why}, ...]. Outside a notebook, prints them with their answers.
    """
    qs = [_as_question(q) for q in questions]
    if in_notebook():
        try:
            from IPython.display import display
            display(quiz_widget(qs))
            return None
        except ImportError:
            pass
    for i, q in enumerate(qs, 1):
        print(f"{i}. {q.question}")
        for j, o in enumerate(q.options):
            print(f"   {'abcdefghij'[j]}) {o}")
        print(f"   answer: {'abcdefghij'[q.answer]}) {q.options[q.answer]}" + (f" -- {q.explain}" if q.explain else ""))
    return None


def reveal_widget(title: str, answer_markdown: str):
    """A collapsed Accordion whose body renders `answer_markdown` (math included)."""
    import ipywidgets as w
    from IPython.display import Markdown

    out = w.Output()
    with out:
        from IPython.display import display
        display(Markdown(answer_markdown))
    acc = w.Accordion(children=[out], selected_index=None)
    acc.set_title(0, f"{title} (click to reveal)")
    return acc


def reveal(title: str, answer_markdown: str) -> None:
    """A model answer, hidden until the learner clicks its title. Outside a notebook, printed."""
    if in_notebook():
        try:
            from IPython.display import display
            display(reveal_widget(title, answer_markdown))
            return None
        except ImportError:
            pass
    print(f"{title}\n{answer_markdown}")
    return None
