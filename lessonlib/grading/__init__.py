"""Batch grading for instructors: untrusted exercise notebooks in, a gradebook and feedback out.

    from lessonlib.grading import GradeSettings, grade, write_gradebook
    settings = GradeSettings(out=Path("grades"), timeout=10, memory_mb=1024, workers=2)
    batch = grade(["submissions/alice", "submissions/bob"], settings)
    write_gradebook(settings.out, batch.results, batch.isolation, settings.limits(), settings.workers)

The command ``lessonlib grade`` does both. Learner code runs only in ``worker.py`` processes
(see :mod:`lessonlib.grading.sandbox` for the isolation levels); this package reads back JSON and
``.npy`` files and judges them with :mod:`lessonlib.exercises`, the same checks learners run.
"""

from lessonlib.grading.batch import BatchResult, GradeSettings, GradingError, Interrupted, grade
from lessonlib.grading.gradebook import write_gradebook
from lessonlib.grading.records import ExerciseGrade, LearnerResult
from lessonlib.grading.sandbox import LEVELS, Isolation, Limits

__all__ = [
    "LEVELS", "BatchResult", "ExerciseGrade", "GradeSettings", "GradingError", "Interrupted", "Isolation",
    "LearnerResult", "Limits", "grade", "write_gradebook",
]
