"""Word counts and working times of the notebooks and their routes, from one stated basis.

**Sections and routes.** Every markdown heading below a notebook's title (``##`` and deeper) opens
a section that runs to the next heading of any level, and names the routes it belongs to at its
end: ``[lesson · unit · everything]``, ``[unit · everything]`` or ``[everything]``. The three
routes nest: *the lesson* (the seed lesson's goals, fixtures, common errors, probe and two
questions), *the unit* (every core path) and *everything* (Going deeper included). A section whose
title begins ``Going deeper``, and every section under it (up to the next heading of the same or a
higher level), is on *everything* alone; every other section is on the unit; a section is on no
route its enclosing section is not on. A heading that breaks these rules is refused, naming it.
The text between the title and the first section (the header and the set-up cell) belongs to
every route that has a section of the notebook. A notebook's **core path** is its unit route.

Words are counted per markdown line with the regex ``[A-Za-z0-9][\\w'\\-]*``, after each
``$...$`` formula (and each ``$$...$$`` display formula) is replaced by one token.

Time, in minutes, is an estimate for a careful first-time reader: reading the prose slowly enough
to follow it, reading and running each code cell and its output, and stopping to answer each
Predict. Code is weighed by what it asks of the reader, not counted as cells:

    words / 130
    + per code cell: 0.75 (run it, read its output)
                     + 0.12 per line of code (blank lines, comments and imports are free)
                     + 0.5 per loop (for, while, comprehension), + 0.5 more per level it is nested
                     + 0.25 per function defined (def or lambda)
                     + 0.05 per new name (a name first assigned in this cell, in notebook order)
    + 2 per Predict  +  10 for one explorer session (if the route passes the explorer)

A one-line print costs under a minute; a 27-line cell with a loop nested in another, a helper
function and a dozen new names about 6.5 minutes, seven times as much. A route's time is the sum
over its sections, in every notebook.

Readers differ, so a time is stated as a range: from the estimate to the estimate times 1.2
(re-reading a formula, a second run of a cell), each end rounded to a multiple of 5 minutes. Each
notebook's header, the map in 00 and the instructor guide state the two ranges in one form:
``**Time:** 75-90 min on the core path, 85-105 min with Going deeper.`` A notebook without Going
deeper sections (00) states one range: ``**Time:** 15-20 min (no Going deeper sections).``
The lesson route is stated in minutes, the unit and everything in hours, each end rounded to the
half hour.

An exercise notebook takes its prose and code cells on the same basis, plus 15 minutes for each
auto-graded exercise (reading the prompt, writing, checking, fixing) and 25 for each written
question. An assignment of some exercises (the registry's ``ASSIGNMENTS``) takes, from each
exercise notebook it uses, the text before the first exercise and each chosen exercise's part
(its heading up to the next "Exercise" or "Question" heading).

In class (the instructor guide's session plans) the same counts are taken at a live pace, stated
in :data:`IN_CLASS`: see ``tools/session_plans.py``.

Usage::

    python tools/reading_times.py [NOTEBOOK ...]     # each notebook (default: notebooks/*.ipynb)
    python tools/reading_times.py --route lesson      # a route's sections and time (lesson, unit, all)
    python tools/reading_times.py --assignment lesson # an assignment's exercises and working time

Imported by tools/session_plans.py, tools/course_tables.py and the tests that hold the notebooks, 00,
the README and the instructor guide to these counts (tests/test_teaching.py, tests/test_routes.py, ...).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

WORD = re.compile(r"[A-Za-z0-9][\w'\-]*")
DISPLAY_MATHS = re.compile(r"\$\$.+?\$\$", re.DOTALL)
INLINE_MATHS = re.compile(r"\$[^$\n]+\$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
EXPLORER_CALL = re.compile(r"^\s*(?!plt\.)[A-Za-z_]\w*\.show\(\)", re.MULTILINE)  # an explorer, not a figure

WORDS_PER_MINUTE = 130
MINUTES_PER_CODE_CELL = 0.75
MINUTES_PER_CODE_LINE = 0.12
MINUTES_PER_LOOP = 0.5  # and as much again for each level the loop is nested in another
MINUTES_PER_FUNCTION = 0.25
MINUTES_PER_NEW_NAME = 0.05
MINUTES_PER_PREDICT = 2
MINUTES_PER_EXPLORER = 10
MINUTES_PER_EXERCISE = 15
MINUTES_PER_WRITTEN_QUESTION = 25
HIGH_FACTOR = 1.2  # the slow end of a range: the estimate times this
ROUND_TO = 5
RANGE = r"(\d+)-(\d+) min"
TIME_LINE = "**Time:** {core} on the core path, {full} with Going deeper."
SINGLE_TIME_LINE = "**Time:** {core} (no Going deeper sections)."
TIME_PATTERN = re.compile(r"\*\*Time:\*\* " + RANGE + r"(?: on the core path, " + RANGE + r" with Going deeper\.|"
                          r" \(no Going deeper sections\)\.)")
TOTALS_LINE = ("**The whole course:** {core} on the core paths, {full} with Going deeper, and {exercises} more "
               "for the exercises: {core_and_exercises} for the core paths and the exercises.")
PREDICT = re.compile(r"^\*\*Predict\.\*\*")

# --- routes ------------------------------------------------------------------------------------

LESSON, UNIT, EVERYTHING = "lesson", "unit", "everything"
ROUTES = (LESSON, UNIT, EVERYTHING)  # narrowest first; each route holds the ones before it
ROUTE_OPTIONS = {"lesson": LESSON, "unit": UNIT, "all": EVERYTHING}  # --route's names
MARKS = {" · ".join(ROUTES[i:]): frozenset(ROUTES[i:]) for i in range(len(ROUTES))}
CORE, DEEPER = frozenset({UNIT, EVERYTHING}), frozenset({EVERYTHING})  # where an unmarked heading stands
ROUTE_MARK = re.compile(r"\s+\[(" + "|".join(re.escape(m) for m in MARKS) + r")\]$")
SECTION_NUMBER = re.compile(r"^\d+\.\s+")


def mark(routes: Iterable[str]) -> str:
    """The marker a heading ends with: ``[lesson · unit · everything]``."""
    chosen = set(routes)
    return "[" + " · ".join(r for r in ROUTES if r in chosen) + "]"


def split_heading(text: str) -> tuple[str, frozenset[str] | None]:
    """(title without its section number and route mark, the marked routes or None)."""
    found = ROUTE_MARK.search(text)
    title = text[:found.start()] if found else text
    return SECTION_NUMBER.sub("", title.strip()), (MARKS[found.group(1)] if found else None)


@dataclass
class Pace:
    """How fast the counts are taken: prose, code (a factor on its weight), Predicts and explorers."""

    words_per_minute: float
    code_factor: float
    predict: float
    explorer: float

    def minutes(self, words: int, code_minutes: float, predicts: int, explorers: int) -> float:
        return (words / self.words_per_minute + self.code_factor * code_minutes + self.predict * predicts
                + self.explorer * explorers)


SELF_PACED = Pace(WORDS_PER_MINUTE, 1.0, MINUTES_PER_PREDICT, MINUTES_PER_EXPLORER)
# In class the instructor tells the prose in fewer words than it has, runs each cell and points at
# what matters (nobody types or re-reads), lets the room vote on each Predict, and demonstrates one
# or two of an explorer's things to try.
IN_CLASS = Pace(200, 0.5, 1.5, 5)

BASIS = (f"{WORDS_PER_MINUTE} words a minute; per code cell {MINUTES_PER_CODE_CELL:g} minute, "
         f"{MINUTES_PER_CODE_LINE:g} per line of code, {MINUTES_PER_LOOP:g} per loop and per level of nesting, "
         f"{MINUTES_PER_FUNCTION:g} per function defined, {MINUTES_PER_NEW_NAME:g} per new name; "
         f"{MINUTES_PER_PREDICT} per Predict, {MINUTES_PER_EXPLORER} for one explorer session; "
         f"exercises {MINUTES_PER_EXERCISE} each, written questions {MINUTES_PER_WRITTEN_QUESTION}; "
         f"ranges from the estimate to {HIGH_FACTOR:g} times it, rounded to {ROUND_TO} minutes")


def count_words(markdown: str) -> int:
    """Words of a markdown text: each formula is one word, then WORD matches are counted per line.

    A heading's route mark is not read, so it is not counted.
    """
    text = DISPLAY_MATHS.sub(" formula ", markdown)
    return sum(len(WORD.findall(INLINE_MATHS.sub(" formula ", ROUTE_MARK.sub("", line)))) for line in text.splitlines())


@dataclass(frozen=True)
class CodeWeight:
    """What one code cell asks of a reader: its lines, loops (and their nesting), functions and new names."""

    lines: int
    loops: int
    nesting: int  # levels of nesting summed over the loops: 0 for a loop not inside another
    functions: int
    new_names: int

    @property
    def minutes(self) -> float:
        return (MINUTES_PER_CODE_CELL + MINUTES_PER_CODE_LINE * self.lines
                + MINUTES_PER_LOOP * (self.loops + self.nesting) + MINUTES_PER_FUNCTION * self.functions
                + MINUTES_PER_NEW_NAME * self.new_names)


LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.comprehension)


def _loops(node: ast.AST, depth: int = 0) -> tuple[int, int]:
    """(loops, summed nesting) under ``node``; a comprehension's generators count as loops too."""
    loops = nesting = 0
    for child in ast.iter_child_nodes(node):
        here = isinstance(child, LOOPS)
        if here:
            loops, nesting = loops + 1, nesting + depth
        inner_loops, inner_nesting = _loops(child, depth + here)
        loops, nesting = loops + inner_loops, nesting + inner_nesting
    return loops, nesting


def without_magics(source: str) -> str:
    """A cell's source with its IPython magic and shell lines blanked (line numbers kept)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def code_weight(source: str, known: set[str] | None = None) -> CodeWeight:
    """Weigh one code cell; ``known`` holds the names earlier cells assigned, and gains this cell's.

    Lines are the non-blank lines that are not comments, imports or IPython magics. A cell Python
    cannot parse is weighed by its lines alone.
    """
    known = set() if known is None else known
    text = without_magics(source)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    import_lines: set[int] = set()
    loops = nesting = functions = 0
    assigned: set[str] = set()
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                import_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                functions += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assigned.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assigned.add(node.id)
        loops, nesting = _loops(tree)
    lines = sum(1 for number, line in enumerate(text.splitlines(), start=1)
                if line.strip() and not line.lstrip().startswith("#") and number not in import_lines)
    new = assigned - known
    known.update(assigned)
    return CodeWeight(lines, loops, nesting, functions, len(new))


@dataclass(frozen=True)
class Line:
    """One markdown line or one code cell of a notebook, and the routes it is on."""

    kind: str  # "markdown" or "code"
    text: str
    routes: frozenset[str]
    heading: str | None = None  # the heading text when the line is a heading
    cell: int = 0  # index of the cell it comes from

    @property
    def optional(self) -> bool:
        """Off the core path: inside a Going deeper section."""
        return UNIT not in self.routes


class RouteError(ValueError):
    """A heading whose route mark contradicts where it stands (a Going deeper title, its enclosing section)."""


@dataclass
class _Open:
    level: int
    routes: frozenset[str]
    deeper: bool


def _section_routes(level: int, text: str, open_sections: list[_Open]) -> _Open:
    """The routes of a heading at ``level``, checked against its Going deeper status and its parent."""
    while open_sections and open_sections[-1].level >= level:
        open_sections.pop()
    parent = open_sections[-1] if open_sections else None
    title, marked = split_heading(text)
    deeper = title.lower().startswith("going deeper") or (parent is not None and parent.deeper)
    implied = DEEPER if deeper else CORE
    routes = marked if marked is not None else (implied & parent.routes if parent else implied)
    if (UNIT in routes) == deeper:
        where = "inside a Going deeper section" if deeper else "on the core path"
        raise RouteError(f"heading {text!r} is {where}, so it is {mark(implied)}, not {mark(routes)}")
    if parent is not None and not routes <= parent.routes:
        raise RouteError(f"heading {text!r} is marked {mark(routes)} but the section it stands in is "
                         f"{mark(parent.routes)}: a section is on no route its enclosing section is not on")
    section = _Open(level, routes, deeper)
    open_sections.append(section)
    return section


def notebook_lines(cells: list[dict]) -> list[Line]:
    """Every markdown line and code cell in order, each with the routes of the section holding it.

    A ``#`` title is no section: the lines from it to the first ``##`` heading are on every route
    that has a section of the notebook (all three when the notebook has none).
    """
    raw: list[tuple[str, str, frozenset[str] | None, str | None, int]] = []
    open_sections: list[_Open] = []
    current: frozenset[str] | None = None  # None: before the first section
    for index, cell in enumerate(cells):
        source = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code":
            raw.append(("code", source, current, None, index))
            continue
        if cell.get("cell_type") != "markdown":
            continue
        in_fence = False
        for text in source.splitlines():
            heading = None
            if text.lstrip().startswith("```"):
                in_fence = not in_fence
            elif not in_fence and (match := HEADING.match(text)):
                level, heading = len(match.group(1)), match.group(2)
                if level == 1:
                    open_sections.clear()
                    current = None
                else:
                    current = _section_routes(level, heading, open_sections).routes
            raw.append(("markdown", text, current, heading, index))
    everywhere = frozenset().union(*(r for _, _, r, _, _ in raw if r is not None)) or frozenset(ROUTES)
    return [Line(kind, text, everywhere if routes is None else routes, heading, index)
            for kind, text, routes, heading, index in raw]


def round_to(minutes: float) -> int:
    """Minutes rounded to the nearest multiple of ROUND_TO (at least ROUND_TO)."""
    return max(ROUND_TO, int(math.floor(minutes / ROUND_TO + 0.5)) * ROUND_TO)


def time_range(minutes: float) -> tuple[int, int]:
    """(low, high) minutes: the estimate and HIGH_FACTOR times it, each rounded to ROUND_TO."""
    return round_to(minutes), max(round_to(minutes * HIGH_FACTOR), round_to(minutes) + ROUND_TO)


def format_range(span: tuple[int, int]) -> str:
    return f"{span[0]}-{span[1]} min"


def hours(minutes: float) -> float:
    """Minutes as hours rounded to the nearest half hour."""
    return round(minutes / 30) / 2


def hour_range(minutes: float) -> str:
    """An estimate in minutes as a range of hours: "7.5-9 h" (the estimate and HIGH_FACTOR times it)."""
    return f"{hours(minutes):g}-{hours(minutes * HIGH_FACTOR):g} h"


# --- sections --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One section of a notebook (or its header, title ""): its routes and the counts of its lines."""

    notebook: str  # the notebook's stem, "02_masking"
    title: str  # the heading without section number and route mark; "" for the header
    heading: str | None  # the heading as written
    routes: frozenset[str]
    words: int = 0
    code_cells: int = 0
    code_minutes: float = 0.0  # on the self-paced basis
    predicts: int = 0
    explorers: int = 0
    cells: tuple[int, ...] = ()  # indices of the cells it has lines in

    def minutes(self, pace: Pace = SELF_PACED) -> float:
        return pace.minutes(self.words, self.code_minutes, self.predicts, self.explorers)


def _cells(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def _is_section_heading(line: Line) -> bool:
    """A ``##`` (or deeper) heading: it opens a section; a ``#`` title belongs to the header."""
    return line.kind == "markdown" and line.heading is not None and not line.text.lstrip().startswith("# ")


def sections(path: Path) -> list[Section]:
    """The header and every section of a notebook file, in order, with their counts."""
    return sections_of(_cells(path), Path(path).stem)


def sections_of(cells: list[dict], name: str) -> list[Section]:
    """The header and every section of notebook ``name``'s cells, in order, with their counts.

    New names are counted in notebook order over every code cell, whatever the route.
    """
    parts: list[list[Line]] = []
    for line in notebook_lines(cells):
        if not parts or _is_section_heading(line):
            parts.append([])
        parts[-1].append(line)
    known: set[str] = set()
    found = []
    for part in parts:
        first = part[0]
        opened = _is_section_heading(first)
        markdown = [line for line in part if line.kind == "markdown"]
        code = [line for line in part if line.kind == "code"]
        found.append(Section(
            notebook=name,
            title=split_heading(first.heading)[0] if opened else "",
            heading=first.heading if opened else None,
            routes=first.routes,
            words=sum(count_words(line.text) for line in markdown),
            code_cells=len(code),
            code_minutes=sum(code_weight(line.text, known).minutes for line in code),
            predicts=sum(bool(PREDICT.match(line.text)) for line in markdown),
            explorers=sum(bool(EXPLORER_CALL.search(line.text)) for line in code),
            cells=tuple(dict.fromkeys(line.cell for line in part)),
        ))
    return found


def _on(parts: Iterable[Section], route: str) -> list[Section]:
    return [s for s in parts if route in s.routes]


def route_estimate(parts: Iterable[Section], route: str, pace: Pace = SELF_PACED) -> float:
    """Minutes of the sections on ``route``; an explorer session counts once, if the route passes one."""
    on = _on(parts, route)
    return pace.minutes(sum(s.words for s in on), sum(s.code_minutes for s in on), sum(s.predicts for s in on),
                        int(any(s.explorers for s in on)))


@dataclass(frozen=True)
class Times:
    """One notebook's sections, and its estimate on each route."""

    name: str
    sections: tuple[Section, ...]

    def estimate(self, route: str) -> float:
        return route_estimate(self.sections, route)

    @property
    def core_words(self) -> int:
        return sum(s.words for s in _on(self.sections, UNIT))

    @property
    def core_code_cells(self) -> int:
        return sum(s.code_cells for s in _on(self.sections, UNIT))

    @property
    def core_code_minutes(self) -> float:
        return sum(s.code_minutes for s in _on(self.sections, UNIT))

    @property
    def explorer_on_core(self) -> bool:
        return any(s.explorers for s in _on(self.sections, UNIT))

    @property
    def has_explorer(self) -> bool:
        return any(s.explorers for s in self.sections)

    @property
    def has_going_deeper(self) -> bool:
        return any(UNIT not in s.routes for s in self.sections)

    @property
    def on_lesson(self) -> bool:
        return bool(_on(self.sections, LESSON))

    @property
    def core_estimate(self) -> float:
        return self.estimate(UNIT)

    @property
    def full_estimate(self) -> float:
        return self.estimate(EVERYTHING)

    @property
    def lesson_estimate(self) -> float:
        return self.estimate(LESSON)

    @property
    def core_range(self) -> tuple[int, int]:
        return time_range(self.core_estimate)

    @property
    def full_range(self) -> tuple[int, int]:
        return time_range(self.full_estimate)

    @property
    def lesson_range(self) -> tuple[int, int] | None:
        return time_range(self.lesson_estimate) if self.on_lesson else None

    @property
    def time_line(self) -> str:
        if not self.has_going_deeper:
            return SINGLE_TIME_LINE.format(core=format_range(self.core_range))
        return TIME_LINE.format(core=format_range(self.core_range), full=format_range(self.full_range))


def measure(path: Path) -> Times:
    """Count the words, weigh the code cells, count the Predicts and find the explorer of a notebook."""
    path = Path(path).resolve()
    return _measure(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _measure(path: Path, mtime_ns: int) -> Times:
    """measure(), once per version of the file (routes, tables and plans measure the same notebooks)."""
    return Times(path.stem, tuple(sections(path)))


def lesson_notebooks(root: Path = Path(".")) -> list[Path]:
    return sorted((Path(root) / "notebooks").glob("*.ipynb"))


@dataclass(frozen=True)
class Route:
    """A route through every notebook: the notebooks' times on it, and its total."""

    name: str
    notebooks: tuple[Times, ...]

    @property
    def estimate(self) -> float:
        return sum(t.estimate(self.name) for t in self.notebooks)

    @property
    def range(self) -> tuple[int, int]:
        return time_range(self.estimate)

    @property
    def stated(self) -> str:
        """How 00 and the guide state it: minutes for the lesson, hours for the others."""
        return format_range(self.range) if self.name == LESSON else hour_range(self.estimate)

    def sections(self) -> list[Section]:
        return [s for t in self.notebooks for s in t.sections if self.name in s.routes]


def route(name: str, root: Path = Path(".")) -> Route:
    """The route ``name`` (lesson, unit or everything; "all" is everything) through notebooks/ under ``root``."""
    name = ROUTE_OPTIONS.get(name, name)
    if name not in ROUTES:
        raise ValueError(f"no route called {name!r}; the routes are {', '.join(ROUTE_OPTIONS)}")
    return Route(name, tuple(measure(p) for p in lesson_notebooks(root)))


# --- exercise notebooks and assignments ----------------------------------------------------------

ITEM_HEADING = re.compile(r"^##\s+(?:Exercise|Question)\s+\d+\.\d+\b", re.MULTILINE)
ANSWER_NAME = re.compile(r"^(?:def\s+(\w+)|(\w+)\s*=)", re.MULTILINE)


@dataclass(frozen=True)
class ExercisePart:
    """One "Exercise N.k" or "Question N.k" of an exercise notebook (or the text before the first)."""

    notebook: str  # "02_masking.ipynb"
    items: tuple[str, ...]  # the exercises and written questions its answer cells define; () for the preamble
    minutes: float  # its prose and code on the reading basis, and 15 per exercise, 25 per written question


def _answer_names(cell: dict, manual_names: dict[str, str]) -> list[str]:
    """What an answer cell defines: a written question's name (by cell id), else its functions and values."""
    if "manual" in cell.get("metadata", {}).get("tags", []):
        return [manual_names.get(cell.get("id", ""), cell.get("id", "?"))]
    found = ANSWER_NAME.findall("".join(cell["source"]))
    return list(dict.fromkeys(a or b for a, b in found))[:1]


def exercise_parts(path: Path, manual_names: dict[str, str] | None = None) -> list[ExercisePart]:
    """The preamble and each exercise of an exercise notebook, with their minutes.

    ``manual_names`` maps a written question's answer-cell id to its name (the registry's).
    """
    manual_names = manual_names or {}
    blocks: list[dict] = [dict(items=[], words=0, code=0.0, exercises=0, written=0)]
    known: set[str] = set()
    for cell in _cells(path):
        tags = cell.get("metadata", {}).get("tags", [])
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and ITEM_HEADING.search(source):
            blocks.append(dict(items=[], words=0, code=0.0, exercises=0, written=0))
        block = blocks[-1]
        if "answer" in tags:
            block["items"] += _answer_names(cell, manual_names)
            block["written" if "manual" in tags else "exercises"] += 1
        elif cell["cell_type"] == "markdown":
            block["words"] += count_words(source)
        elif cell["cell_type"] == "code":
            block["code"] += code_weight(source, known).minutes
    return [ExercisePart(Path(path).name, tuple(b["items"]),
                         b["words"] / WORDS_PER_MINUTE + b["code"] + MINUTES_PER_EXERCISE * b["exercises"]
                         + MINUTES_PER_WRITTEN_QUESTION * b["written"]) for b in blocks]


def exercise_estimate(path: Path) -> float:
    """Minutes for one exercise notebook: its prose and code cells, and each exercise and written question."""
    return sum(part.minutes for part in exercise_parts(path))


def _manual_names() -> dict[str, str]:
    from lessonlib.exercises import MANUAL_QUESTIONS

    return {q.cell_id: q.name for q in MANUAL_QUESTIONS.values()}


def assignment_estimate(items: Iterable[str], root: Path = Path(".")) -> float:
    """Minutes for an assignment of some exercises and written questions (names, as in the registry).

    Each exercise notebook that holds one of them adds its preamble; each chosen exercise its part.
    A name no exercise notebook under ``root`` defines is an error.
    """
    wanted = set(items)
    manual = _manual_names()
    minutes, found = 0.0, set()
    for path in sorted((Path(root) / "exercises").glob("*.ipynb")):
        parts = exercise_parts(path, manual)
        chosen = [p for p in parts[1:] if wanted & set(p.items)]
        if chosen:
            minutes += parts[0].minutes + sum(p.minutes for p in chosen)
            found |= {i for p in chosen for i in p.items}
    missing = wanted - found
    if missing:
        raise ValueError(f"no exercise notebook defines {', '.join(sorted(missing))}")
    return minutes


@dataclass(frozen=True)
class Totals:
    """The whole course: estimates of the lesson notebooks' core and full times, and of the exercises."""

    core: float
    full: float
    exercises: float

    @property
    def line(self) -> str:
        return TOTALS_LINE.format(core=hour_range(self.core), full=hour_range(self.full),
                                  exercises=hour_range(self.exercises),
                                  core_and_exercises=hour_range(self.core + self.exercises))


def totals(root: Path = Path(".")) -> Totals:
    """Sum the estimates of notebooks/*.ipynb and exercises/*.ipynb under ``root``."""
    lessons = [measure(p) for p in lesson_notebooks(root)]
    return Totals(sum(t.core_estimate for t in lessons), sum(t.full_estimate for t in lessons),
                  sum(exercise_estimate(p) for p in sorted((Path(root) / "exercises").glob("*.ipynb"))))


# --- the command line --------------------------------------------------------------------------


def _print_notebooks(paths: list[Path], all_of_them: bool) -> None:
    print(f"basis: {BASIS}")
    print(f"{'notebook':22s} {'core words':>10s} {'core cells':>10s} {'code min':>8s} {'explorer':>8s} "
          f"{'lesson':>10s} {'core':>12s} {'with Going deeper':>18s}")
    for path in paths:
        t = measure(path)
        explorer = "core" if t.explorer_on_core else ("deeper" if t.has_explorer else "none")
        lesson = format_range(t.lesson_range) if t.lesson_range else "-"
        print(f"{t.name:22s} {t.core_words:10d} {t.core_code_cells:10d} {t.core_code_minutes:8.1f} {explorer:>8s} "
              f"{lesson:>10s} {format_range(t.core_range):>12s} {format_range(t.full_range):>18s}")
    if all_of_them:
        for path in sorted(Path("exercises").glob("*.ipynb")):
            print(f"{'exercises/' + path.stem:33s} {format_range(time_range(exercise_estimate(path))):>12s}")
        print(totals().line)


def _print_route(name: str) -> None:
    chosen = route(name)
    print(f"the {chosen.name} route, section by section (minutes on the self-paced basis; the header of each "
          "notebook is its title, set-up and introduction)")
    for times in chosen.notebooks:
        on = _on(times.sections, chosen.name)
        if not on:
            continue
        print(f"{times.name}: {times.estimate(chosen.name):.1f} min")
        for s in on:
            print(f"  {s.minutes():6.1f}  {s.title or '(header)'}")
    print(f"the {chosen.name} route: {chosen.estimate:.1f} min estimated; stated as {chosen.stated} "
          f"({format_range(chosen.range)})")


def _print_assignment(name: str) -> None:
    from lessonlib.exercises import get_assignment

    assignment = get_assignment(name)
    minutes = assignment_estimate(assignment.items)
    print(f"assignment {assignment.name!r}: {assignment.title}")
    for item in assignment.items:
        print(f"  {item:30s} {assignment.points_of(item):g} points")
    print(f"{assignment.points:g} points; working time {minutes:.1f} min estimated, "
          f"{format_range(time_range(minutes))} ({hour_range(minutes)})")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Word counts and working times of the notebooks and routes.")
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to count (default: notebooks/*.ipynb)")
    parser.add_argument("--route", choices=list(ROUTE_OPTIONS), help="a route's sections and time")
    parser.add_argument("--assignment", metavar="NAME", help="an assignment's exercises and working time")
    args = parser.parse_args(argv)
    if args.route:
        _print_route(args.route)
        return 0
    if args.assignment:
        _print_assignment(args.assignment)
        return 0
    paths = args.notebooks or lesson_notebooks()
    if not paths:
        print("no notebooks found; run from the project root or name them", file=sys.stderr)
        return 1
    _print_notebooks(paths, not args.notebooks)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
