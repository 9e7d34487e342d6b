"""Showing things: rich HTML in a notebook, the same content as plain text elsewhere."""
from __future__ import annotations

import html as _html
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")     # terminal colour codes: never in a box

# kind -> (border colour, background, label)
STYLES = {
    "passed": ("#2e7d32", "#e8f5e9", "passed"),
    "failed": ("#c62828", "#ffebee", "not yet right"),
    "unwritten": ("#b26a00", "#fff8e1", "not written yet"),
    "later": ("#b26a00", "#fff3e0", "right so far, a later test fails"),
    "shortcut": ("#b26a00", "#fff3e0", "the library's, not yours"),
    "error": ("#6a1b9a", "#f3e5f5", "could not check"),
    "note": ("#455a64", "#eceff1", "note"),
}


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where display() renders HTML and widgets)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def plain(text) -> str:
    """str(text) without terminal colour codes."""
    return ANSI.sub("", str(text))


def esc(text) -> str:
    return _html.escape(plain(text))


def box(kind: str, title: str, sections: list[tuple[str, list[tuple[str, str]]]] | None = None,
        footer: str = "") -> None:
    """Display one coloured box.

    sections: [(heading, [(label, value), ...]), ...]; labels may be "" for a plain line.
    In a notebook the box is HTML (with a text/plain twin); elsewhere the text is printed.
    """
    sections = sections or []
    text = render_text(kind, title, sections, footer)
    if in_notebook():
        from IPython.display import display
        display({"text/html": render_html(kind, title, sections, footer), "text/plain": text}, raw=True)
    else:
        print(text)


def render_text(kind, title, sections, footer="") -> str:
    label = STYLES.get(kind, STYLES["note"])[2]
    lines = [f"[{label.upper()}] {title}"]
    for heading, rows in sections:
        if heading:
            lines.append(f"  - {heading}")
        for k, v in rows:
            head = f"      {k}: " if k else "      "
            lines.append(head + str(v).replace("\n", "\n" + " " * len(head)))
    if footer:
        lines.append(f"  {footer}")
    return plain("\n".join(lines))


def render_html(kind, title, sections, footer="") -> str:
    border, bg, label = STYLES.get(kind, STYLES["note"])
    parts = [f'<div class="andrea-box andrea-{esc(kind)}" style="border-left:6px solid {border};'
             f'background:{bg};padding:8px 12px;margin:4px 0;border-radius:4px;color:#212121;'
             f'font-family:sans-serif;font-size:14px">',
             f'<div style="font-weight:bold;color:{border}">{esc(label)}: {esc(title)}</div>']
    for heading, rows in sections:
        parts.append('<div style="margin-top:6px">')
        if heading:
            parts.append(f'<div style="font-family:monospace;font-weight:bold">{esc(heading)}</div>')
        if rows:
            parts.append('<table style="margin-left:12px;border-collapse:collapse">')
            for k, v in rows:
                parts.append(f'<tr><td style="padding:1px 8px 1px 0;vertical-align:top;color:#555;'
                             f'text-align:left">{esc(k)}</td><td style="padding:1px 0;text-align:left;'
                             f'white-space:pre-wrap">{esc(v)}</td></tr>')
            parts.append("</table>")
        parts.append("</div>")
    if footer:
        parts.append(f'<div style="margin-top:6px;font-style:italic">{esc(footer)}</div>')
    parts.append("</div>")
    return "".join(parts)
