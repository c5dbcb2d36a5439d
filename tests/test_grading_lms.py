"""LMS downloads in, an importable gradebook out, and written answers graded by hand.

Discovery and rosters are checked on their own (no learner code runs); one Canvas batch and one
Moodle batch then go through ``lessonlib grade`` as an instructor runs it, with a roster, and
the Canvas batch is graded again after manual.csv is filled in.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from grading_submissions import EXERCISES, WRONG_PADDING, masking, notebook, stub_learner, write_learner
from markdown_view import shown

from lessonlib import cli
from lessonlib.exercises import MANUAL_QUESTIONS
from lessonlib.grading import records as r
from lessonlib.grading.lms.downloads import CANVAS_FILE, MOODLE_FOLDER, find_learners, layout
from lessonlib.grading.lms.roster import RosterError, lms_import_text, match, read_roster
from lessonlib.grading.run.notebooks import course_notebooks
from lessonlib.grading.store.manual import ManualError, read_manual

COURSES = course_notebooks()
CANVAS_HEADER = "Student,ID,SIS User ID,SIS Login ID,Section,Attention homework (98765),Current Score\n"
MOODLE_HEADER = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                 "Last modified (submission),Last modified (grade),Feedback comments\n")


def _write(path: Path, nb: object) -> Path:
    folder = path.parent
    write_learner(folder, {path.name: nb})
    return path


def _canvas_download(folder: Path) -> Path:
    """smithbob: 01_scaling twice (the stub, then a resubmission "-1", late) and 02_masking;
    jonesamy: 04_cost, 05_interpretation (with the written answer) and a masking notebook under her
    own name; doedan: not in the roster;
    two files that name nobody."""
    folder.mkdir(parents=True)
    _write(folder / "smithbob_340934_208490100_01_scaling.ipynb", notebook("01_scaling.ipynb",
                                                                           source=EXERCISES))
    _write(folder / "smithbob_LATE_340934_208490284_01_scaling-1.ipynb", notebook("01_scaling.ipynb"))
    _write(folder / "smithbob_LATE_340934_208490285_02_masking.ipynb",
           masking({"padding_mask": WRONG_PADDING})["02_masking.ipynb"])
    _write(folder / "jonesamy_412233_208490300_04_cost.ipynb", notebook("04_cost.ipynb"))
    _write(folder / "jonesamy_412233_208490302_05_interpretation.ipynb", notebook("05_interpretation.ipynb"))
    _write(folder / "jonesamy_412233_208490301_my_masking_work.ipynb", notebook("02_masking.ipynb"))
    _write(folder / "doedan_777777_208490400_02_masking.ipynb", notebook("02_masking.ipynb"))
    (folder / "README.txt").write_text("submissions downloaded from Canvas\n")
    _write(folder / "notebook.ipynb", notebook("02_masking.ipynb"))
    return folder


def _moodle_download(folder: Path) -> Path:
    write_learner(folder / "Bob Smith_1001_assignsubmission_file_", masking())
    write_learner(folder / "Amy Jones_1002_assignsubmission_file_", {
        "02_masking.ipynb": masking({"padding_mask": WRONG_PADDING})["02_masking.ipynb"],
        "02_masking-2.ipynb": notebook("02_masking.ipynb"),
    })
    _write(folder / "Carl Flat_1003_assignsubmission_file_02_masking.ipynb", notebook("02_masking.ipynb"))
    write_learner(folder / "random stuff", masking())
    return folder


# --- discovery ------------------------------------------------------------------------------------


def test_canvas_files_are_grouped_by_user_id_latest_resubmission_wins(tmp_path: Path) -> None:
    folder = _canvas_download(tmp_path / "canvas")
    assert layout(folder) == "canvas"
    found = find_learners([folder], COURSES)
    learners = {lr.lms_id: lr for lr in found.learners}
    assert set(learners) == {"340934", "412233", "777777"}  # smithbob is one learner, not two
    bob = learners["340934"]
    assert bob.name == "smithbob" and bob.late and bob.key == "smithbob_340934"
    assert bob.files["01_scaling.ipynb"].name == "smithbob_LATE_340934_208490284_01_scaling-1.ipynb"
    assert any("submitted 2 times" in n and "the latest, smithbob_LATE_340934_208490284_01_scaling-1.ipynb" in n
               for n in bob.notes)
    amy = learners["412233"]
    assert sorted(amy.files) == ["02_masking.ipynb", "04_cost.ipynb", "05_interpretation.ipynb"]  # by content, by name
    assert not amy.late
    assert sorted(u.path.name for u in found.unattributed) == ["README.txt", "notebook.ipynb"]
    assert all("Canvas" in u.reason for u in found.unattributed)


def test_a_download_inside_a_folder_of_learner_folders_is_still_read_by_id(tmp_path: Path) -> None:
    _canvas_download(tmp_path / "all" / "canvas-download")
    stub_learner(tmp_path / "all" / "alice")
    found = find_learners([tmp_path / "all"], COURSES)
    assert sorted(lr.key for lr in found.learners) == ["alice", "doedan_777777", "jonesamy_412233", "smithbob_340934"]


def test_moodle_folders_and_flat_files_keep_their_participant_id(tmp_path: Path) -> None:
    folder = _moodle_download(tmp_path / "moodle")
    assert layout(folder) == "moodle"
    found = find_learners([folder], COURSES)
    learners = {lr.lms_id: lr for lr in found.learners}
    assert {lr.name for lr in learners.values()} == {"Bob Smith", "Amy Jones", "Carl Flat"}  # no suffix left
    assert learners["1002"].files["02_masking.ipynb"].name == "02_masking-2.ipynb"
    assert [u.path.parent.name for u in found.unattributed] == ["random stuff"]


def test_plain_folders_are_read_as_before(tmp_path: Path) -> None:
    stub_learner(tmp_path / "subs" / "alice")
    assert layout(tmp_path / "subs") is None
    (alice,) = find_learners([tmp_path / "subs"], COURSES).learners
    assert alice.name == "alice" and alice.key == "alice" and alice.lms_id == ""


# --- rosters ----------------------------------------------------------------------------------------


def _result(key: str, lms_id: str, points: float) -> r.LearnerResult:
    grade = r.ExerciseGrade("02_masking.ipynb", "causal_mask", points, 4.0, "passed" if points == 4 else "failed")
    return r.LearnerResult(key, key, "f", "bubblewrap", "now", [grade], lms_id=lms_id)


def test_a_canvas_roster_fills_its_assignment_column(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER + "    Points Possible,,,,,20,\n"
                    "\"Smith, Bob\",340934,S1,bsmith,A,,50\n\"Jones, Amy\",412233,S2,ajones,A,,60\n"
                    "\"Missing, Carl\",555555,S3,cmissing,B,,0\n")
    roster = read_roster(path, "Attention homework")
    assert roster.kind == "canvas" and roster.column == "Attention homework (98765)" and not roster.new_column
    matched = match(roster, [_result("smithbob_340934", "340934", 3), _result("ajones", "", 4),
                             _result("doedan_777777", "777777", 4)])
    assert [res.key if res else None for _, res in matched.pairs] == ["smithbob_340934", "ajones", None]
    assert [res.key for res in matched.not_in_roster] == ["doedan_777777"]
    lines = lms_import_text(roster, matched, 20).splitlines()
    assert lines == ["Student,ID,SIS User ID,SIS Login ID,Section,Attention homework (98765)",
                     "    Points Possible,,,,,20", '"Smith, Bob",340934,S1,bsmith,A,3',
                     '"Jones, Amy",412233,S2,ajones,A,4']  # Carl is absent: Canvas keeps his grade
    assert lms_import_text(roster, matched, 20, absent_zero=True).splitlines()[-1] == \
        '"Missing, Carl",555555,S3,cmissing,B,0'
    with pytest.raises(RosterError, match="no Canvas assignment column is called 'Week 3 lab'.*--new-column"):
        read_roster(path, "Week 3 lab")  # never a new column by surprise
    assert read_roster(path, "Week 3 lab", new_column=True).new_column  # asked for: Canvas creates the assignment


def test_a_moodle_worksheet_gets_grades_scaled_to_its_maximum(tmp_path: Path) -> None:
    path = tmp_path / "worksheet.csv"
    path.write_text("\ufeff" + MOODLE_HEADER + "Participant 1001,Bob Smith,bob@example.org,Submitted,,100.00,Yes,"
                    "\"Monday, 2 March 2026, 10:00 AM\",-,\nParticipant 1004,Dee Missing,dee@example.org,"
                    "No submission,,100.00,Yes,-,-,\n")
    roster = read_roster(path, None)
    assert roster.kind == "moodle" and roster.column == "Grade"
    matched = match(roster, [_result("Bob_Smith_1001", "1001", 3)])
    rows = list(csv.DictReader(io.StringIO(lms_import_text(roster, matched, 4))))
    assert list(rows[0]) == MOODLE_HEADER.strip().split(",")
    assert (rows[0]["Grade"], rows[1]["Grade"]) == ("75", "")  # an empty grade: Moodle leaves Dee's as it is
    assert rows[0]["Last modified (submission)"] == "Monday, 2 March 2026, 10:00 AM"
    assert rows[0]["Feedback comments"].startswith("Automatic grading: 3 / 4 points (0 of 1 exercises passed).")
    assert rows[1]["Feedback comments"] == "Automatic grading: no submission was found."


@pytest.mark.parametrize("text, message", [
    ("name,score\nbob,3\n", "columns are: name, score"),
    (CANVAS_HEADER + "\"Smith, Bob\",340934,S1,bsmith,A,,50\n", "--assignment NAME"),
])
def test_an_unknown_roster_is_refused_naming_the_expected_columns(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(RosterError, match="Student, ID, SIS Login ID, Section|--assignment") as info:
        read_roster(path, None)
    assert message in str(info.value)


# --- through the command, as an instructor runs it ---------------------------------------------------


def _run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = cli.main(["grade", *args, "--timeout", "2", "--memory", "512", "--workers", "2", "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_canvas_batch_with_roster_and_manual_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = _canvas_download(tmp_path / "canvas")
    roster = tmp_path / "gradebook.csv"
    roster.write_text(CANVAS_HEADER + "    Points Possible,,,,,20,\n\"Smith, Bob\",340934,S1,bsmith,A,,50\n"
                      "\"Jones, Amy\",412233,S2,ajones,A,,60\n\"Missing, Carl\",555555,S3,cmissing,B,,0\n")
    out = tmp_path / "out"
    code, stdout, stderr = _run(capsys, str(folder), "--out", str(out), "--roster", str(roster),
                                "--assignment", "Attention homework")
    assert code == 0, stderr
    assert "missing: Missing, Carl" in stdout and "not in the roster: doedan_777777" in stderr
    assert "left as it is" in stdout
    assert "README.txt" in stderr and "notebook.ipynb" in stderr
    data = json.loads((out / "grades.json").read_text())
    learners = {lr["key"]: lr for lr in data["learners"]}
    bob, amy = learners["smithbob_340934"], learners["jonesamy_412233"]
    assert bob["lms_id"] == "340934" and bob["late"] and amy["lms_id"] == "412233"
    bob_grades = {g["exercise"]: g for g in bob["exercises"]}
    assert bob_grades["scaled_dot_product_attention"]["status"] == "passed"  # the resubmission, not the stub
    assert bob_grades["padding_mask"]["status"] == "failed"
    assert "the latest, smithbob_LATE_340934_208490284_01_scaling-1.ipynb, was graded" in \
        shown((out / "feedback" / "smithbob_340934.md").read_text())
    summary = {row["learner"]: row for row in _csv_rows(out / "summary.csv")}
    carl = summary["Missing_Carl_555555"]
    assert carl["name"] == "Missing, Carl" and carl["notes"] == "missing: no submission" and carl["points"] == "0"
    assert summary["doedan_777777"]["notes"] == "not in the roster" and summary["smithbob_340934"]["notes"].startswith(
        "late; Submitted late according to the LMS")
    # one key and one name per learner in every file: the key of feedback/KEY.md, the roster's name
    assert summary["smithbob_340934"]["name"] == "Smith, Bob" and summary["doedan_777777"]["name"] == "doedan"
    assert {row["learner"] for row in _csv_rows(out / "grades.csv")} == {"smithbob_340934", "jonesamy_412233",
                                                                        "doedan_777777"}
    assert {(row["learner"], row["name"]) for row in _csv_rows(out / "grades.csv")} >= {("smithbob_340934",
                                                                                         "Smith, Bob")}
    assert (out / "feedback" / "smithbob_340934.md").read_text().startswith("# Feedback: Smith, Bob\n")
    assert _csv_rows(out / "manual.csv") and all(row["name"] == summary[row["learner"]]["name"]
                                                 for row in _csv_rows(out / "manual.csv"))
    assert [row["notes"].split(":")[0] for row in _csv_rows(out / "summary.csv")
            if row["learner"] == "(unattributed)"] == [str(folder / "README.txt"), str(folder / "notebook.ipynb")]
    lms = _csv_rows(out / "lms-import.csv")
    # Carl, absent, keeps his grade in Canvas; Amy's written answer is still to grade: no grade for her yet
    assert [row["ID"] for row in lms] == ["", "340934"]
    assert "1 learner(s) have written answers still to grade by hand" in stdout
    total = data["max_points"]  # the course's points; Canvas's column is worth 20: scaled, and said
    assert lms[0]["Attention homework (98765)"] == "20"
    assert f"scales every grade to 20 (points x 20 / {total:g})" in stdout
    assert float(lms[1]["Attention homework (98765)"]) == pytest.approx(round(bob["points"] * 20 / total, 2))
    assert (out / "feedback" / "smithbob_340934.html").read_text().startswith("<!DOCTYPE html>")
    with zipfile.ZipFile(out / "feedback" / "canvas-reupload.zip") as archive:  # Canvas's Re-Upload Submissions
        names = sorted(archive.namelist())
    assert names == ["doedan_777777_208490400_feedback.html", "jonesamy_412233_208490302_feedback.html",
                     "smithbob_LATE_340934_208490285_feedback.html"]  # each learner's latest file
    assert [CANVAS_FILE.match(Path(n).stem)["id"] for n in names] == ["777777", "412233", "340934"]
    assert not (out / "feedback" / "moodle-feedback-files.zip").exists()

    # the written answers: one row each in manual.csv, whatever the questions are called
    manual = _csv_rows(out / "manual.csv")
    written = [(lr["key"], g["exercise"]) for lr in data["learners"] for g in lr["exercises"]
               if g["kind"] == "manual" and g["status"] == "needs_manual_grading"]
    assert written and [(row["learner"], row["exercise"]) for row in manual] == written
    saved = {lr["key"]: lr["graded_at"] for lr in data["learners"]}  # when each result was graded
    before = {lr["key"]: lr["points"] for lr in data["learners"]}

    # bad lines are refused, each named, and nothing is rewritten
    rows = [dict(row) for row in manual]
    bad = [dict(rows[0], points="lots"), dict(rows[0], learner="mallory"), dict(rows[0], exercise="q9_nothing"),
           dict(rows[0], points=str(float(rows[0]["max_points"]) + 1))]
    _write_manual(out / "manual.csv", bad)
    grades_csv = (out / "grades.csv").read_text()
    code, _, stderr = _run(capsys, str(folder), "--out", str(out), "--roster", str(roster),
                           "--assignment", "Attention homework")
    assert code == 2
    for fragment in ("line 2: points 'lots'", "line 3: unknown learner 'mallory'", "line 4:", "q9_nothing",
                     "line 5: points", "out of range"):
        assert fragment in stderr
    assert (out / "grades.csv").read_text() == grades_csv

    # filled in properly: totals, grades.csv, summary, feedback and lms-import.csv follow, no code runs
    rows[0].update(points="1.5", rubric="names the confound", comment="Good: say what an ablation would show.")
    _write_manual(out / "manual.csv", rows)
    code, stdout, stderr = _run(capsys, str(folder), "--out", str(out))  # the roster is remembered
    assert code == 0, stderr
    assert "using the roster of the previous run" in stdout
    assert "graded 0 learner(s)" in stdout and "1 graded in manual.csv" in stdout
    after = json.loads((out / "grades.json").read_text())
    assert {lr["key"]: lr["graded_at"] for lr in after["learners"]} == saved  # nothing graded again
    key, exercise = rows[0]["learner"], rows[0]["exercise"]
    points = {lr["key"]: lr["points"] for lr in after["learners"]}
    assert points[key] == pytest.approx(before[key] + 1.5)
    learner = next(lr for lr in after["learners"] if lr["key"] == key)
    grade = next(g for g in learner["exercises"] if g["exercise"] == exercise)
    assert grade["status"] == "graded_by_hand" and grade["points"] == 1.5
    feedback = (out / "feedback" / f"{key}.md").read_text()
    most = MANUAL_QUESTIONS[exercise].points
    assert f"1.5 / {most:g} points, graded by hand" in feedback and "Good: say what an ablation would show." in feedback
    assert any(row["exercise"] == exercise and row["points"] == "1.5" and row["status"] == "graded_by_hand"
               for row in _csv_rows(out / "grades.csv") if row["learner"] == key)
    lms_id = next(lr["lms_id"] for lr in after["learners"] if lr["key"] == key)
    lms = {row["ID"]: row for row in _csv_rows(out / "lms-import.csv")}
    assert float(lms[lms_id]["Attention homework (98765)"]) == pytest.approx(round(points[key] * 20 / total, 2))
    assert _csv_rows(out / "manual.csv")[0]["comment"] == "Good: say what an ablation would show."  # kept


def _write_manual(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_moodle_batch_with_worksheet(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = _moodle_download(tmp_path / "moodle")
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(MOODLE_HEADER + "".join(
        f"Participant {i},{name},{name.split()[0].lower()}@example.org,Submitted,,100.00,Yes,-,-,\n"
        for i, name in ((1001, "Bob Smith"), (1002, "Amy Jones"), (1003, "Carl Flat"), (1004, "Dee Missing"))))
    out = tmp_path / "out"
    code, stdout, stderr = _run(capsys, str(folder), "--out", str(out), "--roster", str(worksheet))
    assert code == 0, stderr
    assert "for Moodle" in stdout and "missing: Dee Missing" in stdout and "random stuff" in stderr
    rows = {row["Identifier"]: row for row in _csv_rows(out / "lms-import.csv")}
    total = json.loads((out / "grades.json").read_text())["learners"][0]["max_points"]
    bob = next(lr for lr in json.loads((out / "grades.json").read_text())["learners"] if lr["lms_id"] == "1001")
    assert float(rows["Participant 1001"]["Grade"]) == pytest.approx(round(100 * bob["points"] / total, 2))
    assert rows["Participant 1004"]["Grade"] == ""  # absent: Moodle skips an empty grade
    assert rows["Participant 1002"]["Grade"] == rows["Participant 1001"]["Grade"]  # "-2" replaced the wrong one
    assert all(row["Feedback comments"].startswith("Automatic grading: ") for row in rows.values())
    with zipfile.ZipFile(out / "feedback" / "moodle-feedback-files.zip") as archive:  # Moodle's feedback files
        folders = sorted(name.split("/")[0] for name in archive.namelist())
    assert folders == ["Amy Jones_1002_assignsubmission_file_", "Bob Smith_1001_assignsubmission_file_",
                       "Carl Flat_1003_assignsubmission_file_"]
    assert [MOODLE_FOLDER.match(f)["id"] for f in folders] == ["1002", "1001", "1003"]  # as lms/downloads.py reads them
    assert not (out / "feedback" / "canvas-reupload.zip").exists()

    code, _, stderr = _run(capsys, str(folder), "--out", str(out), "--absent-zero")
    assert code == 0, stderr  # the same worksheet, a changed row: Moodle would skip it, and the run says so
    assert "warning: 1 row(s)" in stderr and "(Participant 1004)" in stderr and "fresh grading worksheet" in stderr
    assert {row["Identifier"]: row for row in _csv_rows(out / "lms-import.csv")}["Participant 1004"]["Grade"] == "0"


def test_manual_csv_needs_its_columns(tmp_path: Path) -> None:
    (tmp_path / "manual.csv").write_text("who,what\n")
    with pytest.raises(ManualError, match="learner, exercise, points are missing"):
        read_manual(tmp_path / "manual.csv", [])
