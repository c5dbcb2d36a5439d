"""One learner's job for the worker: its tasks, public cases (probes as handles) and the secret
part (probes, hidden cases) that only the worker's keeper reads."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessonlib.exercises import Case, runner
from lessonlib.grading.isolation import sandbox, wire, workers
from lessonlib.grading.isolation.sandbox import Limits
from lessonlib.grading.run.plans import ExercisePlan


def task_key(plan: ExercisePlan) -> str:
    return f"{plan.notebook.removesuffix('.ipynb')}--{plan.exercise}"


def prepare_job(plans: list[ExercisePlan], job_dir: Path, *, level: str, limits: Limits, worker_count: int,
                cases: dict[str, list[Case]], solo: bool, shared_folders: Sequence[str] = ()
                ) -> tuple[dict[str, Any], list[bytes], dict[str, Any], list[bytes]]:
    """The job (public cases; probes as handles) and its secret part (probes, hidden cases) for
    the worker's stdin: the secret part is read by the worker's keeper alone. ``shared_folders``:
    where the trial found learner code can write outside its scratch folder (see worker/cleanup.py)."""
    for name in (sandbox.JOB_FILE, sandbox.OUT_FILE, "scratch"):
        target = job_dir / name
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    job_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(job_dir, 0o700)
    job = workers.job_head(level, limits.for_job(sandbox.nproc_base(level, worker_count)), solo=solo)
    job["shared_folders"] = list(shared_folders)
    arrays: list[bytes] = []
    secret_arrays: list[bytes] = []
    probes: dict[str, str] = {}
    public: dict[str, list[dict[str, Any]]] = {}
    hidden: dict[str, list[dict[str, Any]]] = {}
    for plan in plans:
        if plan.exercise not in public:  # the same cases for every task of an exercise
            exercise_cases = cases[plan.exercise]
            public[plan.exercise] = _encode_cases([c for c in exercise_cases if not _is_hidden(c)], arrays, probes)
            hidden[plan.exercise] = _encode_cases([c for c in exercise_cases if _is_hidden(c)], secret_arrays, probes)
        job["tasks"].append({
            "key": task_key(plan), "exercise": plan.exercise,
            "program": [{"label": s.label, "filename": s.filename, "source": s.source} for s in plan.program],
            "cases": public[plan.exercise], "hidden": bool(hidden[plan.exercise]),
            "hidden_memory": any(c["trace_memory"] for c in hidden[plan.exercise]),
        })
    secret = workers.secret_part(job["limits"], probes, hidden, len(secret_arrays))
    return job, arrays, secret, secret_arrays


def _is_hidden(case: Case) -> bool:
    return case.hidden


def _encode_cases(cases: list[Case], arrays: list[bytes], probes: dict[str, str]) -> list[dict[str, Any]]:
    """Cases as the worker gets them; a probe becomes a handle, its description goes to ``probes``."""
    encoded = []
    for c in cases:
        args = []
        for a in c.args:
            if runner.is_probe(a):
                handle = runner.probe_handle(runner.probe_fields(a)["kind"], secrets.token_hex(12))
                probes[handle] = a
                a = handle
            args.append(a)
        encoded.append({"id": c.id, "call": c.call, "trace_memory": c.trace_memory,
                        "args": wire.encode_args(tuple(args), arrays)})
    return encoded
