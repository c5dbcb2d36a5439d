"""Text from submissions made safe where the grader shows it: CSV cells and terminal lines.

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
"""

from __future__ import annotations

import re
from collections.abc import Iterable

FORMULA_STARTS = frozenset("=+-@\t\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
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
