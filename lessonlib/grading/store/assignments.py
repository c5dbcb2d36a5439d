"""Assignments, learners' submissions and their graded results: what ``lessonlib grade`` writes.

Each function is one transaction (or joins the caller's ``with gradebook.transaction():``) and
appends a history row for every value it changes; a value written again unchanged writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from lessonlib.grading import records as r
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.store.database import Gradebook, StoreError, now
from lessonlib.grading.store.late import LatePolicy
from lessonlib.grading.store.marks import review_decisions
from lessonlib.grading.store.schema import LOCAL_TIME_SOURCES, SUBMISSION_TIME_SOURCES
from lessonlib.grading.zones import zone_of


@dataclass(frozen=True)
class Assignment:
    """One row of the assignments table."""

    id: int
    name: str
    notebooks: tuple[str, ...]
    seed: int
    due_at: datetime | None
    policy: LatePolicy
    last_run: dict[str, Any]  # the isolation, limits, workers and roster of the last run that graded it


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    if when.tzinfo is None:
        raise StoreError(f"the time {when.isoformat()} has no time zone; give it in UTC or with its offset "
                         "(2026-03-01T17:00:00+00:00), so that lateness does not depend on the machine's zone")
    return when.isoformat(timespec="seconds")


def get_assignment(gradebook: Gradebook, name: str) -> Assignment:
    row = gradebook.conn.execute("SELECT * FROM assignments WHERE id = ?", (gradebook.assignment_id(name),)).fetchone()
    return Assignment(row["id"], row["name"], tuple(json.loads(row["notebooks"])), int(row["seed"]),
                      _time(row["due_at"]), LatePolicy(row["late_policy"], row["penalty_per_day"], row["late_floor"]),
                      json.loads(row["last_run"] or "{}"))


def record_run(gradebook: Gradebook, name: str, run: dict[str, Any]) -> None:
    """Keep what the last run that graded ``name`` ran under (its isolation, limits, workers, roster),
    for the commands that rewrite the files without grading; a history row when it changed."""
    before = get_assignment(gradebook, name)
    if before.last_run == run:
        return
    def brief(settings: dict[str, Any]) -> dict[str, Any] | None:  # the history's line: not the probe's details
        if not settings:
            return None
        return {"level": (settings.get("isolation") or {}).get("level"), "limits": settings.get("limits"),
                "workers": settings.get("workers"), "roster": settings.get("roster")}

    with gradebook.transaction() as conn:
        conn.execute("UPDATE assignments SET last_run = ? WHERE id = ?", (json.dumps(run, allow_nan=False), before.id))
        if brief(before.last_run) != brief(run):
            gradebook.record("run_settings", assignment_id=before.id, old=brief(before.last_run), new=brief(run))


def new_seed() -> int:
    """A fresh secret seed: 63 bits from the operating system's random source (as ``resume.new_seed``)."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def ensure_assignment(gradebook: Gradebook, name: str, notebooks: Sequence[str], seed: int | None = None
                      ) -> Assignment:
    """The assignment ``name``; when new, created with ``notebooks`` and ``seed`` (None: a new secret one).

    An existing one must have the same notebooks: grading other notebooks under its name is refused.
    Its seed is its own: a ``seed`` that differs from it is refused, None takes it.
    """
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT notebooks, seed FROM assignments WHERE name = ?", (name,)).fetchone()
        if row is None:
            cursor = conn.execute("INSERT INTO assignments (name, notebooks, seed, created_at) VALUES (?, ?, ?, ?)",
                                  (name, json.dumps(list(notebooks)), new_seed() if seed is None else int(seed),
                                   now()))
            gradebook.record("assignment", assignment_id=int(cursor.lastrowid or 0),
                             new={"name": name, "notebooks": list(notebooks)})  # never the seed
        else:
            if json.loads(row["notebooks"]) != list(notebooks):
                raise StoreError(f"the assignment {name!r} grades {', '.join(json.loads(row['notebooks']))}, not "
                                 f"{', '.join(notebooks)}; give the other notebooks another assignment (with "
                                 "`lessonlib grade`, a new --out folder: its name names the assignment)")
            if seed is not None and int(row["seed"]) != int(seed):
                raise StoreError(f"the assignment {name!r} keeps the seed it was first graded with; leave the seed "
                                 "out to use it, or grade under another assignment name")
        return get_assignment(gradebook, name)


def set_late_policy(gradebook: Gradebook, name: str, *, due_at: datetime | None, policy: LatePolicy) -> Assignment:
    """Set the due date and late policy of an assignment (recorded in history)."""
    before = get_assignment(gradebook, name)
    with gradebook.transaction() as conn:
        conn.execute("UPDATE assignments SET due_at = ?, late_policy = ?, penalty_per_day = ?, late_floor = ? "
                     "WHERE id = ?", (_iso(due_at), policy.kind, policy.penalty_per_day, policy.floor, before.id))
        old = {"due_at": _iso(before.due_at), "policy": before.policy.__dict__}
        new = {"due_at": _iso(due_at), "policy": policy.__dict__}
        if old != new:
            gradebook.record("late_policy", assignment_id=before.id, old=old, new=new)
    return get_assignment(gradebook, name)


def _submitted_at(gradebook: Gradebook, a: int, lid: int) -> str | None:
    row = gradebook.conn.execute("SELECT submitted_at FROM submissions WHERE assignment_id = ? AND learner_id = ?",
                                 (a, lid)).fetchone()
    return row["submitted_at"] if row else None


def grant_extension(gradebook: Gradebook, assignment: str, learner_key: str, due_at: datetime, reason: str) -> None:
    """Give one learner a new due date for one assignment; ``reason`` is required and kept. The
    extension is tied to the learner's submission time as it is now (see ``review_extension``)."""
    if not reason.strip():
        raise StoreError(f"an extension for {learner_key} needs a reason (it is kept in the history)")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    with gradebook.transaction() as conn:
        old = conn.execute("SELECT due_at, reason FROM extensions WHERE assignment_id = ? AND learner_id = ?",
                           (a, lid)).fetchone()
        conn.execute("INSERT OR REPLACE INTO extensions (assignment_id, learner_id, due_at, reason, at, command, "
                     "submitted_at, review) VALUES (?, ?, ?, ?, ?, ?, ?, '')",
                     (a, lid, _iso(due_at), reason.strip(), now(), gradebook.command, _submitted_at(gradebook, a, lid)))
        gradebook.record("extension", assignment_id=a, learner_id=lid, old=dict(old) if old else None,
                         new={"due_at": _iso(due_at)}, reason=reason.strip())


def keep_extension(gradebook: Gradebook, assignment: str, learner_key: str, reason: str) -> None:
    """Keep an extension flagged for review for the learner's submission time as it is now."""
    row = _extension(gradebook, assignment, learner_key)
    grant_extension(gradebook, assignment, learner_key, datetime.fromisoformat(row["due_at"]), reason)


def clear_extension(gradebook: Gradebook, assignment: str, learner_key: str, reason: str) -> None:
    """Remove a learner's extension (the assignment's due date applies again); a reason is required."""
    if not reason.strip():
        raise StoreError(f"removing the extension of {learner_key} needs a reason (it is kept in the history)")
    row = _extension(gradebook, assignment, learner_key)
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    with gradebook.transaction() as conn:
        conn.execute("DELETE FROM extensions WHERE assignment_id = ? AND learner_id = ?", (a, lid))
        gradebook.record("extension", assignment_id=a, learner_id=lid, old={"due_at": row["due_at"]}, new=None,
                         reason=reason.strip())


def _extension(gradebook: Gradebook, assignment: str, learner_key: str) -> Any:
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    row = gradebook.conn.execute("SELECT * FROM extensions WHERE assignment_id = ? AND learner_id = ?",
                                 (a, lid)).fetchone()
    if row is None:
        raise StoreError(f"{learner_key} has no extension for {assignment}")
    return row


def review_extension(gradebook: Gradebook, a: int, lid: int, old: str | None, new: str | None) -> str:
    """Flag learner ``lid``'s extension when their submission time moved from ``old`` to ``new`` (the
    caller holds the transaction): it was given against the old time. Returns the sentence ("" when
    there is no extension or the time did not change)."""
    row = gradebook.conn.execute("SELECT due_at, submitted_at, review FROM extensions WHERE assignment_id = ? "
                                 "AND learner_id = ?", (a, lid)).fetchone()
    if row is None or old == new or row["submitted_at"] == new:
        return ""
    why = (f"the submission time changed from {old or 'unknown'} to {new or 'unknown'} after the extension to "
           f"{row['due_at']} was given: keep it or clear it")
    if row["review"] != why:
        gradebook.conn.execute("UPDATE extensions SET review = ? WHERE assignment_id = ? AND learner_id = ?",
                               (why, a, lid))
        gradebook.record("extension", assignment_id=a, learner_id=lid, old={"due_at": row["due_at"]},
                         new={"due_at": row["due_at"], "review": True}, reason=why)
    return why


# --- submissions and results --------------------------------------------------------------------


@dataclass(frozen=True)
class SubmittedFile:
    notebook: str
    file_name: str
    sha256: str
    size: int

    @classmethod
    def of(cls, notebook: str, path: Path) -> SubmittedFile:
        """Hash ``path`` in chunks (a file of any size in little memory); what is not a regular file (a
        folder named like a notebook) has no hash ("" and size -1), as its notebook is flagged unreadable."""
        if not Path(path).is_file():
            return cls(notebook, Path(path).name, "", -1)
        h, size = hashlib.sha256(), 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        return cls(notebook, Path(path).name, h.hexdigest(), size)


def record_submission(gradebook: Gradebook, assignment: str, learner_key: str, files: Sequence[SubmittedFile], *,
                      submitted_at: datetime | None = None, submitted_from: str = "", lms_late: bool = False,
                      attempt: int = 0, chosen_because: str = "", notes: Sequence[str] = (), read_in: str = "") -> int:
    """Record (or replace) the learner's submission to the assignment: its files, its time and where
    that time comes from (``schema.SUBMISSION_TIME_SOURCES``; "" when unknown), the zone a local time
    was read in (``read_in``), and the late flag. An extension given against another time is flagged."""
    if submitted_from not in ("", *SUBMISSION_TIME_SOURCES):
        raise StoreError(f"a submission time's source is one of {', '.join(SUBMISSION_TIME_SOURCES)}, "
                         f"not {submitted_from!r}")
    if submitted_from and submitted_at is None:
        raise StoreError(f"a submission time from {submitted_from} needs the time itself")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    new = {"submitted_at": _iso(submitted_at), "submitted_from": submitted_from if submitted_at else "",
           "lms_late": bool(lms_late), "attempt": attempt,
           "chosen_because": chosen_because, "notes": list(notes),
           "files": {f.notebook: {"file": f.file_name, "sha256": f.sha256, "size": f.size} for f in files}}
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT * FROM submissions WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchone()
        old = _submission(gradebook, row["id"]) if row else None
        if row is None:
            sid = int(conn.execute("INSERT INTO submissions (assignment_id, learner_id) VALUES (?, ?)",
                                   (a, lid)).lastrowid or 0)
        else:
            sid = int(row["id"])
        conn.execute("UPDATE submissions SET submitted_at = ?, submitted_from = ?, read_in = ?, lms_late = ?, "
                     "attempt = ?, chosen_because = ?, notes = ? WHERE id = ?",
                     (new["submitted_at"], new["submitted_from"], read_in if new["submitted_from"] else "",
                      int(lms_late), attempt, chosen_because, json.dumps(list(notes)), sid))
        conn.execute("DELETE FROM submission_files WHERE submission_id = ?", (sid,))
        conn.executemany("INSERT INTO submission_files VALUES (?, ?, ?, ?, ?)",
                         [(sid, f.notebook, f.file_name, f.sha256, f.size) for f in files])
        if old != new:
            gradebook.record("submission", assignment_id=a, learner_id=lid, old=old, new=new)
            review_extension(gradebook, a, lid, old["submitted_at"] if old else None, new["submitted_at"])
        return sid


def update_submission_time(gradebook: Gradebook, assignment: str, learner_key: str, submitted_at: datetime | None,
                           submitted_from: str, *, lms_late: bool | None = None, read_in: str = "") -> bool:
    """Set a stored submission's time from a better source than the stored one's (a history row says
    so), as when a later run brings Moodle's worksheet for files already graded; a time from an equal
    or weaker source changes nothing. ``lms_late``, when given, updates the LMS's late flag (Moodle's
    Status, read again). Returns whether anything changed."""
    if submitted_at is not None and submitted_from not in SUBMISSION_TIME_SOURCES:
        raise StoreError(f"a submission time's source is one of {', '.join(SUBMISSION_TIME_SOURCES)}, "
                         f"not {submitted_from!r}")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT id, submitted_at, submitted_from, lms_late FROM submissions WHERE assignment_id = ? "
                           "AND learner_id = ?", (a, lid)).fetchone()
        if row is None:
            raise StoreError(f"{learner_key!r} has no submission to {assignment!r} whose time could be set")
        changed = False
        if lms_late is not None and bool(row["lms_late"]) != lms_late:
            conn.execute("UPDATE submissions SET lms_late = ? WHERE id = ?", (int(lms_late), row["id"]))
            gradebook.record("submission_late_flag", assignment_id=a, learner_id=lid, old=bool(row["lms_late"]),
                             new=lms_late, reason="the LMS's late flag, read again")
            changed = True
        rank = {source: n for n, source in enumerate((*SUBMISSION_TIME_SOURCES, ""))}  # 0 is the best
        if submitted_at is None or rank[submitted_from] >= rank.get(row["submitted_from"], len(rank)):
            return changed
        _set_time(gradebook, a, lid, row, submitted_at, submitted_from, read_in, reason="")
        return True


def _set_time(gradebook: Gradebook, a: int, lid: int, row: Any, when: datetime, source: str, read_in: str,
              reason: str) -> None:
    old = {"submitted_at": row["submitted_at"], "submitted_from": row["submitted_from"]}
    new = {"submitted_at": _iso(when), "submitted_from": source}
    gradebook.conn.execute("UPDATE submissions SET submitted_at = ?, submitted_from = ?, read_in = ? WHERE id = ?",
                           (new["submitted_at"], source, read_in if source in LOCAL_TIME_SOURCES else "", row["id"]))
    gradebook.record("submission_time", assignment_id=a, learner_id=lid, old=old, new=new, reason=reason)
    review_extension(gradebook, a, lid, old["submitted_at"], new["submitted_at"])


def correct_submission_time(gradebook: Gradebook, assignment: str, learner_key: str, when: datetime,
                            reason: str) -> None:
    """The instructor's correction of one learner's submission time, with a reason: it outranks every
    other source, so no later run replaces it (a new submission does, with its own time)."""
    if not reason.strip():
        raise StoreError(f"correcting the submission time of {learner_key} needs a reason (it is kept in the "
                         "history)")
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    with gradebook.transaction() as conn:
        row = conn.execute("SELECT id, submitted_at, submitted_from FROM submissions WHERE assignment_id = ? "
                           "AND learner_id = ?", (a, lid)).fetchone()
        if row is None:
            raise StoreError(f"{learner_key} has no submission to {assignment}: grade it first")
        _set_time(gradebook, a, lid, row, when, "instructor", "", reason=reason.strip())


def reread_local_times(gradebook: Gradebook, old_zone: tzinfo | None, new_zone: tzinfo, new_name: str) -> int:
    """Read every stored local time (a zip entry's, the worksheet's) again in ``new_zone``: its wall-clock
    time as it was read (in the zone it was read in, else ``old_zone``, else its own offset) placed in
    the new zone, each change with a history row (the caller holds the transaction). Returns how many
    changed."""
    rows = gradebook.conn.execute(
        f"SELECT id, assignment_id, learner_id, submitted_at, submitted_from, read_in FROM submissions WHERE "
        f"submitted_at IS NOT NULL AND submitted_from IN ({', '.join('?' * len(LOCAL_TIME_SOURCES))})",
        LOCAL_TIME_SOURCES).fetchall()
    changed = 0
    for row in rows:
        stored = datetime.fromisoformat(row["submitted_at"])
        read_in = _zone(row["read_in"]) or old_zone
        wall = (stored.astimezone(read_in) if read_in else stored).replace(tzinfo=None)
        again = wall.replace(tzinfo=new_zone)
        if _iso(again) == row["submitted_at"] and row["read_in"] == new_name:
            continue
        _set_time(gradebook, row["assignment_id"], row["learner_id"], row, again, row["submitted_from"], new_name,
                  reason=f"read again in the course's time zone {new_name}")
        changed += 1
    return changed


def _zone(name: str) -> tzinfo | None:
    try:
        return zone_of(name) if name else None
    except ValueError:
        return None


def _submission(gradebook: Gradebook, sid: int) -> dict[str, Any]:
    row = gradebook.conn.execute("SELECT * FROM submissions WHERE id = ?", (sid,)).fetchone()
    files = gradebook.conn.execute("SELECT * FROM submission_files WHERE submission_id = ?", (sid,))
    return {"submitted_at": row["submitted_at"], "submitted_from": row["submitted_from"],
            "lms_late": bool(row["lms_late"]), "attempt": row["attempt"],
            "chosen_because": row["chosen_because"], "notes": json.loads(row["notes"]),
            "files": {f["notebook"]: {"file": f["file_name"], "sha256": f["sha256"], "size": f["size"]}
                      for f in files}}


def _diagnosis_names(grade: r.ExerciseGrade) -> list[str]:
    return [str(d.get("name", d.get("misconception", ""))) for d in grade.diagnoses if isinstance(d, dict)]


def record_result(gradebook: Gradebook, assignment: str, result: r.LearnerResult) -> list[str]:
    """Store one learner's graded result (its key must be registered): every exercise, the run's facts.

    A result row whose status or points change gets a history row; the submission row is created
    when ``record_submission`` was not called first (files unknown). Hand grades and overrides
    given for another answer are withdrawn or suspended (``marks.review_decisions``); returns a line
    for each, for the instructor.
    """
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(result.key)
    with gradebook.transaction() as conn:
        said = review_decisions(gradebook, a, lid, result.exercises)
        row = conn.execute("SELECT id FROM submissions WHERE assignment_id = ? AND learner_id = ?", (a, lid)).fetchone()
        if row is None:
            conn.execute("INSERT INTO submissions (assignment_id, learner_id, lms_late) VALUES (?, ?, ?)",
                         (a, lid, int(result.late)))
        conn.execute("UPDATE submissions SET fingerprint = ?, isolation = ?, graded_at = ?, seconds = ?, notes = ? "
                     "WHERE assignment_id = ? AND learner_id = ?",
                     (result.fingerprint, result.isolation, result.graded_at, result.seconds,
                      json.dumps(result.notes), a, lid))
        before = {row["exercise"]: row for row in conn.execute(
            "SELECT exercise, status, points FROM results WHERE assignment_id = ? AND learner_id = ?", (a, lid))}
        for position, grade in enumerate(result.exercises):
            old = before.pop(grade.exercise, None)
            conn.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (a, lid, grade.exercise, grade.notebook, position, grade.kind, str(grade.status), grade.points,
                          grade.max_points, json.dumps(_diagnosis_names(grade)),
                          json.dumps(grade.to_dict(), allow_nan=False)))
            new_value = {"status": str(grade.status), "points": grade.points}
            old_value = None if old is None else {"status": old["status"], "points": old["points"]}
            if old_value != new_value:
                gradebook.record("result", assignment_id=a, learner_id=lid, exercise=grade.exercise,
                                 old=old_value, new=new_value)
        for exercise, old in before.items():  # no longer graded (the assignment's exercises changed)
            conn.execute("DELETE FROM results WHERE assignment_id = ? AND learner_id = ? AND exercise = ?",
                         (a, lid, exercise))
            gradebook.record("result", assignment_id=a, learner_id=lid, exercise=exercise,
                             old={"status": old["status"], "points": old["points"]}, new=None)
    return said


def saved_fingerprint(gradebook: Gradebook, assignment: str, learner_key: str) -> str:
    """The fingerprint the learner's stored result was graded from ("" when none): for resuming."""
    row = gradebook.conn.execute(
        "SELECT s.fingerprint FROM submissions s JOIN assignments a ON a.id = s.assignment_id "
        "JOIN learners l ON l.id = s.learner_id WHERE a.name = ? AND l.key = ?", (assignment, learner_key)).fetchone()
    return row["fingerprint"] if row else ""


def stored_files(files: Mapping[str, Path]) -> list[SubmittedFile]:
    """The SubmittedFile of each notebook path (a ``Learner.files`` mapping)."""
    return [SubmittedFile.of(notebook, path) for notebook, path in sorted(files.items())]


def save_learner_result(gradebook: Gradebook, assignment: str, learner: Learner, result: r.LearnerResult, *,
                        attempt: int = 0, chosen_because: str = "", read_in: str = "") -> list[str]:
    """One graded learner, all or nothing: the submission (its files hashed) and every result.

    ``learner.key`` must be its stored key (``assign_stored_keys``) and equal ``result.key``; the
    submission's time and its source are the learner's (``submitted_at``, ``submitted_from``), a
    local time read in the zone ``read_in``. Returns ``record_result``'s lines for the instructor.
    """
    if learner.key != result.key:
        raise StoreError(f"the result of {result.key!r} was given for the learner {learner.key!r}; give each "
                         "learner its own result")
    files = stored_files(learner.files)  # hashed before the transaction: no lock held while reading files
    with gradebook.transaction():
        record_submission(gradebook, assignment, learner.key, files, submitted_at=learner.submitted_at,
                          submitted_from=learner.submitted_from, lms_late=learner.late, attempt=attempt,
                          chosen_because=chosen_because, notes=learner.notes, read_in=read_in)
        return record_result(gradebook, assignment, result)


def graded_result(gradebook: Gradebook, assignment: str, learner_key: str) -> r.LearnerResult | None:
    """The learner's result as it was graded (no hand grade, override or late policy applied), for a
    run that resumes: None when the learner has no graded result in the assignment."""
    a, lid = gradebook.assignment_id(assignment), gradebook.learner_id(learner_key)
    sub = gradebook.conn.execute("SELECT * FROM submissions WHERE assignment_id = ? AND learner_id = ?",
                                 (a, lid)).fetchone()
    if sub is None or not sub["fingerprint"]:
        return None
    learner = gradebook.conn.execute("SELECT name, lms_id FROM learners WHERE id = ?", (lid,)).fetchone()
    details = gradebook.conn.execute("SELECT detail FROM results WHERE assignment_id = ? AND learner_id = ? "
                                     "ORDER BY position", (a, lid))
    files = {f["notebook"]: f["file_name"] for f in gradebook.conn.execute(
        "SELECT notebook, file_name FROM submission_files WHERE submission_id = ?", (sub["id"],))}
    return r.LearnerResult(learner["name"], learner_key, sub["fingerprint"], sub["isolation"], sub["graded_at"] or "",
                           [r.ExerciseGrade.from_dict(json.loads(d["detail"])) for d in details],
                           json.loads(sub["notes"]), files, sub["seconds"], learner["lms_id"], bool(sub["lms_late"]))
