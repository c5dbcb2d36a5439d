"""A term of graded work, end to end through the course gradebook: five weekly assignments (one per
notebook, 01 to 05) for a generated class of 150 learners in two sections, one taught on Canvas and
one on Moodle, each graded from its LMS's download with its LMS's roster, and every lms-import.csv
checked against the gradebook at the end.

The term has what a real one has: absent learners, late files (Canvas ``_LATE`` names, Moodle's late
Status), a zero late policy, extensions, an override, written answers graded by hand in manual.csv,
a learner who resubmits (a regrade), and a late-submissions folder graded into the same output
folder, with ``--absent-zero``. At the end, from the files and from the gradebook: every learner's
grade in every lms-import.csv is the gradebook's (scaled to the LMS's 100 points), no key moved,
each decision is where it was given and in the history with its reason, the late policy touched
the late learners only, the late folder dropped nobody, and the regrade replaced the old result
with a history row. The term report names the misconception that persists (a softmax zeroed after
normalising in week 2, excluded without renormalising in week 5).

This test checks the gradebook's plumbing, not the sandbox, which other tests cover: the learners'
notebooks are the released exercise notebooks with a marker in their metadata, and
``batch.grade_learner`` is replaced by a deterministic stand-in that derives each exercise's
points from the notebook's bytes (no worker starts), so about 700 submissions grade in seconds.
A handful of learners (``REAL``: two model answers and one untouched stub) are graded for real
in the sandbox, which is probed once for the term.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from html import unescape
from pathlib import Path

import pytest

from lessonlib import cli
from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS
from lessonlib.grading import records as r
from lessonlib.grading import store
from lessonlib.grading.isolation import sandbox, trial
from lessonlib.grading.reports import term
from lessonlib.grading.reports.term import kind_title
from lessonlib.grading.run import batch

ROOT = Path(__file__).resolve().parents[2]
WEEKS = {1: "01_scaling.ipynb", 2: "02_masking.ipynb", 3: "03_position.ipynb", 4: "04_cost.ipynb",
         5: "05_interpretation.ipynb"}
CLASS = 150
CANVAS = range(0, CLASS // 2)
MOODLE = range(CLASS // 2, CLASS)
LAST = ("Smith", "Jones", "Nguyen", "Garcia", "Okafor", "Kowalski")
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *(f"Week {w} ({10000 + w})" for w in WEEKS),
                 "Current Score"]
MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
                 "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
MISCONCEPTION = {"masked_softmax": "zeroed_after_softmax", "exclusion_effects": "exclusion_not_renormalised"}
OVERRIDE = (10, 2, "masked_softmax", 2.5, "regrade request: right up to the fill value, which the question left open")
EXTENDED = {(16, 3): "illness, with a note from the dean", (76, 3): "a family emergency"}
REGRADED = {(5, 4), (80, 4)}  # (learner, week): handed in a stub, then resubmitted a full answer
LATE_FOLDER_WEEK = 1  # the Canvas section's late files arrive as a folder of their own
REAL = {(20, 2): "solutions", (21, 2): "exercises", (90, 2): "solutions"}  # graded for real, in the sandbox
REAL_GRADE_LEARNER = batch.grade_learner


# --- the class ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    i: int

    @property
    def first(self) -> str:
        return f"Learner{self.i:03d}"

    @property
    def last(self) -> str:
        return LAST[self.i % len(LAST)]

    @property
    def canvas(self) -> bool:
        return self.i in CANVAS

    @property
    def lms_id(self) -> str:
        return str(500_000 + self.i) if self.canvas else str(2_000 + self.i)

    def absent(self, week: int) -> bool:
        return (self.i + week) % 17 == 0

    def late(self, week: int) -> bool:
        return self.i % 15 == 1 and not self.absent(week)

    def misconceived(self, week: int) -> bool:
        return self.i % 10 == 3 and week in (2, 5)


PEOPLE = [Person(i) for i in range(CLASS)]


def _notebook(week: int, person: Person, score: str = "hash") -> bytes:
    """The released exercise notebook with a marker: whose it is, and how the stand-in grades it."""
    source = REAL.get((person.i, week), "exercises")
    score = "real" if (person.i, week) in REAL else score
    nb = json.loads((ROOT / source / WEEKS[week]).read_text())
    marker = {"learner": person.i, "week": week, "score": score, "misconception": person.misconceived(week)}
    nb["metadata"]["course_test"] = marker
    return json.dumps(nb, indent=1).encode()


def fast_grade_learner(batch_: object, learner: object, fingerprint: str) -> r.LearnerResult:
    """A deterministic stand-in for ``batch.grade_learner``: each exercise's points from the notebook's bytes
    (the learners in ``REAL`` are graded for real)."""
    if any(b'"score": "real"' in path.read_bytes() for path in learner.files.values()):  # type: ignore[attr-defined]
        return REAL_GRADE_LEARNER(batch_, learner, fingerprint)  # type: ignore[arg-type]
    grades: list[r.ExerciseGrade] = []
    for course in batch_.courses:  # type: ignore[attr-defined]
        path = learner.files.get(course.name)  # type: ignore[attr-defined]
        data = path.read_bytes() if path else b""
        marker = json.loads(data)["metadata"].get("course_test", {}) if data else {}
        for ex in (e for e in EXERCISES.values() if e.notebook == course.name):
            digest = hashlib.sha256(data + ex.name.encode()).digest()
            points = {"full": ex.points, "zero": 0.0}.get(marker.get("score"), float(digest[0] % (int(ex.points) + 1)))
            diagnoses = []
            if marker.get("misconception") and ex.name in MISCONCEPTION:
                d = next(d for d in ex.diagnoses if d.name == MISCONCEPTION[ex.name])
                points, diagnoses = 0.0, [{"name": d.name, "title": d.title, "message": d.message, "hint": d.hint,
                                           "reread": kind_title(d.section)}]
            status = r.PASSED if points == ex.points else r.FAILED
            grades.append(r.ExerciseGrade(course.name, ex.name, points, ex.points, status, passed_cases=int(points),
                                          total_cases=int(ex.points), diagnoses=diagnoses,
                                          instructor_diagnoses=diagnoses))
        for q in (q for q in MANUAL_QUESTIONS.values() if q.notebook == course.name):
            grades.append(r.ExerciseGrade(course.name, q.name, None, q.points, r.NEEDS_MANUAL, kind="manual",
                                          answer_text=f"written answer of learner {marker.get('learner')}"))
    return r.LearnerResult(learner.name, learner.key, fingerprint, batch_.isolation.level,  # type: ignore
                           datetime.now(timezone.utc).isoformat(timespec="seconds"), grades,
                           notes=list(learner.notes), files={k: v.name for k, v in learner.files.items()},
                           lms_id=learner.lms_id, late=learner.late)  # type: ignore[attr-defined]


# --- the LMS files --------------------------------------------------------------------------------------


def _canvas_file(folder: Path, person: Person, week: int, data: bytes, resubmission: int = 0) -> None:
    late = "_LATE" if person.late(week) else ""
    stem = Path(WEEKS[week]).stem + (f"-{resubmission}" if resubmission else "")
    name = f"{person.last.lower()}{person.first.lower()}{late}_{person.lms_id}_{900_000 + 10 * person.i + week}"
    folder.mkdir(parents=True, exist_ok=True)
    _handed_in(folder / f"{name}_{stem}.ipynb", person, week, data)


def _moodle_file(folder: Path, person: Person, week: int, data: bytes, copy: int = 0) -> None:
    where = folder / f"{person.first} {person.last}_{person.lms_id}_assignsubmission_file_"
    where.mkdir(parents=True, exist_ok=True)
    stem = Path(WEEKS[week]).stem + (f" ({copy})" if copy else "")
    _handed_in(where / f"{stem}.ipynb", person, week, data)


def _handed_in(path: Path, person: Person, week: int, data: bytes) -> None:
    """Write a submitted file with the time it was handed in (3 hours early, or 1 day 2 hours late, as
    the LMS's late flag says): the download's file times are the submission times the grader reads."""
    path.write_bytes(data)
    due = datetime.fromisoformat(_due(week))
    when = (due + timedelta(days=1, hours=2) if person.late(week) else due - timedelta(hours=3)).timestamp()
    os.utime(path, (when, when))


def _canvas_roster(path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CANVAS_HEADER)
        w.writerow(["    Points Possible", "", "", "", "", *["100"] * len(WEEKS), ""])
        for p in PEOPLE:
            if p.canvas:
                w.writerow([f"{p.last}, {p.first}", p.lms_id, f"S{p.i:04d}", p.first.lower(), "Canvas section",
                            *[""] * len(WEEKS), ""])
    return path


def _moodle_worksheet(path: Path, week: int) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(MOODLE_HEADER)
        for p in PEOPLE:
            if p.canvas:
                continue
            status = ("No submission" if p.absent(week) else
                      "Submitted for grading - Assignment was submitted 1 day 2 hours late" if p.late(week) else
                      "Submitted for grading")
            w.writerow([f"Participant {p.lms_id}", f"{p.first} {p.last}", f"{p.first.lower()}@example.org", status,
                        "", "100.00", "Yes", "-", "-", ""])
    return path


def _due(week: int, extra_days: int = 0) -> str:
    return (datetime(2026, 9, 6, 23, 59, tzinfo=timezone.utc) + timedelta(weeks=week - 1, days=extra_days)).isoformat()


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, f"lessonlib {' '.join(args)}\n{out}\n{err}"
    return out


# --- the term ---------------------------------------------------------------------------------------------


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    chosen: list[sandbox.Isolation] = []
    choose = trial.choose_isolation

    def once(*args: object, **kwargs: object) -> sandbox.Isolation:  # probed once for the term, not per run
        if not chosen:
            chosen.append(choose(*args, **kwargs))  # type: ignore[arg-type]
        return chosen[0]
    monkeypatch.setattr(batch, "grade_learner", fast_grade_learner)
    monkeypatch.setattr(trial, "choose_isolation", once)
    yield


def _grade(capsys: pytest.CaptureFixture[str], download: Path, out: Path, week: int, roster: Path | None,
           *extra: str) -> str:
    args = ["grade", str(download), "--out", str(out), "--notebooks", WEEKS[week], "--workers", "2", "--quiet"]
    if roster is not None:
        args += ["--roster", str(roster)] + (["--assignment", f"Week {week}"] if out.name.startswith("canvas") else [])
    return _run(capsys, *args, *extra)


def test_a_term_of_150_learners_round_trips_through_canvas_and_moodle(
        tmp_path: Path, fast: None, capsys: pytest.CaptureFixture[str]) -> None:
    course = tmp_path / "course"
    downloads = tmp_path / "downloads"
    canvas_roster = _canvas_roster(tmp_path / "canvas-gradebook.csv")
    db = course / store.GRADEBOOK_FILE
    keys_after: dict[str, dict[str, str]] = {}

    for week in WEEKS:
        for lms in ("canvas", "moodle"):
            out = course / f"{lms}-week{week}"
            download = downloads / f"{lms}-week{week}"
            late_folder = downloads / f"{lms}-week{week}-late"
            for p in PEOPLE:
                if p.canvas != (lms == "canvas") or p.absent(week):
                    continue
                data = _notebook(week, p, "zero" if (p.i, week) in REGRADED else "hash")
                if lms == "canvas":
                    separate = week == LATE_FOLDER_WEEK and p.late(week)
                    _canvas_file(late_folder if separate else download, p, week, data)
                else:
                    _moodle_file(download, p, week, data)
            roster = canvas_roster if lms == "canvas" else _moodle_worksheet(tmp_path / f"moodle-week{week}.csv", week)
            _grade(capsys, download, out, week, roster)
            _run(capsys, "late-policy", "--out", str(out), "--due", _due(week), "--zero")
            if late_folder.exists():  # the late files, graded into the same folder: nobody is dropped
                before = _rows(out / "lms-import.csv")
                _grade(capsys, late_folder, out, week, None, "--absent-zero")
                after = {row["ID"]: row for row in _rows(out / "lms-import.csv")}
                column = f"Week {week} ({10000 + week})"
                for row in before:
                    if row["ID"] and row[column]:
                        assert after[row["ID"]][column] == row[column], row  # on-time learners keep their grade
            with store.open_gradebook(db, "check", lock=False) as gb:
                keys_after[out.name] = {s.lms_id: s.key for s in store.all_learners(gb)}

    # the instructor's decisions
    person, week, exercise, points, reason = OVERRIDE
    with store.open_gradebook(db, "check", lock=False) as gb:
        key_of = {s.lms_id: s.key for s in store.all_learners(gb)}
    _run(capsys, "override", "--out", str(course / f"canvas-week{week}"), key_of[PEOPLE[person].lms_id], exercise,
         str(points), "--reason", reason)
    for (i, week), why in EXTENDED.items():
        lms = "canvas" if PEOPLE[i].canvas else "moodle"
        _run(capsys, "extend", "--out", str(course / f"{lms}-week{week}"), key_of[PEOPLE[i].lms_id],
             "--due", _due(week, 3), "--reason", why)
    for i, week in REGRADED:  # a resubmission: the newer file wins, the old result is replaced
        p = PEOPLE[i]
        lms = "canvas" if p.canvas else "moodle"
        if p.canvas:
            _canvas_file(downloads / f"canvas-week{week}", p, week, _notebook(week, p, "full"), resubmission=1)
        else:
            _moodle_file(downloads / f"moodle-week{week}", p, week, _notebook(week, p, "full"), copy=1)
        stdout = _grade(capsys, downloads / f"{lms}-week{week}", course / f"{lms}-week{week}", week, None)
        assert "graded 1 learner(s)" in stdout, stdout
    hand: dict[tuple[str, str], float] = {}
    for lms in ("canvas", "moodle"):  # week 5's written answers, graded by hand
        out = course / f"{lms}-week5"
        pending = _rows(out / "lms-import.csv")
        graded_early = [row for row in pending if row.get("ID", row.get("Identifier"))
                        and row.get("Grade", row.get("Week 5 (10005)")) != ""]
        assert pending and not graded_early, "no grade before hand grading"
        rows = _rows(out / "manual.csv")
        assert rows and all(row["answer"].startswith("written answer of learner") for row in rows)  # the text
        for n, row in enumerate(rows):
            row.update(points=str((n % 5) * 0.5), rubric=f"band {n % 5}", comment=f"hand comment {n}")
            hand[row["learner"], row["exercise"]] = (n % 5) * 0.5
        with open(out / "manual.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        assert "graded 0 learner(s)" in _grade(capsys, downloads / f"{lms}-week5", out, 5, None)

    # --- every grade where it belongs --------------------------------------------------------------------
    with store.open_gradebook(db, "check", lock=False) as gb:
        final_keys = {s.lms_id: s.key for s in store.all_learners(gb)}
        assert len(final_keys) == CLASS
        for name, keys in keys_after.items():  # no key moved between runs
            assert {k: final_keys[k] for k in keys} == keys, name
        by_key = {s.key: s for s in store.all_learners(gb)}
        checked = 0
        for week in WEEKS:
            for lms in ("canvas", "moodle"):
                out = course / f"{lms}-week{week}"
                sheets = {by_key[s.key].lms_id: s for s in store.assignment_sheet(gb, out.name)}
                section = [p for p in PEOPLE if p.canvas == (lms == "canvas")]
                assert set(sheets) == {p.lms_id for p in section if not p.absent(week)}, out.name
                if lms == "canvas":
                    column = f"Week {week} ({10000 + week})"
                    lms_rows = {row["ID"]: row[column] for row in _rows(out / "lms-import.csv") if row["ID"]}
                    assert _rows(out / "lms-import.csv")[0][column] == "100"  # Points Possible kept
                else:
                    lms_rows = {row["Identifier"].removeprefix("Participant "): row["Grade"]
                                for row in _rows(out / "lms-import.csv")}
                for p in section:
                    given = lms_rows.get(p.lms_id, "")
                    if p.absent(week):
                        absent_zero = lms == "canvas" and week == LATE_FOLDER_WEEK
                        assert given == ("0" if absent_zero else ""), (out.name, p)
                        continue
                    s = sheets[p.lms_id]
                    assert s.pending == 0
                    assert float(given.replace(",", ".")) == pytest.approx(round(s.total * 100 / s.max_points, 2),
                                                                            abs=0.006), (out.name, p)
                    extended = (p.i, week) in EXTENDED
                    assert s.lms_late == p.late(week), (out.name, p)
                    if p.late(week) and not extended:  # the zero policy: late learners only
                        assert s.total == 0 and s.late is not None and s.late.deducted == s.points, (out.name, p)
                    else:
                        assert s.total == s.points, (out.name, p, s.late)
                    checked += 1
        assert checked > 600

        # the history is complete: each learner's arrival, and a result for each assignment handed in
        for p in PEOPLE:
            history = store.learner_history(gb, final_keys[p.lms_id])
            assert [c.what for c in history].count("learner") == 1, p
            lms = "canvas" if p.canvas else "moodle"
            assert {c.assignment for c in history if c.what == "result" and c.new is not None} == {
                f"{lms}-week{w}" for w in WEEKS if not p.absent(w)}, p

        # the handful graded for real: the model answers get every point, the untouched stubs none
        for (i, week), source in REAL.items():
            p = PEOPLE[i]
            name = f"{'canvas' if p.canvas else 'moodle'}-week{week}"
            sheet = next(s for s in store.assignment_sheet(gb, name) if s.key == final_keys[p.lms_id])
            if source == "solutions":
                assert sheet.points == sheet.max_points and {e.status for e in sheet.exercises} == {"passed"}, sheet
            else:
                assert sheet.points == 0 and {e.status for e in sheet.exercises} == {"not_attempted"}, sheet

        # the override, with its reason, in the sheet and the history
        person, week, exercise, points, reason = OVERRIDE
        key = final_keys[PEOPLE[person].lms_id]
        sheet = next(s for s in store.assignment_sheet(gb, f"canvas-week{week}") if s.key == key)
        score = next(e for e in sheet.exercises if e.exercise == exercise)
        assert (score.points, score.source, score.note) == (points, "override", reason)
        history = store.learner_history(gb, key)
        assert any(c.what == "override" and c.exercise == exercise and c.reason == reason for c in history)
        assert reason in (course / f"canvas-week{week}" / "feedback" / f"{key}.md").read_text()
        # the extensions
        for (i, week), why in EXTENDED.items():
            key = final_keys[PEOPLE[i].lms_id]
            assert any(c.what == "extension" and c.reason == why and c.assignment.endswith(f"week{week}")
                       for c in store.learner_history(gb, key)), key
            name = f"{'canvas' if PEOPLE[i].canvas else 'moodle'}-week{week}"
            sheet = next(s for s in store.assignment_sheet(gb, name) if s.key == key)
            assert sheet.lms_late and sheet.late is not None and "extension" in sheet.late.sentence
            assert "extension" in (course / name / "feedback" / f"{key}.md").read_text()
        # the regrades: the resubmission's full marks replaced the stub's zeros, each with a history row
        for i, week in REGRADED:
            p = PEOPLE[i]
            name = f"{'canvas' if p.canvas else 'moodle'}-week{week}"
            key = final_keys[p.lms_id]
            sheet = next(s for s in store.assignment_sheet(gb, name) if s.key == key)
            assert sheet.points == sheet.max_points
            changes = [c for c in store.learner_history(gb, key) if c.what == "result" and c.assignment == name]
            regraded = [c for c in changes if c.old is not None]
            assert {c.exercise for c in regraded} == {e.exercise for e in sheet.exercises}
            assert all(c.old["points"] == 0 and c.new["points"] > 0 for c in regraded)
        # the hand grades, with their rubric lines, and one history row each
        for lms in ("canvas", "moodle"):
            scores = {(s.key, e.exercise): e for s in store.assignment_sheet(gb, f"{lms}-week5") for e in s.exercises}
            marked = {k: v for k, v in hand.items() if k in scores}
            assert marked
            for (key, exercise), points in marked.items():
                assert scores[key, exercise].points == points and scores[key, exercise].source == "hand"
            rows = store.assignment_history(gb, f"{lms}-week5")
            assert sum(c.what == "hand_grade" for c in rows) == len(marked)

    # the term report names the misconception that persists, and who has it
    report = course / "term-report.html"
    stdout = _run(capsys, "term-report", "--gradebook", str(db), "--to", str(report))
    html = unescape(report.read_text())
    persisting = [p for p in PEOPLE if p.misconceived(2) and not p.absent(2) and not p.absent(5)]
    assert len(persisting) >= 10
    assert f"{kind_title('zeroed-after')}, {len(persisting)} persisting" in html
    assert all(p.first.lower() in html.lower() for p in persisting)
    assert "a learner is expected only at assignments whose roster lists them" in html
    # sections: a learner is missing only the work of their own section's assignments
    with store.open_gradebook(db, "test", lock=False) as gb:
        summary = term.term_report_from(gb)
    by_id = {ln.key.rsplit("_", 1)[-1]: ln for ln in summary.learners}
    for p in PEOPLE:
        lms = "canvas" if p.canvas else "moodle"
        assert summary.missed(by_id[p.lms_id]) == [f"{lms}-week{w}" for w in WEEKS if p.absent(w)], p
    skipped = next(p for p in PEOPLE if p.canvas and p.absent(1))  # handed nothing in to canvas-week1
    assert "no submission to canvas-week1" in summary.help_reasons(by_id[skipped.lms_id])
    present = next(p for p in PEOPLE if p.canvas and not any(p.absent(w) for w in WEEKS))
    assert not any("no submission" in why for why in summary.help_reasons(by_id[present.lms_id]))
    assert "not expected" in html
    with capsys.disabled():
        print(f"\nterm report of the generated course: {report} ({stdout.strip()})")


def test_a_grader_failure_records_the_assignment_s_exercises_only(
        tmp_path: Path, fast: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a failure of the grader on one learner recorded an error for every exercise of every
    course notebook, so a one-notebook assignment's learner was out of the whole course's points."""
    def fails(*args: object, **kwargs: object) -> r.LearnerResult:
        raise RuntimeError("a bug in the grader")
    monkeypatch.setattr(batch, "grade_learner", fails)
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / WEEKS[2]).write_bytes(_notebook(2, PEOPLE[0]))
    out = tmp_path / "week2"
    assert cli.main(["grade", str(tmp_path / "subs"), "--out", str(out), "--notebooks", WEEKS[2], "--quiet"]) == 1
    assert "the grader failed on 1 learner(s)' submission (ann)" in capsys.readouterr().err
    [ann] = [lr for lr in json.loads((out / "grades.json").read_text())["learners"]]
    assert {g["notebook"] for g in ann["exercises"]} == {WEEKS[2]}
    assert {g["status"] for g in ann["exercises"]} == {"error"}
    assert ann["max_points"] == sum(e.points for e in EXERCISES.values() if e.notebook == WEEKS[2])


def test_an_extension_is_honoured_when_only_the_lms_says_late() -> None:
    """Before: Canvas's ``_LATE`` (or Moodle's late Status) with no submission time zeroed a learner
    whose extension the instructor had granted, under a zero late policy: the LMS's flag is measured
    against the assignment's due date, not the extension."""
    due = datetime(2026, 9, 6, 23, 59, tzinfo=timezone.utc)
    zero = store.LatePolicy("zero")
    extended = store.late_adjusted(7.0, 9.0, zero, due=due, submitted=None, extension=due + timedelta(days=3),
                                   lms_late=True)
    assert (extended.points, extended.deducted, extended.late) == (7.0, 0.0, False)
    assert "extension" in extended.sentence
    assert store.late_adjusted(7.0, 9.0, zero, due=due, submitted=None, lms_late=True).points == 0.0  # unchanged
    after_extension = store.late_adjusted(7.0, 9.0, zero, due=due, submitted=due + timedelta(days=4),
                                          extension=due + timedelta(days=3), lms_late=True)
    assert after_extension.points == 0.0  # a known time after the extension is still late
