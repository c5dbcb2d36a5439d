"""The course's notebooks, and reading a learner's notebook without trusting it.

Nothing here runs learner code: a notebook is only read as bounded JSON.
"""


from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS, ManualQuestion
from lessonlib.exercises.registry import released_answer_cells
from lessonlib.exercises.results import Status

MAX_NOTEBOOK_BYTES = 32 * 2**20
MAX_CELL_CHARS = 2**20
# What a notebook under MAX_NOTEBOOK_BYTES may still hold, checked as it is read, so that reading it
# costs the grader tens of MB, not gigabytes (32 MB of "{}," parse into ten million objects):
MAX_JSON_VALUES = 2**20  # objects, lists and the items in them: the exercise notebooks hold a few thousand
MAX_CELL_ID_CHARS = 64  # nbformat 4.5: a cell id is 1 to 64 characters
MAX_WRITTEN_CHARS = 20_000  # of a written answer, kept for the person grading it (gradebook and feedback)
ANSWER_TAG = "answer"
WRITTEN_STUB = "_Write your answer here._"  # what `lessonlib exercises build` leaves in a written answer

# Statuses decided before any code runs.
NOT_SUBMITTED, MALFORMED, MISSING_ANSWER, CELL_ERROR, TOO_LONG = (
    Status.NOT_SUBMITTED, Status.MALFORMED, Status.MISSING_ANSWER, Status.CELL_ERROR, Status.TOO_LONG
)


# --- the course's notebooks --------------------------------------------------------------------


@dataclass(frozen=True)
class CourseNotebook:
    """One exercise notebook: its exercises (in order), written questions and released answer cells."""

    name: str  # "02_masking.ipynb"
    exercises: tuple[str, ...]
    manual: tuple[ManualQuestion, ...]
    answer_cells: dict[str, str] = field(default_factory=dict)  # exercise -> released cell id

    @property
    def stem(self) -> str:
        return self.name.removesuffix(".ipynb")


def course_notebooks() -> list[CourseNotebook]:
    """The exercise notebooks, in file-name order, from the exercise registry."""
    cells = released_answer_cells()
    names = sorted({e.notebook for e in EXERCISES.values()} | {q.notebook for q in MANUAL_QUESTIONS.values()})
    return [
        CourseNotebook(
            name,
            tuple(e.name for e in EXERCISES.values() if e.notebook == name),
            tuple(q for q in MANUAL_QUESTIONS.values() if q.notebook == name),
            {e: c for e, c in cells.items() if EXERCISES[e].notebook == name},
        )
        for name in names
    ]


def assignment_courses(names: Sequence[str]) -> list[CourseNotebook]:
    """The course notebooks an assignment grades, in file-name order; ``names`` empty means all of them.

    A name may omit ``.ipynb`` ("02_masking"); an unknown one is an error that lists the known ones.
    """
    courses = course_notebooks()
    if not names:
        return courses
    by_name = {c.name: c for c in courses} | {c.stem: c for c in courses}
    unknown = [n for n in names if n.strip() not in by_name]
    if unknown:
        raise ValueError(f"not an exercise notebook of this course: {', '.join(unknown)}; the notebooks are "
                         f"{', '.join(c.name for c in courses)}")
    chosen = {by_name[n.strip()].name for n in names}
    return [c for c in courses if c.name in chosen]


def unassigned_note(names: Sequence[str]) -> str:
    """Said to a learner who handed in notebooks the assignment does not grade."""
    listed = ", ".join(sorted(names))
    return f"Not part of this assignment, so not graded: {listed}."


# --- reading a notebook without trusting it -------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    index: int
    cell_type: str
    id: str
    tags: tuple[str, ...]
    source: str


@dataclass
class Notebook:
    """A submitted notebook's cells, or why it could not be read."""

    path: Path
    cells: list[Cell] = field(default_factory=list)
    problem: str | None = None


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return "".join(value)
    raise ValueError("a cell source that is neither text nor a list of lines")


def _read_regular_file(path: Path) -> bytes | str:
    """The bytes of ``path``, or why they were not read: a symbolic link is not followed (O_NOFOLLOW),
    and anything but a regular file (a FIFO would block forever) or a file past the size cap is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "it is a symbolic link, and links are not followed"
        raise
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        return ("it is a folder named like a notebook, not a notebook file (download the notebook itself, "
                "File > Download in JupyterLab, and hand that in)")
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(info.st_mode):
            return "it is not a regular file"
        if info.st_size > MAX_NOTEBOOK_BYTES:
            return (f"the file is {info.st_size / 2**20:.0f} MB, more than the {MAX_NOTEBOOK_BYTES // 2**20} MB "
                    "a notebook may have")
        return f.read(MAX_NOTEBOOK_BYTES + 1)


def json_values(raw: bytes) -> int:
    """How many values a JSON text parses into, at most: its objects, lists and the commas between
    items, counted outside strings, plus one. The bytes are counted first, strings and all: most notebooks stop
    there. Otherwise one pass skips the strings (linear in the size, whatever the escapes)."""
    rough = raw.count(b",") + raw.count(b"{") + raw.count(b"[") + 1
    if rough <= MAX_JSON_VALUES:
        return rough
    found, pos, end = 1, 0, len(raw)
    while pos < end:
        start = raw.find(b'"', pos)
        stop = end if start < 0 else start
        found += raw.count(b",", pos, stop) + raw.count(b"{", pos, stop) + raw.count(b"[", pos, stop)
        if start < 0:
            break
        pos, quote = start + 1, raw.find(b'"', start + 1)
        while quote >= 0:  # the closing quote is the first one no backslash escapes
            escape = raw.find(b"\\", pos, quote)
            if escape < 0:
                break
            pos = escape + 2
            if pos > quote:
                quote = raw.find(b'"', pos)
        if quote < 0:
            break  # an unterminated string: json.loads says what is wrong
        pos = quote + 1
    return found


def read_notebook(path: Path) -> Notebook:
    """Parse ``path`` as an nbformat-4 notebook; never raises, reports a problem instead.

    Sizes are checked before anything large is built: the file's bytes, then the number of JSON
    values it would parse into, then each cell id's length.
    """
    try:
        raw = _read_regular_file(path)
        if isinstance(raw, str):
            return Notebook(path, problem=raw)
        if len(raw) > MAX_NOTEBOOK_BYTES:  # it grew while it was read
            return Notebook(path, problem=f"the file is more than the {MAX_NOTEBOOK_BYTES // 2**20} MB a notebook "
                                         "may have")
        values = json_values(raw)
        if values > MAX_JSON_VALUES:
            return Notebook(path, problem=f"it has {values:,} JSON objects, lists and item separators, more than "
                                          f"the {MAX_JSON_VALUES:,} a notebook may have (an exercise notebook has a "
                                          "few thousand)")
        text = raw.decode("utf-8")
        del raw  # the text alone from here: one copy of the file, not two
        data = json.loads(text)
        del text
    except json.JSONDecodeError as exc:
        return Notebook(path, problem=f"it is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})")
    except UnicodeDecodeError:
        return Notebook(path, problem="it is not UTF-8 text")
    except (OSError, ValueError, RecursionError) as exc:
        return Notebook(path, problem=f"it could not be read ({type(exc).__name__})")
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return Notebook(path, problem="it is JSON but not a notebook (no list of cells)")
    if data.get("nbformat") != 4:
        return Notebook(path, problem=f"it is in notebook format {data.get('nbformat')!r}; version 4 is expected")
    cells = []
    try:
        for i, raw in enumerate(data["cells"]):
            if not isinstance(raw, dict):
                raise ValueError("a cell that is not an object")
            metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
            tags = metadata.get("tags") if isinstance(metadata.get("tags"), list) else []
            cell_id = raw.get("id") if isinstance(raw.get("id"), str) else ""
            if len(cell_id) > MAX_CELL_ID_CHARS:
                raise ValueError(f"cell {i + 1} has an id of {len(cell_id):,} characters; a cell id has at most "
                                 f"{MAX_CELL_ID_CHARS} (nbformat 4.5)")
            cells.append(Cell(i, str(raw.get("cell_type", "")), cell_id,
                              tuple(t for t in tags if isinstance(t, str)), _text(raw.get("source", ""))))
    except ValueError as exc:
        return Notebook(path, problem=f"it has a malformed cell ({exc})")
    return Notebook(path, cells)
