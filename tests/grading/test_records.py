"""Grades of record, through the command line as an instructor uses it: no resubmission, time zone or
damaged gradebook changes a grade unseen.

Each test reproduces a case where a grade used to change with no warning (or a command ended in a
traceback) and shows what happens now:

- a written answer resubmitted after it was graded by hand kept the old hand grade (7/7 for a
  one-line answer): now the hand grade is withdrawn, the answer waits for a person again, and the
  run, manual.csv, summary.csv, the marking page and the LMS file say so;
- code resubmitted after an override kept the override in the files while the run said 10/10: now
  the override is suspended until the instructor keeps or clears it, and both agree;
- Moodle times read in the machine's zone (UTC) were a day late: now the course's zone is stored
  once, changing it reads every stored time again, and one learner's time can be corrected;
- ``--assignment "Week 2"`` made a new Canvas column beside "Week 2: Masking (51002)";
- a gradebook truncated to 0 bytes was silently rebuilt, and 18 deleted history rows went unseen;
- a Moodle participant called "Alice Smith_1002_assignsubmission_file" had their notebook graded
  as Alice's;
- ``nan``, negative and zero numbers, a full disk and a read-only folder ended in tracebacks;
- ``lessonlib grade x/readme.txt`` graded a learner called "readme";
- a failure of the grader itself on a submission dropped its written answer from the files, gave
  0 points that went to the LMS, and ended with 0.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers.submissions import CORRECT_MASKED_SOFTMAX, masking, notebook, summary_rows, write_learner

from lessonlib import cli
from lessonlib.exercises import MANUAL_QUESTIONS
from lessonlib.grading.store import chain

MASKING, INTERPRETATION = "02_masking.ipynb", "05_interpretation.ipynb"
QUESTION = "q2_attention_not_causal"
LONG_ANSWER = ("A heatmap shows the weights of one head for one query: where it looked, not why the output is "
               "what it is. The value vectors, the other heads and the layers after it all change the result, "
               "so a bright cell is no proof of cause; an ablation or a gradient test would be.")
# masked_softmax written another way: still right, but a different answer from the one overridden
OTHER_MASKED_SOFTMAX = CORRECT_MASKED_SOFTMAX + '''
def masked_softmax(scores, allowed):
    return _correct(scores, allowed)
'''
CANVAS = ("Student,ID,SIS User ID,SIS Login ID,Section,Week 2: Masking (51002),Week 20: Review (51020),"
          "Current Score\n    Points Possible,,,,,,,\n\"Nguyen, Ann\",11,S11,ann,A,,,\n\"Okafor, Bo\",12,S12,bo,A,,,\n")


def _written(answer: str) -> dict[str, nbformat.NotebookNode]:
    """05_interpretation.ipynb with its written answer replaced by ``answer``."""
    nb = notebook(INTERPRETATION)
    cell = MANUAL_QUESTIONS[QUESTION].cell_id
    for c in nb.cells:
        if c.get("id") == cell:
            c.source = answer
    return {INTERPRETATION: nb}


def _lessonlib(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``lessonlib ARGS`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = cli.main(list(args))
    except SystemExit as exc:  # argparse refusing an option
        code = int(exc.code or 0)
    said = capsys.readouterr()
    return code, said.out, said.err


def _grade(capsys: pytest.CaptureFixture[str], *args: str, quiet: bool = True) -> tuple[int, str, str]:
    return _lessonlib(capsys, "grade", *args, "--timeout", "5", "--memory", "512", *(["--quiet"] if quiet else []))


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _fill_manual(out: Path, every: bool = False, **values: str) -> None:
    """manual.csv's first row (``every``: every row) filled in, as the instructor would in a spreadsheet."""
    rows = _csv(out / "manual.csv")
    for row in rows if every else rows[:1]:
        row.update(values)
    with open(out / "manual.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# --- 1. a written answer resubmitted after it was graded by hand --------------------------------------


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Week 5: ann's written answer graded 4/4 by hand, then resubmitted as one line."""
    course = tmp_path_factory.mktemp("course")
    write_learner(course / "subs" / "ann", _written(LONG_ANSWER))
    return course


def test_a_written_answer_resubmitted_after_hand_grading_waits_for_a_person_again(
        written: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, subs = written / "week5", str(written / "subs")
    args = (subs, "--out", str(out), "--notebooks", INTERPRETATION)
    assert _grade(capsys, *args)[0] == 0
    _fill_manual(out, points="4", comment="Clear and complete.")
    assert _grade(capsys, *args)[0] == 0
    graded = summary_rows(out)["ann"]
    assert float(graded["manual_pending"]) == 0 and float(graded["points"]) == float(graded["max_points"])

    write_learner(written / "subs" / "ann", _written("It is not causal."))  # the resubmission
    code, said, err = _grade(capsys, *args)
    assert code == 0, err
    assert f"review: ann / {QUESTION}: the written answer changed after it was graded by hand (4 of 4 withdrawn)" \
        in said
    now = summary_rows(out)["ann"]
    assert float(now["manual_pending"]) == 4 and float(now["points"]) == float(graded["points"]) - 4  # 3/7, not 7/7
    assert "changed after it was graded by hand" in now["flagged"]
    (row,) = _csv(out / "manual.csv")
    assert row["points"] == "" and row["answer"] == "It is not causal."
    assert "typed for the earlier answer: 4 points, comment 'Clear and complete.'" in row["note"]
    page = (out / "marking" / f"{QUESTION}.html").read_text()
    assert "Not graded yet" in page and "changed after it was graded by hand" in page
    assert "Needs manual grading" in (out / "feedback" / "ann.md").read_text()
    assert "Clear and complete." not in (out / "feedback" / "ann.md").read_text()
    code, history, _ = _lessonlib(capsys, "history", "--out", str(out), "ann")
    assert code == 0 and "'comment': 'Clear and complete.'" in history and "waits for a person again" in history

    _fill_manual(out, points="1", comment="Say why.")  # the new answer graded: it counts, and the note is gone
    assert _grade(capsys, *args)[0] == 0
    assert float(summary_rows(out)["ann"]["points"]) == float(graded["points"]) - 3
    assert _csv(out / "manual.csv")[0]["note"] == ""


# --- 2. code resubmitted after an override; 3. the Canvas column ---------------------------------------


@pytest.fixture(scope="module")
def week2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Week 2 graded with a Canvas roster whose column is "Week 2: Masking (51002)"."""
    course = tmp_path_factory.mktemp("course")
    write_learner(course / "subs" / "ann", masking())
    write_learner(course / "subs" / "bo", masking())
    (course / "canvas.csv").write_text(CANVAS)
    code = subprocess.run([sys.executable, "-m", "lessonlib.cli", "grade", str(course / "subs"), "--out",
                           str(course / "week2"), "--notebooks", MASKING, "--roster", str(course / "canvas.csv"),
                           "--assignment", "Week 2", "--timeout", "5", "--memory", "512", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert code.returncode == 0, code.stderr
    assert "(column 'Week 2: Masking (51002)')" in code.stdout and "new column" not in code.stdout
    return course


def test_assignment_names_the_canvas_column_by_its_title_and_a_new_one_needs_asking(
        week2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = (week2 / "week2" / "lms-import.csv").read_text().splitlines()[0]
    assert header.endswith(",Week 2: Masking (51002)")  # filled, not a new "Week 2" column with raw points
    fresh = week2 / "fresh"
    code, _, err = _grade(capsys, str(week2 / "subs"), "--out", str(fresh), "--notebooks", MASKING, "--roster",
                          str(week2 / "canvas.csv"), "--assignment", "Week 3")
    assert code == 2 and "no Canvas assignment column is called 'Week 3'" in err and "--new-column" in err
    assert "'Week 2: Masking (51002)'; 'Week 20: Review (51020)'" in err
    assert not (fresh / "grades.csv").exists()  # refused before any grading
    code, said, err = _grade(capsys, str(week2 / "subs"), "--out", str(fresh), "--notebooks", MASKING, "--roster",
                             str(week2 / "canvas.csv"), "--assignment", "Week 3", "--new-column")
    assert code == 0, err
    assert "(new column 'Week 3')" in said


def test_code_resubmitted_after_an_override_suspends_it_until_the_instructor_decides(
        week2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = week2 / "week2"
    assert _lessonlib(capsys, "override", "--out", str(out), "ann", "masked_softmax", "1.5", "--reason",
                      "plagiarism: see the e-mail of 3 March")[0] == 0
    overridden = float(summary_rows(out)["ann"]["points"])
    lms = {row["SIS Login ID"]: row for row in _csv(out / "lms-import.csv")}
    assert "ann" in lms

    write_learner(week2 / "subs" / "ann", masking({"masked_softmax": OTHER_MASKED_SOFTMAX}))  # resubmitted
    code, said, progress = _grade(capsys, str(week2 / "subs"), "--out", str(out), "--notebooks", MASKING,
                                  quiet=False)
    assert code == 0, progress
    line = next(line for line in progress.splitlines() if "] ann:" in line)
    shown = float(line.split(": ")[1].split("/")[0])
    files = float(summary_rows(out)["ann"]["points"])
    assert shown == files > overridden  # the run and the files agree: the graded points count
    assert "review: ann / masked_softmax: the answer changed after the override to 1.5" in said
    assert "waiting for you: 1 override(s)" in said and "--keep" in said
    assert "the answer changed after the override" in summary_rows(out)["ann"]["flagged"]
    lms = {row["SIS Login ID"]: row for row in _csv(out / "lms-import.csv")}
    assert "ann" not in lms and "bo" in lms  # no grade goes to Canvas while it waits

    code, said, err = _lessonlib(capsys, "override", "--out", str(out), "ann", "masked_softmax", "--keep",
                                 "--reason", "the new answer is the same copy")
    assert code == 0, err
    assert float(summary_rows(out)["ann"]["points"]) == overridden
    assert summary_rows(out)["ann"]["flagged"] == ""
    assert "ann" in {row["SIS Login ID"] for row in _csv(out / "lms-import.csv")}
    feedback = (out / "feedback" / "ann.md").read_text()
    assert "Set by your instructor: masked_softmax 1.5 of 3" in feedback  # the override is named, not "automatic"
    assert _lessonlib(capsys, "override", "--out", str(out), "ann", "masked_softmax", "--clear", "--reason",
                      "talked it through")[0] == 0
    assert float(summary_rows(out)["ann"]["points"]) == files


def test_the_gradebooks_state_lives_in_sqlite_alone(week2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = week2 / "week2"
    assert not (out / "learners").exists() and not (out / ".grading" / "state.json").exists()
    assert not (out / ".grading" / "roster.json").exists()
    (out / "grades.json").write_text('{"isolation": {"level": "none"}, "learners": "not read back"}')
    code, _, err = _lessonlib(capsys, "override", "--out", str(out), "bo", "causal_mask", "0", "--reason",
                              "a view is never read back")
    assert code == 0, err
    data = json.loads((out / "grades.json").read_text())
    assert data["isolation"]["level"] == "bubblewrap" and {lr["key"] for lr in data["learners"]} == {"ann", "bo"}
    assert "Week 2: Masking (51002)" in (out / "lms-import.csv").read_text()  # the roster, from the gradebook
    key = (out / "marking").exists()
    assert not key  # week 2 has no written question
    with sqlite3.connect(week2 / "gradebook.db") as conn:
        assert conn.execute("SELECT value FROM meta WHERE name = 'marking_secret'").fetchone() is not None


# --- a grader that fails on a submission --------------------------------------------------------------


def test_a_grader_failure_loses_no_row_and_changes_no_decision(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of the grader itself (a bug, or an interpreter error) on a resubmission: every item
    keeps its row, written answer included; the hand grade and the override given before stay; the
    learners are left out of the LMS file; the run says so and ends with 1; the next run grades them."""
    from lessonlib.grading.run import batch

    subs, out, roster = tmp_path / "subs", tmp_path / "week", tmp_path / "canvas.csv"
    roster.write_text(CANVAS.replace("Week 2: Masking (51002)", "Week 5 (51005)"))
    for key in ("ann", "bo"):
        write_learner(subs / key, {**masking(), **_written(LONG_ANSWER)})
    args = (str(subs), "--out", str(out), "--notebooks", f"{MASKING},{INTERPRETATION}")
    assert _grade(capsys, *args, "--roster", str(roster), "--assignment", "Week 5")[0] == 0
    _fill_manual(out, every=True, points="3", comment="Clear.")  # the written answers
    assert _lessonlib(capsys, "override", "--out", str(out), "bo", "masked_softmax", "1", "--reason", "copied")[0] == 0
    assert _grade(capsys, *args)[0] == 0
    before, typed = summary_rows(out), [(m["learner"], m["points"], m["answer_id"]) for m in _csv(out / "manual.csv")]
    assert {row["SIS Login ID"] for row in _csv(out / "lms-import.csv")} >= {"ann", "bo"}

    for key in ("ann", "bo"):  # both hand in again: the code changes, the written answer does not
        write_learner(subs / key, {**masking({"masked_softmax": OTHER_MASKED_SOFTMAX}), **_written(LONG_ANSWER)})

    def fails(*_: object) -> None:
        raise SystemError("AST constructor recursion depth mismatch (before=42, after=38)")

    with monkeypatch.context() as patch:
        patch.setattr(batch, "grade_learner", fails)
        code, said, err = _grade(capsys, *args)
    assert code == 1 and "the grader failed on 2 learner(s)' submission (ann, bo)" in err, err
    rows = _csv(out / "grades.csv")
    items = [r["exercise"] for r in rows if r["learner"] == "ann"]
    assert items == [r["exercise"] for r in rows if r["learner"] == "bo"] and QUESTION in items
    assert len(items) == len({r["exercise"] for r in rows})  # every item of the assignment, written one too
    assert {r["status"] for r in rows if r["exercise"] != QUESTION} == {"error"}
    assert {r["status"] for r in rows if r["exercise"] == QUESTION} == {"graded_by_hand"}  # the hand grade stays
    assert "SystemError" in rows[0]["diagnosis"]  # for the instructor; the learner is told no more than:
    feedback = (out / "feedback" / "ann.md").read_text()
    assert "through no fault of your answer" in feedback and "SystemError" not in feedback
    assert not {row["SIS Login ID"] for row in _csv(out / "lms-import.csv")} & {"ann", "bo"}
    assert "review" not in said  # nothing withdrawn or suspended for an answer not read
    assert [(m["learner"], m["points"], m["answer_id"]) for m in _csv(out / "manual.csv")] == typed  # kept as typed
    with sqlite3.connect(tmp_path / "gradebook.db") as conn:
        assert conn.execute("SELECT points FROM hand_grades").fetchall() == [(3.0,), (3.0,)]
        assert conn.execute("SELECT points, suspended FROM overrides").fetchall() == [(1.0, "")]

    code, said, err = _grade(capsys, *args)  # the next run grades them both
    assert code == 0 and "graded 2 learner(s)" in said, err
    assert "review: ann" not in said  # the written answers are the ones graded by hand; bo's override...
    assert "review: bo / masked_softmax: the answer changed after the override" in said  # ...waits: new code
    after = summary_rows(out)
    assert after["ann"]["points"] == before["ann"]["points"] and float(after["ann"]["manual_pending"]) == 0
    assert {row["SIS Login ID"] for row in _csv(out / "lms-import.csv")} & {"ann", "bo"} == {"ann"}


# --- 9. a damaged gradebook stops the run ---------------------------------------------------------------


@pytest.fixture
def damaged(week2: Path, tmp_path: Path) -> Path:
    """A copy of the week 2 course, to damage."""
    course = tmp_path / "course"
    shutil.copytree(week2, course)
    return course


def test_a_gradebook_truncated_to_nothing_is_refused_and_restored(damaged: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out, db = damaged / "week2", damaged / "gradebook.db"
    before = (out / "summary.csv").read_text()
    db.write_bytes(b"")
    code, _, err = _grade(capsys, str(damaged / "subs"), "--out", str(out), "--notebooks", MASKING)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "is empty (0 bytes)" in err and "gradebook.db.backups" not in err and "restore the newest backup" in err
    assert (out / "summary.csv").read_text() == before and db.stat().st_size == 0  # nothing rebuilt, nothing lost
    db.unlink()
    code, _, err = _grade(capsys, str(damaged / "subs"), "--out", str(out), "--notebooks", MASKING)
    assert code == 2 and "is missing" in err
    code, said, err = _lessonlib(capsys, "restore", "--out", str(out))
    assert code == 0, err
    assert "restored" in said
    code, said, err = _grade(capsys, str(damaged / "subs"), "--out", str(out), "--notebooks", MASKING)
    assert code == 0, err
    assert "graded 0 learner(s)" in said  # every result came back with the backup: nothing graded again
    code, history, _ = _lessonlib(capsys, "history", "--out", str(out), "bo")
    assert "a view is never read back" in history  # bo's override came back with it


def _unguarded(db: Path, statement: str, *args: object) -> None:
    """Run ``statement`` on the gradebook as learner code with the file could: the guards dropped and put back."""
    with sqlite3.connect(db) as conn:
        triggers = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'history'")
        saved = [row[0] for row in triggers]
        conn.execute("DROP TRIGGER history_no_update")
        conn.execute("DROP TRIGGER history_no_delete")
        conn.execute(statement, args)
        for sql in saved:
            conn.execute(sql)


def test_history_rows_deleted_edited_or_rewritten_are_named(damaged: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, db = damaged / "week2", damaged / "gradebook.db"
    pristine = db.read_bytes()
    _unguarded(db, "DELETE FROM history WHERE id BETWEEN 20 AND 37")  # 18 rows, the trigger put back
    code, _, err = _lessonlib(capsys, "history", "--out", str(out))
    assert code == 2 and "entries 20 to 37 of the history are missing (deleted)" in err
    assert "lessonlib restore" in err

    db.write_bytes(pristine)
    _unguarded(db, "UPDATE history SET reason = 'plagiarism, see e-mail' WHERE id = 12")
    code, _, err = _lessonlib(capsys, "override", "--out", str(out), "bo", "causal_mask", "1", "--reason", "x")
    assert code == 2 and "entry 12 (" in err and "changed after it was written" in err

    db.write_bytes(pristine)  # a rewrite that recomputes every hash: the newest backup still holds the truth
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        conn.execute("DROP TRIGGER history_no_update")
        conn.execute("UPDATE history SET reason = 'rewritten' WHERE id = 12")
        chain.seal_existing(conn)
        conn.execute("CREATE TRIGGER history_no_update BEFORE UPDATE ON history BEGIN SELECT RAISE(ABORT, 'no'); END")
    code, _, err = _lessonlib(capsys, "history", "--out", str(out))
    assert code == 2 and "differs from the same entry in the backup" in err

    db.write_bytes(pristine[:len(pristine) // 2])  # cut in half: a truncated file
    code, _, err = _lessonlib(capsys, "history", "--out", str(out))
    assert code == 2 and "corrupt" in err and len(err.strip().splitlines()) == 1


# --- one-line errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "said"), [
    (("late-policy", "--out", "w", "--per-day", "nan"), "'nan' is not a finite number"),
    (("late-policy", "--out", "w", "--per-day", "0.1", "--floor", "-0.5"), "give a fraction from 0 to 1"),
    (("late-policy", "--out", "w", "--lms-points", "-5"), "unrecognized arguments: --lms-points"),
    (("override", "--out", "w", "ann", "causal_mask", "-5", "--reason", "x"), "points are 0 or more"),
    (("grade", "s", "--out", "w", "--timeout", "0"), "give a number above 0"),
    (("grade", "s", "--out", "w", "--memory", "0"), "give at least 64"),
    (("grade", "s", "--out", "w", "--workers", "0"), "give at least 1"),
])
def test_bad_numbers_are_one_line_errors(args: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _lessonlib(capsys, *args)
    assert code == 2 and said in err and "Traceback" not in err


@pytest.mark.parametrize(("problem", "said"), [
    ("database or disk is full", "is full: nothing of this change was written"),
    ("attempt to write a readonly database", "cannot be written (the file or its folder is read-only)"),
])
def test_a_full_disk_or_a_read_only_gradebook_is_one_line_and_loses_nothing(
        damaged: Path, problem: str, said: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = damaged / "week2"
    before = summary_rows(out)["bo"]["points"]

    def refuse(*args: object) -> int:
        raise sqlite3.OperationalError(problem)

    monkeypatch.setattr(chain, "append", refuse)  # the first write of the command meets the full disk
    code, _, err = _lessonlib(capsys, "override", "--out", str(out), "bo", "causal_mask", "0.5", "--reason", "x")
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1
    monkeypatch.undo()
    assert summary_rows(out)["bo"]["points"] == before
    assert "'reason': 'x'" not in _lessonlib(capsys, "history", "--out", str(out), "bo")[1]


def test_a_full_disk_while_writing_the_files_is_one_line(damaged: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from lessonlib.grading import files

    def full(path: Path, data: bytes, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(files, "atomic_write_bytes", full)
    code, _, err = _lessonlib(capsys, "override", "--out", str(damaged / "week2"), "bo", "causal_mask", "0.5",
                              "--reason", "recorded before the files")
    assert code == 2 and "no space left on the disk" in err and len(err.strip().splitlines()) == 1


# --- 10. Moodle names parsed from the right; issue 40: what is not a submission ------------------------------


def test_a_participant_named_like_a_moodle_suffix_is_not_graded_as_someone_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    download = tmp_path / "moodle"
    download.mkdir()
    nbformat.write(notebook(MASKING), download / f"Alice Smith_1002_assignsubmission_file_{MASKING}")
    impostor = download / f"Alice Smith_1002_assignsubmission_file_2001_assignsubmission_file_{MASKING}"
    shutil.copy(Path(__file__).resolve().parents[2] / "exercises" / MASKING, impostor)  # a blank notebook
    code, _, err = _grade(capsys, str(download), "--out", str(tmp_path / "week2"), "--notebooks", MASKING)
    assert code == 0, err
    rows = summary_rows(tmp_path / "week2")
    (alice,) = rows.values()
    assert alice["lms_id"] == "1002" and float(alice["points"]) == float(alice["max_points"])  # her own, in full
    with open(tmp_path / "week2" / "summary.csv", newline="") as f:
        unattributed = [row["notes"] for row in csv.DictReader(f) if row["learner"] == "(unattributed)"]
    assert len(unattributed) == 1 and "participant 2001" in unattributed[0] and "participant 1002" in unattributed[0]


def test_what_is_not_a_notebook_a_zip_or_a_folder_is_refused_before_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "readme.txt").write_text("hand-in instructions\n")
    code, _, err = _grade(capsys, str(tmp_path / "x" / "readme.txt"), "--out", str(tmp_path / "week2"))
    assert code == 2 and "readme.txt is not a notebook (.ipynb)" in err
    assert not (tmp_path / "gradebook.db").exists()  # refused before anything was made
    (tmp_path / "x" / MASKING).mkdir()
    code, _, err = _lessonlib(capsys, "similarity", str(tmp_path / "x" / MASKING), "--out", str(tmp_path / "w"))
    assert code == 2 and "is a folder named like a notebook" in err


def test_a_folder_named_like_a_notebook_in_a_learners_folder_is_flagged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "subs" / "ann" / MASKING).mkdir(parents=True)
    (tmp_path / "subs" / "ann" / MASKING / "checkpoint.txt").write_text("saved as a folder by mistake\n")
    code, _, err = _grade(capsys, str(tmp_path / "subs"), "--out", str(tmp_path / "week2"), "--notebooks", MASKING)
    assert code == 0, err
    grades = _csv(tmp_path / "week2" / "grades.csv")
    assert {g["status"] for g in grades} == {"malformed"} and "not_submitted" not in str(grades)
    assert "folder named like a notebook" in summary_rows(tmp_path / "week2")["ann"]["flagged"] or \
        "folder named like a notebook" in (tmp_path / "week2" / "feedback" / "ann.md").read_text()


# --- 2. submission times in the course's time zone; 4. late policy in words --------------------------------


MOODLE_SHEET = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                "Last modified (submission),Last modified (grade),Feedback comments\n"
                "Participant 1001,Bob Smith,bob@example.org,Submitted for grading,,100.00,Yes,"
                "\"Monday, 15 June 2026, 10:00 PM\",-,\n"
                "Participant 1002,Amy Jones,amy@example.org,Submitted for grading,,100.00,Yes,"
                "\"Monday, 15 June 2026, 11:30 PM\",-,\n"
                "Participant 1003,Cat Long,cat@example.org,Submitted for grading - 1 day 1 hour late,,100.00,Yes,"
                "\"Wednesday, 17 June 2026, 1:00 AM\",-,\n")
DUE = "2026-06-15T23:59+02:00"  # 23:59 in Berlin (summer time)


def test_moodle_times_are_read_in_the_courses_zone_on_a_utc_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        _zones(tmp_path, capsys)
    finally:
        monkeypatch.undo()
        time.tzset()


def _points(out: Path) -> dict[str, float]:
    return {row["name"].split()[0]: float(row["points"]) for row in summary_rows(out).values()}


def _zones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    download, out = tmp_path / "moodle", tmp_path / "week2"
    for participant in ("Bob Smith_1001", "Amy Jones_1002", "Cat Long_1003"):
        write_learner(download / f"{participant}_assignsubmission_file_", masking())
    (tmp_path / "worksheet.csv").write_text(MOODLE_SHEET)
    args = (str(download), "--out", str(out), "--notebooks", MASKING, "--roster", str(tmp_path / "worksheet.csv"))
    code, _, err = _grade(capsys, *args)
    assert code == 2 and "the course has no time zone yet: give it once with --timezone" in err  # never the machine's

    assert _grade(capsys, *args, "--timezone", "UTC")[0] == 0  # the wrong zone, as a UTC machine had it
    assert _lessonlib(capsys, "late-policy", "--out", str(out), "--due", DUE, "--zero")[0] == 0
    full = float(summary_rows(out)[next(iter(summary_rows(out)))]["max_points"])
    assert _points(out) == {"Bob": 0.0, "Amy": 0.0, "Cat": 0.0}  # 22:00 and 23:30 read as UTC: late

    code, _, err = _grade(capsys, *args, "--timezone", "Europe/Berlin")
    assert code == 2 and "the course's time zone is UTC" in err and "lessonlib timezone --out" in err
    code, said, err = _lessonlib(capsys, "timezone", "--out", str(out), "Europe/Berlin", "--reason", "the LMS's zone")
    assert code == 0, err
    assert "3 stored submission time(s) read again" in said
    assert _points(out) == {"Bob": full, "Amy": full, "Cat": 0.0}
    assert _grade(capsys, *args)[0] == 0  # the stored zone: no --timezone needed again
    assert _points(out) == {"Bob": full, "Amy": full, "Cat": 0.0}
    code, history, _ = _lessonlib(capsys, "history", "--out", str(out))
    assert "read again in the course's time zone Europe/Berlin" in history

    cat = next(key for key, row in summary_rows(out).items() if row["name"] == "Cat Long")
    assert "late; Submitted 2 days after the due date" in summary_rows(out)[cat]["notes"]
    code, _, err = _lessonlib(capsys, "submission-time", "--out", str(out), cat, "2026-06-15T23:10+02:00",
                              "--reason", "Moodle was down; she e-mailed the notebook at 23:10")
    assert code == 0, err
    assert _points(out)["Cat"] == full and not summary_rows(out)[cat]["notes"].startswith("late")
    assert "a correction by the instructor" in (out / "feedback" / f"{cat}.md").read_text()

    amy = next(key for key, row in summary_rows(out).items() if row["name"] == "Amy Jones")
    assert _lessonlib(capsys, "extend", "--out", str(out), amy, "--due", "2026-06-17T12:00+02:00", "--reason",
                      "ill")[0] == 0
    assert _lessonlib(capsys, "submission-time", "--out", str(out), amy, "2026-06-17T09:00+02:00", "--reason",
                      "her upload failed; the e-mail came at 9:00")[0] == 0
    assert "extension: the submission time changed" in summary_rows(out)[amy]["flagged"]
    code, said, _ = _grade(capsys, *args)
    assert "waiting for you: " in said and "--keep or --clear" in said
    assert _lessonlib(capsys, "extend", "--out", str(out), amy, "--keep", "--reason", "the e-mail counts")[0] == 0
    assert summary_rows(out)[amy]["flagged"] == "" and _points(out)["Amy"] == full
    assert summary_rows(out)[amy]["notes"] == ""  # an extension that covers the work: not "late"

    bob = next(key for key, row in summary_rows(out).items() if row["name"] == "Bob Smith")
    assert _lessonlib(capsys, "override", "--out", str(out), bob, "causal_mask", "0", "--reason",
                      "copied from a classmate")[0] == 0
    comment = {row["Full name"]: row["Feedback comments"] for row in _csv(out / "lms-import.csv")}["Bob Smith"]
    assert "Set by your instructor: causal_mask 0 of" in comment and "copied from a classmate" in comment


def test_the_late_floor_says_what_it_is_a_fraction_of() -> None:
    from datetime import datetime, timedelta, timezone

    from lessonlib.grading.store import LatePolicy, late_adjusted

    due = datetime(2026, 3, 2, 17, tzinfo=timezone.utc)
    policy = LatePolicy("per_day", 0.25, floor=0.5)
    floored = late_adjusted(9.0, 10.0, policy, due=due, submitted=due + timedelta(days=2, hours=1))
    assert floored.points == 5.0
    assert floored.sentence == ("Submitted 3 days after the due date; the late policy deducts 25% of the 10 points "
                                "possible per started day late, 7.5 points in all, but no deduction takes a score "
                                "below 50% of the points possible (5 of 10 points): 9 became 5.")
    below = late_adjusted(4.0, 10.0, policy, due=due, submitted=due + timedelta(hours=1))
    assert below.points == 4.0 and "a score at or below 50% of the points possible (5 of 10 points) is not " \
        "lowered: 4 stays" in below.sentence
    assert "of the assignment's points possible" in policy.describe()
