"""Batch grading for instructors: untrusted exercise notebooks in, a gradebook and feedback out.

Installed with the ``grade`` extra (``pip install "lessonlib[grade]"``); a learner's install has
the engine and the exercises' checks alone.

    from lessonlib.grading import GradeSettings, grade, write_gradebook
    from lessonlib.grading.lms.downloads import find_learners
    from lessonlib.grading.notebooks import course_notebooks
    found = find_learners([Path("submissions")], course_notebooks())
    settings = GradeSettings(out=Path("grades"), timeout=10, memory_mb=1024, workers=2)
    batch = grade(found.learners, settings, submissions=[Path("submissions")])
    write_gradebook(settings.out, batch.results, batch.isolation, settings.limits(), settings.workers)

The command ``lessonlib grade`` does that and keeps the course gradebook (``app/grade.py``).
Learner code runs only in the worker's processes; this package reads back JSON and ``.npy``
files and judges them with :mod:`lessonlib.exercises`, the same checks learners run.

Its rooms form layers, each importing only those below it (``tests/grading/test_layers.py``)::

    app/        the application: one function per command; opens the gradebook, drives the rest
    gradescope/ the same checks packed as a Gradescope autograder
    reports/    every file written for people: feedback, summary and grades files, manual.csv, the
                class, term, marking and similarity reports
    run/        one grading run: plan notebooks, start workers, judge what they send back
    lms/        from and to the LMS: learners in downloads, zips, rosters, lms-import.csv, uploads
    store/      the course gradebook (SQLite): learners, assignments, submissions, hand grades,
                overrides, late policy, a hash-chained history, backups
    isolation/  keep learner code apart: levels and limits, bubblewrap, control groups, seccomp,
                starting and stopping workers, the trial sandbox, the wire format
    worker/     the worker itself, started by path; it imports nothing of lessonlib

and on the ground floor, modules every room may import:

    records.py    a learner's and an exercise's result, and their one-line summary
    learners.py   a learner as found in the submissions
    notebooks.py  the course's notebooks, what an assignment grades of them, reading a notebook safely
    safe_text.py  what learners wrote, made inert for Markdown, CSV and terminals
    files.py      atomic writes and safe reads
    zones.py      time zones by name (the course's, stored once in the gradebook)
    arguments.py  numbers and times on the command line, checked as they are parsed

Importing this package imports none of them: the names below load on first use, so that
``lessonlib.cli`` can read a constant of the grader without loading it whole.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LEVELS": "isolation.sandbox", "Isolation": "isolation.sandbox", "Limits": "isolation.sandbox",
    "ExerciseGrade": "records", "LearnerResult": "records", "write_gradebook": "reports.gradebook",
    "BatchResult": "run.batch", "GradeSettings": "run.batch", "grade": "run.batch",
    "GradingError": "run.errors", "Interrupted": "run.errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
