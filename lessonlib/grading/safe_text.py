"""Text from submissions made safe where the grader shows it: CSV cells, terminal lines, Markdown.

Learners choose their folder and file names, and an LMS writes their full names (Moodle, Canvas)
into the download and the roster. That text reaches every CSV the grader writes and the lines it
prints. Two dangers follow:

- A spreadsheet runs a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a formula
  (``=HYPERLINK(...)``, ``@SUM(1+1)*cmd|'calc'!A0``), and a tab or carriage return at the start
  can hide one. :func:`csv_cell` prefixes such a text cell with a single quote, as OWASP advises
  against CSV injection; numbers (``-1.5``) stay numbers for the LMS importer, and a lone ``-``
  (Moodle's "no date") stays as it is. :func:`csv_value` undoes it when the grader reads its own
  CSV back (``manual.csv``), so names and comments make the round trip unchanged.
- A terminal obeys control characters: an escape sequence in a name can rewrite the screen,
  clear it or retitle the window. :func:`printable` shows every control character (C0, DEL, C1
  and the bidirectional overrides that reorder a line) as a visible escape such as ``\\x1b``.
- Markdown (``feedback/KEY.md``, Gradescope's output) obeys its own syntax: a line starting with
  ``#`` is a heading, ``![x](http://...)`` loads an image (a tracking beacon), ``<img>`` is raw
  HTML, and a backtick line closes a code block. :func:`markdown_inline` makes a text one line
  of literal characters (each character that can start Markdown syntax backslash-escaped, as
  CommonMark allows; prose stays readable), and :func:`markdown_block` a code block whose fence is
  longer than any backtick run in the text, so nothing in it can end it. :func:`markdown_code` is
  an inline code span likewise. Every text the feedback's Markdown shows goes through these
  three, so no learner text (a written answer, an exception's text, a name, a file name) becomes
  a heading, link, image or HTML.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FORMULA_STARTS = frozenset("=+-@\t\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# What starts Markdown syntax in a line of text, escaped wherever it stands: code, emphasis (an
# underscore between letters cannot), links and images ([), HTML and autolinks (<), headings (#),
# tables (|), strikethrough (~), math ($), e-mail autolinks (@), entities (&name;), and the dot of a
# domain or the colon of a scheme, which bare-URL autolinks need (www.x.org, http://x).
_MARKDOWN_SYNTAX = re.compile(r"[\\`*\[\]<>#|~$@{}]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=[#A-Za-z0-9])"
                              r"|\.(?=[A-Za-z])|:(?=/)")
# What starts a block at the beginning of a line: a list item (-, +, *, 1. or 1)), a quote, a rule.
_BLOCK_START = re.compile(r"^(\s*)([-+=>]|\d+[.)])")
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_BACKTICKS = re.compile("`+")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _formula_like(text: str) -> bool:
    """True when a spreadsheet could read ``text`` as a formula: it starts with one of
    FORMULA_STARTS, is more than that one character, and is not a plain number."""
    return len(text) > 1 and text[0] in FORMULA_STARTS and _NUMBER.fullmatch(text) is None


def _quoted(text: str) -> bool:
    """True for a cell :func:`csv_cell` has quoted: quotes, then formula-like text."""
    return text.startswith("'") and _formula_like(text.lstrip("'"))


def csv_cell(value: object) -> str:
    """``value`` as text a spreadsheet shows and never runs (see the module's docstring).

    A cell that already looks quoted (``'=x``) gets one more quote, so that :func:`csv_value`,
    which removes exactly one, gives every value back as it was.
    """
    text = "" if value is None else str(value)
    return "'" + text if _formula_like(text) or _quoted(text) else text


def csv_value(cell: str) -> str:
    """The value :func:`csv_cell` wrote as ``cell``; any other text unchanged."""
    return cell[1:] if _quoted(cell) else cell


def csv_row(values: Iterable[object]) -> list[str]:
    return [csv_cell(v) for v in values]


def printable(text: object) -> str:
    """``text`` for a terminal: each control character shown as an escape (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(lambda m: _escape(m.group()), str(text))


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# --- Markdown ---------------------------------------------------------------------------------


def _one_line(text: object) -> str:
    return _LINE_BREAKS.sub(" ", str(text))


def markdown_inline(text: object) -> str:
    """``text`` as literal Markdown inline text: one line, each character that could start syntax escaped.

    Nothing in it can start a heading, list or quote (no line of its own, and a leading marker is
    escaped), emphasis, code, a link, an image, an autolink or HTML; it may stand anywhere in a line.
    """
    escaped = _MARKDOWN_SYNTAX.sub(lambda m: "\\" + m.group(), _one_line(text))
    return _BLOCK_START.sub(lambda m: m.group(1) + "".join("\\" + c if not c.isdigit() else c
                                                            for c in m.group(2)), escaped)


def _fence_for(text: str, least: int) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(least, longest + 1)


def markdown_code(text: object) -> str:
    """``text`` as one inline code span, delimited by more backticks than any run inside it."""
    body = _one_line(text)
    fence = _fence_for(body, 1)
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "  # CommonMark strips one space on each side
    return f"{fence}{body}{fence}"


def markdown_block(text: object) -> list[str]:
    """``text`` as the lines of a fenced code block that nothing in it can close (no info string)."""
    lines = str(text).splitlines() or [""]
    fence = _fence_for(str(text), 3)
    return [fence, *lines, fence]
