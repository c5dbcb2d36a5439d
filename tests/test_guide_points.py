"""The instructor guide's points per notebook are the registry's.

The table under "Points per notebook" in docs/instructor-guide.md is recomputed here from
``lessonlib.exercises`` (EXERCISES, MANUAL_QUESTIONS): each exercise notebook's auto-graded
exercises and written questions with their points, numbered as the exercise notebook numbers
them (the "Exercise 2.6" or "Question 5.2" heading above the answer cell), and the totals.
After a change to the exercises, ``python tests/test_guide_points.py`` prints the table to paste.

The week-by-week plan is checked the same way: the times it gives for each notebook's core path
and exercise notebook are those tools/reading_times.py computes, and the points it gives each
assignment are the registry's. So are the guide's other counts: which notebooks have written
answers (the quick start), the exercises that practise the lesson's prevention tests, and the
number of exercise notebooks.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructor-guide.md"
sys.path.insert(0, str(ROOT / "tools"))
import course_tables as ct  # noqa: E402

HEADING = re.compile(r"^#+\s*(?:Exercise|Question)\s+(\d+\.\d+)\b", re.M)


def _numbers(notebook: str) -> dict[str, str]:
    """{exercise or question name: its number} from the headings of exercises/<notebook>."""
    from lessonlib.exercises import MANUAL_QUESTIONS

    cells = json.loads((ROOT / "exercises" / notebook).read_text(encoding="utf-8"))["cells"]
    by_cell_id = {q.cell_id: q.name for q in MANUAL_QUESTIONS.values() if q.notebook == notebook}
    numbers: dict[str, str] = {}
    current = None
    for cell in cells:
        source = "".join(cell.get("source", []))
        if cell["cell_type"] == "markdown" and (found := HEADING.findall(source)):
            current = found[-1]
        if cell.get("id") in by_cell_id and current:
            numbers[by_cell_id[cell["id"]]] = current
        if cell["cell_type"] == "code" and "answer" in cell.get("metadata", {}).get("tags", []) and current:
            for name in re.findall(r"^(?:def\s+(\w+)|(\w+)\s*=)", source, re.M):
                numbers.setdefault(name[0] or name[1], current)
    return numbers


def _listed(items, numbers: dict[str, str]) -> str:
    if not items:
        return "none"
    return ", ".join(f"{numbers.get(i.name, '?')} `{i.name}` {i.points:g}" for i in items)


def points_table() -> str:
    """The guide's table, from the registry."""
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    notebooks = sorted({e.notebook for e in EXERCISES.values()} | {q.notebook for q in MANUAL_QUESTIONS.values()})
    lines = ["| notebook | auto-graded exercises and points | written questions and points | total |",
             "|---|---|---|---|"]
    for notebook in notebooks:
        numbers = _numbers(notebook)
        auto = [e for e in EXERCISES.values() if e.notebook == notebook]
        written = [q for q in MANUAL_QUESTIONS.values() if q.notebook == notebook]
        auto.sort(key=lambda e: tuple(int(x) for x in numbers.get(e.name, "99.99").split(".")))
        total = sum(e.points for e in auto) + sum(q.points for q in written)
        lines.append(f"| `exercises/{Path(notebook).stem}` | {_listed(auto, numbers)} | {_listed(written, numbers)} "
                     f"| {total:g} |")
    auto_points = sum(e.points for e in EXERCISES.values())
    written_points = sum(q.points for q in MANUAL_QUESTIONS.values())
    lines.append(f"| all {len(notebooks)} | {len(EXERCISES)} exercises, {auto_points:g} points | "
                 f"{len(MANUAL_QUESTIONS)} questions, {written_points:g} points | {auto_points + written_points:g} |")
    return "\n".join(lines) + "\n"


def test_every_exercise_has_a_number_in_its_notebook():
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    for item in [*EXERCISES.values(), *MANUAL_QUESTIONS.values()]:
        assert item.name in _numbers(item.notebook), (
            f"{item.name}: no 'Exercise N.k' or 'Question N.k' heading above its answer cell in "
            f"exercises/{item.notebook}")


def test_the_guides_points_per_notebook_are_the_registrys():
    table = points_table()
    guide = GUIDE.read_text(encoding="utf-8")
    assert table in guide, (
        "the instructor guide's table under 'Points per notebook' differs from the registry; "
        f"replace it with:\n{table}")


def test_the_guides_totals_in_words_are_the_registrys():
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    auto = sum(e.points for e in EXERCISES.values())
    assert f"{auto:g} points" in guide, f"the guide should give the auto-graded exercises' {auto:g} points"
    for question in MANUAL_QUESTIONS.values():
        assert question.points == next(iter(MANUAL_QUESTIONS.values())).points
    assert f"worth {next(iter(MANUAL_QUESTIONS.values())).points:g} points each" in guide
    said = re.search(r"\(([\w-]+) auto-graded exercises, [\d.]+ points, and (\w+) written questions", guide)
    assert said and (said[1], said[2]) == (ct.in_words(len(EXERCISES)), ct.in_words(len(MANUAL_QUESTIONS))), (
        f"the guide should count {len(EXERCISES)} auto-graded exercises and {len(MANUAL_QUESTIONS)} written questions")


# --- the term plan: the times and points it states ----------------------------------------------

def _section(title: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start:end if end > 0 else None].split())


def _notebook_points(notebook: str) -> float:
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    return (sum(e.points for e in EXERCISES.values() if e.notebook == notebook)
            + sum(q.points for q in MANUAL_QUESTIONS.values() if q.notebook == notebook))


def _lesson(prefix: str) -> Path:
    return next((ROOT / "notebooks").glob(f"{prefix}_*.ipynb"))


def test_the_term_plan_states_the_computed_times():
    sys.path.insert(0, str(ROOT / "tools"))
    import reading_times as rt

    plan = _section("A term, week by week")
    core = re.findall(r"(\d\d)'s core path \((\d+)-(\d+) min\)", plan)
    exercises = re.findall(r"`exercises/(\d\d_\w+)` \((\d+)-(\d+) min\)", plan)
    assert len(core) >= 6 and len(exercises) >= 6, "the plan gives each week's core path and exercise times"
    for prefix, low, high in core:
        assert rt.measure(_lesson(prefix)).core_range == (int(low), int(high)), f"{prefix}'s core path"
    for name, low, high in exercises:
        computed = rt.time_range(rt.exercise_estimate(ROOT / "exercises" / f"{name}.ipynb"))
        assert computed == (int(low), int(high)), f"exercises/{name}: the plan says {low}-{high}, computed {computed}"
    for prefix, low, high, full_low, full_high in re.findall(
            r"(\d\d)'s alone raise its (\d+)-(\d+) minutes to (\d+)-(\d+)", plan):
        times = rt.measure(_lesson(prefix))
        assert (times.core_range, times.full_range) == ((int(low), int(high)), (int(full_low), int(full_high)))
    assert f"{rt.hour_range(rt.totals(ROOT).exercises)} of exercises" in plan


def test_the_term_plan_states_the_registrys_points():
    from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS

    plan = _section("A term, week by week")
    single = re.findall(r"`exercises/(\d\d_\w+)`, (\d+) points", plan)
    several = re.findall(r"`--notebooks ([\w.,]+)`, (\d+) points", plan)
    assert len(single) >= 6 and several, "the plan gives each assignment's points"
    for name, points in single:
        assert _notebook_points(f"{name}.ipynb") == float(points), f"exercises/{name} is worth {points} in the plan"
    for names, points in several:
        total = sum(_notebook_points(n) for n in names.split(","))
        assert total == float(points), f"--notebooks {names} is worth {total:g}, the plan says {points}"
    everything = sum(e.points for e in EXERCISES.values()) + sum(q.points for q in MANUAL_QUESTIONS.values())
    assert f"one assignment ({everything:g} points" in plan


# --- other counts of the guide ------------------------------------------------------------------



def test_the_quick_start_names_the_notebooks_with_written_answers():
    from lessonlib.exercises import MANUAL_QUESTIONS

    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    said = re.search(r"Only notebooks ([\d, and]+) have them", guide)
    with_written = sorted(q.notebook[:2] for q in MANUAL_QUESTIONS.values())
    assert said and re.findall(r"\d\d", said[1]) == with_written, (
        f"the quick start should say which notebooks have written answers: {', '.join(with_written)}")


def test_the_table_of_prevention_exercises_counts_and_numbers_its_rows():
    text = GUIDE.read_text(encoding="utf-8")
    said = re.search(r"Besides writing attention, masks and positions, (\w+) exercises practise", text)
    table = text[said.end():].split("\n\n", 2)[1]
    rows = re.findall(r"^\| (\d+\.\d+) `(\w+)\(", table, re.M)
    assert rows and said[1] == ct.in_words(len(rows)), f"the guide says {said[1]} exercises and lists {len(rows)}"
    numbers = ct.exercise_numbers(ROOT)
    for number, name in rows:
        assert numbers.get(name) == number, (
            f"the guide numbers {name} {number}; its notebook numbers it {numbers.get(name)}")


def test_the_guide_counts_the_exercise_notebooks():
    guide = " ".join(GUIDE.read_text(encoding="utf-8").split())
    said = re.search(r"release all (\w+) exercise notebooks", guide)
    count = len(list((ROOT / "exercises").glob("*.ipynb")))
    assert said and said[1] == ct.in_words(count), f"the guide should count {count} exercise notebooks"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(points_table(), end="")
