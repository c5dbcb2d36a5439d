"""How long the grader takes to plan one exercise of a learner's notebook, on generated worst cases.

Planning decides, before any learner code runs, which statements of a notebook each exercise
needs (``lessonlib.exercises.cells.slice_cells``, called by ``plan_notebook``). It runs in the
grading process, before any limit applies, so it must stay fast on every notebook the grader
accepts. Each case below is the released masking notebook with generated helper code added and
``masked_softmax``'s answer reading the generated names; the script times ``plan_notebook`` for
that one exercise (parsing and slicing the whole notebook, as the grader does per exercise):

- ``same name``: one cell of N lines ``x = 1`` (every one binds the name the answer reads);
- ``independent``: one cell of N distinct definitions ``v123 = 123``;
- ``chain``: one cell of N assignments that each read the one before (``c5 = g(c4)``);
- ``many cells``: N cells of one statement each, the answer reading the last;
- ``fan-in``: N assignments and one helper that reads them all (``return (f0, f1, ...)``),
  and N statements that each change one list the answer reads (``T.append(5)``);
- ``dense``: a chain whose lines are padded with arguments up to the code-size cap, the most
  syntax nodes per character, every statement reached from the answer;
- ``over the cap``: a chain one statement longer than the cap allows (refused, unparsed);
  ``byte cap``: a notebook just under the file-size cap, all of it code (refused, unparsed).

Each case runs with the largest N the statement cap accepts, and again with ``--statements`` N
when that is larger (refused). Before the caps existed, each case ran with ``--statements`` alone.

    python benchmarks/planning.py                     # also N = 8000 (the red team's size), 5 repeats
    python benchmarks/planning.py --statements 2000 --repeat 3 --only chain,fan-in

The budget is at most 1 s per exercise for any notebook under the size cap. Timings depend on the
machine and on what else runs on it: this script prints a table of medians, it does not assert.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's lessonlib, installed or not
sys.path.insert(0, str(ROOT / "tests"))  # the test helpers: the same generated notebooks as the tests

from helpers.notebook_shapes import answer_cell, chain, fan_in, independent, many_cells, same_name  # noqa: E402

from lessonlib.exercises import cells as cells_module  # noqa: E402
from lessonlib.grading import notebooks  # noqa: E402
from lessonlib.grading.notebooks import CourseNotebook, course_notebooks, read_notebook  # noqa: E402
from lessonlib.grading.run.plans import plan_notebook  # noqa: E402

BUDGET_SECONDS = 1.0
EXERCISE = "masked_softmax"
MAX_STATEMENTS = getattr(cells_module, "MAX_STATEMENTS", None)  # None before the caps existed
MAX_CODE_CHARS = getattr(cells_module, "MAX_CODE_CHARS", None)


def dense(n: int) -> tuple[list[str], str]:
    """A chain of ``n`` lines, each padded with arguments to fill the code-size cap: the most syntax
    nodes per character (two characters per name), every statement reached from the answer."""
    room = (MAX_CODE_CHARS or 128 * 1024) - 6000  # the notebook's own code counts too
    width = max(1, room // max(n, 1) - 16) // 3
    pad = ", a" * width
    lines = ["a = 1", "d0 = g(1)"] + [f"d{i} = g(d{i - 1}{pad})" for i in range(1, n - 1)]
    return ["def g(*x):\n    return x", "\n".join(lines)], answer_cell(f"d{n - 2}")


CASES: dict[str, Callable[[int], tuple[list[str], str]]] = {
    "same name": same_name, "independent": independent, "chain": chain, "many cells": many_cells,
    "fan-in": fan_in, "dense": dense,
}


def write_case(folder: Path, name: str, extra: list[str], answer: str) -> Path:
    """The released masking notebook with ``extra`` cells before the answer and ``answer`` swapped in."""
    nb = nbformat.read(ROOT / "exercises" / "02_masking.ipynb", as_version=4)
    course = _course()
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == course.answer_cells[EXERCISE])
    nb.cells[at].source = answer
    nb.cells[at:at] = [nbformat.v4.new_code_cell(src) for src in extra]
    path = folder / f"{name.replace(' ', '_')}.ipynb"
    nbformat.write(nb, path)
    return path


def write_byte_cap_case(folder: Path) -> Path:
    """A notebook just under the size cap whose code cells are all ``x = 1`` lines (1 MB per cell)."""
    per_cell = notebooks.MAX_CELL_CHARS - 64
    count = (notebooks.MAX_NOTEBOOK_BYTES - 2**20) // (per_cell * 7 // 6 + 200)  # "\n" is two bytes in JSON
    source = ("x = 1\n" * (per_cell // 6)).rstrip("\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for _ in range(count)] + [nbformat.v4.new_code_cell(answer_cell("x"))]
    path = folder / "byte_cap.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _notebook_statements(extra: list[str], answer: str) -> int:
    """What the statement cap counts for the masking notebook with ``extra`` and ``answer``."""
    nb = nbformat.read(ROOT / "exercises" / "02_masking.ipynb", as_version=4)
    released = _course().answer_cells[EXERCISE]
    code = [c.source for c in nb.cells if c.cell_type == "code" and c.get("id") != released] + extra + [answer]
    return sum(_statement_bound(src) for src in code)


def _statement_bound(source: str) -> int:
    """``cells.statement_bound``, also for a lessonlib from before the caps (to measure before and after)."""
    counted = getattr(cells_module, "statement_bound", None)
    if counted is not None:
        return counted(source)
    code = [line for line in source.split("\n") if line.strip() and not line.lstrip().startswith("#")]
    return len(code) + source.count(";")


def largest_accepted(make: Callable[[int], tuple[list[str], str]]) -> int:
    """The largest N whose notebook is within the statement cap (each generator adds one line per N)."""
    assert MAX_STATEMENTS is not None
    return 100 + MAX_STATEMENTS - _notebook_statements(*make(100))


def _course() -> CourseNotebook:
    masking = next(c for c in course_notebooks() if c.name == "02_masking.ipynb")
    return CourseNotebook(masking.name, (EXERCISE,), (), {EXERCISE: masking.answer_cells[EXERCISE]})


def time_planning(path: Path, repeat: int) -> tuple[float, str]:
    """Median seconds to read and plan the one exercise of ``path``, and the plan's status."""
    course = _course()
    seconds, status = [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        plans, _ = plan_notebook(course, read_notebook(path))
        seconds.append(time.perf_counter() - start)
        status = plans[0].status or f"planned, {len(plans[0].program)} steps"
    return statistics.median(seconds), status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=8000, help="N, the size of each generated case")
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the table shows the median")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    rows: list[tuple[str, int, int, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="lessonlib-planning-") as tmp:
        folder = Path(tmp)
        cases = []
        for name, make in CASES.items():
            if MAX_STATEMENTS is not None:  # the largest notebook accepted, then the given size
                cases.append((name, make, largest_accepted(make)))
            if MAX_STATEMENTS is None or args.statements > largest_accepted(make):
                cases.append((name, make, args.statements))
        if MAX_STATEMENTS is not None:
            cases.append(("over the cap", chain, largest_accepted(chain) + 1))
        for name, make, n in cases:
            if only and name not in only:
                continue
            extra, answer = make(n)
            path = write_case(folder, name, extra, answer)
            median, status = time_planning(path, args.repeat)
            rows.append((name, _notebook_statements(extra, answer), path.stat().st_size, median, status))
        if not only or "byte cap" in only:
            path = write_byte_cap_case(folder)
            median, status = time_planning(path, max(1, min(args.repeat, 3)))
            rows.append(("byte cap", -1, path.stat().st_size, median, status))
    caps = (f"{MAX_STATEMENTS:,} statements and {MAX_CODE_CHARS // 1024} KB of code" if MAX_STATEMENTS is not None
            else "none")
    print(f"planning one exercise ({EXERCISE}); caps per notebook: {caps}; file-size cap: "
          f"{notebooks.MAX_NOTEBOOK_BYTES // 2**20} MB; median of {args.repeat} run(s)")
    print()
    print("| case | statements in the notebook | notebook size | median s per exercise | budget | outcome |")
    print("|---|---:|---:|---:|---|---|")
    for name, n, size, median, status in rows:
        verdict = "ok" if median <= BUDGET_SECONDS else "OVER"
        shown = "all code" if n < 0 else f"{n:,}"
        print(f"| {name} | {shown} | {size / 1024:,.0f} KB | {median:.3f} | {verdict} | {status[:70]} |")
    print()
    print(f"(budget: at most {BUDGET_SECONDS:g} s per exercise; wall-clock time of read_notebook + plan_notebook)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
