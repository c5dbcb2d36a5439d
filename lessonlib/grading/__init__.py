"""Batch grading for instructors: untrusted exercise notebooks in, a gradebook and feedback out.

    from lessonlib.grading import GradeSettings, grade, write_gradebook
    settings = GradeSettings(out=Path("grades"), timeout=10, memory_mb=1024, workers=2)
    batch = grade(["submissions/alice", "submissions/bob"], settings)
    write_gradebook(settings.out, batch.results, batch.isolation, settings.limits(), settings.workers)

The command ``lessonlib grade`` does both. Learner code runs only in the worker's processes (``worker/``)
(see :mod:`lessonlib.grading.sandbox` for the isolation levels); this package reads back JSON and
``.npy`` files and judges them with :mod:`lessonlib.exercises`, the same checks learners run.
LMS downloads are read by :mod:`~lessonlib.grading.lms`, rosters and ``lms-import.csv`` are
:mod:`~lessonlib.grading.roster`'s, hand-graded written answers :mod:`~lessonlib.grading.manual`'s,
and :mod:`~lessonlib.grading.gradescope` packs the same checks as a Gradescope autograder.
"""

from lessonlib.grading.batch import BatchResult, GradeSettings, GradingError, Interrupted, grade
from lessonlib.grading.gradebook import write_gradebook
from lessonlib.grading.records import ExerciseGrade, LearnerResult
from lessonlib.grading.sandbox import LEVELS, Isolation, Limits

__all__ = [
    "LEVELS", "BatchResult", "ExerciseGrade", "GradeSettings", "GradingError", "Interrupted", "Isolation",
    "LearnerResult", "Limits", "grade", "write_gradebook",
]
