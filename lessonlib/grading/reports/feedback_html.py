"""A learner's feedback as one HTML page that renders alone: ``feedback/KEY.html``.

The page is what :mod:`feedback` says (the same blocks as the Markdown file), laid out for a
browser, an LMS's file viewer or an e-mail. It holds no script, no style sheet, no image and no
link: every style is an inline ``style`` attribute, and a Content-Security-Policy meta tag forbids
anything the page might otherwise load or run. Every text is escaped, learner text included (a
name such as ``<img src=x onerror=alert(1)>`` shows as those characters). Status is given in
words, never by colour alone.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from lessonlib.grading import records as r
from lessonlib.grading.reports.feedback import (
    Block,
    Box,
    Bullets,
    Heading,
    Item,
    Para,
    Quote,
    Spans,
    Table,
    feedback_blocks,
)

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'; base-uri 'none'"
BODY = ("font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; font-size: 16px; line-height: 1.5; "
        "color: #1f2328; background: #ffffff; max-width: 52em; margin: 2em auto; padding: 0 1em")
HEADING = {1: "font-size: 1.6em; margin: 0 0 0.6em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em",
           2: "font-size: 1.3em; margin: 1.6em 0 0.6em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em",
           3: "font-size: 1.1em; margin: 1.4em 0 0.4em"}
PARA = "margin: 0.5em 0"
CODE = ("font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; "
        "background: #f6f8fa; padding: 0.1em 0.3em; border-radius: 4px")
PRE = ("font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; "
       "background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 0.6em 0.8em; "
       "margin: 0.2em 0 0.6em; "
       "white-space: pre-wrap; overflow-wrap: anywhere")
QUOTE = ("margin: 0.4em 0 0.8em; padding: 0.4em 0.9em; border-left: 4px solid #d0d7de; color: #3d444d; "
         "white-space: pre-wrap; overflow-wrap: anywhere")
LABEL = "margin: 0.4em 0 0.1em; font-weight: 600"
LIST = "margin: 0.4em 0 0.8em; padding-left: 1.4em"
TABLE = "border-collapse: collapse; margin: 0.6em 0 1em"
CELL = "border: 1px solid #d0d7de; padding: 0.3em 0.7em; text-align: left; vertical-align: top"
RULE = "border: 0; border-top: 1px solid #d0d7de; margin: 1.6em 0"
WORD_STYLE = {r.PASSED: "color: #1a7f37; font-weight: 600", r.FAILED: "color: #9a4a00; font-weight: 600"}


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _inline(text: Spans) -> str:
    out = []
    for span in text:
        body = _esc(span.text)
        if span.style == "strong":
            body = f"<strong>{body}</strong>"
        elif span.style == "code":
            body = f'<code style="{CODE}">{body}</code>'
        elif span.style == "em":
            body = f"<em>{body}</em>"
        out.append(body)
    return "".join(out)


def _item(item: Item) -> str:
    children = "".join(_block(child) for child in item.children)
    return f"<li>{_inline(item.text)}{children}</li>"


def _cell(text: str, tag: str) -> str:
    style = CELL + ("; background: #f6f8fa" if tag == "th" else "")
    words = {v: k for k, v in r.STATUS_WORDS.items()}
    extra = WORD_STYLE.get(words.get(text, ""), "")
    return f'<{tag} style="{style}{"; " + extra if extra else ""}">{_esc(text)}</{tag}>'


def _block(block: Block) -> str:
    if isinstance(block, Heading):
        level = min(max(block.level, 1), 3)
        return f'<h{level} style="{HEADING[level]}">{_inline(block.text)}</h{level}>\n'
    if isinstance(block, Para):
        return f'<p style="{PARA}">{_inline(block.text)}</p>\n'
    if isinstance(block, Quote):
        return f'<blockquote style="{QUOTE}">{_esc(block.text)}</blockquote>\n'
    if isinstance(block, Box):
        return f'<p style="{LABEL}">{_esc(block.label)}</p>\n<pre style="{PRE}">{_esc(block.text)}</pre>\n'
    if isinstance(block, Bullets):
        return f'<ul style="{LIST}">\n' + "\n".join(_item(i) for i in block.items) + "\n</ul>\n"
    if isinstance(block, Table):
        head = "".join(_cell(h, "th") for h in block.header)
        rows = "".join("<tr>" + "".join(_cell(c, "td") for c in row) + "</tr>\n" for row in block.rows)
        return f'<table style="{TABLE}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody>\n</table>\n'
    return f'<hr style="{RULE}">\n'


def page(title: str, blocks: Sequence[Block]) -> str:
    """A complete HTML document: ``title`` and the blocks, with inline styles only."""
    body = "".join(_block(b) for b in blocks)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_esc(title)}</title>\n</head>\n<body style=\"{BODY}\">\n{body}</body>\n</html>\n")


def feedback_html(result: r.LearnerResult) -> str:
    """The feedback page of one learner."""
    return page(f"Feedback: {result.learner}", feedback_blocks(result))
