"""Submission times and the per-day late policy: where each time comes from (Moodle's worksheet,
the download zip's entries, the files' modification time), recorded in the gradebook, and a
deduction per started day after the due date (or the learner's extension) in the feedback, the
summary and the history."""

from __future__ import annotations

import os
import sqlite3
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import nbformat
import pytest
from grading_submissions import grade_masking, masking, summary_rows, write_learner

from lessonlib import cli
from lessonlib.grading import records as r
from lessonlib.grading.lms.downloads import find_learners
from lessonlib.grading.lms.roster import read_roster
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.lms.times import parse_moodle_time, stamp_worksheet_times
from lessonlib.grading.lms.unzip import unpack
from lessonlib.grading.run.notebooks import course_notebooks
from lessonlib.grading.zones import zone_of

MASKING = "02_masking.ipynb"
DUE = datetime(2026, 3, 2, 17, 0, tzinfo=timezone.utc)
MOODLE_HEADER = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                 "Last modified (submission),Last modified (grade),Feedback comments\n")


def _canvas_zip(path: Path, handed_in: dict[str, datetime]) -> Path:
    """A Canvas download zip: one correct masking notebook per learner, each entry dated as given (in UTC)."""
    text = nbformat.writes(masking()[MASKING])
    with zipfile.ZipFile(path, "w") as zf:
        for n, (name, when) in enumerate(handed_in.items()):
            info = zipfile.ZipInfo(f"{name}_{101 + n}_{9001 + n}_{MASKING}", date_time=when.timetuple()[:6])
            zf.writestr(info, text)
    return path


def test_a_day_and_a_half_late_loses_two_days_an_extension_saves_it_and_the_source_is_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    late = DUE + timedelta(days=1, hours=12)
    download = _canvas_zip(tmp_path / "submissions.zip",
                           {"ann": DUE - timedelta(hours=1), "ben": late, "cat": late})
    out = tmp_path / "week2"
    graded = grade_masking(str(download), "--out", str(out), "--timezone", "UTC")
    assert graded.returncode == 0, graded.stderr
    before = summary_rows(out)
    keys = {row["learner"].split("_")[0]: key for key, row in before.items()}
    assert set(keys) == {"ann", "ben", "cat"}
    full = float(before[keys["ben"]]["points"])
    max_points = float(before[keys["ben"]]["max_points"])
    assert full == max_points  # every answer right: only the late policy can take points off

    assert cli.main(["late-policy", "--out", str(out), "--due", DUE.isoformat(), "--per-day", "0.1",
                     "--floor", "0.5"]) == 0
    assert cli.main(["extend", "--out", str(out), keys["cat"], "--due", (DUE + timedelta(days=2)).isoformat(),
                     "--reason", "ill for two days"]) == 0
    after = summary_rows(out)
    assert float(after[keys["ben"]]["points"]) == pytest.approx(max_points - 0.2 * max_points)  # 2 started days
    assert "late" in after[keys["ben"]]["notes"] and "2 days after the due date" in after[keys["ben"]]["notes"]
    assert float(after[keys["cat"]]["points"]) == full and float(after[keys["ann"]]["points"]) == full
    assert "late" not in after[keys["cat"]]["notes"].split("; ")

    feedback = (out / "feedback" / f"{keys['ben']}.md").read_text()
    assert "2 days after the due date" in feedback and "time from the zip entry of the LMS download" in feedback
    assert "Late" not in (out / "feedback" / f"{keys['cat']}.md").read_text()

    with sqlite3.connect(tmp_path / "gradebook.db") as conn:
        rows = dict(conn.execute("SELECT l.key, s.submitted_at || ' ' || s.submitted_from FROM submissions s "
                                 "JOIN learners l ON l.id = s.learner_id"))
    assert rows[keys["ben"]] == f"{late.isoformat()} zip_entry"
    assert rows[keys["ann"]] == f"{(DUE - timedelta(hours=1)).isoformat()} zip_entry"

    capsys.readouterr()
    assert cli.main(["history", "--out", str(out), keys["ben"]]) == 0
    history = capsys.readouterr().out
    assert "'submitted_from': 'zip_entry'" in history and late.isoformat() in history


def test_zip_entry_times_are_read_in_the_zone_given(tmp_path: Path) -> None:
    """A zip entry holds a local time without a zone: 18:00 in Berlin in March is 17:00 UTC."""
    archive = tmp_path / "d.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(zipfile.ZipInfo("a.txt", date_time=(2026, 3, 2, 18, 0, 0)), "x")
    folder = unpack(archive, tmp_path / "u", zone=ZoneInfo("Europe/Berlin"))
    assert datetime.fromtimestamp((folder / "a.txt").stat().st_mtime, timezone.utc) == DUE


def test_a_plain_folder_gets_the_files_modification_time(tmp_path: Path) -> None:
    path = write_learner(tmp_path / "subs" / "dana", masking()) / MASKING
    stamp = DUE.timestamp()
    os.utime(path, (stamp, stamp))
    (learner,) = find_learners([tmp_path / "subs"], course_notebooks()).learners
    assert (learner.submitted_at, learner.submitted_from) == (DUE, "file_mtime")


@pytest.mark.parametrize("text, zone, expected", [
    ("Monday, 2 March 2026, 5:00 PM", "UTC", DUE),
    ("Montag, 2. März 2026, 18:00", "Europe/Berlin", DUE),
    ("lundi 2 mars 2026, 18:00", "Europe/Paris", DUE),
    ("02.03.2026, 17:00", "UTC", DUE),
    ("2026-03-02T17:00:00+00:00", None, DUE),
    ("-", "UTC", None),
    ("not a date", "UTC", None),
])
def test_moodle_worksheet_times_are_read_in_its_languages(text: str, zone: str | None,
                                                          expected: datetime | None) -> None:
    assert parse_moodle_time(text, zone_of(zone)) == expected


def test_the_worksheet_time_wins_over_the_files_and_names_its_source(tmp_path: Path) -> None:
    sheet = tmp_path / "worksheet.csv"
    sheet.write_text(MOODLE_HEADER
                     + 'Participant 1001,Bob Smith,bob@example.org,Submitted for grading - 1 day 12 hours late,,14,'
                       'Yes,"Tuesday, 3 March 2026, 5:00 AM",-,\n'
                     + 'Participant 1002,Amy Jones,amy@example.org,Submitted for grading,,14,Yes,-,-,\n')
    roster = read_roster(sheet, None)
    bob = Learner("Bob Smith", "bob", lms_id="1001", submitted_at=DUE, submitted_from="zip_entry")
    amy = Learner("Amy Jones", "amy", lms_id="1002", submitted_at=DUE, submitted_from="zip_entry")
    assert stamp_worksheet_times([bob, amy], roster.submission_times(zone_of("UTC"))) == [bob]
    assert (bob.submitted_at, bob.submitted_from) == (DUE + timedelta(hours=12), "moodle_worksheet")
    assert (amy.submitted_at, amy.submitted_from) == (DUE, "zip_entry")  # "-": the worksheet does not know


def test_an_unknown_time_zone_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'Mars/Olympus' is not a time zone name"):
        zone_of("Mars/Olympus")
    done = grade_masking(str(tmp_path), "--out", str(tmp_path / "week2"), "--timezone", "Mars/Olympus")
    assert done.returncode == 2 and "Mars/Olympus" in done.stderr


def test_an_older_gradebook_gains_the_time_source_column(tmp_path: Path) -> None:
    """A gradebook of format 1 (no submitted_from) is upgraded on opening; its rows' sources are unknown."""
    from lessonlib.grading import store
    from lessonlib.grading.store import schema

    path = tmp_path / "gradebook.db"
    with store.open_gradebook(path, "test") as gb:
        store.ensure_assignment(gb, "week2", [MASKING], seed=1)
    with sqlite3.connect(path) as conn:  # as format 1 left it
        conn.execute("ALTER TABLE submissions DROP COLUMN submitted_from")
        conn.execute("DROP TABLE enrolments")
        conn.execute("UPDATE meta SET value = '1' WHERE name = 'format'")
    with store.open_gradebook(path, "test") as gb:
        columns = {row[1] for row in gb.conn.execute("PRAGMA table_info(submissions)")}
        assert "submitted_from" in columns
        assert gb.conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0] == str(schema.FORMAT)
    assert (tmp_path / "gradebook.db.format1.bak").exists()


def test_a_later_worksheet_corrects_a_stored_time_and_a_weaker_source_never_does(tmp_path: Path) -> None:
    """Files graded before the worksheet was given keep their result; the worksheet's time replaces
    the zip entry's (with a history row), and a later run without it does not bring the zip's back."""
    from lessonlib.grading import store
    from lessonlib.grading.store import outputs

    out = tmp_path / "week2"
    path = write_learner(tmp_path / "subs" / "bob", masking()) / MASKING
    with store.open_gradebook(tmp_path / "gradebook.db", "test") as gb:
        store.ensure_assignment(gb, "week2", [MASKING], seed=1)
        bob = store.assign_stored_keys(gb, [Learner("Bob Smith", "", {MASKING: path}, lms_id="1001",
                                                    submitted_at=DUE, submitted_from="zip_entry")])[0]
        result = r.LearnerResult("Bob Smith", bob.key, "fp-1", "bubblewrap", "now", [], lms_id="1001")
        save = outputs.Saver(gb, out)
        save(result, bob)
        bob.submitted_at, bob.submitted_from = DUE + timedelta(hours=12), "moodle_worksheet"
        save(result, bob)  # the same files: not graded again, but the better time is kept
        bob.submitted_at, bob.submitted_from = DUE, "zip_entry"
        save(result, bob)  # a run without the worksheet
        (sheet,) = store.assignment_sheet(gb, "week2")
        assert (sheet.submitted_at, sheet.submitted_from) == (DUE + timedelta(hours=12), "moodle_worksheet")
        changes = [c for c in store.learner_history(gb, bob.key) if c.what == "submission_time"]
        assert [c.new["submitted_from"] for c in changes] == ["moodle_worksheet"]
