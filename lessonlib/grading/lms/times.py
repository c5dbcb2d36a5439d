"""When each learner handed in: the submission time and where it comes from.

Sources, the first that knows wins (``Learner.submitted_from`` records which):

- ``moodle_worksheet``: Moodle's grading worksheet, column "Last modified (submission)" (its
  translations in :mod:`~lessonlib.grading.lms.localized`), given as ``--roster``;
- ``zip_entry``: the LMS download's zip (Canvas and Moodle), its entries' dates: the newest of the
  learner's graded notebooks;
- ``file_mtime``: the modification time of the learner's graded notebooks, the newest.

A zip entry and the worksheet hold a local date and time without a zone: they are read in the
course's time zone, stored once in the course gradebook (``--timezone Europe/Berlin`` the first
time, or taken from an assignment's due date; see ``store/settings.py``), never silently in this
machine's. A file's modification time is a true instant, but it is the time the file was last
written on this machine (a copy may change it), so it is the weakest source. An instructor's
correction (``lessonlib submission-time``) outranks them all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone, tzinfo
from pathlib import Path

from lessonlib.grading.lms.submissions import Learner

SOURCES = {
    "instructor": "a correction by the instructor",
    "moodle_worksheet": "Moodle's grading worksheet (Last modified (submission))",
    "zip_entry": "the zip entry of the LMS download",
    "file_mtime": "the file's modification time",
}

# Moodle's English date ("Monday, 2 March 2026, 5:03 PM"), and numeric dates some languages use.
_MONTHS = {name: n for n, names in enumerate((
    ("january", "januar", "janvier", "enero", "janeiro", "jan"),
    ("february", "februar", "février", "febrero", "fevereiro", "feb"),
    ("march", "märz", "mars", "marzo", "março", "mar"),
    ("april", "avril", "abril", "apr"),
    ("may", "mai", "mayo", "maio"),
    ("june", "juni", "juin", "junio", "junho", "jun"),
    ("july", "juli", "juillet", "julio", "julho", "jul"),
    ("august", "août", "agosto", "aug"),
    ("september", "septembre", "septiembre", "setembro", "sep", "sept"),
    ("october", "oktober", "octobre", "octubre", "outubro", "oct"),
    ("november", "novembre", "noviembre", "novembro", "nov"),
    ("december", "dezember", "décembre", "diciembre", "dezembro", "dec"),
), start=1) for name in names}
_WORDS = re.compile(r"(\d{1,2})\.?\s+(?:de\s+)?([^\W\d_]+)\.?\s+(?:de\s+)?(\d{4}),?\s+(?:à\s+|um\s+|a las\s+|às\s+)?"
                    r"(\d{1,2})[:h](\d{2})\s*([AaPp]\.?\s?[Mm]\.?)?")
_NUMERIC = re.compile(r"(\d{1,2})[./](\d{1,2})[./](\d{4}),?\s+(\d{1,2}):(\d{2})")


def parse_moodle_time(text: str, zone: tzinfo | None = None) -> datetime | None:
    """A worksheet date ("Monday, 2 March 2026, 5:03 PM", "Montag, 2. März 2026, 17:03", "02.03.2026,
    17:03", or ISO 8601) as an aware time, read in ``zone``; None for "-" or a form not known."""
    text = (text or "").strip()
    if not text or text == "-":
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = _from_words(text) or _from_numbers(text)
    if when is None:
        return None
    return when if when.tzinfo else _localize(when, zone)


def _from_words(text: str) -> datetime | None:
    match = _WORDS.search(text)
    month = _MONTHS.get(match[2].lower()) if match else None
    if match is None or month is None:
        return None
    hour = int(match[4])
    meridiem = (match[6] or "").lower().replace(".", "").replace(" ", "")
    if meridiem in ("pm", "am"):
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    try:
        return datetime(int(match[3]), month, int(match[1]), hour, int(match[5]))
    except ValueError:
        return None


def _from_numbers(text: str) -> datetime | None:
    match = _NUMERIC.search(text)
    if match is None:
        return None
    try:
        return datetime(int(match[3]), int(match[2]), int(match[1]), int(match[4]), int(match[5]))
    except ValueError:
        return None


def _localize(naive: datetime, zone: tzinfo | None) -> datetime:
    return naive.replace(tzinfo=zone) if zone is not None else naive.astimezone()


def _newest_mtime(paths: Sequence[Path]) -> datetime | None:
    times = []
    for path in paths:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


def _inside(path: Path, folders: Sequence[Path]) -> bool:
    return any(path.is_relative_to(folder) for folder in folders)


def stamp_file_times(learners: Sequence[Learner], unpacked: Sequence[Path]) -> None:
    """Give each learner without a time the newest time of their graded notebooks: the zip entry's
    when they all come from a zip unpacked into one of ``unpacked``, else the files' modification time."""
    for learner in learners:
        if learner.submitted_at is not None or not learner.files:
            continue
        paths = list(learner.files.values())
        learner.submitted_at = _newest_mtime(paths)
        if learner.submitted_at is not None:
            learner.submitted_from = "zip_entry" if unpacked and all(_inside(p, unpacked) for p in paths) \
                else "file_mtime"


def stamp_worksheet_times(learners: Sequence[Learner], times: dict[str, datetime]) -> list[Learner]:
    """Take each learner's time from the worksheet (``times`` by LMS id) where it has one; returns
    the learners changed."""
    changed = []
    for learner in learners:
        when = times.get(learner.lms_id) if learner.lms_id else None
        if when is not None and (learner.submitted_at != when or learner.submitted_from != "moodle_worksheet"):
            learner.submitted_at, learner.submitted_from = when, "moodle_worksheet"
            changed.append(learner)
    return changed


def describe_source(source: str) -> str:
    """The words feedback and the summary use for a time's source ("" when unknown)."""
    return SOURCES.get(source, "")
