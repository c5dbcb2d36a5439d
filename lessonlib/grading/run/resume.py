"""What a run keeps for the next one: a fingerprint per result (which the course gradebook stores
beside it), and the markers a grading process that died left behind (see
:mod:`~lessonlib.grading.run.batch` on resuming)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from lessonlib.grading.files import atomic_write_json, read_json
from lessonlib.grading.isolation.sandbox import OUT_FILE, Limits
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.run.notebooks import MAX_NOTEBOOK_BYTES, CourseNotebook
from lessonlib.grading.run.results import read_results

FORMAT = 3  # bump when a saved result would no longer be valid


def new_seed() -> int:
    """A fresh secret seed for an assignment's hidden cases: 63 bits from the operating system's
    random source, so nothing public (notebook names, dates, the package) predicts it. The course
    gradebook keeps it (``store.ensure_assignment``); nothing here writes it to a file."""
    return int.from_bytes(os.urandom(8), "big") >> 1


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


# --- markers left by a grading process that died -------------------------------------------------


def suspects_path(job_dir: Path) -> Path:
    return job_dir / "suspects.json"


def load_suspects(job_dir: Path) -> dict[str, str]:
    data = read_json(suspects_path(job_dir))
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def blame(work: Path, limits: Limits, finished: set[str]) -> None:
    """Turn the tasks a dead grading process left running into suspects (see ``batch``'s docstring)."""
    if not work.is_dir():
        return
    flights: list[tuple[Path, str, bool]] = []
    jobs = []
    for job_dir in sorted(p for p in work.iterdir() if p.is_dir()):
        if job_dir.name in finished:
            shutil.rmtree(job_dir, ignore_errors=True)
            continue
        jobs.append(job_dir)
        running = read_results(job_dir, limits, frames=False).in_flight()  # sent before the grader died
        flights += [(job_dir, key, m["solo"]) for key, m in running.items() if m["level"] == "limits"]
    for job_dir, key, solo in flights:
        suspects = load_suspects(job_dir)
        verdict = "culprit" if solo or len(flights) == 1 else "solo"
        if suspects.get(key) != "culprit":
            suspects[key] = verdict
        atomic_write_json(suspects_path(job_dir), suspects, mode=0o600)
    for job_dir in jobs:  # blamed, or forgiven (the sandbox): never counted again
        forget_in_flight(job_dir)


def forget_in_flight(job_dir: Path) -> None:
    """Forget what a job's worker was running (after an interruption by the instructor, nobody is to blame)."""
    (job_dir / OUT_FILE).unlink(missing_ok=True)
