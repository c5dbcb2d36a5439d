"""Word counts and working times of the lesson notebooks, from one stated basis.

A notebook's **core path** is everything outside its "Going deeper" sections: a markdown heading
whose text begins ``Going deeper`` opens one, and it runs until the next heading of the same or
a higher level (a ``##`` section ends at the next ``##`` or ``#``). Words are counted per
markdown line with the regex ``[A-Za-z0-9][\\w'\\-]*``, after each ``$...$`` formula (and each
``$$...$$`` display formula) is replaced by one token.

Time, in minutes, rounded up to a multiple of 5, counts reading the prose slowly enough to follow
it, reading each code cell and its output, and stopping to answer each Predict:

    words / 130  +  2 per code cell  +  1 per Predict  +  10 for one explorer session (if any)

"core" counts the markdown words, the code cells and the Predicts of the core path (and the
explorer session if the explorer sits on it); "full" counts everything. Each notebook's header, the
map in 00 and the instructor guide state these two numbers in one form:
``**Time:** about N min on the core path, M min with Going deeper.``

An exercise notebook takes its prose and code cells on the same basis, plus 10 minutes for each
auto-graded exercise (writing, checking, fixing) and 15 for each written question. The totals (all
lesson notebooks' core paths, with Going deeper, and all exercise notebooks) are stated in 00 and
the instructor guide in hours, rounded to the half hour.

Usage: ``python tools/reading_times.py [NOTEBOOK ...]`` (default: notebooks/*.ipynb). Imported by
tests/test_teaching.py, which holds the notebooks to the same counts.
"""

from __future__ import annotations

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
MINUTES_PER_CODE_CELL = 2
MINUTES_PER_PREDICT = 1
MINUTES_PER_EXPLORER = 10
MINUTES_PER_EXERCISE = 10
MINUTES_PER_WRITTEN_QUESTION = 15
ROUND_TO = 5
TIME_LINE = "**Time:** about {core} min on the core path, {full} min with Going deeper."
TIME_PATTERN = re.compile(r"\*\*Time:\*\* about (\d+) min on the core path, (\d+) min with Going deeper\.")
TOTALS_LINE = ("**The whole course:** about {core} on the core paths, {full} with Going deeper, "
               "and {exercises} more for the exercises.")
PREDICT = re.compile(r"^\*\*Predict\.\*\*")
BASIS = (f"{WORDS_PER_MINUTE} words a minute, {MINUTES_PER_CODE_CELL} minutes per code cell to run and read "
         f"its output, {MINUTES_PER_PREDICT} per Predict to answer, {MINUTES_PER_EXPLORER} for one explorer "
         f"session; exercises {MINUTES_PER_EXERCISE} each, written questions {MINUTES_PER_WRITTEN_QUESTION}; "
         f"rounded up to {ROUND_TO} minutes")


def count_words(markdown: str) -> int:
    """Words of a markdown text: each formula is one word, then WORD matches are counted per line."""
    text = DISPLAY_MATHS.sub(" formula ", markdown)
    return sum(len(WORD.findall(INLINE_MATHS.sub(" formula ", line))) for line in text.splitlines())


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


def round_up(minutes: float) -> int:
    """Minutes rounded up to a multiple of ROUND_TO."""
    return int(math.ceil(minutes / ROUND_TO - 1e-9) * ROUND_TO)


@dataclass(frozen=True)
class Times:
    """Word, cell and Predict counts of one notebook, and the two times they give."""

    name: str
    core_words: int
    full_words: int
    core_code_cells: int
    full_code_cells: int
    core_predicts: int
    full_predicts: int
    explorer_on_core: bool
    has_explorer: bool

    @staticmethod
    def _minutes(words: int, cells: int, predicts: int, explorer: bool) -> int:
        return round_up(words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * cells + MINUTES_PER_PREDICT * predicts
                        + (MINUTES_PER_EXPLORER if explorer else 0))

    @property
    def core_minutes(self) -> int:
        return self._minutes(self.core_words, self.core_code_cells, self.core_predicts, self.explorer_on_core)

    @property
    def full_minutes(self) -> int:
        return self._minutes(self.full_words, self.full_code_cells, self.full_predicts, self.has_explorer)

    @property
    def time_line(self) -> str:
        return TIME_LINE.format(core=self.core_minutes, full=self.full_minutes)


def _cells(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def measure(path: Path) -> Times:
    """Count the words, code cells, Predicts and explorer of the notebook at ``path``."""
    lines = notebook_lines(_cells(path))
    words = [(count_words(line.text), line.optional) for line in lines if line.kind == "markdown"]
    predicts = [line.optional for line in lines if line.kind == "markdown" and PREDICT.match(line.text)]
    code = [line for line in lines if line.kind == "code"]
    explorers = [line for line in code if EXPLORER_CALL.search(line.text)]
    return Times(
        name=Path(path).stem,
        core_words=sum(n for n, optional in words if not optional),
        full_words=sum(n for n, _ in words),
        core_code_cells=sum(not line.optional for line in code),
        full_code_cells=len(code),
        core_predicts=sum(not optional for optional in predicts),
        full_predicts=len(predicts),
        explorer_on_core=any(not line.optional for line in explorers),
        has_explorer=bool(explorers),
    )


def exercise_minutes(path: Path) -> int:
    """Minutes for one exercise notebook: its prose and code cells, and each exercise and written question."""
    cells = _cells(path)
    tags = [set(cell.get("metadata", {}).get("tags", [])) for cell in cells]
    written = sum("manual" in t for t in tags)
    exercises = sum("answer" in t for t in tags) - written
    words = sum(count_words("".join(c["source"])) for c, t in zip(cells, tags)
                if c["cell_type"] == "markdown" and "answer" not in t)
    code = sum(c["cell_type"] == "code" and "answer" not in t for c, t in zip(cells, tags))
    return round_up(words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * code + MINUTES_PER_EXERCISE * exercises
                    + MINUTES_PER_WRITTEN_QUESTION * written)


def hours(minutes: int) -> str:
    """Minutes as hours rounded to the nearest half hour: "5.5 h"."""
    return f"{round(minutes / 30) / 2:g} h"


@dataclass(frozen=True)
class Totals:
    """The whole course: the lesson notebooks' core and full times, and the exercise notebooks' time."""

    core: int
    full: int
    exercises: int

    @property
    def line(self) -> str:
        return TOTALS_LINE.format(core=hours(self.core), full=hours(self.full), exercises=hours(self.exercises))


def totals(root: Path = Path(".")) -> Totals:
    """Sum the times of notebooks/*.ipynb and exercises/*.ipynb under ``root``."""
    lessons = [measure(p) for p in sorted((root / "notebooks").glob("*.ipynb"))]
    return Totals(sum(t.core_minutes for t in lessons), sum(t.full_minutes for t in lessons),
                  sum(exercise_minutes(p) for p in sorted((root / "exercises").glob("*.ipynb"))))


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(Path("notebooks").glob("*.ipynb"))
    if not paths:
        print("no notebooks found; run from the project root or name them", file=sys.stderr)
        return 1
    print(f"basis: {BASIS}")
    print(f"{'notebook':22s} {'core words':>10s} {'full words':>10s} {'core cells':>10s} {'full cells':>10s} "
          f"{'explorer':>8s} {'core min':>8s} {'full min':>8s}")
    for path in paths:
        t = measure(path)
        explorer = "core" if t.explorer_on_core else ("deeper" if t.has_explorer else "none")
        print(f"{t.name:22s} {t.core_words:10d} {t.full_words:10d} {t.core_code_cells:10d} {t.full_code_cells:10d} "
              f"{explorer:>8s} {t.core_minutes:8d} {t.full_minutes:8d}")
    if not argv:
        print(totals().line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
