"""The tables of routes and assignments that 00 and the instructor guide state, rendered from their sources.

Each function returns the exact Markdown that a notebook or the guide must contain: times from
tools/reading_times.py, sections from the notebooks' route marks, exercises, numbers and points from
the exercise registry (``lessonlib.exercises``) and the exercise notebooks' headings. The tests
(tests/test_routes.py) fail on the first difference and print the text to paste;
``python tools/course_tables.py`` prints every table.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reading_times as rt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUIDE_LINKS = "../notebooks/"  # from docs/ to the notebooks
NUMBERED = re.compile(r"^##\s+(?:Exercise|Question)\s+(\d+\.\d+)\b", re.MULTILINE)


def route_times(root: Path = ROOT) -> dict[str, str]:
    """route -> its time as 00 and the guide state it ("120-145 min", "9-11 h")."""
    return {name: rt.route(name, root).stated for name in rt.ROUTES}


def routes_table(root: Path = ROOT) -> str:
    """The time column of 00's and the guide's table of the three routes, as its three row endings."""
    times = route_times(root)
    return "\n".join(f"| {times[name]} |" for name in rt.ROUTES)


def lesson_sections_table(root: Path = ROOT, links: str = "") -> str:
    """The lesson route, notebook by notebook: its sections in order, and the notebook's time on it.

    ``links`` is the path from the page to notebooks/: "" in 00, "../notebooks/" in the guide.
    """
    lines = ["| notebook | the lesson's sections | time |", "|---|---|---|"]
    for times in rt.route(rt.LESSON, root).notebooks:
        if not times.on_lesson:
            continue
        titles = "; ".join(s.title for s in times.sections if s.heading is not None and rt.LESSON in s.routes)
        name = f"[`{times.name}`]({links}{times.name}.ipynb)"
        lines.append(f"| {name} | {titles} | {rt.format_range(times.lesson_range)} |")
    return "\n".join(lines)


def exercise_numbers(root: Path = ROOT) -> dict[str, str]:
    """exercise or written question -> its number ("2.4"), from the headings of exercises/*.ipynb."""
    from lessonlib.exercises import MANUAL_QUESTIONS

    manual = {q.cell_id: q.name for q in MANUAL_QUESTIONS.values()}
    numbers: dict[str, str] = {}
    for path in sorted((Path(root) / "exercises").glob("*.ipynb")):
        current = None
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell.get("source", []))
            if cell["cell_type"] == "markdown" and (found := NUMBERED.findall(source)):
                current = found[-1]
            if current and "answer" in cell.get("metadata", {}).get("tags", []):
                for name in rt._answer_names(cell, manual):
                    numbers.setdefault(name, current)
    return numbers


UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}


def in_words(n: int) -> str:
    """A count from 0 to 99 as the prose writes it: "seven", "twenty-two"."""
    return UNITS[n] if n < 20 else TENS[n // 10] + (f"-{UNITS[n % 10]}" if n % 10 else "")


def _joined(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def practice_line(root: Path = ROOT) -> str:
    """00's sentence on the lesson assignment: its exercises by number, its points and its working time."""
    from lessonlib.exercises import get_assignment

    lesson = get_assignment("lesson")
    numbers = exercise_numbers(root)
    exercises = _joined([numbers[name] for name in lesson.exercises])
    questions = _joined([numbers[name] for name in lesson.questions])
    minutes = rt.assignment_estimate(lesson.items, root)
    return (f"**Practise the lesson** with exercises {exercises} and the written question {questions} in "
            f"`exercises/`: the lesson assignment, {lesson.points:g} points and {rt.hour_range(minutes)} of work.")


def lesson_assignment_table(root: Path = ROOT) -> str:
    """The guide's table of the lesson assignment: each item's number, name, points and what it checks."""
    from lessonlib.exercises import get_assignment

    lesson = get_assignment("lesson")
    numbers = exercise_numbers(root)
    lines = ["| number | exercise | points | what it checks |", "|---|---|---|---|"]
    for item in lesson.entries:
        kind = " (written)" if item.written else ""
        lines.append(f"| {numbers[item.name]} | `{item.name}`{kind} | {item.points:g} | {item.checks} |")
    minutes = rt.assignment_estimate(lesson.items, root)
    lines.append(f"| all | {len(lesson.exercises)} exercises and {len(lesson.questions)} written question | "
                 f"{lesson.points:g} | working time {rt.format_range(rt.time_range(minutes))} |")
    return "\n".join(lines)


def main() -> int:
    for title, text in (("00 and the guide: the three routes' times (the table's last column)", routes_table()),
                        ("00: the lesson's sections", lesson_sections_table()),
                        ("the guide: the lesson's sections", lesson_sections_table(links=GUIDE_LINKS)),
                        ("00: the lesson assignment", practice_line()),
                        ("the guide: the lesson assignment", lesson_assignment_table())):
        print(f"--- {title}\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
