"""The worker's output for one job, read once, as data only (JSON and ``.npy`` through
:mod:`~lessonlib.grading.isolation.wire`), into a :class:`TaskResult` per exercise."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lessonlib.exercises import Outcome, Value
from lessonlib.grading.isolation import wire
from lessonlib.grading.isolation.sandbox import Limits
from lessonlib.grading.isolation.workers import read_records


@dataclass
class TaskResult:
    """What the worker reported for one exercise: the process's fate and the frames it sent."""

    fate: dict[str, Any] | None = None  # None: the exercise started but never finished
    cells: list[dict[str, Any]] | None = None
    defined: bool = False
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    lessonlib: set[str] = field(default_factory=set)
    printed: int = 0
    done: bool = False
    broken: str | None = None  # the frames did not follow the format
    setup_error: str | None = None  # the worker could not prepare the process (not the learner's doing)
    hidden: TaskResult | None = None  # the child that ran the hidden cases: read for statuses, never quoted


def clip(x: Any, limit: int = 2000) -> str:
    """At most ``limit`` characters of ``x`` as text."""
    return str(x)[:limit]


@dataclass
class WorkerReport:
    """What one run of a worker sent: finished tasks' results, started tasks, its fatal error if any."""

    results: dict[str, TaskResult] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)  # the tasks' keys, in order
    fatal: str | None = None

    def in_flight(self) -> list[str]:
        """Tasks that started and never finished: the worker died meanwhile."""
        return [key for key in self.started if key not in self.results]


def read_results(job_dir: Path, limits: Limits) -> WorkerReport:
    """Read the worker's output once, without trusting anything in it, into per-task results."""
    report = WorkerReport()
    for header, parts in read_records(job_dir, limits):
        kind, key = header.get("kind"), clip(header.get("key", ""), 200)
        if kind == "fatal":
            report.fatal = clip(header.get("error"), 500)
        elif kind == "started" and key:
            report.started.append(key)
        elif kind == "result" and key:
            public, hidden = parts or [([], None), ([], None)]
            task = report.results[key] = _child(header.get("fate"), *public)
            if isinstance(header.get("hidden_fate"), dict):  # its own frames and fate only, never the public one's
                task.hidden = _child(header["hidden_fate"], *hidden)
    return report


def _child(fate: Any, frames: list[Any], problem: str | None) -> TaskResult:
    """One child's result: how it ended (the zygote's account) and the frames it sent, in order."""
    task = TaskResult(fate=dict(fate) if isinstance(fate, dict) else {}, broken=problem)
    try:
        i = 0
        while i < len(frames):
            frame, i = frames[i], i + 1
            if not isinstance(frame, dict):
                raise wire.WireError("an array where a description was expected")
            kind = frame.get("kind")
            if kind == "cells" and isinstance(frame.get("cells"), list):
                task.cells = [c for c in frame["cells"] if isinstance(c, dict)]
                for c in task.cells:
                    task.lessonlib.update(_names(c.get("lessonlib")))
                task.defined = frame.get("defined") is True
                task.printed = int(frame.get("printed") or 0)
            elif kind == "case":
                count = frame.get("arrays")
                if not isinstance(count, int) or count < 0 or i + count > len(frames):
                    raise wire.WireError("a case that refers to missing arrays")
                arrays, i = frames[i:i + count], i + count
                if not all(hasattr(a, "dtype") for a in arrays):
                    raise wire.WireError("a description where an array was expected")
                task.outcomes[clip(frame.get("id"), 100)] = wire.decode_outcome(frame.get("outcome"), arrays,
                                                                                  Outcome, Value)
                task.lessonlib.update(_names(frame.get("lessonlib")))
                task.printed += int(frame.get("printed") or 0)
            elif kind == "done":
                task.done = True
            elif kind == "setup_failed":
                task.setup_error = clip(frame.get("error"), 500)
            else:
                raise wire.WireError(f"an unknown frame {clip(kind, 40)!r}")
    except (wire.WireError, KeyError, TypeError, ValueError) as exc:
        task.broken = clip(exc)
    return task


def _names(names: Any) -> set[str]:
    """The stand-in lessonlib functions a frame says were called."""
    return {clip(n, 200) for n in names if isinstance(n, str)} if isinstance(names, list) else set()
