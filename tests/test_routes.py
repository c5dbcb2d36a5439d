"""The three routes through the module, held to the notebooks' route marks and to the timing tool.

- Every section heading of every notebook ends with its routes, and the timing tool accepts them: a
  Going deeper section is on *everything* alone, any other on the unit, and no section is on a route
  its enclosing section is not on. The tool refuses marks that break these rules.
- Nothing a section uses is defined only in a section off its route (read from the code, for the
  lesson and the unit); and the lesson route's code cells, run alone in order, print what the
  notebooks store, so a learner who skips the other sections sees the numbers the prose quotes.
- The lesson route reaches what the source lesson teaches: its three goals, both fixtures, its three
  common errors with their prevention tests, the library probe, and its two questions.
- The lesson route's stated range ends at 150 minutes at most, and 00 and the instructor guide state
  each route's time and the lesson's sections as the tool computes them.
- 00's tables of exercises and explorers list what the registry and the notebooks hold.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import re
import symtable
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import course_tables as ct  # noqa: E402
import reading_times as rt  # noqa: E402

NOTEBOOKS = rt.lesson_notebooks(ROOT)
GUIDE = ROOT / "docs" / "instructor-guide.md"
LESSON_LIMIT = 150  # the upper end of the lesson route's stated range, in minutes
IPYTHON_NAMES = {"get_ipython", "display", "In", "Out"}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell.get("source", []))


# --- the marks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_section_heading_names_its_routes(path):
    lines = rt.notebook_lines(_cells(path))  # raises RouteError on a mark that breaks the rules
    for line in lines:
        if line.heading is not None and not line.text.startswith("# "):
            assert rt.split_heading(line.heading)[1] is not None, (
                f"{path.name}: the heading {line.heading!r} does not end with its routes, e.g. "
                f"{rt.mark(rt.ROUTES)} or {rt.mark(rt.ROUTES[1:])}")


def _md(*headings: str) -> list[dict]:
    return [{"cell_type": "markdown", "source": [f"{h}\n" for h in headings]}]


@pytest.mark.parametrize("headings, complaint", [
    (("## 1. Core [everything]",), "on the core path"),
    (("## Going deeper: extra [unit · everything]",), "inside a Going deeper section"),
    (("## Going deeper: extra [everything]", "### Inside [unit · everything]"), "inside a Going deeper section"),
    (("## 1. Core [unit · everything]", "### Part [lesson · unit · everything]"), "enclosing section"),
])
def test_the_tool_refuses_a_mark_that_breaks_the_rules(headings, complaint):
    with pytest.raises(rt.RouteError, match=complaint):
        rt.notebook_lines(_md(*headings))


def test_a_section_runs_to_the_next_heading_and_the_header_is_on_every_route_of_the_notebook():
    cells = _md("# 09 · Title", "intro words", "## 1. One [lesson · unit · everything]", "one",
                "### Going deeper: two [everything]", "two", "## 2. Three [unit · everything]", "three")
    parts = rt.sections_of(cells, "09")
    assert [(p.title, sorted(p.routes)) for p in parts] == [
        ("", sorted(rt.ROUTES)), ("One", sorted(rt.ROUTES)), ("Going deeper: two", ["everything"]),
        ("Three", ["everything", "unit"])]
    assert [p.words for p in parts] == [4, 3, 4, 3]  # a heading's number counts, its route mark does not


# --- what a route uses is on the route ------------------------------------------------------------


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names a cell needs from earlier cells, names it defines at the top level)."""
    source = rt.without_magics(source)
    table = symtable.symtable(source, "<cell>", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    needed = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.get_name() not in defined}
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        stack.extend(child.get_children())
        needed |= {s.get_name() for s in child.get_symbols()
                   if s.is_global() and s.is_referenced() and s.get_name() not in defined}
    return needed, defined


def _route_code(path: Path, route: str) -> list[tuple[int, dict]]:
    """(index, cell) of the code cells on ``route``, in order."""
    cells = _cells(path)
    on = sorted({line.cell for line in rt.notebook_lines(cells) if line.kind == "code" and route in line.routes})
    return [(i, cells[i]) for i in on]


@pytest.mark.parametrize("route", [rt.LESSON, rt.UNIT])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_route_uses_nothing_defined_off_it(path, route):
    known = set(dir(builtins)) | IPYTHON_NAMES
    for index, cell in _route_code(path, route):
        needed, defined = _names(_source(cell))
        missing = needed - known
        assert not missing, (f"{path.name}, cell {index} on the {route} route uses {sorted(missing)}, which no "
                             f"earlier cell of that route defines")
        known |= defined


SANITIZE = re.compile(r"0x[0-9a-fA-F]+")


def _stored(cell: dict) -> tuple[str, list[str]]:
    """What a cell stored: its stdout (without IPython's %xmode notice) and the names of its errors."""
    stdout = "".join("".join(o["text"]) for o in cell.get("outputs", [])
                     if o["output_type"] == "stream" and o["name"] == "stdout")
    stdout = re.sub(r"^Exception reporting mode: \w+\n", "", stdout, flags=re.M)
    shown = {o["output_type"] for o in cell.get("outputs", [])}
    assert shown <= {"stream", "error", "display_data"}, (
        f"a lesson cell shows {shown - {'stream', 'error', 'display_data'}}: compare it here too")
    return stdout, [o["ename"] for o in cell.get("outputs", []) if o["output_type"] == "error"]


def _run_alone(path: Path) -> list[tuple[int, str, str, list[str], list[str]]]:
    """Run the lesson route's code cells of one notebook, alone and in order, in one namespace."""
    namespace: dict = {"__name__": "__main__"}
    found = []
    with np.printoptions():  # the set-up cells set NumPy's print options; put them back afterwards
        for index, cell in _route_code(path, rt.LESSON):
            out, raised = io.StringIO(), []
            with contextlib.redirect_stdout(out):
                try:
                    exec(compile(rt.without_magics(_source(cell)), f"<{path.stem} cell {index}>", "exec"), namespace)
                except Exception as exc:  # a cell tagged raises-exception stores its error's name
                    raised.append(type(exc).__name__)
            stdout, errors = _stored(cell)
            found.append((index, SANITIZE.sub("0x", stdout), SANITIZE.sub("0x", out.getvalue()), errors, raised))
    return found


LESSON_NOTEBOOKS = [p for p in NOTEBOOKS if any(rt.LESSON in s.routes and s.heading for s in rt.sections(p))]


@pytest.mark.parametrize("path", LESSON_NOTEBOOKS, ids=[p.stem for p in LESSON_NOTEBOOKS])
def test_the_lesson_route_alone_prints_what_the_notebook_stores(path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    try:
        for index, stored, printed, errors, raised in _run_alone(path):
            assert raised == errors, f"{path.name}, cell {index}: raised {raised}, stored {errors}"
            assert printed == stored, f"{path.name}, cell {index} prints differently on the lesson route alone"
    finally:
        plt.close("all")


# --- what the lesson route reaches ----------------------------------------------------------------

# what the source lesson teaches -> (notebook, section title, text its prose, code or outputs must hold)
REACHES = {
    "goal 1: scores, weights and values, with shapes": ("01_scaling", "The formula, with shapes", "V: (S, d_v)"),
    "the first fixture's weights": ("01_scaling", "The first fixture, stage by stage", "[0.669762, 0.330238]"),
    "the first fixture's context": ("01_scaling", "The first fixture, stage by stage", "context=3.981431"),
    "question 1": ("01_scaling", "Check your understanding", "values 2 and 6"),
    "goal 2: padding and causal masks": ("02_masking", "Two reasons to exclude a key", "padding mask"),
    "the second fixture": ("02_masking", "The second fixture: a disallowed key is removed before normalising",
                           "[0.268941, 0.731059, 0.0]\nmasked weight 0.0"),
    "common error 2: zeroed after the softmax": ("02_masking", "The wrong order: zeroing probabilities after the "
                                                 "softmax", "row sum 0.334759"),
    "common error 2's prevention: row sums and all-masked rows": ("02_masking", "Rows with no allowed key, and our "
                                                                  "policy", "fully_masked"),
    "common error 1: a missing or inverted causal mask": ("02_masking", "The causality test", "inverted mask"),
    "common error 1's prevention test": ("02_masking", "Causal alignment when query and key lengths differ",
                                         "assert zero weight on future keys in a tiny unequal-length fixture"),
    "common error 1's prevention test catching a leak": ("02_masking", "Causal alignment when query and key lengths "
                                                         "differ", "bottom-right weight on future keys, per query: "
                                                         "[0.6667, 0.5]"),
    "the library probe": ("02_masking", "Probing a library with a tiny case", "[[0.0, 0.0, 1.0], [0.0, 0.5, 0.5]]"),
    "goal 3 and common error 3: order is invisible": ("03_position", "Without position, order is invisible",
                                                      "permutation"),
    "common error 3's prevention test: same content, different order": ("03_position", "Same words, different order",
                                                                        "man bites dog"),
    "where position enters": ("03_position", "Three places where position can enter", "rotation"),
    "question 2": ("05_interpretation", "Check your understanding", "not by itself explain the final decision"),
}


def _section_text(stem: str, title: str) -> tuple[rt.Section, str]:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    cells = _cells(path)
    section = next(s for s in rt.sections(path) if s.title == title)
    lines = [line for line in rt.notebook_lines(cells) if line.cell in section.cells]
    text = "\n".join(line.text for line in lines)
    outputs = "".join("".join(o.get("text", "")) for i in section.cells for o in cells[i].get("outputs", []))
    return section, " ".join(text.split()) + "\n" + outputs


@pytest.mark.parametrize("what", list(REACHES))
def test_the_lesson_route_reaches(what):
    stem, title, needle = REACHES[what]
    section, text = _section_text(stem, title)
    assert rt.LESSON in section.routes, f"{what}: {stem}, section {title!r} is not on the lesson route"
    assert needle in text or " ".join(needle.split()) in text, f"{what}: {stem}, section {title!r} lacks {needle!r}"


# --- the times and tables stated ------------------------------------------------------------------


def test_the_lesson_route_fits_two_hours():
    lesson = rt.route("lesson", ROOT)
    low, high = lesson.range
    assert high <= LESSON_LIMIT, (f"the lesson route takes {lesson.estimate:.1f} min by the tool, stated as "
                                  f"{low}-{high} min: its upper end must be at most {LESSON_LIMIT}")


def test_the_unit_is_the_core_paths_and_everything_the_whole_course():
    totals = rt.totals(ROOT)
    assert rt.route("unit", ROOT).estimate == pytest.approx(totals.core)
    assert rt.route("all", ROOT).estimate == pytest.approx(totals.full)


def _start_here() -> str:
    return "\n".join(_source(c) for c in _cells(ROOT / "notebooks" / "00_start_here.ipynb")
                     if c["cell_type"] == "markdown")


ROUTE_ROW = re.compile(r"^\| \*\*(the lesson|the unit|everything)\*\* \|[^|\n]*\| ([^|\n]*) \|$", re.M)


@pytest.mark.parametrize("where", ["00", "guide"])
def test_the_three_routes_are_stated_with_their_computed_times(where):
    text = _start_here() if where == "00" else GUIDE.read_text(encoding="utf-8")
    stated = {m[1].removeprefix("the "): m[2] for m in ROUTE_ROW.finditer(text)}
    assert stated == ct.route_times(ROOT), (
        f"{where} states the routes' times as {stated}; tools/reading_times.py computes {ct.route_times(ROOT)}")


@pytest.mark.parametrize("where", ["00", "guide"])
def test_the_lesson_sections_are_stated_as_marked(where):
    text = _start_here() if where == "00" else GUIDE.read_text(encoding="utf-8")
    table = ct.lesson_sections_table(ROOT, "" if where == "00" else ct.GUIDE_LINKS)
    assert table in text, f"{where}'s table of the lesson's sections differs from the marks; write:\n{table}"


def test_00_states_the_lesson_assignment():
    line = ct.practice_line(ROOT)
    assert line in " ".join(_start_here().split()), f"00 should say: {line}"


ROW = re.compile(r"^\| `(\d\d_\w+)` \| (.*) \|$", re.M)


def test_00s_exercise_table_lists_every_exercise_and_written_question():
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    text = _start_here()
    table = text[text.index("| notebook | you write |"):]
    rows = {m[1]: m[2] for m in ROW.finditer(table)}
    notebooks = sorted({Path(e.notebook).stem for e in EXERCISES.values()}
                       | {Path(q.notebook).stem for q in MANUAL_QUESTIONS.values()})
    assert sorted(rows) == notebooks, f"00's exercise table has rows {sorted(rows)}; the exercises are in {notebooks}"
    for stem, cell in rows.items():
        named = set(re.findall(r"`(\w+)`", cell))
        expected = {e.name for e in EXERCISES.values() if Path(e.notebook).stem == stem}
        assert named == expected, f"00's row for {stem} names {sorted(named)}, the registry {sorted(expected)}"
        written = sum(Path(q.notebook).stem == stem for q in MANUAL_QUESTIONS.values())
        assert cell.count("graded by your instructor") == written, (
            f"00's row for {stem} should describe {written} written question(s), each 'graded by your instructor'")


def test_00s_explorer_table_lists_every_notebook_with_an_explorer():
    text = _start_here()
    table = text[text.index("| notebook | explorer | you change |"):]
    listed = re.findall(r"^\| (\d\d) \|", table.split("\n\n")[0], re.M)
    with_explorer = [t.name[:2] for t in (rt.measure(p) for p in NOTEBOOKS) if t.has_explorer]
    assert listed == with_explorer, f"00's explorer table lists {listed}; the notebooks with one are {with_explorer}"
