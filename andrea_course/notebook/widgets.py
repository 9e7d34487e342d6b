"""quiz() and reveal(): self-check questions as widgets and model answers as collapsed Markdown
in a notebook, as plain text elsewhere. Both return None (a returned widget would be shown twice).
quiz() and its helpers live in quizzes.py."""
from __future__ import annotations

import html as _html

from ._display import in_notebook
from .quizzes import Question, grade, quiz, quiz_widget, seal, sealed_source, unseal  # noqa: F401


def reveal_widget(title: str, answer_markdown: str):
    """The answer as a collapsed HTML <details> block around its Markdown (math included), as
    an IPython Markdown object. No ipywidgets Accordion: Colab's widget manager breaks it, and
    JupyterLab, Colab, VS Code and GitHub all render <details> in Markdown."""
    from IPython.display import Markdown

    # The blank lines let the Markdown inside the HTML block be rendered as Markdown.
    return Markdown(f"<details>\n<summary><b>{_html.escape(title)}</b> (click to reveal)</summary>\n\n"
                    f"{answer_markdown}\n\n</details>")


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
