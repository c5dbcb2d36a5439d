"""What the report pages share: one HTML document that renders alone, escaped text, figures.

A page holds no script, no link to anything outside it and no external image: its style sheet is
inline, figures are PNG data URLs with alt text, and a Content-Security-Policy meta tag forbids
anything else it might load or run. Every text from a learner, an LMS or a gradebook goes through
:func:`esc` (a written answer holding ``</textarea>`` or ``<script>`` shows as those characters);
:func:`esc_block` keeps line breaks and tabs for code and written answers shown in ``<pre>``.
Meaning is never carried by colour alone: status and kind are words, bars are hatched.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence

from lessonlib.grading.safe_text import printable

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'"
STYLE = ("body{font-family:system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:72rem;margin:1rem auto;"
         "padding:0 1rem;line-height:1.45}table{border-collapse:collapse;margin:.5rem 0 1rem}"
         "th,td{border:1px solid #767676;padding:.25rem .5rem;text-align:left;vertical-align:top}"
         "th{background:#e8e8e8}caption{text-align:left;font-weight:600;padding:.25rem 0}"
         "pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;background:#f6f6f6;"
         "border:1px solid #767676;padding:.5rem .75rem;white-space:pre-wrap;overflow-wrap:anywhere;margin:.25rem 0}"
         "img{max-width:100%;height:auto}.muted{color:#4a4a4a}.note{border-left:4px solid #1a1a1a;"
         "padding:.25rem .75rem;background:#f6f6f6}.pair{display:grid;grid-template-columns:1fr 1fr;gap:.75rem}"
         "section.answer{border-top:1px solid #767676;padding-top:.5rem;margin-top:1rem}")
# Control characters other than the line breaks and tabs a block of code or prose keeps.
_BLOCK_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def esc(text: object) -> str:
    """One line of untrusted text, safe inside HTML (control characters shown as escapes)."""
    return html.escape(printable(text), quote=True)


def esc_block(text: object) -> str:
    """Untrusted text of several lines for a ``<pre>``: line breaks and tabs kept, the rest as :func:`esc`."""
    kept = _BLOCK_CONTROL.sub(lambda m: printable(m.group()), str(text).replace("\r\n", "\n"))
    return html.escape(kept, quote=True)


def document(title: str, body: Sequence[str]) -> str:
    """A complete page: ``title`` (escaped here) and ``body``, already HTML."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>",
        *body, "</main></body></html>"]) + "\n"


def table(caption: str, header: Sequence[str], rows: Sequence[str]) -> str:
    """A table: ``caption`` and ``header`` are HTML already; ``rows`` are ``<tr>`` elements."""
    heads = "".join(f'<th scope="col">{h}</th>' for h in header)
    return f"<table><caption>{caption}</caption><thead><tr>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def figure(fig: object, alt: str) -> str:
    """A matplotlib figure drawn by Agg into a PNG data URL, with its alt text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}"></figure>'
