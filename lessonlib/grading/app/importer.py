"""Bring an output folder of the file-based grader into the course gradebook, as one assignment.

The folder's layout (``batch.py``)::

    DIR/.grading/state.json    {"seed": ..., "notebooks": [...], "format": ...}
    DIR/learners/<key>.json    one LearnerResult each
    DIR/manual.csv             hand grades of written answers (``manual.py``)

Each learner keeps the key the folder gave it when that key is free in the gradebook (so the
feedback files already handed out still name them); their identity is their LMS id, else their
name. The files' names are kept, not their hashes (the folder has none: ``sha256`` is empty and
``size`` -1). Everything is one transaction, and each history row says ``imported from DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.files import read_json
from lessonlib.grading.reports.manual import MANUAL_FILE, ManualError, read_manual
from lessonlib.grading.store import Gradebook, StoreError, assignments, learners, marks


@dataclass
class Imported:
    """What an import brought in, and what it could not read."""

    assignment: str
    learners: int = 0
    hand_grades: int = 0
    renamed: dict[str, str] = field(default_factory=dict)  # the folder's key -> the gradebook's, where they differ
    skipped: list[str] = field(default_factory=list)  # files that are not a readable result


def _results(folder: Path, imported: Imported) -> list[r.LearnerResult]:
    results = []
    for path in sorted((folder / "learners").glob("*.json")):
        data = read_json(path)
        try:
            results.append(r.LearnerResult.from_dict(data))
        except (TypeError, KeyError, ValueError, AttributeError):
            imported.skipped.append(f"{path.name}: not a saved learner result")
    return results


def import_output_folder(gradebook: Gradebook, folder: Path | str, *, assignment: str | None = None) -> Imported:
    """Import ``folder`` as the assignment ``assignment`` (default: the folder's name); see the module docstring.

    Refuses a folder without ``.grading/state.json`` (not a grader's output), a manual.csv with
    bad lines (as ``lessonlib grade`` would), and an assignment name already holding other notebooks.
    """
    folder = Path(folder)
    state = read_json(folder / ".grading" / "state.json")
    if not isinstance(state, dict) or "seed" not in state or "notebooks" not in state:
        raise StoreError(f"{folder} is not an output folder of lessonlib grade (no .grading/state.json with its "
                         "seed and notebooks); give the folder passed as --out")
    name = assignment or folder.resolve().name
    imported = Imported(name)
    results = _results(folder, imported)
    try:
        marked = read_manual(folder / MANUAL_FILE, results)
    except ManualError as exc:
        raise StoreError(f"{exc}; correct manual.csv, then import again") from None
    source = f"imported from {folder.resolve()}"
    before = gradebook.command
    gradebook.command = f"{before} ({source})"
    try:
        with gradebook.transaction():
            assignments.ensure_assignment(gradebook, name, list(state["notebooks"]), int(state["seed"]))
            keys: dict[str, str] = {}
            for result in results:
                stored = learners.register(gradebook, result.learner, lms_id=result.lms_id, key=result.key)
                keys[result.key] = stored.key
                if stored.key != result.key:
                    imported.renamed[result.key] = stored.key
                files = [assignments.SubmittedFile(nb, file, "", -1) for nb, file in sorted(result.files.items())]
                assignments.record_submission(gradebook, name, stored.key, files, lms_late=result.late,
                                              notes=result.notes)
                assignments.record_result(gradebook, name, _rekeyed(result, stored.key))
                imported.learners += 1
            for (key, exercise), mark in sorted(marked.items()):
                if mark.points is None:
                    continue
                marks.set_hand_grade(gradebook, name, keys[key], exercise, mark.points, rubric=mark.rubric,
                                     comment=mark.comment)
                imported.hand_grades += 1
    finally:
        gradebook.command = before
    return imported


def _rekeyed(result: r.LearnerResult, key: str) -> r.LearnerResult:
    if result.key == key:
        return result
    data = result.to_dict()
    data["key"] = key
    return r.LearnerResult.from_dict(data)
