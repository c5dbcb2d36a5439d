"""Grade a batch of learners: one isolated worker per learner, results saved as soon as known.

Output folder layout::

    DIR/grades.csv, summary.csv, grades.json, feedback/<learner>.md   written at the end
    DIR/.grading/trial/              the trial sandbox's job (no learner's: see trial.choose_isolation)
    DIR/.grading/work/<learner>/     a learner's job while it runs: job.bin (the worker's stdin),
                                     worker.out (its stdout: records, read once by results.read_results)

Each learner's result is handed to ``on_result`` as soon as it is known (the command saves it in
the course gradebook, which also holds the seed: this module keeps no state of its own in files).
Resuming: a learner whose result ``saved`` returns (graded from the same files and seed) is not
graded again.
Before each exercise runs, the worker sends a ``started`` record. A worker that ends with one
unanswered, while the grading process lives, died under that exercise: it is blamed (status
``stopped_grader``, kept in ``suspects.json`` and not run again), for learner code that can reach its
worker can kill it (level limits before Landlock scoped signals: both run as nobody). One found in
worker.out when the command is run again means the grading process died meanwhile, which learner
code cannot cause at any level (``resume.forgive_dead_grader``): that exercise is simply run
again, as after Ctrl-C.
"""

from __future__ import annotations

import hashlib
import itertools
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lessonlib.exercises import EXERCISES, Case
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_json, owner_only
from lessonlib.grading.isolation import cgroups, sandbox, trial, workers
from lessonlib.grading.learners import Learner
from lessonlib.grading.notebooks import (
    CourseNotebook,
    Scope,
    assignment_scope,
    read_notebook,
    unassigned_note,
)
from lessonlib.grading.run import jobs, resume
from lessonlib.grading.run.assess import assess, manual_grade
from lessonlib.grading.run.errors import GradingError, Interrupted
from lessonlib.grading.run.plans import ExercisePlan, plan_notebook
from lessonlib.grading.run.results import TaskResult, read_results
from lessonlib.grading.store.assignments import new_seed


@dataclass(frozen=True)
class GradeSettings:
    """The options of ``lessonlib grade``."""

    out: Path
    timeout: float = 10.0
    memory_mb: int = 1024
    workers: int = 2
    seed: int | None = None
    isolation: str = "auto"
    notebooks: tuple[str, ...] = ()  # the assignment: course notebook file names to grade; empty, all of them
    exercise_set: str | None = None  # or a named assignment of the registry (ASSIGNMENTS): its items alone
    gradebook: Path | None = None  # the course gradebook, which the trial checks learner code cannot reach

    def limits(self) -> sandbox.Limits:
        return sandbox.Limits(cpu_seconds=self.timeout, memory_mb=self.memory_mb)

    def scope(self) -> Scope:
        """What the assignment grades (GradingError, naming the known ones, for an unknown name)."""
        try:
            return assignment_scope(self.notebooks, self.exercise_set)
        except ValueError as exc:
            raise GradingError(f"--{'exercise-set' if self.exercise_set else 'notebooks'}: {exc}") from None


class Reporter:
    """Receives progress (this one ignores it; the command line shows it, see ``progress.py``)."""

    def start(self, *, total: int, resumed: int, isolation: sandbox.Isolation, settings: GradeSettings) -> None:
        """The batch is about to start: ``resumed`` learners were already graded."""

    def running(self, learner: str) -> None:
        """A learner's worker is starting."""

    def done(self, result: r.LearnerResult, *, resumed: bool = False) -> None:
        """A learner's result is saved (or was saved by an earlier run)."""


@dataclass
class BatchResult:
    results: list[r.LearnerResult]
    isolation: sandbox.Isolation
    seconds: float
    graded: int  # learners graded by this run (the others were already saved)
    scope: Scope = field(default_factory=lambda: Scope(()))  # what the assignment grades


@dataclass
class _Batch:
    settings: GradeSettings
    limits: sandbox.Limits
    out: Path
    state: Path
    work: Path
    scope: Scope
    courses: list[CourseNotebook]
    cases: dict[str, list[Case]]
    submissions: list[Path]
    seed_digest: str
    protected: list[Path] = field(default_factory=list)
    isolation: sandbox.Isolation | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    running: dict[str, workers.Worker] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    containment: cgroups.Plan = field(default_factory=cgroups.Plan)  # a control group per worker, if any
    gradebook: Path | None = None  # the course gradebook: the trial checks learner code cannot reach it
    numbers: itertools.count = field(default_factory=lambda: itertools.count(1))  # names the groups


# --- set-up --------------------------------------------------------------------------------------


def _run_worker(batch: _Batch, learner: Learner, job_dir: Path, n_tasks: int, measured: int) -> int:
    allowance = 120 + n_tasks * 2 * (batch.limits.wall_seconds + 10)  # each task may be tried twice
    with batch.lock:
        if batch.stopping.is_set():
            raise Interrupted
        worker = workers.start_worker(job_dir, batch.isolation.level, batch.limits, protected=batch.protected,
                                      plan=batch.containment, number=next(batch.numbers), measured=measured)
        batch.running[learner.key] = worker
    try:
        worker.process.wait(timeout=allowance)
    except subprocess.TimeoutExpired:
        pass
    finally:
        workers.stop_worker(worker)  # also after a normal end: whatever is left, and the control group
        with batch.lock:
            batch.running.pop(learner.key, None)
    if batch.stopping.is_set():
        raise Interrupted
    return worker.process.returncode


def _worker_log(job_dir: Path) -> str:
    try:
        return (job_dir / "worker.log").read_text(errors="replace")[-600:].strip()
    except OSError:
        return ""


def _run_tasks(batch: _Batch, learner: Learner, plans: list[ExercisePlan], job_dir: Path,
               suspects: dict[str, str]) -> tuple[dict[str, TaskResult], str]:
    """Run the worker until every task has a result or is blamed; relaunch after a worker dies.
    Returns the results by task key, and why the worker could not run the rest ("" if it did)."""
    remaining = [p for p in plans if suspects.get(jobs.task_key(p)) != "culprit"]
    results: dict[str, TaskResult] = {}
    job: dict[str, Any] | None = None
    while remaining:
        if job is None:
            assert batch.isolation is not None
            job, arrays, secret, secret_arrays = jobs.prepare_job(
                remaining, job_dir, level=batch.isolation.level, limits=batch.limits,
                worker_count=batch.settings.workers, cases=batch.cases,
                shared_folders=batch.isolation.verified.get("writable_folders") or ())
        else:  # a relaunch after the worker died: only what is left, in a fresh sandbox
            job["tasks"] = [t for t in job["tasks"] if t["key"] in {jobs.task_key(p) for p in remaining}]
        # it holds every case's inputs: 0600, not for learner code
        workers.write_job(job_dir, job, arrays, secrets=secret, secret_arrays=secret_arrays)
        code = _run_worker(batch, learner, job_dir, len(remaining), workers.measured_children(job))
        report = read_results(job_dir, batch.limits)
        if batch.stopping.is_set():  # the instructor stopped the batch while it was read
            raise Interrupted
        if code == 3 and report.fatal:
            raise GradingError(f"the worker could not start: {report.fatal}")
        results.update(report.results)
        crashed = report.in_flight()  # the worker died while this ran: it killed it
        suspects.update({key: "culprit" for key in crashed})
        if crashed:
            atomic_write_json(resume.suspects_path(job_dir), suspects, mode=0o600)
        left = [p for p in remaining if jobs.task_key(p) not in results and suspects.get(jobs.task_key(p)) != "culprit"]
        if left and len(left) == len(remaining):
            return results, f"the worker ended with status {code} before running them ({_worker_log(job_dir)})"
        remaining = left
    return results, ""


def grade_learner(batch: _Batch, learner: Learner, fingerprint: str) -> r.LearnerResult:
    """Plan, run and assess every exercise of one learner (the worker does the running)."""
    start = time.perf_counter()
    job_dir = batch.work / learner.key
    suspects = resume.load_suspects(job_dir)
    plans: list[ExercisePlan] = []
    grades: list[r.ExerciseGrade] = []
    manual: list[r.ExerciseGrade] = []
    for course in batch.courses:
        path = learner.files.get(course.name)
        notebook_plans, answers = plan_notebook(course, read_notebook(path) if path else None, instead=learner.instead)
        plans += notebook_plans
        manual += [manual_grade(a) for a in answers]
    runnable = [p for p in plans if p.status is None]
    results, failure = _run_tasks(batch, learner, runnable, job_dir, suspects) if runnable else ({}, "")
    assert batch.isolation is not None
    for plan in plans:
        exercise = EXERCISES[plan.exercise]
        key = jobs.task_key(plan)
        task = results.get(key)
        grade = assess(exercise, plan, batch.cases[plan.exercise], task, batch.limits,
                       stopped_grader=suspects.get(key) == "culprit")
        grade.answer_sha256 = r.answer_digest(next((s.source for s in plan.program if s.label == "answer"), None))
        if task is None and plan.status is None and suspects.get(key) != "culprit" and failure:
            grade.reason = f"The worker could not run this exercise: {failure}"
            grade.diagnosis = "the worker could not run this exercise"
        grades.append(grade)
    order = {c.name: i for i, c in enumerate(batch.courses)}
    grades += manual
    grades.sort(key=lambda g: order.get(g.notebook, 99))  # stable: exercises keep their order
    return r.LearnerResult(
        learner=learner.name, key=learner.key, fingerprint=fingerprint, isolation=batch.isolation.level,
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), exercises=grades,
        notes=list(learner.notes), files={k: v.name for k, v in learner.files.items()},
        seconds=round(time.perf_counter() - start, 3), lms_id=learner.lms_id, late=learner.late,
    )


# --- the batch -----------------------------------------------------------------------------------------


def work_folder(out: Path) -> Path:
    """Where a run keeps its jobs, its trial and the downloads it unpacked: ``DIR/.grading``."""
    return Path(out).resolve() / ".grading"


def _make_batch(submissions: Sequence[Path], settings: GradeSettings) -> _Batch:
    out = Path(settings.out).resolve()
    resolved = [Path(s).resolve() for s in submissions]
    state = work_folder(out)
    for folder in (out, state, state / "work"):
        folder.mkdir(parents=True, exist_ok=True)
    # grades, hidden cases' descriptions, feedback, the marking key, the jobs with every case's inputs:
    # the instructor's alone
    owner_only(out)
    scope = settings.scope()
    seed = settings.seed if settings.seed is not None else new_seed()  # the caller keeps it
    return _Batch(
        settings=settings, limits=settings.limits(), out=out, state=state, work=state / "work", scope=scope,
        courses=scope.courses(),
        cases={name: ex.public_cases() + ex.hidden_cases(seed) for name, ex in EXERCISES.items()},
        submissions=resolved, protected=sandbox.protected_folders(out, resolved),
        seed_digest=hashlib.sha256(str(seed).encode()).hexdigest()[:16],
        gradebook=Path(settings.gradebook).resolve() if settings.gradebook else None,
    )


def _stop_everything(batch: _Batch) -> None:
    batch.stopping.set()
    with batch.lock:
        running = list(batch.running.items())
    for key, worker in running:
        workers.stop_worker(worker)
        resume.forget_in_flight(batch.work / key)


def _grader_failed(batch: _Batch, learner: Learner, exc: Exception) -> r.LearnerResult:
    """The safety net: a failure of the grader itself on one learner is recorded, the batch goes on.

    Every item of the assignment has a row (no written answer vanishes from the files), none with
    points, and each waits for the instructor: the answers were not read (``records.NOT_READ``), so no
    decision about them is withdrawn or suspended, and the LMS file leaves the learner out. What
    failed goes to the instructor's files alone: its message may quote a hidden case."""
    why = f"The grader failed on this submission ({type(exc).__name__}: {exc}); please report it."
    told = "The grader itself failed here, through no fault of your answer; it will be graded again."
    grades = [r.ExerciseGrade(course.name, name, 0.0, points, r.ERROR, why[:300], told, kind=kind,
                              answer_sha256=r.NOT_READ, review=r.GRADER_FAILED)
              for course in batch.courses
              for name, points, kind in [*((e, EXERCISES[e].points, "auto") for e in course.exercises),
                                         *((q.name, q.points, "manual") for q in course.manual)]
              if batch.scope.grades(course.name, name)]
    return r.LearnerResult(learner.name, learner.key, "", batch.isolation.level if batch.isolation else "?",
                           datetime.now(timezone.utc).isoformat(timespec="seconds"), grades, list(learner.notes),
                           lms_id=learner.lms_id, late=learner.late)


def _grade_and_save(batch: _Batch, learner: Learner, fingerprint: str) -> r.LearnerResult:
    """Grade one learner, save the result at once (atomically), then drop the job folder."""
    try:
        result = grade_learner(batch, learner, fingerprint)
    except (Interrupted, GradingError):
        raise
    except Exception as exc:  # the fingerprint stays empty, so the next run grades this learner again
        result = _grader_failed(batch, learner, exc)
    shutil.rmtree(batch.work / result.key, ignore_errors=True)
    return result


def grade(learners: Sequence[Learner], settings: GradeSettings, *, submissions: Sequence[Path | str],
          reporter: Reporter | None = None, on_result: Callable[[r.LearnerResult, Learner], None] | None = None,
          rekey: Callable[[list[Learner]], list[Learner]] | None = None,
          saved: Callable[[Learner, str], r.LearnerResult | None] | None = None,
          recorded: sandbox.Isolation | None = None) -> BatchResult:
    """Grade ``learners`` (found in ``submissions`` by ``lms.find_learners``) into ``settings.out``,
    resuming where it stopped. ``submissions``, the paths they were found in, are hidden from learner
    code and checked by the trial.

    ``rekey``: gives the found learners their keys (the course gradebook's stored ones) instead of
    keys in arrival order. ``on_result``: called in this thread with each learner's result as soon
    as it is known, saved ones included. ``saved``: a learner's stored result when it was graded
    from the given fingerprint (None: grade it); ``recorded``: the isolation of the run that graded
    them, used when every learner is saved (no worker starts, so none is probed). Without
    ``settings.seed``, a new secret seed is drawn for this call alone."""
    if settings.workers < 1:
        raise GradingError("--workers must be at least 1")
    if settings.timeout <= 0 or settings.memory_mb < 64:
        raise GradingError("--timeout must be positive and --memory at least 64 MB")
    start = time.perf_counter()
    reporter = reporter or Reporter()
    batch = _make_batch([Path(s) for s in submissions], settings)
    learners = [_assigned_only(learner, batch.courses) for learner in learners]
    if rekey is not None:
        learners = rekey(learners)
    if not learners:
        raise GradingError("no exercise notebooks found in the given submissions")
    fingerprints = {lr.key: resume.fingerprint(lr, batch.courses, batch.seed_digest) for lr in learners}
    found_saved = {lr.key: saved(lr, fingerprints[lr.key]) if saved else None for lr in learners}
    resume.forgive_dead_grader(batch.work, {k for k, v in found_saved.items() if v is not None})
    batch.isolation = _reusable(recorded, settings) if all(found_saved.values()) else None
    if batch.isolation is None:
        batch.containment = cgroups.detect()
        batch.limits = workers.contained_limits(batch.limits, batch.containment)
        try:
            batch.isolation = trial.choose_isolation(settings.isolation, batch.limits, work=batch.state / "trial",
                                                       out_dir=batch.out, submissions=batch.submissions,
                                                       plan=batch.containment, gradebook=batch.gradebook)
        except sandbox.IsolationError as exc:
            raise GradingError(str(exc)) from None
    done = [v for v in found_saved.values() if v is not None]
    reporter.start(total=len(learners), resumed=len(done), isolation=batch.isolation, settings=settings)
    by_key = {lr.key: lr for lr in learners}
    for result in done:
        reporter.done(result, resumed=True)
        if on_result is not None:
            on_result(result, by_key[result.key])
    todo = [lr for lr in learners if found_saved[lr.key] is None]
    results = {k: v for k, v in found_saved.items() if v is not None}

    def finish(result: r.LearnerResult) -> None:
        results[result.key] = result
        reporter.done(result)
        if on_result is not None:
            on_result(result, by_key[result.key])

    # Worker threads live until the pool shuts down: a worker dies with the thread that started
    # it (PR_SET_PDEATHSIG), so the pool is shut down only after every worker has ended.
    pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="grade")
    try:
        pending: dict[Future, Learner] = {}
        queue = list(todo)
        while queue or pending:
            while queue and len(pending) < settings.workers:
                learner = queue.pop(0)
                reporter.running(learner.name)
                pending[pool.submit(_grade_and_save, batch, learner, fingerprints[learner.key])] = learner
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                pending.pop(future)
                finish(future.result())
    except BaseException as exc:
        _stop_everything(batch)
        pool.shutdown(wait=True, cancel_futures=True)
        if isinstance(exc, (KeyboardInterrupt, Interrupted)):
            raise Interrupted from None
        raise
    pool.shutdown(wait=True)
    ordered = [results[lr.key] for lr in learners]
    return BatchResult(ordered, batch.isolation, time.perf_counter() - start, len(todo), scope=batch.scope)


def _assigned_only(learner: Learner, courses: Sequence[CourseNotebook]) -> Learner:
    """Drop the notebooks the assignment does not grade, with a note saying so."""
    assigned = {c.name for c in courses}
    other = [name for name in learner.files if name not in assigned]
    if other:
        learner.files = {k: v for k, v in learner.files.items() if k in assigned}
        learner.notes.append(unassigned_note(other))
        learner.instead += other
    return learner


def _reusable(recorded: sandbox.Isolation | None, settings: GradeSettings) -> sandbox.Isolation | None:
    """The recorded isolation of the run that graded every learner (a re-run after manual grading),
    when it is the level asked for."""
    if recorded is None or recorded.level not in sandbox.LEVELS:
        return None
    return recorded if settings.isolation in ("auto", recorded.level) else None
