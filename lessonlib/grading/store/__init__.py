"""The course gradebook: one SQLite database per course (nbgrader's ``gradebook.db`` is the model).

Every file a user sees (CSVs, JSON, LMS imports, feedback) is meant to be a view of this database,
covering every learner of an assignment, never only one run's. Standard library ``sqlite3`` only.

A grading run::

    from lessonlib.grading import store
    with store.open_gradebook(course / "gradebook.db", "lessonlib grade ... --out grades") as gb:  # the lock
        a = store.ensure_assignment(gb, "week3", notebooks)  # a.seed: drawn once, when it is created
        learners = store.assign_stored_keys(gb, found.learners)      # instead of submissions.assign_keys
        ...                                                          # grade; for each learner's result:
        store.save_learner_result(gb, "week3", learner, result)     # one transaction: files hashed, results
        rows = store.assignment_sheet(gb, "week3")       # every learner: effective scores, totals, late policy
        results = store.learner_results(gb, "week3")     # the same as LearnerResults for gradebook.py
        store.record_export(gb, "week3", "grades.csv")

A person's decisions::

    store.set_hand_grade(gb, "week3", "bob-2", "q_scaling", 2.0, rubric="B", comment="...")
    store.set_override(gb, "week3", "bob-2", "scaled_scores", 3.0, reason="regrade request: ...")
    store.keep_override(gb, "week3", "bob-2", "scaled_scores", reason="...")  # after the answer changed
    store.grant_extension(gb, "week3", "bob-2", due, reason="illness")
    store.correct_submission_time(gb, "week3", "bob-2", when, reason="the LMS was down: e-mailed at 23:10")
    store.set_late_policy(gb, "week3", due_at=due, policy=store.LatePolicy("per_day", 0.1, floor=0.5))
    store.set_time_zone(gb, "Europe/Berlin", reason="...")  # every stored local time is read again

A decision is tied to what it was about: a regrade that brings another answer withdraws its hand
grade and suspends its override; a submission time that moves flags its extension (``marks.py``).
The file itself is checked on every open (a damaged one is refused, naming the backup), backed up
before every command that writes, and its history is a hash chain (``chain.py``, ``backups.py``).

A ``Gradebook`` is one ``sqlite3`` connection: use it from the thread that opened it (the batch's
main thread, where results arrive). ``ensure_assignment`` draws the secret seed when it creates the
assignment (or takes ``--seed``); afterwards the stored seed is the assignment's, and a different
``--seed`` is refused.

The effective score of an exercise is its override, else (written questions) its hand grade,
else the graded result; the late policy then applies to the learner's total of effective scores
(``late.py`` has the arithmetic, ``marks.py`` the order). Learners' keys are given once and
stored (``learners.py``); every change appends a row to ``history``, which nothing can alter
(``schema.py``). One grader at a time: ``open_gradebook`` takes an ``flock`` beside the file
(``lock.py``) and names the holder to a second grader, or waits for it with ``wait=True``.
An output folder of the file-based grader is brought in with ``import_output_folder``.

``outputs.py`` ties an output folder to the gradebook (which assignment it is, its files written
from the database); ``manual.py`` reads and writes manual.csv, the hand grades' sheet. ``enrolments.py`` records which
learners an assignment expects (its roster's), so a course taught in sections misses no one wrongly.

Errors: every error meant for the person running a command is a ``GradebookError`` (``StoreError``
for a request that cannot be carried out, ``StoreFormatError`` for a file this version cannot
use, ``GraderBusy`` for another grader); its message names what was wrong and what to do. Keep
each transaction short (one learner): readers wait for a writer's commit (``busy_timeout``).
"""

from lessonlib.grading.store.assignments import (
    Assignment,
    SubmittedFile,
    clear_extension,
    correct_submission_time,
    ensure_assignment,
    get_assignment,
    graded_result,
    grant_extension,
    keep_extension,
    record_result,
    record_run,
    record_submission,
    save_learner_result,
    saved_fingerprint,
    set_late_policy,
    stored_files,
    update_submission_time,
)
from lessonlib.grading.store.database import (
    GRADEBOOK_FILE,
    Gradebook,
    StoreError,
    open_gradebook,
    restore_gradebook,
)
from lessonlib.grading.store.enrolments import enrol, enrolled
from lessonlib.grading.store.errors import DamagedGradebook, GradebookError
from lessonlib.grading.store.importer import Imported, import_output_folder
from lessonlib.grading.store.late import LateAdjustment, LatePolicy, days_late, late_adjusted
from lessonlib.grading.store.learners import (
    StoredLearner,
    all_learners,
    assign_stored_keys,
    identity_for,
    register,
)
from lessonlib.grading.store.lock import GraderBusy
from lessonlib.grading.store.marks import (
    Effective,
    clear_override,
    effective,
    keep_override,
    set_hand_grade,
    set_override,
)
from lessonlib.grading.store.queries import (
    Change,
    Changes,
    ExerciseScore,
    LearnerSheet,
    TermRow,
    assignment_history,
    assignment_sheet,
    changed_since,
    learner_history,
    learner_results,
    record_export,
    term_results,
)
from lessonlib.grading.store.schema import FORMAT, StoreFormatError
from lessonlib.grading.store.settings import course_zone, marking_secret, set_time_zone, time_zone

__all__ = [
    "FORMAT", "GRADEBOOK_FILE", "Assignment", "Change", "Changes", "DamagedGradebook", "Effective", "ExerciseScore",
    "Gradebook", "GradebookError", "GraderBusy", "Imported", "LateAdjustment", "LatePolicy", "LearnerSheet",
    "StoreError", "StoreFormatError", "StoredLearner", "SubmittedFile", "TermRow", "all_learners",
    "assign_stored_keys", "assignment_history", "assignment_sheet", "changed_since", "clear_extension",
    "clear_override", "correct_submission_time", "course_zone", "days_late", "effective", "enrol", "enrolled",
    "ensure_assignment", "get_assignment", "grant_extension", "graded_result", "identity_for",
    "import_output_folder", "keep_extension", "keep_override", "late_adjusted", "learner_history",
    "learner_results", "marking_secret", "open_gradebook", "record_export", "record_result", "record_run",
    "record_submission", "register", "restore_gradebook", "save_learner_result", "saved_fingerprint",
    "set_hand_grade", "set_late_policy", "set_override", "set_time_zone", "stored_files", "term_results",
    "time_zone", "update_submission_time",
]
