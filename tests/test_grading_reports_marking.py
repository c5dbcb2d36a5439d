"""Marking pages for written questions: alone, escaped, anonymised by default; manual.csv's answer
column; a written question in Gradescope's output as a manual question."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from report_pages import HOSTILE_ANSWER, assert_alone

from lessonlib.exercises import MANUAL_QUESTIONS
from lessonlib.grading import records as r
from lessonlib.grading.reports import marking
from lessonlib.grading.reports.safe_text import csv_row
from lessonlib.grading.store.manual import MANUAL_COLUMNS, manual_rows, read_manual

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"  # the course's, installed package or not

Q = "q2_attention_not_causal"
NAMES = {"zoe_k": "Zoë Quintessa", "bob_k": "Bob Marchetti", "amy_k": "Amy Wexford", "cal_k": "Cal Ostrander"}


def _written(text: str | None, status: str = r.NEEDS_MANUAL, points: float | None = None) -> r.ExerciseGrade:
    return r.ExerciseGrade("05_interpretation.ipynb", Q, points, 4.0, status, kind="manual", answer_text=text,
                           diagnosis="B" if points is not None else "", reason="clear" if points is not None else "")


def _results() -> list[r.LearnerResult]:
    answers = {
        "zoe_k": _written(HOSTILE_ANSWER),
        "bob_k": _written("The weight is not the effect: values matter too.", r.GRADED_BY_HAND, 2.0),
        "amy_k": _written("Later layers mix the heads again.\n\n    indented line"),
        "cal_k": _written(None, r.NOT_ATTEMPTED, 0.0),
    }
    return [r.LearnerResult(NAMES[k], k, "f", "bubblewrap", "now", [g]) for k, g in answers.items()]


def test_the_page_renders_alone_with_the_rubric_and_the_model_answer(tmp_path: Path) -> None:
    paths = marking.write_marking_pages(tmp_path, _results(), solutions=SOLUTIONS)
    assert [p.name for p in paths] == [f"{Q}.html", marking.KEY_FILE]
    text = paths[0].read_text(encoding="utf-8")
    page = assert_alone(text)
    words = page.words
    question = MANUAL_QUESTIONS[Q]
    assert question.question in words
    for item in question.rubric:
        assert item.criterion in words and all(anchor in words for anchor in item.anchors)
    assert "Model answer." in words  # the solutions notebook's cell, from the course checkout
    assert "values matter too" in words and "Graded by hand: 2 of 4" in words
    assert "Later layers mix the heads again.\n\n    indented line" in words  # line breaks and indent kept


def test_learner_text_is_shown_as_text(tmp_path: Path) -> None:
    text = marking.write_marking_pages(tmp_path, _results(), solutions=SOLUTIONS)[0].read_text(encoding="utf-8")
    page = assert_alone(text)
    assert HOSTILE_ANSWER in page.words
    assert "</textarea><script>" not in text and "&lt;/textarea&gt;&lt;script&gt;" in text


def test_anonymised_by_default_with_a_key_file_the_page_does_not_hold(tmp_path: Path) -> None:
    results = _results()
    page_path, key_path = marking.write_marking_pages(tmp_path, results, solutions=SOLUTIONS)
    text = page_path.read_text(encoding="utf-8")
    for key, name in NAMES.items():
        assert name not in text and key not in text
        assert name.split()[0] not in text  # not even a first name
    rows = list(csv.DictReader(io.StringIO(key_path.read_text(encoding="utf-8"))))
    assert {row["learner"]: row["name"] for row in rows} == NAMES
    labels = [row["number"] for row in rows]
    assert labels == [f"Learner {n}" for n in range(1, 5)]
    for label in labels:
        assert label in text  # every learner is on the page, by number
    secret = b"the course's secret"
    numbers = marking.learner_numbers(list(NAMES), secret)
    assert numbers == marking.learner_numbers(sorted(NAMES, reverse=True), secret)  # stable, whatever the order
    orders = {tuple(sorted(NAMES, key=marking.learner_numbers(list(NAMES), bytes([n])).get)) for n in range(40)}
    assert len(orders) > 10  # the order depends on the secret: the keys alone do not give it away
    assert "Not graded yet" in text and "not attempted (1)" in text


def test_names_shown_on_request_and_then_no_key_file(tmp_path: Path) -> None:
    paths = marking.write_marking_pages(tmp_path, _results(), solutions=SOLUTIONS, show_names=True)
    assert [p.name for p in paths] == [f"{Q}.html"]
    words = assert_alone(paths[0].read_text(encoding="utf-8")).words
    assert "Zoë Quintessa (zoe_k)" in words and "Learner 1" not in words


def test_no_model_answer_without_the_solutions(tmp_path: Path) -> None:
    path = marking.write_marking_pages(tmp_path / "out", _results(), solutions=tmp_path / "none")[0]
    assert "The model answer is not available here" in path.read_text(encoding="utf-8")


def test_manual_csv_rows_carry_the_answer_and_read_back(tmp_path: Path) -> None:
    results = _results()
    rows = marking.with_answers(manual_rows(results, {}), results)
    by_learner = {row[0]: row for row in rows}
    assert by_learner["amy_k"][-1] == "Later layers mix the heads again.\n\n    indented line"
    assert by_learner["zoe_k"][-1] == HOSTILE_ANSWER
    assert "cal_k" not in by_learner  # nothing written: no row, as before
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(MANUAL_COLUMNS + (marking.ANSWER_COLUMN,))
    filled = [[*row[:6], "3", *row[7:]] if row[0] == "amy_k" else row for row in rows]
    writer.writerows(csv_row(row) for row in filled)
    (tmp_path / "manual.csv").write_text(buffer.getvalue(), encoding="utf-8")
    marks = read_manual(tmp_path / "manual.csv", results)  # the extra column is read past
    assert marks["amy_k", Q].points == 3.0 and marks["zoe_k", Q].points is None


def test_gradescope_lists_a_written_question_as_graded_by_hand() -> None:
    grades = [r.ExerciseGrade("02_masking.ipynb", "masked_softmax", 3.0, 3.0, r.PASSED),
              _written("an answer"), _written(None, r.NOT_ATTEMPTED, 0.0)]
    lines = marking.gradescope_written(grades)
    assert len(lines) == 2
    assert all("graded by hand in Gradescope" in line and "not in this score" in line for line in lines)
    assert "an answer was found" in lines[0] and "no answer was found" in lines[1]
