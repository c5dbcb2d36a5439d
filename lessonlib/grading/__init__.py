"""Batch grading for instructors: untrusted exercise notebooks in, a gradebook and feedback out.

    from lessonlib.grading import GradeSettings, grade, write_gradebook
    settings = GradeSettings(out=Path("grades"), timeout=10, memory_mb=1024, workers=2)
    batch = grade(["submissions/alice", "submissions/bob"], settings)
    write_gradebook(settings.out, batch.results, batch.isolation, settings.limits(), settings.workers)

The command ``lessonlib grade`` does both (``commands.py``; the course gradebook in ``store/``).
Learner code runs only in the worker's processes; this package reads back JSON and ``.npy``
files and judges them with :mod:`lessonlib.exercises`, the same checks learners run.

Which subpackage does which job::

    run/        one grading run: read and plan notebooks, start workers, judge what they send back
    isolation/  keep learner code apart: levels and limits, bubblewrap, control groups, seccomp,
                starting and stopping workers, the probe, the wire format
    worker/     the worker itself, started by path; it imports nothing of lessonlib
    lms/        from and to the LMS: learners in downloads, zips, rosters, lms-import.csv, uploads
    store/      the course gradebook (SQLite): learners, assignments, submissions, hand grades,
                overrides, late policy, a hash-chained history, backups; output folders and manual.csv
    reports/    every file written for people: feedback, summary and grades files, the class,
                term, marking and similarity reports
    gradescope/ the same checks packed as a Gradescope autograder
    records.py  a learner's and an exercise's result, as every subpackage passes them
    files.py    atomic writes and safe reads
    zones.py    time zones by name (the course's, stored once in the gradebook)
    arguments.py numbers and times on the command line, checked as they are parsed
    commands.py the instructor's commands on an assignment (override, extend, restore, ...)
"""

from lessonlib.grading.isolation.sandbox import LEVELS, Isolation, Limits
from lessonlib.grading.records import ExerciseGrade, LearnerResult
from lessonlib.grading.reports.gradebook import write_gradebook
from lessonlib.grading.run.batch import BatchResult, GradeSettings, grade
from lessonlib.grading.run.errors import GradingError, Interrupted

__all__ = [
    "LEVELS", "BatchResult", "ExerciseGrade", "GradeSettings", "GradingError", "Interrupted", "Isolation",
    "LearnerResult", "Limits", "grade", "write_gradebook",
]
