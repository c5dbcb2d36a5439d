"""Word counts and working times of the lesson notebooks, from one stated basis.

A notebook's **core path** is everything outside its "Going deeper" sections: a markdown heading
whose text begins ``Going deeper`` opens one, and it runs until the next heading of the same or
a higher level (a ``##`` section ends at the next ``##`` or ``#``). Words are counted per
markdown line with the regex ``[A-Za-z0-9][\\w'\\-]*``, after each ``$...$`` formula (and each
``$$...$$`` display formula) is replaced by one token.

Time, in minutes, is an estimate for a careful first-time reader: reading the prose slowly enough
to follow it, reading and running each code cell and its output, and stopping to answer each
Predict. Code is weighed by what it asks of the reader, not counted as cells:

    words / 130
    + per code cell: 0.75 (run it, read its output)
                     + 0.12 per line of code (blank lines, comments and imports are free)
                     + 0.5 per loop (for, while, comprehension), + 0.5 more per level it is nested
                     + 0.25 per function defined (def or lambda)
                     + 0.05 per new name (a name first assigned in this cell)
    + 2 per Predict  +  10 for one explorer session (if any)

A one-line print costs under a minute; a 27-line cell with a loop nested in another, a helper
function and a dozen new names about 6.5 minutes, seven times as much. "core" counts the markdown
words, the code cells and the Predicts of the core path (and the explorer session if the explorer
sits on it); "full" counts everything.

Readers differ, so a time is stated as a range: from the estimate to the estimate times 1.2
(re-reading a formula, a second run of a cell), each end rounded to a multiple of 5 minutes. Each
notebook's header, the map in 00 and the instructor guide state the two ranges in one form:
``**Time:** 75-90 min on the core path, 85-105 min with Going deeper.`` A notebook without Going
deeper sections (00) states one range: ``**Time:** 15-20 min (no Going deeper sections).``

An exercise notebook takes its prose and code cells on the same basis, plus 15 minutes for each
auto-graded exercise (reading the prompt, writing, checking, fixing) and 25 for each written
question. The totals (all lesson notebooks' core paths, with Going deeper, all exercise notebooks,
and core paths with exercises) are stated in 00 and the instructor guide in hours, each end
rounded to the half hour.

Usage: ``python tools/reading_times.py [NOTEBOOK ...]`` (default: notebooks/*.ipynb). Imported by
tests/test_teaching.py, which holds the notebooks to the same counts.
"""

from __future__ import annotations

import ast
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

WORD = re.compile(r"[A-Za-z0-9][\w'\-]*")
DISPLAY_MATHS = re.compile(r"\$\$.+?\$\$", re.DOTALL)
INLINE_MATHS = re.compile(r"\$[^$\n]+\$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
EXPLORER_CALL = re.compile(r"^\s*[A-Za-z_]\w*\.show\(\)", re.MULTILINE)

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
BASIS = (f"{WORDS_PER_MINUTE} words a minute; per code cell {MINUTES_PER_CODE_CELL:g} minute, "
         f"{MINUTES_PER_CODE_LINE:g} per line of code, {MINUTES_PER_LOOP:g} per loop and per level of nesting, "
         f"{MINUTES_PER_FUNCTION:g} per function defined, {MINUTES_PER_NEW_NAME:g} per new name; "
         f"{MINUTES_PER_PREDICT} per Predict, {MINUTES_PER_EXPLORER} for one explorer session; "
         f"exercises {MINUTES_PER_EXERCISE} each, written questions {MINUTES_PER_WRITTEN_QUESTION}; "
         f"ranges from the estimate to {HIGH_FACTOR:g} times it, rounded to {ROUND_TO} minutes")


def count_words(markdown: str) -> int:
    """Words of a markdown text: each formula is one word, then WORD matches are counted per line."""
    text = DISPLAY_MATHS.sub(" formula ", markdown)
    return sum(len(WORD.findall(INLINE_MATHS.sub(" formula ", line))) for line in text.splitlines())


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


def code_weight(source: str, known: set[str] | None = None) -> CodeWeight:
    """Weigh one code cell; ``known`` holds the names earlier cells assigned, and gains this cell's.

    Lines are the non-blank lines that are not comments, imports or IPython magics. A cell Python
    cannot parse is weighed by its lines alone.
    """
    known = set() if known is None else known
    text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
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
    """One markdown line or one code cell of a notebook, and whether a Going deeper section holds it."""

    kind: str  # "markdown" or "code"
    text: str
    optional: bool
    heading: str | None = None  # the heading text when the line is a heading


def notebook_lines(cells: list[dict]) -> list[Line]:
    """Every markdown line and code cell in order, each marked optional inside Going deeper.

    A heading that begins ``Going deeper`` is itself optional; the next heading of the same or a
    higher level closes the section (and may open another one).
    """
    lines: list[Line] = []
    deeper_level: int | None = None  # level of the open Going deeper heading
    for cell in cells:
        source = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code":
            lines.append(Line("code", source, deeper_level is not None))
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
                if deeper_level is not None and level <= deeper_level:
                    deeper_level = None
                if deeper_level is None and heading.lower().startswith("going deeper"):
                    deeper_level = level
            lines.append(Line("markdown", text, deeper_level is not None, heading))
    return lines


def round_to(minutes: float) -> int:
    """Minutes rounded to the nearest multiple of ROUND_TO (at least ROUND_TO)."""
    return max(ROUND_TO, int(math.floor(minutes / ROUND_TO + 0.5)) * ROUND_TO)


def time_range(minutes: float) -> tuple[int, int]:
    """(low, high) minutes: the estimate and HIGH_FACTOR times it, each rounded to ROUND_TO."""
    return round_to(minutes), max(round_to(minutes * HIGH_FACTOR), round_to(minutes) + ROUND_TO)


def format_range(span: tuple[int, int]) -> str:
    return f"{span[0]}-{span[1]} min"


@dataclass(frozen=True)
class Times:
    """Word, code, Predict and explorer counts of one notebook, and the two estimates they give."""

    name: str
    core_words: int
    full_words: int
    core_code_cells: int
    full_code_cells: int
    core_code_minutes: float
    full_code_minutes: float
    core_predicts: int
    full_predicts: int
    explorer_on_core: bool
    has_explorer: bool
    has_going_deeper: bool

    @staticmethod
    def _minutes(words: int, code_minutes: float, predicts: int, explorer: bool) -> float:
        return (words / WORDS_PER_MINUTE + code_minutes + MINUTES_PER_PREDICT * predicts
                + (MINUTES_PER_EXPLORER if explorer else 0))

    @property
    def core_estimate(self) -> float:
        return self._minutes(self.core_words, self.core_code_minutes, self.core_predicts, self.explorer_on_core)

    @property
    def full_estimate(self) -> float:
        return self._minutes(self.full_words, self.full_code_minutes, self.full_predicts, self.has_explorer)

    @property
    def core_range(self) -> tuple[int, int]:
        return time_range(self.core_estimate)

    @property
    def full_range(self) -> tuple[int, int]:
        return time_range(self.full_estimate)

    @property
    def time_line(self) -> str:
        if not self.has_going_deeper:
            return SINGLE_TIME_LINE.format(core=format_range(self.core_range))
        return TIME_LINE.format(core=format_range(self.core_range), full=format_range(self.full_range))


def _cells(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def measure(path: Path) -> Times:
    """Count the words, weigh the code cells, count the Predicts and find the explorer of a notebook."""
    lines = notebook_lines(_cells(path))
    words = [(count_words(line.text), line.optional) for line in lines if line.kind == "markdown"]
    predicts = [line.optional for line in lines if line.kind == "markdown" and PREDICT.match(line.text)]
    code = [line for line in lines if line.kind == "code"]
    known: set[str] = set()
    weights = [code_weight(line.text, known).minutes for line in code]
    explorers = [line for line in code if EXPLORER_CALL.search(line.text)]
    return Times(
        name=Path(path).stem,
        core_words=sum(n for n, optional in words if not optional),
        full_words=sum(n for n, _ in words),
        core_code_cells=sum(not line.optional for line in code),
        full_code_cells=len(code),
        core_code_minutes=sum(w for w, line in zip(weights, code) if not line.optional),
        full_code_minutes=sum(weights),
        core_predicts=sum(not optional for optional in predicts),
        full_predicts=len(predicts),
        explorer_on_core=any(not line.optional for line in explorers),
        has_explorer=bool(explorers),
        has_going_deeper=any(line.optional for line in lines),
    )


def exercise_estimate(path: Path) -> float:
    """Minutes for one exercise notebook: its prose and code cells, and each exercise and written question."""
    cells = _cells(path)
    tags = [set(cell.get("metadata", {}).get("tags", [])) for cell in cells]
    written = sum("manual" in t for t in tags)
    exercises = sum("answer" in t for t in tags) - written
    words = sum(count_words("".join(c["source"])) for c, t in zip(cells, tags)
                if c["cell_type"] == "markdown" and "answer" not in t)
    known: set[str] = set()
    code = sum(code_weight("".join(c["source"]), known).minutes for c, t in zip(cells, tags)
               if c["cell_type"] == "code" and "answer" not in t)
    return (words / WORDS_PER_MINUTE + code + MINUTES_PER_EXERCISE * exercises
            + MINUTES_PER_WRITTEN_QUESTION * written)


def hours(minutes: float) -> float:
    """Minutes as hours rounded to the nearest half hour."""
    return round(minutes / 30) / 2


def hour_range(minutes: float) -> str:
    """An estimate in minutes as a range of hours: "7.5-9 h" (the estimate and HIGH_FACTOR times it)."""
    return f"{hours(minutes):g}-{hours(minutes * HIGH_FACTOR):g} h"


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
    lessons = [measure(p) for p in sorted((root / "notebooks").glob("*.ipynb"))]
    return Totals(sum(t.core_estimate for t in lessons), sum(t.full_estimate for t in lessons),
                  sum(exercise_estimate(p) for p in sorted((root / "exercises").glob("*.ipynb"))))


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(Path("notebooks").glob("*.ipynb"))
    if not paths:
        print("no notebooks found; run from the project root or name them", file=sys.stderr)
        return 1
    print(f"basis: {BASIS}")
    print(f"{'notebook':22s} {'core words':>10s} {'core cells':>10s} {'code min':>8s} {'explorer':>8s} "
          f"{'core':>12s} {'with Going deeper':>18s}")
    for path in paths:
        t = measure(path)
        explorer = "core" if t.explorer_on_core else ("deeper" if t.has_explorer else "none")
        print(f"{t.name:22s} {t.core_words:10d} {t.core_code_cells:10d} {t.core_code_minutes:8.1f} {explorer:>8s} "
              f"{format_range(t.core_range):>12s} {format_range(t.full_range):>18s}")
    if not argv:
        for path in sorted(Path("exercises").glob("*.ipynb")):
            print(f"{'exercises/' + path.stem:33s} {format_range(time_range(exercise_estimate(path))):>12s}")
        print(totals().line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
