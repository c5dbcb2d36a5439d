"""Where the course's own material lives, for the reports: model answers and the course's code.

The solutions notebooks (``solutions/``) and the lesson notebooks (``notebooks/``) sit in the course
checkout, not in an installed package; a report that needs them takes the folder as an argument
and, without one, looks in the checkout lessonlib runs from. Without a checkout, the marking page
says the model answer is not available, and the similarity report compares with ``lessonlib``'s
own code alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import lessonlib
from lessonlib.exercises import ManualQuestion

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"  # as lessonlib.exercises.build marks an answer


def course_checkout() -> Path | None:
    """The source checkout holding the course files, when lessonlib runs from one."""
    root = Path(lessonlib.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").exists() else None


def default_folder(name: str) -> Path | None:
    """``solutions``, ``notebooks`` or ``exercises`` of the checkout, when there is one."""
    root = course_checkout()
    return root / name if root is not None and (root / name).is_dir() else None


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def notebook_cells(path: Path) -> list[dict]:
    """The cells of a course notebook (the course's own file: read as it is)."""
    return list(json.loads(Path(path).read_text(encoding="utf-8")).get("cells", []))


def solution_region(text: str) -> str:
    """What lies between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (the whole text without them)."""
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() in (BEGIN, END)]
    if len(marks) >= 2:
        return "\n".join(lines[marks[0] + 1:marks[1]]).strip()
    return text.strip()


def model_answer(question: ManualQuestion, solutions: Path | None = None) -> str | None:
    """The model answer of a written question: its cell (by id) in the solutions notebook, or None."""
    folder = solutions if solutions is not None else default_folder("solutions")
    path = Path(folder) / question.notebook if folder is not None else None
    if path is None or not path.is_file():
        return None
    cell = next((c for c in notebook_cells(path) if c.get("id") == question.cell_id), None)
    return solution_region(_source(cell)) if cell is not None else None


@dataclass(frozen=True)
class CourseFile:
    """A piece of the course's own code, to compare answers with: where it is, and its text."""

    label: str  # "solutions/02_masking.ipynb, cell masked-softmax" or "lessonlib/masks.py"
    text: str


# lessonlib's subpackages that are not the course's teaching code: the exercises' models of
# misconceptions (wrong on purpose) and the grader itself.
NOT_TAUGHT = ("exercises", "grading")


def course_files(checkout: Path | None = None) -> list[CourseFile]:
    """The course's code: every code cell of the lesson and solutions notebooks, and the modules of
    lessonlib's engine (not ``NOT_TAUGHT``)."""
    root = checkout if checkout is not None else course_checkout()
    files: list[CourseFile] = []
    if root is not None:
        for folder in ("notebooks", "solutions"):
            for path in sorted((Path(root) / folder).glob("*.ipynb")):
                for n, cell in enumerate(notebook_cells(path), start=1):
                    if cell.get("cell_type") == "code" and _source(cell).strip():
                        text = solution_region(_source(cell)) if folder == "solutions" else _source(cell)
                        files.append(CourseFile(f"{folder}/{path.name}, cell {cell.get('id') or n}", text))
    package = Path(lessonlib.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] in NOT_TAUGHT:
            continue
        files.append(CourseFile(f"lessonlib/{path.relative_to(package).as_posix()}", path.read_text(encoding="utf-8")))
    return files


def exercise_stubs(exercises: Path | None = None) -> list[str]:
    """The code cells of the released exercise notebooks: what every learner was given (boilerplate)."""
    folder = exercises if exercises is not None else default_folder("exercises")
    if folder is None:
        return []
    return [_source(c) for path in sorted(Path(folder).glob("*.ipynb")) for c in notebook_cells(path)
            if c.get("cell_type") == "code" and _source(c).strip()]
