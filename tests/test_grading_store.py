"""The course gradebook (lessonlib.grading.store): stable keys, append-only history, reasons, late
policy, effective scores, exports, import of an output folder, and format upgrades."""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lessonlib.grading import records as r
from lessonlib.grading import store
from lessonlib.grading.files import atomic_write_json
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.store import schema
from lessonlib.grading.store.manual import Mark, write_manual

DUE = datetime(2026, 3, 1, 17, 0, tzinfo=timezone.utc)
NOTEBOOKS = ["02_masking.ipynb"]


def _result(key: str, name: str = "", *, written: float | None = None, status: str = r.NEEDS_MANUAL,
            lms_id: str = "", late: bool = False) -> r.LearnerResult:
    return r.LearnerResult(
        learner=name or key, key=key, fingerprint=f"fp-{key}", isolation="bubblewrap",
        graded_at="2026-03-02T10:00:00+00:00", lms_id=lms_id, late=late,
        files={"02_masking.ipynb": f"{key}_02_masking.ipynb"},
        exercises=[
            r.ExerciseGrade("02_masking.ipynb", "causal_mask", 3.0, 3.0, r.PASSED, kind="auto"),
            r.ExerciseGrade("02_masking.ipynb", "padding_mask", 1.0, 4.0, r.FAILED, "swapped axes", kind="auto",
                            diagnoses=[{"name": "query_axis_padded", "title": "t"}]),
            r.ExerciseGrade("02_masking.ipynb", "q_masks", written, 3.0, status, kind="manual",
                            answer_text="Because..."),
        ])


@pytest.fixture
def gb(tmp_path: Path) -> store.Gradebook:
    gradebook = store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade test")
    store.ensure_assignment(gradebook, "week2", NOTEBOOKS, seed=1234)
    yield gradebook
    gradebook.close()


def _graded(gb: store.Gradebook, name: str, **kwargs) -> str:
    key = store.register(gb, name, lms_id=kwargs.pop("lms_id", "")).key
    store.record_result(gb, "week2", _result(key, name, **kwargs))
    return key


# --- identity --------------------------------------------------------------------------------------


def test_a_late_folder_never_moves_a_hand_grade(gb: store.Gradebook, tmp_path: Path) -> None:
    """bob and bob-2 are graded and bob-2's written answer gets a hand grade; then a folder Bob
    arrives. Bob gets a key of its own, and the hand grade stays with the folder bob-2."""
    assert _graded(gb, "bob") == "bob"
    assert _graded(gb, "bob-2") == "bob-2"
    store.set_hand_grade(gb, "week2", "bob-2", "q_masks", 2.5, rubric="B", comment="good")
    gb.close()
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade run 2") as again:  # a later run
        assert _graded(again, "Bob") == "Bob-3"
        assert _graded(again, "bob-2") == "bob-2"  # the same folder: the same learner
        sheet = {s.key: s for s in store.assignment_sheet(again, "week2")}
        stored = store.all_learners(again)
    by_folder = {ln.identity: ln.key for ln in stored}
    assert by_folder == {"name:bob": "bob", "name:bob-2": "bob-2", "name:Bob": "Bob-3"}
    assert sheet["bob-2"].exercises[2].points == 2.5 and sheet["bob-2"].exercises[2].source == "hand"
    assert sheet["Bob-3"].exercises[2].points is None and sheet["bob"].exercises[2].points is None
    assert "'Bob' was already the key of 'name:bob'" in next(ln for ln in stored if ln.key == "Bob-3").disambiguation


def test_same_names_from_two_folders_stay_apart(gb: store.Gradebook) -> None:
    a = store.register(gb, "bob", origin="section-a")
    b = store.register(gb, "bob", origin="section-b")
    assert (a.key, b.key) == ("bob", "bob-2")
    assert store.register(gb, "bob", origin="section-b").key == "bob-2"


def test_an_lms_id_is_the_identity_whatever_the_name(gb: store.Gradebook) -> None:
    first = store.register(gb, "smithbob", lms_id="340934")
    renamed = store.register(gb, "Bob Smith", lms_id="340934")
    assert renamed.id == first.id and renamed.key == first.key == "smithbob_340934"
    assert renamed.name == "Bob Smith"
    assert [c.what for c in store.learner_history(gb, first.key)] == ["learner", "learner_name"]


def test_a_reader_cannot_write(gb: store.Gradebook, tmp_path: Path) -> None:
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib gradebook show", lock=False) as reader:
        assert store.get_assignment(reader, "week2").seed == 1234
        with pytest.raises(store.StoreError, match="opened for reading"):
            store.register(reader, "alice")
    with pytest.raises(store.StoreError, match="no gradebook at"):
        store.open_gradebook(tmp_path / "missing.db", "lessonlib gradebook show", lock=False)
    assert not (tmp_path / "missing.db").exists()


def test_keys_cannot_be_changed_nor_learners_deleted(gb: store.Gradebook) -> None:
    key = store.register(gb, "alice").key
    with pytest.raises(sqlite3.IntegrityError, match="never change"):
        gb.conn.execute("UPDATE learners SET key = 'eve' WHERE key = ?", (key,))
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        gb.conn.execute("DELETE FROM learners")


# --- history, reasons, effective scores --------------------------------------------------------------


def test_history_is_append_only(gb: store.Gradebook) -> None:
    _graded(gb, "alice")
    count = gb.conn.execute("SELECT COUNT(*) FROM history").fetchone()[0]
    assert count > 0
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        gb.conn.execute("UPDATE history SET reason = 'nothing happened'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        gb.conn.execute("DELETE FROM history WHERE id = 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        with gb.transaction() as conn:
            conn.execute("DELETE FROM history")
    assert gb.conn.execute("SELECT COUNT(*) FROM history").fetchone()[0] == count


def test_an_override_needs_a_reason(gb: store.Gradebook) -> None:
    key = _graded(gb, "alice")
    for reason in ("", "   "):
        with pytest.raises(store.StoreError, match="needs a reason"):
            store.set_override(gb, "week2", key, "padding_mask", 4.0, reason)
    with pytest.raises(sqlite3.IntegrityError):  # the database refuses too, whatever the code path
        gb.conn.execute("INSERT INTO overrides (assignment_id, learner_id, exercise, points, reason, at, command) "
                        "VALUES (1, 1, 'padding_mask', 4, ' ', 'now', 'sql')")
    with pytest.raises(store.StoreError, match="out of range"):
        store.set_override(gb, "week2", key, "padding_mask", 5.0, "regrade")
    store.set_override(gb, "week2", key, "padding_mask", 4.0, "regrade request: the axes were right")
    change = store.learner_history(gb, key)[-1]
    assert (change.what, change.command, change.reason) == ("override", "lessonlib grade test",
                                                            "regrade request: the axes were right")
    assert change.new == {"points": 4.0}
    with pytest.raises(store.StoreError, match="needs a reason"):
        store.clear_override(gb, "week2", key, "padding_mask", "")


def test_effective_score_order_override_then_hand_then_graded(gb: store.Gradebook) -> None:
    key = _graded(gb, "alice")
    with pytest.raises(store.StoreError, match="auto-graded"):
        store.set_hand_grade(gb, "week2", key, "causal_mask", 1.0)
    store.set_hand_grade(gb, "week2", key, "q_masks", 2.0, rubric="B")
    sheet = store.assignment_sheet(gb, "week2")[0]
    assert [e.points for e in sheet.exercises] == [3.0, 1.0, 2.0] and sheet.points == 6.0
    assert sheet.exercises[2].status == r.GRADED_BY_HAND and sheet.pending == 0
    store.set_override(gb, "week2", key, "q_masks", 3.0, "second reader")
    store.set_override(gb, "week2", key, "causal_mask", 0.0, "copied")
    sheet = store.assignment_sheet(gb, "week2")[0]
    assert [(e.points, e.source) for e in sheet.exercises] == [(0.0, "override"), (1.0, "graded"),
                                                               (3.0, "override")]
    results = store.learner_results(gb, "week2")
    assert [g.points for g in results[0].exercises] == [0.0, 1.0, 3.0] and "copied" in results[0].exercises[0].notes[0]
    store.clear_override(gb, "week2", key, "q_masks", "first reader's grade stands")
    assert store.assignment_sheet(gb, "week2")[0].exercises[2].points == 2.0


def test_every_learner_of_every_run_is_in_the_sheet(gb: store.Gradebook, tmp_path: Path) -> None:
    _graded(gb, "alice")
    gb.close()
    with store.open_gradebook(tmp_path / "gradebook.db", "run 2") as again:
        _graded(again, "bob")  # run 2 grades only bob
        sheet = store.assignment_sheet(again, "week2")
        assert [s.key for s in sheet] == ["alice", "bob"]
        assert [s.pending for s in sheet] == [3.0, 3.0]
        store.register(again, "carol")
        assert [s.key for s in store.assignment_sheet(again, "week2", every_learner=True)] == ["alice", "bob", "carol"]
        assert [(t.key, t.assignment, t.points) for t in store.term_results(again)] == [("alice", "week2", 4.0),
                                                                                        ("bob", "week2", 4.0)]


def test_what_changed_since_an_export(gb: store.Gradebook) -> None:
    _graded(gb, "alice")
    _graded(gb, "bob")
    first = store.record_export(gb, "week2", "grades.csv")
    assert store.changed_since(gb, first).learners == []
    store.record_result(gb, "week2", _result("alice"))  # the same result again: nothing changed
    assert store.changed_since(gb, first).learners == []
    store.set_hand_grade(gb, "week2", "bob", "q_masks", 1.0)
    changes = store.changed_since(gb, first)
    assert changes.learners == ["bob"] and not changes.assignment_wide
    store.set_late_policy(gb, "week2", due_at=DUE, policy=store.LatePolicy("zero"))
    assert store.changed_since(gb, first).assignment_wide
    second = store.record_export(gb, "week2", "grades.csv")
    assert store.changed_since(gb, second).learners == [] and second > first
    with pytest.raises(store.StoreError, match="no export number 99"):
        store.changed_since(gb, 99)


def test_the_seed_and_notebooks_of_an_assignment_are_kept(gb: store.Gradebook) -> None:
    with pytest.raises(store.StoreError, match="keeps the seed"):
        store.ensure_assignment(gb, "week2", NOTEBOOKS, seed=99)
    with pytest.raises(store.StoreError, match="give the other notebooks another assignment"):
        store.ensure_assignment(gb, "week2", ["03_position.ipynb"], seed=1234)
    with pytest.raises(sqlite3.IntegrityError, match="seed never changes"):
        gb.conn.execute("UPDATE assignments SET seed = 1")
    assert store.get_assignment(gb, "week2").seed == 1234
    assert "1234" not in str(store.learner_history(gb, store.register(gb, "x").key))


# --- late policy (the arithmetic: test_grading_store_late.py) -----------------------------------------


def test_an_extension_moves_the_due_date(gb: store.Gradebook) -> None:
    store.set_late_policy(gb, "week2", due_at=DUE, policy=store.LatePolicy("per_day", 0.1))
    for name in ("alice", "bob"):
        key = _graded(gb, name)
        store.record_submission(gb, "week2", key, [], submitted_at=DUE + timedelta(hours=30))
    with pytest.raises(store.StoreError, match="needs a reason"):
        store.grant_extension(gb, "week2", "bob", DUE + timedelta(days=2), " ")
    store.grant_extension(gb, "week2", "bob", DUE + timedelta(days=2), "illness")
    sheet = {s.key: s for s in store.assignment_sheet(gb, "week2")}
    assert (sheet["alice"].points, sheet["alice"].total, sheet["alice"].late.days_late) == (4.0, 2.0, 2)
    assert (sheet["bob"].total, sheet["bob"].late.days_late) == (4.0, 0)
    assert "the due date of the learner's extension" in sheet["bob"].late.sentence
    with pytest.raises(store.StoreError, match="no time zone"):
        store.grant_extension(gb, "week2", "bob", datetime(2026, 3, 5), "naive")


# --- import -------------------------------------------------------------------------------------------


def test_import_an_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "week2-grades"
    atomic_write_json(out / ".grading" / "state.json", {"seed": 777, "notebooks": NOTEBOOKS, "format": 2})
    results = [_result("alice"), _result("bob-2", "bob"), _result("smith_42", "smith", lms_id="42", late=True)]
    for res in results:
        atomic_write_json(out / "learners" / f"{res.key}.json", res.to_dict())
    (out / "learners" / "broken.json").write_text("{not json")
    write_manual(out, results, {("bob-2", "q_masks"): Mark("bob-2", "q_masks", 2.5, "B", "nice")})
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib gradebook import") as gb:
        store.register(gb, "someone", key="alice")  # the key alice is taken in the course already
        imported = store.import_output_folder(gb, out)
        assert (imported.assignment, imported.learners, imported.hand_grades) == ("week2-grades", 3, 1)
        assert imported.renamed == {"alice": "alice-2"} and imported.skipped
        a = store.get_assignment(gb, "week2-grades")
        assert (a.seed, a.notebooks) == (777, tuple(NOTEBOOKS))
        sheet = {s.key: s for s in store.assignment_sheet(gb, "week2-grades")}
        assert sorted(sheet) == ["alice-2", "bob-2", "smith_42"]
        assert sheet["bob-2"].exercises[2].points == 2.5 and sheet["bob-2"].exercises[2].comment == "nice"
        assert sheet["smith_42"].lms_late and sheet["smith_42"].lms_id == "42"
        assert sheet["bob-2"].exercises[1].diagnoses == ("query_axis_padded",)
        history = store.learner_history(gb, "bob-2")
        assert history and all("imported from" in c.command for c in history)
        assert {c.what for c in history} == {"learner", "submission", "result", "hand_grade"}
        rebuilt = {res.key: res for res in store.learner_results(gb, "week2-grades")}
        assert rebuilt["bob-2"].exercises[1].to_dict() == results[1].exercises[1].to_dict()
        assert rebuilt["bob-2"].points == 6.5 and rebuilt["alice-2"].files == results[0].files
        again = store.import_output_folder(gb, out)  # importing twice changes nothing
        assert again.renamed == {"alice": "alice-2"}
        assert len(store.learner_history(gb, "bob-2")) == len(history)
        with pytest.raises(store.StoreError, match="not an output folder"):
            store.import_output_folder(gb, tmp_path / "elsewhere")


# --- the format -----------------------------------------------------------------------------------------


def test_an_older_format_is_upgraded_after_a_backup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gradebook.db"
    with store.open_gradebook(path, "old lessonlib") as gb:
        store.ensure_assignment(gb, "week2", NOTEBOOKS, seed=1)

    def add_section(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE learners ADD COLUMN section TEXT NOT NULL DEFAULT ''")

    monkeypatch.setattr(schema, "FORMAT", schema.FORMAT + 1)
    monkeypatch.setitem(schema.MIGRATIONS, schema.FORMAT - 1, add_section)
    with store.open_gradebook(path, "new lessonlib") as gb:
        assert gb.conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0] == str(schema.FORMAT)
        assert "section" in [c[1] for c in gb.conn.execute("PRAGMA table_info(learners)")]
        assert store.get_assignment(gb, "week2").seed == 1
        last = gb.conn.execute("SELECT what, reason, command FROM history ORDER BY id DESC").fetchone()
        assert tuple(last) == ("gradebook", "upgraded", "new lessonlib")
    assert (tmp_path / f"gradebook.db.format{schema.FORMAT - 1}.bak").exists()


def test_a_format_without_an_upgrade_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "gradebook.db"
    store.open_gradebook(path, "old lessonlib").close()
    monkeypatch.setattr(schema, "FORMAT", schema.FORMAT + 2)
    with pytest.raises(store.StoreFormatError, match="knows no upgrade from format"):
        store.open_gradebook(path, "new lessonlib")
    monkeypatch.setattr(schema, "FORMAT", 0)
    with pytest.raises(store.StoreFormatError, match="upgrade lessonlib"):
        store.open_gradebook(path, "older lessonlib")


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(store.StoreFormatError, match="not a lessonlib gradebook"):
        store.open_gradebook(path, "lessonlib grade")
    assert path.stat().st_size > 0
    garbage = tmp_path / "grades.csv"
    garbage.write_text("learner,points\nalice,3\n" * 100)
    with pytest.raises(store.StoreFormatError, match="not an SQLite database"):
        store.open_gradebook(garbage, "lessonlib grade")
    assert garbage.read_text().startswith("learner,points")


def test_the_file_is_the_graders_alone(tmp_path: Path) -> None:
    store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade").close()
    assert (tmp_path / "gradebook.db").stat().st_mode & 0o077 == 0


# --- what the batch will call ----------------------------------------------------------------------------


def test_stored_keys_do_not_depend_on_the_order_of_arrival(tmp_path: Path) -> None:
    """Today's assign_keys gives -2 by listing order; the stored keys are the same whatever the order,
    and a later run keeps them even when the listing changes."""
    keys = []
    for n, order in enumerate((["bob", "Bob", "bob-2"], ["bob-2", "Bob", "bob"])):
        with store.open_gradebook(tmp_path / f"course{n}.db", "lessonlib grade") as gb:
            found = store.assign_stored_keys(gb, [Learner(name, "") for name in order])
            keys.append({lr.name: lr.key for lr in found})
            again = store.assign_stored_keys(gb, [Learner("bob", ""), Learner("bob-2", "")])  # run 2: Bob is gone
            assert {lr.name: lr.key for lr in again} == {"bob": keys[-1]["bob"], "bob-2": keys[-1]["bob-2"]}
    assert keys[0] == keys[1] == {"bob": "bob", "bob-2": "bob-2", "Bob": "Bob-3"}


def test_a_learner_is_saved_whole_with_the_hashes_of_their_files(gb: store.Gradebook, tmp_path: Path) -> None:
    notebook = tmp_path / "alice" / "02_masking.ipynb"
    notebook.parent.mkdir()
    notebook.write_bytes(b'{"cells": []}')
    learner = store.assign_stored_keys(gb, [Learner("alice", "", {"02_masking.ipynb": notebook}, late=True)])[0]
    with pytest.raises(store.StoreError, match="its own result"):
        store.save_learner_result(gb, "week2", learner, _result("bob"))
    learner.submitted_at, learner.submitted_from = DUE, "zip_entry"
    store.save_learner_result(gb, "week2", learner, _result("alice"), attempt=2, chosen_because="the latest of 3")
    row = gb.conn.execute("SELECT f.*, s.lms_late, s.attempt, s.submitted_at, s.submitted_from FROM submission_files f "
                          "JOIN submissions s ON s.id = f.submission_id").fetchone()
    assert (row["file_name"], row["size"], row["lms_late"], row["attempt"]) == ("02_masking.ipynb", 13, 1, 2)
    assert (row["submitted_at"], row["submitted_from"]) == (DUE.isoformat(), "zip_entry")
    assert row["sha256"] == hashlib.sha256(b'{"cells": []}').hexdigest()
    assert store.saved_fingerprint(gb, "week2", "alice") == "fp-alice"
    with pytest.raises(RuntimeError, match="grader failed"):  # a failure inside leaves nothing of the second save
        with gb.transaction():
            store.record_result(gb, "week2", _result("alice", written=1.0, status=r.GRADED_BY_HAND))
            raise RuntimeError("the grader failed")
    assert store.assignment_sheet(gb, "week2")[0].exercises[2].points is None


def test_the_seed_is_drawn_once_and_kept(tmp_path: Path) -> None:
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade") as gb:
        seed = store.ensure_assignment(gb, "week3", NOTEBOOKS).seed
        assert 0 <= seed < 2**63 and store.ensure_assignment(gb, "week3", NOTEBOOKS).seed == seed
        assert store.ensure_assignment(gb, "week4", NOTEBOOKS).seed != seed


def test_a_hand_grade_for_an_earlier_answer_is_withdrawn(gb: store.Gradebook) -> None:
    key = _graded(gb, "alice")
    store.set_hand_grade(gb, "week2", key, "q_masks", 2.0, comment="Clear.")
    assert store.assignment_sheet(gb, "week2")[0].exercises[2].points == 2.0
    assert store.record_result(gb, "week2", _result(key)) == []  # the same answer graded again: kept
    changed = _result(key)
    changed.exercises[2].answer_text = "A new answer, resubmitted."
    said = store.record_result(gb, "week2", changed)
    score = store.assignment_sheet(gb, "week2")[0].exercises[2]
    assert score.points is None and score.pending and "changed after it was graded by hand" in score.review
    assert said and "q_masks" in said[0]
    withdrawn = store.learner_history(gb, key)[-1]
    assert (withdrawn.what, withdrawn.old["points"], withdrawn.new) == ("hand_grade", 2.0, None)


def test_every_error_for_the_user_is_one_kind(gb: store.Gradebook) -> None:
    for error in (store.StoreError, store.StoreFormatError, store.GraderBusy):
        assert issubclass(error, store.GradebookError)
    with pytest.raises(store.GradebookError, match="the assignments are: week2"):
        store.get_assignment(gb, "week9")
    with pytest.raises(store.GradebookError, match="no learner with key 'nobody'"):
        store.set_override(gb, "week2", "nobody", "causal_mask", 1.0, "why")


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """Every row of every table, for comparing a gradebook before and after an upgrade."""
    tables = [t[0] for t in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return {t: sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr) for t in tables}


def test_a_format_2_gradebook_gains_enrolments_without_losing_a_row(gb: store.Gradebook, tmp_path: Path) -> None:
    """Format 2 had no enrolments: the upgrade adds the table (empty: every learner stays expected),
    keeps every row of every table, backs the file up and records the upgrade in the history."""
    _graded(gb, "amy", lms_id="101")
    _graded(gb, "bob", written=2.0, status=r.PASSED)
    store.set_override(gb, "week2", "bob", "padding_mask", 4.0, reason="regrade request")
    gb.close()
    path = tmp_path / "gradebook.db"
    with sqlite3.connect(path) as conn:  # as format 2 left it
        conn.execute("DROP TABLE enrolments")
        conn.execute("UPDATE meta SET value = '2' WHERE name = 'format'")
        before = _rows(conn)
    with store.open_gradebook(path, "new lessonlib") as upgraded:
        after = _rows(upgraded.conn)
        assert after.pop("enrolments") == [] and store.enrolled(upgraded) == {}
        new_history = [row for row in after["history"] if row not in before["history"]]
        assert [row[3:4] + row[7:10] for row in new_history] == [
            ("gradebook", '{"format": 2}', f'{{"format": {store.FORMAT}}}', "upgraded")]
        after["history"] = [row for row in after["history"] if row not in new_history]
        after.pop("sqlite_sequence"), before.pop("sqlite_sequence")  # the history's counter, one row on
        after["meta"] = [row for row in after["meta"] if row[0] not in ("format", "history_head")]
        before["meta"] = [row for row in before["meta"] if row[0] not in ("format", "history_head")]
        assert after == before
        assert upgraded.conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()[0] == str(store.FORMAT)
    with sqlite3.connect(tmp_path / "gradebook.db.format2.bak") as backup:
        assert _rows(backup)["results"] == before["results"]


def test_enrolling_a_roster_records_each_learner_once_with_a_history_row(gb: store.Gradebook) -> None:
    amy = _graded(gb, "amy", lms_id="101")
    cat = store.register(gb, "Cat", lms_id="103").key  # in the roster, handed nothing in
    assert store.enrol(gb, "week2", [amy, cat, amy]) == [amy, cat]
    assert store.enrol(gb, "week2", [amy]) == []  # a re-run adds nothing
    assert store.enrolled(gb) == {"week2": {amy, cat}}
    rows = [c for c in store.learner_history(gb, cat) if c.what == "enrolment"]
    assert len(rows) == 1 and rows[0].assignment == "week2"
    dan = store.register(gb, "Dan", lms_id="104").key
    export = store.record_export(gb, "week2", "lms-import.csv")
    store.enrol(gb, "week2", [dan])
    assert store.changed_since(gb, export).learners == []  # an enrolment changes no grade to export
    with pytest.raises(store.StoreError, match="no learner with key 'nobody'"):
        store.enrol(gb, "week2", ["nobody"])
    with pytest.raises(store.StoreError, match="no assignment 'week9'"):
        store.enrol(gb, "week9", [amy])
