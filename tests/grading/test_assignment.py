"""An assignment of some notebooks, ``lessonlib grade --notebooks``, or a named exercise set from
several notebooks, ``--exercise-set lesson``.

A weekly assignment grades one or two notebooks. Everything written counts and mentions only
them: the totals, grades.csv, grades.json, the LMS import's "Points Possible" and the feedback.
The hidden cases' seed is the assignment's own, so the same notebooks get the same points in any
output folder; a folder holds one assignment.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from helpers.grading import csv_rows as _rows
from helpers.grading import grade_in_process as _grade
from helpers.markdown_view import shown
from helpers.submissions import EXERCISES, WRONG_PADDING, masking, notebook, write_learner

from lessonlib import cli
from lessonlib.exercises import EXERCISES as REGISTRY
from lessonlib.exercises import MANUAL_QUESTIONS, get_assignment
from lessonlib.grading.notebooks import assignment_courses

MASKING = "02_masking.ipynb"
LESSON = get_assignment("lesson")
MASKING_POINTS = sum(e.points for e in REGISTRY.values() if e.notebook == MASKING) + sum(
    q.points for q in MANUAL_QUESTIONS.values() if q.notebook == MASKING)
ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section,Week 2 (1001),Current Score\n"
          "    Points Possible,,,,,32,\n\"Lee, Ann\",11,S1,ann,A,,50\n\"Ng, Bo\",12,S2,bo,A,,60\n"
          "\"Absent, Cy\",13,S3,cy,A,,0\n")


def _class(folder: Path) -> Path:
    """ann: 01_scaling (the stub) and a wrong 02_masking; bo: a right 02_masking only."""
    write_learner(folder / "ann", {"01_scaling.ipynb": notebook("01_scaling.ipynb", source=EXERCISES),
                                   **masking({"padding_mask": WRONG_PADDING})})
    write_learner(folder / "bo", masking())
    return folder


def test_names_are_checked_and_stems_accepted() -> None:
    assert [c.name for c in assignment_courses(["04_cost", MASKING])] == [MASKING, "04_cost.ipynb"]
    assert len(assignment_courses([])) == len({e.notebook for e in REGISTRY.values()})
    with pytest.raises(ValueError, match=r"not an exercise notebook of this course: 02_mask\.ipynb; the notebooks "
                                         r"are 01_scaling\.ipynb, 02_masking\.ipynb"):
        assignment_courses(["02_mask.ipynb"])


def test_an_unknown_notebook_is_refused_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--notebooks", "02_mask.ipynb"])
    assert stop.value.code == 2
    assert "not an exercise notebook of this course: 02_mask.ipynb" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_one_notebook_is_the_whole_assignment_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = _class(tmp_path / "class")
    roster = tmp_path / "gradebook.csv"
    roster.write_text(ROSTER)
    out = tmp_path / "out"
    code, _, stderr = _grade(capsys, str(folder), "--out", str(out), "--notebooks", MASKING, "--roster", str(roster),
                             "--assignment", "Week 2")
    assert code == 0, stderr

    summary = {row["learner"]: row for row in _rows(out / "summary.csv")}
    assert {row["max_points"] for row in summary.values()} == {f"{MASKING_POINTS:g}"}  # the absent one too
    assert summary["Absent_Cy_13"]["notes"].startswith("missing")
    assert {row["notebook"] for row in _rows(out / "grades.csv")} == {MASKING}
    data = json.loads((out / "grades.json").read_text())
    assert data["notebooks"] == [MASKING] and data["max_points"] == MASKING_POINTS
    assert {e["notebook"] for e in data["exercises"]} == {MASKING}
    assert all(lr["max_points"] == MASKING_POINTS for lr in data["learners"])
    lms = _rows(out / "lms-import.csv")
    assert lms[0]["Student"].strip() == "Points Possible" and float(lms[0]["Week 2 (1001)"]) == 32  # Canvas's, kept
    points = {lr["key"]: lr["points"] for lr in data["learners"]}  # and the grades scaled to it
    assert {row["ID"]: float(row["Week 2 (1001)"]) for row in lms[1:]} == \
        {i: pytest.approx(round(points[key] * 32 / MASKING_POINTS, 2)) for i, key in (("11", "ann"), ("12", "bo"))}

    ann = (out / "feedback" / "ann.md").read_text()
    assert "Not part of this assignment, so not graded: 01_scaling.ipynb." in shown(ann)
    assert "## 01_scaling" not in ann and "| 01_scaling |" not in ann
    for name in ("ann.md", "bo.md"):
        assert "not submitted" not in (out / "feedback" / name).read_text()
    with sqlite3.connect(tmp_path / "gradebook.db") as conn:  # the seed lives in the gradebook alone
        notebooks, stored_seed = conn.execute("SELECT notebooks, seed FROM assignments WHERE name = 'out'").fetchone()
    assert json.loads(notebooks) == [MASKING] and not (out / ".grading" / "state.json").exists()

    # the same notebooks into another folder with the same --seed: the same points and diagnoses
    again = tmp_path / "again"
    seed = str(stored_seed)
    assert _grade(capsys, str(folder), "--out", str(again), "--notebooks", MASKING, "--seed", seed)[0] == 0
    assert [(r["learner"], r["points"], r["diagnosis"]) for r in _rows(again / "grades.csv")] == \
        [(r["learner"], r["points"], r["diagnosis"]) for r in _rows(out / "grades.csv")]

    # a folder holds one assignment: another set of notebooks is refused, and nothing is rewritten
    grades = (out / "grades.csv").read_text()
    code, _, stderr = _grade(capsys, str(folder), "--out", str(out), "--notebooks", "01_scaling.ipynb")
    assert code == 2 and "grades 02_masking.ipynb, not 01_scaling.ipynb" in stderr and "a new --out folder" in stderr
    assert (out / "grades.csv").read_text() == grades


def test_the_guides_manual_csv_example_is_a_real_row() -> None:
    """The guide shows manual.csv as the grader writes it: its columns (the answer text last), and a
    written question with its notebook and points as the course has them."""
    from lessonlib.grading.reports.manual import MANUAL_COLUMNS
    from lessonlib.grading.reports.marking import ANSWER_COLUMN

    guide = (Path(__file__).resolve().parents[2] / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    block = guide.split("```\nlearner,", 1)[1].split("```", 1)[0]
    header, *rows = csv.reader(("learner," + block).splitlines())
    assert tuple(header) == (*MANUAL_COLUMNS, ANSWER_COLUMN) and rows
    for row in rows:
        entry = dict(zip(header, row))
        question = MANUAL_QUESTIONS[entry["exercise"]]
        assert (entry["notebook"], float(entry["max_points"])) == (question.notebook, question.points)


# --- a named exercise set: --exercise-set lesson ------------------------------------------------------

WRONG_MASKED_SOFTMAX = '''
def masked_softmax(scores, allowed):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) * allowed  # zeroed after the softmax
'''
LESSON_ROSTER = ("Student,ID,SIS User ID,SIS Login ID,Section,Lesson (2001),Current Score\n"
                 "    Points Possible,,,,,36,\n\"Lee, Ann\",11,S1,ann,A,,50\n\"Ng, Bo\",12,S2,bo,A,,60\n")


@pytest.fixture(scope="module")
def lesson(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[tuple[int, str, str]]]:
    """ann: the four notebooks from the solutions, with a wrong padding_mask (2.3, not in the set);
    bo: 02_masking alone, with a wrong masked_softmax, and 04_cost (not one of the set's notebooks).
    Graded with --exercise-set lesson and a Canvas roster; then bo hands in again, then a run forgets
    the option."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("lesson")
    folder = root / "class"
    write_learner(folder / "ann", {**{name: notebook(name) for name in LESSON.by_notebook()},
                                   **masking({"padding_mask": WRONG_PADDING})})
    write_learner(folder / "bo", {**masking({"masked_softmax": WRONG_MASKED_SOFTMAX}),
                                  "04_cost.ipynb": notebook("04_cost.ipynb")})
    roster = root / "gradebook.csv"
    roster.write_text(LESSON_ROSTER)
    out = root / "grades-lesson"
    runs = []

    def run(*extra: str) -> None:
        stdout, stderr = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli.main(["grade", str(folder), "--out", str(out), "--timeout", "2", "--memory", "512",
                             "--quiet", *extra])
        runs.append((code, stdout.getvalue(), stderr.getvalue()))

    run("--exercise-set", "lesson", "--roster", str(roster), "--assignment", "Lesson")
    runs.append((0, (out / "grades.csv").read_text(), ""))  # the first run's grades, for comparing
    write_learner(folder / "bo", masking())  # bo hands in again: right this time
    run("--exercise-set", "lesson")
    run()  # the option forgotten: refused, nothing rewritten
    return root, out, runs


def test_the_lesson_set_is_graded_counted_and_shown_alone(lesson) -> None:
    root, out, runs = lesson
    first, graded_first = runs[0], runs[1][1]
    assert first[0] == 0, first[2]
    items, points = list(LESSON.items), LESSON.points
    rows = list(csv.DictReader(graded_first.splitlines()))
    assert {lr: [r["exercise"] for r in rows if r["learner"] == lr] for lr in ("ann", "bo")} == \
        {"ann": items, "bo": items}  # 2.3 padding_mask, 4.x and the 01/03/05 items of others: never
    summary = {row["learner"]: row for row in _rows(out / "summary.csv")}
    assert {row["max_points"] for row in summary.values()} == {f"{points:g}"}
    written = sum(MANUAL_QUESTIONS[q].points for q in LESSON.questions)  # ann's, to grade by hand
    assert float(summary["ann"]["points"]) == points - written  # her wrong 2.3 costs nothing
    data = json.loads((out / "grades.json").read_text())
    assert data["exercise_set"] == "lesson" and data["max_points"] == points
    assert [e["exercise"] for e in data["exercises"]] == [*LESSON.exercises, *LESSON.questions]
    assert data["notebooks"] == list(LESSON.by_notebook())
    assert [(row["learner"], row["exercise"]) for row in _rows(out / "manual.csv")] == \
        [("ann", q) for q in LESSON.questions]  # bo handed in no 05
    lms = {row["ID"]: row["Lesson (2001)"] for row in _rows(out / "lms-import.csv")}
    bo = next(lr for lr in data["learners"] if lr["key"] == "bo")
    assert float(lms["12"]) == pytest.approx(round(bo["points"] * 36 / points, 2))  # of 18 points, to Canvas's 36
    assert "11" not in lms  # ann: left out until her written answer is graded
    feedback = {key: shown((out / "feedback" / f"{key}.md").read_text()) for key in ("ann", "bo")}
    assert not any(name in text for text in feedback.values() for name in ("padding_mask", "online_softmax"))
    assert "Not part of this assignment, so not graded: 04_cost.ipynb." in feedback["bo"]
    with sqlite3.connect(root / "gradebook.db") as conn:  # recorded, for later commands and resubmissions
        stored = conn.execute("SELECT notebooks, exercises FROM assignments WHERE name = 'grades-lesson'").fetchone()
    assert (json.loads(stored[0]), json.loads(stored[1])) == (list(LESSON.by_notebook()), items)


def test_a_resubmission_is_graded_within_the_set_and_the_set_is_kept(lesson, capsys) -> None:
    root, out, runs = lesson
    (code, stdout, stderr), (refused, _, why) = runs[2], runs[3]
    assert code == 0 and "graded 1 learner(s)" in stdout, stderr  # bo alone: ann's files did not change
    bo = {r["exercise"]: r for r in _rows(out / "grades.csv") if r["learner"] == "bo"}
    assert list(bo) == list(LESSON.items) and bo["masked_softmax"]["status"] == "passed"
    assert refused == 2 and "grades the exercise set lesson (--exercise-set lesson)" in why
    assert json.loads((out / "grades.json").read_text())["exercise_set"] == "lesson"  # not rewritten by it
    # a later command rewrites the files from the gradebook: still the set, still its points
    assert cli.main(["late-policy", "--out", str(out), "--none"]) == 0
    data = json.loads((out / "grades.json").read_text())
    assert data["exercise_set"] == "lesson" and data["max_points"] == LESSON.points
    assert {e["exercise"] for lr in data["learners"] for e in lr["exercises"]} == set(LESSON.items)
    assert cli.main(["override", "--out", str(out), "bo", "padding_mask", "1", "--reason", "r"]) == 2
    assert "padding_mask" in capsys.readouterr().err  # not an exercise of this assignment: no result to override


def test_the_set_and_notebooks_are_one_choice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--exercise-set", "lesson",
                     "--notebooks", MASKING])
    assert code == 2 and "leave --notebooks out" in capsys.readouterr().err and not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--exercise-set", "lessons"])
    assert "invalid choice: 'lessons' (choose from 'lesson')" in capsys.readouterr().err
