"""What a run keeps for the next one: a fingerprint per result (which the course gradebook stores
beside it), the exercises whose worker died under them, and what a grading process that died left
running (see :mod:`~lessonlib.grading.run.batch` on resuming)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from lessonlib.grading.files import read_json
from lessonlib.grading.isolation.sandbox import OUT_FILE
from lessonlib.grading.learners import Learner
from lessonlib.grading.notebooks import MAX_NOTEBOOK_BYTES, CourseNotebook

FORMAT = 3  # bump when a saved result would no longer be valid


def fingerprint(learner: Learner, courses: Sequence[CourseNotebook], seed_digest: str) -> str:
    """What the saved result was graded from: the format, the seed and each notebook's bytes.

    A file larger than a notebook may be is fingerprinted by its size and time, never read (it is
    refused when planned); the others are hashed in chunks, so memory stays small whatever the size.
    """
    h = hashlib.sha256(f"{FORMAT}:{seed_digest}".encode())
    for course in courses:
        path = learner.files.get(course.name)
        h.update(course.name.encode())
        if path is None:
            h.update(b"<missing>")
            continue
        try:
            with open(path, "rb") as f:
                info = os.fstat(f.fileno())
                if info.st_size > MAX_NOTEBOOK_BYTES:
                    h.update(f"<too large: {info.st_size} {info.st_mtime_ns}>".encode())
                    continue
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError:
            h.update(b"<unreadable>")
    return h.hexdigest()


# --- markers left by a worker or a grading process that died ---------------------------------------


def suspects_path(job_dir: Path) -> Path:
    return job_dir / "suspects.json"


def load_suspects(job_dir: Path) -> dict[str, str]:
    data = read_json(suspects_path(job_dir))
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def forgive_dead_grader(work: Path, finished: set[str]) -> None:
    """Forget what a grading process that died left running: it is run again, blamed on nobody.

    Learner code cannot cause that death at any level: in the bubblewrap sandbox it cannot see the
    grading process, and level limits, refused to an ordinary user, runs it as nobody beside root's
    grader. So the machine or the instructor stopped it. The job folders of ``finished`` learners go.
    (A *worker* that dies while an exercise runs is another matter: see ``batch._run_tasks``.)
    """
    if not work.is_dir():
        return
    for job_dir in sorted(p for p in work.iterdir() if p.is_dir()):
        if job_dir.name in finished:
            shutil.rmtree(job_dir, ignore_errors=True)
        else:
            forget_in_flight(job_dir)


def forget_in_flight(job_dir: Path) -> None:
    """Forget what a job's worker was running (the grading process stopped or died: nobody is to blame)."""
    (job_dir / OUT_FILE).unlink(missing_ok=True)
