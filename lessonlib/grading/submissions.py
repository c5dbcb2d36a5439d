"""Learners' submissions: who submitted which notebook, reading it safely, and which cells run.

A SUBMISSION is an exercise notebook or a folder per learner holding any of them (a folder of
such folders also works). The learner is named by the folder, or by the file name with the
notebook's own name removed (``alice_02_masking.ipynb`` is alice's ``02_masking.ipynb``).

Which learner code runs for exercise ``f`` of a notebook, in notebook order:

- the answer cell of ``f`` (tagged ``answer``, else with the released answer cell's id), in full;
- from every other code cell, its *definitions* (imports, ``def``, ``class`` and assignments of
  constants) and every statement that defines or changes a name the answer uses, directly or
  through the helpers it calls (``SCALE = np.sqrt(8)`` read by a helper). Other calls are left
  out, so check cells, plotting and widget cells never run, and a stray loop elsewhere cannot
  cost ``f`` its points. Imports of plotting and widget libraries are left out too. Another
  cell's definition of an exercise's name never replaces its answer. Whatever the answer needs
  and cannot have is named in a note of the feedback (``lessonlib.exercises.cells``).

Nothing here runs learner code: sources are only parsed (``ast``), never executed.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS, ManualQuestion
from lessonlib.exercises.cells import parse, python_source, slice_cells, too_much_code
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
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
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


# --- parsing code cells ---------------------------------------------------------------------------


def parse_cell(source: str) -> ast.Module | str:
    """The cell's syntax tree, or a one-line description of why it does not parse."""
    if len(source) > MAX_CELL_CHARS:
        return f"the cell has {len(source)} characters (at most {MAX_CELL_CHARS} are read)"
    try:
        return parse(python_source(source))
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"


def bound_names(tree: ast.Module) -> set[str]:
    """Names a cell binds at its top level (also inside if/try/with/for, not inside functions)."""
    names: set[str] = set()

    def visit(body: Iterable[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            for attr in ("body", "orelse", "finalbody"):
                inner = getattr(node, attr, None)
                if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef)):
                    visit(inner)
            for handler in getattr(node, "handlers", []) or []:
                visit(handler.body)

    visit(tree.body)
    return names


# --- one notebook's plans --------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """Source to run in the worker: a whole answer cell, or another cell's definitions."""

    label: str
    filename: str
    source: str


@dataclass
class ExercisePlan:
    """What to run for one exercise, or the status it gets without running anything."""

    exercise: str
    notebook: str
    program: list[Step] = field(default_factory=list)
    status: str | None = None  # set when nothing can run
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    answer_cell: str | None = None


@dataclass
class ManualAnswer:
    question: ManualQuestion
    text: str | None
    status: str  # needs_manual_grading, not_attempted, missing_answer, not_submitted, malformed
    reason: str = ""


def _code_cells(notebook: Notebook) -> list[tuple[Cell, ast.Module | str]]:
    return [(c, parse_cell(c.source)) for c in notebook.cells if c.cell_type == "code" and c.source.strip()]


def too_long(notebook: Notebook) -> str:
    """Why ``notebook`` holds too much code to plan (a sentence for the learner), or "".

    Checked before any cell is parsed, so that planning stays fast on any notebook under the size cap.
    """
    why = too_much_code([c.source for c in notebook.cells if c.cell_type == "code"])
    if not why:
        return ""
    return (f"{notebook.path.name} was not graded: {why}. The exercise notebook holds about 50 lines of code; "
            "keep long experiments and pasted code in a notebook of their own, and hand this one in again.")


def _find_answer(name: str, released_id: str | None, parsed: list[tuple[Cell, ast.Module | str]]
                 ) -> tuple[Cell | None, ast.Module | str | None, str]:
    """The answer cell of exercise ``name``, its tree (or parse error), and a note or a reason.

    The cell tagged ``answer`` that defines ``name`` is graded; when several do, the one with the
    released cell's id, else the last (running the notebook top to bottom leaves its definition, as
    ``check`` sees it). Without such a cell, the cell with the released id; without that, any cell
    that defines ``name``. Cell ids should be unique; a duplicated answer id is noted, since a copy
    of the cell (a decoy, or an old version) would otherwise decide silently what is graded.
    """
    with_id = [(c, t) for c, t in parsed if released_id and c.id == released_id]
    duplicated = (f"{len(with_id)} cells ({', '.join(f'cell {c.index + 1}' for c, _ in with_id)}) carry the answer "
                  f"cell's id `{released_id}`, which should be unique" if len(with_id) > 1 else "")
    tagged = [(c, t) for c, t in parsed
              if ANSWER_TAG in c.tags and isinstance(t, ast.Module) and name in bound_names(t)]
    chosen = [(c, t) for c, t in tagged if c.id == released_id][-1:] or tagged[-1:]
    if chosen:
        cell, tree = chosen[0]
        notes = [f"{duplicated}; cell {cell.index + 1}, tagged `{ANSWER_TAG}`, was graded."] if duplicated else []
        if len(tagged) > 1:
            notes.append(f"{len(tagged)} cells tagged `{ANSWER_TAG}` define `{name}` "
                         f"({', '.join(f'cell {c.index + 1}' for c, _ in tagged)}); cell {cell.index + 1} was graded.")
        return cell, tree, " ".join(notes)
    by_id = next(((c, t) for c, t in with_id if isinstance(t, ast.Module) and name in bound_names(t)), None)
    by_id = by_id or (with_id[0] if with_id else None)
    if by_id is not None:
        cell, tree = by_id
        if isinstance(tree, str) or name in bound_names(tree):
            return cell, tree, (f"{duplicated}; cell {cell.index + 1} was graded." if duplicated else "")
        defines = sorted(bound_names(tree) - {"np", "math", "numpy"})
        what = f"it defines {', '.join(f'`{d}`' for d in defines)}" if defines else "it defines nothing"
        return None, None, (f"The answer cell no longer defines `{name}` ({what}): the function must keep "
                            "its name for the grader to find it.")
    elsewhere = [(c, t) for c, t in parsed if isinstance(t, ast.Module) and name in bound_names(t)
                 and not _is_check_cell(t)]
    if elsewhere:
        cell, tree = elsewhere[-1]
        return cell, tree, (f"The answer cell of `{name}` was not found (its `answer` tag or id changed); "
                            f"the cell that defines `{name}` (cell {cell.index + 1}) was graded instead.")
    return None, None, (f"The answer cell of `{name}` is missing (deleted?) and no cell defines `{name}`: "
                        "nothing to grade.")


def _is_check_cell(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "check"
               for n in ast.walk(tree))


def plan_notebook(course: CourseNotebook, notebook: Notebook | None, *, instead: Sequence[str] = ()
                  ) -> tuple[list[ExercisePlan], list[ManualAnswer]]:
    """Plans for every exercise of ``course`` and the written answers, from a submitted notebook.

    ``instead``: notebooks the learner handed in that this assignment does not grade; when ``course``
    is missing, its exercises are flagged ``wrong_notebook`` (a wrong file handed in?), not merely
    ``not_submitted``.

    Never raises: a notebook whose code cannot even be analysed (say, an expression nested so
    deeply that walking it overflows the stack) makes every exercise in it ``malformed``.
    """
    try:
        return _plan_notebook(course, notebook, instead)
    except (RecursionError, MemoryError, ValueError) as exc:
        reason = f"{notebook.path.name if notebook else course.name} could not be analysed ({type(exc).__name__})."
        plans = [ExercisePlan(name, course.name, status=MALFORMED, reason=reason) for name in course.exercises]
        return plans, [ManualAnswer(q, None, MALFORMED, reason) for q in course.manual]


def _plan_notebook(course: CourseNotebook, notebook: Notebook | None, instead: Sequence[str] = ()
                   ) -> tuple[list[ExercisePlan], list[ManualAnswer]]:
    plans = [ExercisePlan(name, course.name) for name in course.exercises]
    if notebook is None and instead:
        status = Status.WRONG_NOTEBOOK
        reason = (f"No {course.name} was found in the submission, but {', '.join(sorted(instead))} was handed in, "
                  "which this assignment does not grade: was the wrong file submitted?")
    elif notebook is None or notebook.problem is not None:
        status = NOT_SUBMITTED if notebook is None else MALFORMED
        reason = (f"No {course.name} was found in the submission." if notebook is None
                  else f"{notebook.path.name} could not be read: {notebook.problem}.")
    if notebook is None or notebook.problem is not None:
        for plan in plans:
            plan.status, plan.reason = status, reason
        return plans, [ManualAnswer(q, None, status, reason) for q in course.manual]
    refused = too_long(notebook)
    if refused:
        for plan in plans:
            plan.status, plan.reason = TOO_LONG, refused
        return plans, [_manual_answer(q, notebook) for q in course.manual]  # written answers need no parsing
    parsed = _code_cells(notebook)
    answers: dict[str, tuple[Cell, ast.Module | str]] = {}
    for plan in plans:
        cell, tree, message = _find_answer(plan.exercise, course.answer_cells.get(plan.exercise), parsed)
        if cell is None or tree is None:
            plan.status, plan.reason = MISSING_ANSWER, message
        elif isinstance(tree, str):
            plan.status = CELL_ERROR
            plan.reason = f"The answer cell of `{plan.exercise}` is not valid Python ({tree})."
        else:
            answers[plan.exercise] = (cell, tree)
            plan.answer_cell = cell.id or f"cell {cell.index + 1}"
            if message:
                plan.notes.append(message)
    owner = {ex: cell.index for ex, (cell, _) in answers.items()}
    readable = [cell for cell, tree in parsed if isinstance(tree, ast.Module)]
    trees = {k: tree for k, tree in enumerate(t for _, t in parsed if isinstance(t, ast.Module))}
    position = {cell.index: k for k, cell in enumerate(readable)}
    for plan in plans:
        if plan.status is not None:
            continue
        # the answer cell whole; from other cells, definitions and what the answer needs (see cells.py)
        owners = {ex: position.get(i, -1) for ex, i in owner.items()}
        cut = slice_cells([c.source for c in readable], position[owner[plan.exercise]], plan.exercise, owners,
                          [f"cell {c.index + 1}" for c in readable], trees)
        plan.notes += [f"Not run by the grader: {note}" for note in cut.notes]
        for k, cell in enumerate(readable):
            if cell.index == owner[plan.exercise]:
                plan.program.append(Step("answer", f"<answer cell {plan.answer_cell}>", python_source(cell.source)))
            elif k in cut.kept:
                plan.program.append(Step(f"cell {cell.index + 1}", f"<cell {cell.index + 1}>", cut.kept[k]))
    return plans, [_manual_answer(q, notebook) for q in course.manual]


def _manual_answer(question: ManualQuestion, notebook: Notebook) -> ManualAnswer:
    """The written answer: the markdown cell tagged ``manual`` with the question's id, else the cell
    with that id, else the first cell tagged ``manual`` (by its tag first, as for exercises)."""
    tagged = [c for c in notebook.cells if c.cell_type == "markdown" and "manual" in c.tags]
    cell = (next((c for c in tagged if c.id == question.cell_id), None)
            or next((c for c in notebook.cells if c.id == question.cell_id), None)
            or next(iter(tagged), None))
    if cell is None:
        return ManualAnswer(question, None, MISSING_ANSWER, "The cell for the written answer is missing (deleted?).")
    text = cell.source.strip()
    if not text or text == WRITTEN_STUB:
        return ManualAnswer(question, None, "not_attempted", "No written answer yet.")
    return ManualAnswer(question, cut_written(text), "needs_manual_grading", "Written answer: needs manual grading.")


def cut_written(text: str) -> str:
    """A written answer as the gradebook keeps it: its first MAX_WRITTEN_CHARS characters, and a note
    saying how long it was when it is longer (the rest stays in the learner's notebook)."""
    if len(text) <= MAX_WRITTEN_CHARS:
        return text
    return (text[:MAX_WRITTEN_CHARS] + f"\n\n[... cut: the answer has {len(text):,} characters; the grader keeps "
            f"the first {MAX_WRITTEN_CHARS:,}]")


# --- finding learners ------------------------------------------------------------------------------


@dataclass
class Learner:
    """One learner: a display name, a file-safe key, and their notebooks by course notebook name."""

    name: str
    key: str
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lms_id: str = ""  # the LMS's id (Canvas user id, Moodle participant id) when read from a download
    late: bool = False  # the LMS marked the submission late (Canvas's _LATE; Moodle's Status, see roster.py)
    instead: list[str] = field(default_factory=list)  # notebooks handed in that this assignment does not grade


def safe_key(name: str) -> str:
    key = re.sub(r"[^A-Za-z0-9._@+-]+", "_", name).strip("._") or "learner"
    return key[:80]


def match_course(path: Path, courses: Sequence[CourseNotebook], stem: str | None = None) -> CourseNotebook | None:
    """The course notebook ``path`` is, by its name (or ``stem``, the learner's own file name), else by content."""
    return _match_by_name(Path(f"{stem}.ipynb") if stem else path, courses) or _match_by_content(path, courses)


def _match_by_name(path: Path, courses: Sequence[CourseNotebook]) -> CourseNotebook | None:
    hits = [c for c in courses if c.stem in path.stem]
    return max(hits, key=lambda c: len(c.stem)) if hits else None


def _match_by_content(path: Path, courses: Sequence[CourseNotebook]) -> CourseNotebook | None:
    notebook = read_notebook(path)
    if notebook.problem is not None:
        return None
    ids = {c.id for c in notebook.cells}
    defined: set[str] = set()
    for _, tree in [] if too_long(notebook) else _code_cells(notebook):  # too long: by its cell ids alone
        if isinstance(tree, ast.Module):
            defined |= bound_names(tree)
    scores = [(len(ids & set(c.answer_cells.values())) + len(defined & set(c.exercises)), c) for c in courses]
    best = max(scores, key=lambda s: s[0], default=(0, None))
    return best[1] if best[0] > 0 else None


def _learner_from_file(path: Path, course: CourseNotebook | None) -> str:
    if course is None:
        return path.stem
    rest = path.stem.replace(course.stem, " ").strip(" _-.")
    return rest or path.parent.name


def add_notebook(learner: Learner, course: CourseNotebook, path: Path) -> None:
    """Give ``learner`` the notebook ``path`` for ``course``; of two, the exactly named, else the newest."""
    previous = learner.files.get(course.name)
    if previous is None:
        learner.files[course.name] = path
        return
    # two files for one notebook: the exactly named one, else the newest, is graded
    def rank(p: Path) -> tuple[bool, float]:
        return (p.name == course.name, p.stat().st_mtime)

    chosen, other = (path, previous) if rank(path) > rank(previous) else (previous, path)
    learner.files[course.name] = chosen
    learner.notes.append(f"Both {chosen.name} and {other.name} look like {course.name}; {chosen.name} was graded.")


def link_note(path: Path) -> str:
    """The note for a symbolic link met in a submission: never followed, since it could point anywhere
    the grader can read (the solutions, another learner's folder)."""
    return f"{path.name} is a symbolic link; links are not followed, so it was not graded."


def skipped_note(path: Path) -> str | None:
    """Why ``path``, found in a learner's folder, is not graded; None for a notebook file to grade."""
    if path.is_symlink():
        return link_note(path)
    if path.name.startswith("."):
        return (f"{path.name} was not graded: its name starts with a dot, which hides it"
                + (" (rename it to have it graded)." if path.suffix == ".ipynb" else "."))
    if path.is_dir():
        return (f"{path.name}/ is a folder with no notebook in it for the grader (empty, or deeper than {MAX_DEPTH} "
                "folders).")
    if path.suffix != ".ipynb":
        return f"{path.name} is not a notebook; it was not graded."
    if not path.is_file():
        return f"{path.name} is not a regular file; it was not graded."
    return None


MAX_DEPTH = 3  # folders inside a learner's folder that are looked into
SKIPPED_FOLDERS = ("__MACOSX",)  # what a zip tool adds beside the files


def folder_entries(folder: Path, depth: int = MAX_DEPTH) -> list[Path]:
    """Every entry of a learner's folder, and of the folders in it down to ``depth`` levels, in a
    stable order. Links and hidden folders are listed, never entered (they get a note)."""
    found = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:  # a folder the grader may not read: listed, so that it gets a note
        return [folder]
    for path in entries:
        real_dir = path.is_dir() and not path.is_symlink()
        if real_dir and depth > 0 and not path.name.startswith(".") and path.name not in SKIPPED_FOLDERS:
            inside = folder_entries(path, depth - 1)
            found += inside or [path]  # an empty folder is listed, so that it gets a note
        elif not (real_dir and path.name in SKIPPED_FOLDERS):
            found.append(path)
    return found


def has_notebooks(folder: Path) -> bool:
    """True when ``folder`` holds a notebook, directly or in a folder :func:`folder_entries` looks into."""
    return any(p.suffix == ".ipynb" for p in folder_entries(folder))


def unrecognised(learner: Learner, path: Path) -> None:
    """Note a file of the learner's that is none of the exercise notebooks (and keep a notebook's
    name, so that the exercises it may have replaced are flagged)."""
    learner.notes.append(f"{path.name} is not one of the exercise notebooks; it was not graded.")
    if path.suffix == ".ipynb":
        learner.instead.append(path.name)


def same_names(learners: Sequence[Learner]) -> None:
    """A note for learners who share a name but came from different places: they stay apart."""
    by_name: dict[str, list[Learner]] = {}
    for learner in learners:
        by_name.setdefault(learner.name.lower(), []).append(learner)
    for group in by_name.values():
        if len(group) > 1:
            for learner in group:
                learner.notes.append(f"{len(group)} submissions are named {learner.name!r}; they come from different "
                                     "folders or LMS ids and are graded as different learners (check that they are).")


def discover(paths: Sequence[Path], courses: Sequence[CourseNotebook]) -> list[Learner]:
    """Learners and their notebooks from the SUBMISSION arguments, in a stable order.

    Symbolic links are never followed, whether given on the command line, as a learner's folder or
    inside one: each is named in a note of the learner it would have belonged to. Every other
    entry of a learner's folder that is not graded is named in a note too.
    """
    learners: dict[tuple[str, str], Learner] = {}  # by where they came from and name: never merged by name alone

    def learner(where: Path, name: str) -> Learner:
        return learners.setdefault((str(where.absolute()), name), Learner(name, ""))

    def add_folder(folder: Path, name: str) -> None:
        owner = learner(folder, name)
        for path in folder_entries(folder):  # notebooks in the learner's own subfolders are found too
            why = skipped_note(path)
            course = None if why else match_course(path, courses)
            if why:
                owner.notes.append(why)
            elif course is None:
                unrecognised(owner, path)
            else:
                add_notebook(owner, course, path)

    for path in paths:
        if path.is_symlink():  # a learner folder or notebook given as a link: refused like any other
            learner(path, path.stem if path.suffix == ".ipynb" else path.name).notes.append(link_note(path))
        elif path.is_file():
            course = match_course(path, courses)
            name = _learner_from_file(path, course)
            if course is None:
                unrecognised(learner(path.parent, name), path)
            else:
                add_notebook(learner(path.parent, name), course, path)
        elif path.is_dir():
            if any(path.glob("*.ipynb")):
                add_folder(path, path.resolve().name)
            else:
                for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
                    if sub.is_symlink():  # a learner folder that is a link (to solutions/, say)
                        learner(sub, sub.name).notes.append(link_note(sub))
                    elif has_notebooks(sub):
                        add_folder(sub, sub.name)
        else:
            raise FileNotFoundError(f"{path}: no such notebook or folder")
    same_names(list(learners.values()))
    return assign_keys(list(learners.values()))


def assign_keys(learners: list[Learner]) -> list[Learner]:
    """Give every learner a unique, file-safe key (the LMS id joins the name when there is one);
    returns them sorted by key."""
    keys: set[str] = set()
    for learner in learners:
        base = safe_key(f"{learner.name}_{learner.lms_id}" if learner.lms_id else learner.name)
        key, n = base, 2
        while key.lower() in keys:
            key, n = f"{base}-{n}", n + 1
        keys.add(key.lower())
        learner.key = key
    return sorted(learners, key=lambda lr: lr.key.lower())
