"""One notebook's plans: which learner code runs for each exercise, and the written answers.

Which learner code runs for exercise ``f`` of a notebook, in notebook order:

- the answer cell of ``f`` (tagged ``answer``, else with the released answer cell's id), in full;
- from every other code cell, its *definitions* (imports, ``def``, ``class`` and assignments of
  constants) and every statement that defines or changes a name the answer uses, directly or
  through the helpers it calls (``SCALE = np.sqrt(8)`` read by a helper). Other calls are left
  out, so check cells, plotting and widget cells never run, and a stray loop elsewhere cannot
  cost ``f`` its points. Imports of plotting and widget libraries are left out too. Another
  cell's definition of an exercise's name never replaces its answer. Whatever the answer needs
  and cannot have is named in a note of the feedback (``lessonlib.exercises.cells``).

Nothing here runs learner code: sources are only parsed (``ast``), never executed.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from lessonlib.exercises import ManualQuestion
from lessonlib.exercises.cells import ANSWER_TAG, WRITTEN_STUB, python_source, slice_cells
from lessonlib.exercises.results import Status
from lessonlib.grading.notebooks import (
    CELL_ERROR,
    MALFORMED,
    MAX_WRITTEN_CHARS,
    MISSING_ANSWER,
    NOT_SUBMITTED,
    TOO_LONG,
    Cell,
    CourseNotebook,
    Notebook,
    bound_names,
    code_cells,
    too_long,
)

# --- one notebook's plans --------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """Source to run in the worker: a whole answer cell, or another cell's definitions."""

    label: str
    filename: str
    source: str


@dataclass
class ExercisePlan:
    """What to run for one exercise, or the status it gets without running anything."""

    exercise: str
    notebook: str
    program: list[Step] = field(default_factory=list)
    status: str | None = None  # set when nothing can run
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    answer_cell: str | None = None


@dataclass
class ManualAnswer:
    question: ManualQuestion
    text: str | None
    status: str  # needs_manual_grading, not_attempted, missing_answer, not_submitted, malformed
    reason: str = ""


def _find_answer(name: str, released_id: str | None, parsed: list[tuple[Cell, ast.Module | str]]
                 ) -> tuple[Cell | None, ast.Module | str | None, str]:
    """The answer cell of exercise ``name``, its tree (or parse error), and a note or a reason.

    The cell tagged ``answer`` that defines ``name`` is graded; when several do, the one with the
    released cell's id, else the last (running the notebook top to bottom leaves its definition, as
    ``check`` sees it). Without such a cell, the cell with the released id; without that, any cell
    that defines ``name``. Cell ids should be unique; a duplicated answer id is noted, since a copy
    of the cell (a decoy, or an old version) would otherwise decide silently what is graded.
    """
    with_id = [(c, t) for c, t in parsed if released_id and c.id == released_id]
    duplicated = (f"{len(with_id)} cells ({', '.join(f'cell {c.index + 1}' for c, _ in with_id)}) carry the answer "
                  f"cell's id `{released_id}`, which should be unique" if len(with_id) > 1 else "")
    tagged = [(c, t) for c, t in parsed
              if ANSWER_TAG in c.tags and isinstance(t, ast.Module) and name in bound_names(t)]
    chosen = [(c, t) for c, t in tagged if c.id == released_id][-1:] or tagged[-1:]
    if chosen:
        cell, tree = chosen[0]
        notes = [f"{duplicated}; cell {cell.index + 1}, tagged `{ANSWER_TAG}`, was graded."] if duplicated else []
        if len(tagged) > 1:
            notes.append(f"{len(tagged)} cells tagged `{ANSWER_TAG}` define `{name}` "
                         f"({', '.join(f'cell {c.index + 1}' for c, _ in tagged)}); cell {cell.index + 1} was graded.")
        return cell, tree, " ".join(notes)
    by_id = next(((c, t) for c, t in with_id if isinstance(t, ast.Module) and name in bound_names(t)), None)
    by_id = by_id or (with_id[0] if with_id else None)
    if by_id is not None:
        cell, tree = by_id
        if isinstance(tree, str) or name in bound_names(tree):
            return cell, tree, (f"{duplicated}; cell {cell.index + 1} was graded." if duplicated else "")
        defines = sorted(bound_names(tree) - {"np", "math", "numpy"})
        what = f"it defines {', '.join(f'`{d}`' for d in defines)}" if defines else "it defines nothing"
        return None, None, (f"The answer cell no longer defines `{name}` ({what}): the function must keep "
                            "its name for the grader to find it.")
    elsewhere = [(c, t) for c, t in parsed if isinstance(t, ast.Module) and name in bound_names(t)
                 and not _is_check_cell(t)]
    if elsewhere:
        cell, tree = elsewhere[-1]
        return cell, tree, (f"The answer cell of `{name}` was not found (its `answer` tag or id changed); "
                            f"the cell that defines `{name}` (cell {cell.index + 1}) was graded instead.")
    return None, None, (f"The answer cell of `{name}` is missing (deleted?) and no cell defines `{name}`: "
                        "nothing to grade.")


def _is_check_cell(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "check"
               for n in ast.walk(tree))


def plan_notebook(course: CourseNotebook, notebook: Notebook | None, *, instead: Sequence[str] = ()
                  ) -> tuple[list[ExercisePlan], list[ManualAnswer]]:
    """Plans for the exercises of ``course`` its assignment grades, and their written answers, from a
    submitted notebook. Every answer cell of the notebook is found all the same, so that the learner
    code run for an exercise is the same whichever of the others the assignment grades.

    ``instead``: notebooks the learner handed in that this assignment does not grade; when ``course``
    is missing, its exercises are flagged ``wrong_notebook`` (a wrong file handed in?), not merely
    ``not_submitted``.

    Never raises: a notebook whose code cannot even be analysed (say, an expression nested so
    deeply that walking it overflows the stack) makes every exercise in it ``malformed``.
    """
    try:
        plans, answers = _plan_notebook(course, notebook, instead)
    except (RecursionError, MemoryError, ValueError) as exc:
        reason = f"{notebook.path.name if notebook else course.name} could not be analysed ({type(exc).__name__})."
        plans = [ExercisePlan(name, course.name, status=MALFORMED, reason=reason) for name in course.exercises]
        answers = [ManualAnswer(q, None, MALFORMED, reason) for q in course.manual]
    return [p for p in plans if course.grades(p.exercise)], [a for a in answers if course.grades(a.question.name)]


def _plan_notebook(course: CourseNotebook, notebook: Notebook | None, instead: Sequence[str] = ()
                   ) -> tuple[list[ExercisePlan], list[ManualAnswer]]:
    plans = [ExercisePlan(name, course.name) for name in course.exercises]
    if notebook is None and instead:
        status = Status.WRONG_NOTEBOOK
        reason = (f"No {course.name} was found in the submission, but {', '.join(sorted(instead))} was handed in, "
                  "which this assignment does not grade: was the wrong file submitted?")
    elif notebook is None or notebook.problem is not None:
        status = NOT_SUBMITTED if notebook is None else MALFORMED
        reason = (f"No {course.name} was found in the submission." if notebook is None
                  else f"{notebook.path.name} could not be read: {notebook.problem}.")
    if notebook is None or notebook.problem is not None:
        for plan in plans:
            plan.status, plan.reason = status, reason
        return plans, [ManualAnswer(q, None, status, reason) for q in course.manual]
    refused = too_long(notebook)
    if refused:
        for plan in plans:
            plan.status, plan.reason = TOO_LONG, refused
        return plans, [_manual_answer(q, notebook) for q in course.manual]  # written answers need no parsing
    parsed = code_cells(notebook)
    answers: dict[str, tuple[Cell, ast.Module | str]] = {}
    for plan in plans:
        cell, tree, message = _find_answer(plan.exercise, course.answer_cells.get(plan.exercise), parsed)
        if cell is None or tree is None:
            plan.status, plan.reason = MISSING_ANSWER, message
        elif isinstance(tree, str):
            plan.status = CELL_ERROR
            plan.reason = f"The answer cell of `{plan.exercise}` is not valid Python ({tree})."
        else:
            answers[plan.exercise] = (cell, tree)
            plan.answer_cell = cell.id or f"cell {cell.index + 1}"
            if message:
                plan.notes.append(message)
    owner = {ex: cell.index for ex, (cell, _) in answers.items()}
    readable = [cell for cell, tree in parsed if isinstance(tree, ast.Module)]
    trees = {k: tree for k, tree in enumerate(t for _, t in parsed if isinstance(t, ast.Module))}
    position = {cell.index: k for k, cell in enumerate(readable)}
    for plan in plans:
        if plan.status is not None or not course.grades(plan.exercise):
            continue
        # the answer cell whole; from other cells, definitions and what the answer needs (see cells.py)
        owners = {ex: position.get(i, -1) for ex, i in owner.items()}
        cut = slice_cells([c.source for c in readable], position[owner[plan.exercise]], plan.exercise, owners,
                          [f"cell {c.index + 1}" for c in readable], trees)
        plan.notes += [f"Not run by the grader: {note}" for note in cut.notes]
        for k, cell in enumerate(readable):
            if cell.index == owner[plan.exercise]:
                plan.program.append(Step("answer", f"<answer cell {plan.answer_cell}>", python_source(cell.source)))
            elif k in cut.kept:
                plan.program.append(Step(f"cell {cell.index + 1}", f"<cell {cell.index + 1}>", cut.kept[k]))
    return plans, [_manual_answer(q, notebook) for q in course.manual]


def _manual_answer(question: ManualQuestion, notebook: Notebook) -> ManualAnswer:
    """The written answer: the markdown cell tagged ``manual`` with the question's id, else the cell
    with that id, else the first cell tagged ``manual`` (by its tag first, as for exercises)."""
    tagged = [c for c in notebook.cells if c.cell_type == "markdown" and "manual" in c.tags]
    cell = (next((c for c in tagged if c.id == question.cell_id), None)
            or next((c for c in notebook.cells if c.id == question.cell_id), None)
            or next(iter(tagged), None))
    if cell is None:
        return ManualAnswer(question, None, MISSING_ANSWER, "The cell for the written answer is missing (deleted?).")
    text = cell.source.strip()
    if not text or text == WRITTEN_STUB:
        return ManualAnswer(question, None, "not_attempted", "No written answer yet.")
    return ManualAnswer(question, cut_written(text), "needs_manual_grading", "Written answer: needs manual grading.")


def cut_written(text: str) -> str:
    """A written answer as the gradebook keeps it: its first MAX_WRITTEN_CHARS characters, and a note
    saying how long it was when it is longer (the rest stays in the learner's notebook)."""
    if len(text) <= MAX_WRITTEN_CHARS:
        return text
    return (text[:MAX_WRITTEN_CHARS] + f"\n\n[... cut: the answer has {len(text):,} characters; the grader keeps "
            f"the first {MAX_WRITTEN_CHARS:,}]")
