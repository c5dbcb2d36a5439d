"""What a run keeps for the next one: the assignment's seed (``state.json``), a fingerprint per
saved result, and the markers a grading process that died left behind (see
:mod:`~lessonlib.grading.run.batch` on resuming)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_json, read_json
from lessonlib.grading.isolation.sandbox import OUT_FILE, Limits
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.run.errors import GradingError
from lessonlib.grading.run.notebooks import MAX_NOTEBOOK_BYTES, CourseNotebook
from lessonlib.grading.run.results import read_results

FORMAT = 3  # bump when a saved result would no longer be valid


def new_seed() -> int:
    """A fresh secret seed for an assignment's hidden cases: 63 bits from the operating system's
    random source, so nothing public (notebook names, dates, the package) predicts it."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def resolve_seed(state: Path, requested: int | None, notebooks: list[str]) -> int:
    """The folder's seed: the one it was graded with, else ``requested``, else a new secret one.

    The seed is drawn once, when the assignment is first graded, and kept in ``state.json`` (a
    folder only the grading user may enter); every later run reuses it, so the same notebook keeps
    the same points. It is never printed. A folder holds one assignment: grading other notebooks
    into it is refused, since its saved results, seed and totals belong to the first.
    """
    saved = read_json(state / "state.json") or {}
    if "notebooks" in saved and saved["notebooks"] != notebooks:
        raise GradingError(
            f"this output folder holds the grades of another assignment ({', '.join(saved['notebooks'])}); "
            f"grade {', '.join(notebooks)} into a new --out folder"
        )
    if requested is not None and "seed" in saved and int(saved["seed"]) != requested:
        raise GradingError(
            "this output folder was graded with another --seed; resume without --seed (the folder keeps its "
            "own), or grade into a new folder"
        )
    seed = requested if requested is not None else int(saved["seed"]) if "seed" in saved else new_seed()
    atomic_write_json(state / "state.json", {**saved, "seed": seed, "notebooks": notebooks, "format": FORMAT},
                      mode=0o600)
    return seed



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


def saved_result(saved: Path, learner: Learner, fingerprint: str) -> r.LearnerResult | None:
    data = read_json(saved / f"{learner.key}.json")
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint:
        return None
    try:
        return r.LearnerResult.from_dict(data)
    except (TypeError, KeyError, ValueError):
        return None


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
