"""Write exercises/ from solutions/, and tell whether exercises/ is up to date.

In a solutions notebook, each cell tagged ``answer`` holds its answer between a line
``### BEGIN SOLUTION`` and a line ``### END SOLUTION``. The exercise notebook is the same notebook
with each such region replaced by a stub:

- inside a function body: ``raise NotImplementedError("<short hint>")`` at the region's indent;
- at the top level of a code cell (a value answer such as ``q1_context = 4.0``): ``name = None``;
- in a markdown cell (a written answer): an invitation to write the answer.

Cells tagged ``solutions-only`` are dropped. Outputs are cleared, then the exercise notebook is
executed so it is stored with outputs (its checks read "not attempted yet"). The ids of the answer
cells go into the package (``answer_cells.json``), where the grader reads them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from lessonlib.exercises.cells import ANSWER_TAG, WRITTEN_STUB, binds, python_source
from lessonlib.exercises.registry import ANSWER_CELLS_FILE, EXERCISES, released_answer_cells

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
SOLUTIONS_ONLY_TAG = "solutions-only"
_DEF = re.compile(r"^\s*def\s+(\w+)\s*\(")


class BuildError(ValueError):
    """A solutions notebook that cannot be turned into an exercise notebook."""


@dataclass(frozen=True)
class Problem:
    """One way in which exercises/ differs from what solutions/ would build."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _hint(name: str | None) -> str:
    exercise = EXERCISES.get(name or "")
    return exercise.stub_hint if exercise else "write your answer here"


def _code_stub(region: list[str], indent: str, enclosing: str | None, where: str) -> list[str]:
    if indent:
        return [f"{indent}raise NotImplementedError({_hint(enclosing)!r})"]
    try:
        tree = ast.parse("\n".join(region))
    except SyntaxError as exc:
        raise BuildError(f"{where}: the solution does not parse ({exc.msg})") from None
    names = [
        target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]
    if not names:
        raise BuildError(f"{where}: a top-level solution must assign the answer, e.g. q1_context = 4.0")
    return [f"{name} = None  # your answer: {_hint(name)}" for name in dict.fromkeys(names)]


def stub_source(source: str, *, markdown: bool = False, where: str = "cell") -> str:
    """``source`` with every solution region replaced by its stub."""
    lines = source.split("\n")
    out: list[str] = []
    region: list[str] | None = None
    indent = ""
    enclosing: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped == BEGIN:
            if region is not None:
                raise BuildError(f"{where}: '{BEGIN}' inside another solution region")
            region, indent = [], line[: len(line) - len(line.lstrip())]
        elif stripped == END:
            if region is None:
                raise BuildError(f"{where}: '{END}' without '{BEGIN}'")
            out += [WRITTEN_STUB] if markdown else _code_stub(region, indent, enclosing, where)
            region = None
        elif region is not None:
            region.append(line)
        else:
            match = _DEF.match(line)
            if match:
                enclosing = match.group(1)
            out.append(line)
    if region is not None:
        raise BuildError(f"{where}: '{BEGIN}' without '{END}'")
    return "\n".join(out)


def exercise_notebook(solution: nbformat.NotebookNode, name: str = "notebook") -> nbformat.NotebookNode:
    """The exercise notebook for a solutions notebook (not executed; no outputs)."""
    nb = nbformat.v4.new_notebook(metadata=dict(solution.metadata))
    nb.nbformat, nb.nbformat_minor = 4, max(int(solution.get("nbformat_minor", 5)), 5)
    answers = 0
    for cell in solution.cells:
        tags = _tags(cell)
        if SOLUTIONS_ONLY_TAG in tags:
            continue
        source = cell.source
        if ANSWER_TAG in tags:
            answers += 1
            where = f"{name}, cell {cell.get('id', '?')}"
            if BEGIN not in source:
                raise BuildError(f"{where}: an answer cell without '{BEGIN}'")
            source = stub_source(source, markdown=cell.cell_type == "markdown", where=where)
        metadata = {"tags": tags} if tags else {}
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(source, metadata=metadata)
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(source, metadata=metadata)
        else:
            new = nbformat.v4.new_raw_cell(source, metadata=metadata)
        new.id = cell.get("id", new.id)
        nb.cells.append(new)
    if not answers:
        raise BuildError(f"{name}: no cell is tagged '{ANSWER_TAG}'")
    return nb


def _default_execute(path: Path) -> None:
    try:
        from lessonlib.notebook_tools import execute_notebook
    except ImportError:  # pragma: no cover - the maintainer tools ship with the package
        from nbclient import NotebookClient

        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=120, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(path.parent.resolve())}}).execute()
        nbformat.write(nb, path)
        return
    execute_notebook(path)


def solution_paths(solutions: Path) -> list[Path]:
    return sorted(p for p in Path(solutions).glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def answer_cell_ids(sources: list[Path]) -> dict[str, str]:
    """exercise -> id of the cell tagged ``answer`` that defines it, over the solutions notebooks."""
    found: dict[str, str] = {}
    for src in sources:
        for cell in nbformat.read(src, as_version=4).cells:
            if cell.cell_type == "code" and ANSWER_TAG in _tags(cell) and cell.get("id"):
                body = ast.parse(python_source(cell.source)).body
                for name in sorted(set().union(*map(binds, body)) & set(EXERCISES)):
                    found.setdefault(name, cell.id)
    return dict(sorted(found.items()))


def _stored_answer_cells() -> dict[str, str] | None:
    try:
        return released_answer_cells(ANSWER_CELLS_FILE)
    except (OSError, ValueError):
        return None


def _write_answer_cells(ids: dict[str, str], log: Callable[[str], None]) -> None:
    if ids == _stored_answer_cells():
        return
    try:
        ANSWER_CELLS_FILE.write_text(json.dumps(ids, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BuildError(f"the answer cells changed, but {ANSWER_CELLS_FILE} cannot be written ({exc}): "
                         "build from a checkout of the course") from None
    log(f"wrote the ids of {len(ids)} answer cells to {ANSWER_CELLS_FILE}")


def build(
    solutions: Path, exercises: Path, *, execute: Callable[[Path], None] | None = _default_execute,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Write one exercise notebook per solutions notebook, execute each, remove stale ones."""
    solutions, exercises = Path(solutions), Path(exercises)
    sources = solution_paths(solutions)
    if not sources:
        raise BuildError(f"no notebooks in {solutions}")
    _write_answer_cells(answer_cell_ids(sources), log)
    exercises.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sources:
        nb = exercise_notebook(nbformat.read(src, as_version=4), src.name)
        dest = exercises / src.name
        nbformat.write(nb, dest)
        if execute is not None:
            log(f"executing {dest}")
            execute(dest)
        written.append(dest)
    for stale in sorted(set(exercises.glob("*.ipynb")) - set(written)):
        log(f"removing {stale} (no solutions notebook of that name)")
        stale.unlink()
    return written


def _signature(cell: nbformat.NotebookNode) -> tuple[str, str, str, tuple[str, ...]]:
    return cell.cell_type, str(cell.get("id", "")), cell.source, tuple(_tags(cell))


def verify(solutions: Path, exercises: Path) -> list[Problem]:
    """Differences between exercises/ and what :func:`build` would write (empty = up to date).

    Compares cell types, ids, sources and tags, and that every code cell was executed; ignores
    outputs' content and notebook metadata, which change from run to run.
    """
    solutions, exercises = Path(solutions), Path(exercises)
    problems: list[Problem] = []
    sources = solution_paths(solutions)
    if not sources:
        return [Problem(solutions, "no solutions notebooks found")]
    for src in sources:
        dest = exercises / src.name
        if not dest.exists():
            problems.append(Problem(dest, "missing"))
            continue
        try:
            want = exercise_notebook(nbformat.read(src, as_version=4), src.name)
        except BuildError as exc:
            problems.append(Problem(src, str(exc)))
            continue
        have = nbformat.read(dest, as_version=4)
        problems += _compare(dest, want, have)
    for extra in sorted(set(exercises.glob("*.ipynb")) - {exercises / s.name for s in sources}):
        problems.append(Problem(extra, "has no solutions notebook"))
    if answer_cell_ids(sources) != _stored_answer_cells():
        problems.append(Problem(ANSWER_CELLS_FILE, "names other answer cells than the solutions notebooks"))
    return problems


def _compare(path: Path, want: nbformat.NotebookNode, have: nbformat.NotebookNode) -> list[Problem]:
    if len(want.cells) != len(have.cells):
        return [Problem(path, f"has {len(have.cells)} cells, the solutions would give {len(want.cells)}")]
    problems = []
    for i, (w, h) in enumerate(zip(want.cells, have.cells)):
        for label, a, b in zip(("type", "id", "source", "tags"), _signature(w), _signature(h)):
            if a != b:
                problems.append(Problem(path, f"cell {i} differs in its {label}"))
                break
        else:
            if h.cell_type == "code" and h.source.strip() and h.get("execution_count") is None:
                problems.append(Problem(path, f"cell {i} was never executed (no stored outputs)"))
    return problems
