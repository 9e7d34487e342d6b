"""quiz() and reveal(): self-check questions and model answers, as widgets in a notebook and
as plain text elsewhere. Both return None (a returned widget would be shown twice).
quiz() and its helpers live in quizzes.py."""
from __future__ import annotations

from ._display import in_notebook
from .quizzes import Question, grade, quiz, quiz_widget, seal, sealed_source, unseal  # noqa: F401


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
