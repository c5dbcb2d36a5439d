"""An assignment of some notebooks: ``lessonlib grade --notebooks``.

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
from grading_submissions import EXERCISES, WRONG_PADDING, masking, notebook, write_learner
from markdown_view import shown
from test_grading_lms import _csv_rows as _rows
from test_grading_lms import _run as _grade

from lessonlib import cli
from lessonlib.exercises import EXERCISES as REGISTRY
from lessonlib.exercises import MANUAL_QUESTIONS
from lessonlib.grading.run.notebooks import assignment_courses

MASKING = "02_masking.ipynb"
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
    from lessonlib.grading.reports.marking import ANSWER_COLUMN
    from lessonlib.grading.store.manual import MANUAL_COLUMNS

    guide = (Path(__file__).resolve().parents[1] / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    block = guide.split("```\nlearner,", 1)[1].split("```", 1)[0]
    header, *rows = csv.reader(("learner," + block).splitlines())
    assert tuple(header) == (*MANUAL_COLUMNS, ANSWER_COLUMN) and rows
    for row in rows:
        entry = dict(zip(header, row))
        question = MANUAL_QUESTIONS[entry["exercise"]]
        assert (entry["notebook"], float(entry["max_points"])) == (question.notebook, question.points)
