"""`lessonlib exercises build|verify`: stubs from solutions, and a deterministic staleness check."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import nbformat
import pytest

from lessonlib import cli
from lessonlib.exercises import build as build_module
from lessonlib.exercises.build import (
    BuildError,
    answer_cell_ids,
    build,
    exercise_notebook,
    solution_paths,
    stub_source,
    verify,
)
from lessonlib.exercises.registry import ANSWER_CELLS_FILE, released_answer_cells

ROOT = Path(__file__).resolve().parents[1]

FUNCTION = '''def masked_softmax(scores, allowed):
    """Docstring stays."""
    ### BEGIN SOLUTION
    keep = np.where(allowed, scores, -np.inf)
    return keep
    ### END SOLUTION'''


def test_function_body_becomes_a_stub_with_a_hint():
    stub = stub_source(FUNCTION)
    assert stub.startswith('def masked_softmax(scores, allowed):\n    """Docstring stays."""\n')
    assert stub.splitlines()[-1].startswith("    raise NotImplementedError(")
    assert "np.where" not in stub and "SOLUTION" not in stub
    compile(stub, "<stub>", "exec")


def test_top_level_value_becomes_none():
    stub = stub_source("### BEGIN SOLUTION\nq1_context = 4.0  # why\n### END SOLUTION")
    assert stub.startswith("q1_context = None  # your answer")
    assert "4.0" not in stub


def test_written_answer_becomes_an_invitation():
    stub = stub_source("intro\n### BEGIN SOLUTION\nThe model answer.\n### END SOLUTION", markdown=True)
    assert stub == "intro\n_Write your answer here._"


@pytest.mark.parametrize(
    "source",
    ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
     "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "### BEGIN SOLUTION\nprint(1)\n### END SOLUTION"],
)
def test_malformed_regions_are_refused(source):
    with pytest.raises(BuildError):
        stub_source(source)


def _solution_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_markdown_cell("maintainers only", metadata={"tags": ["solutions-only"]}),
        nbformat.v4.new_code_cell(FUNCTION, metadata={"tags": ["answer"]}),
        nbformat.v4.new_code_cell('check("masked_softmax", masked_softmax)'),
    ]
    for i, cell in enumerate(cells):
        cell.id = f"cell-{i}"
    cells[3].outputs = [nbformat.v4.new_output("stream", text="passed\n")]
    cells[3].execution_count = 3
    nb.cells = cells
    return nb


def test_exercise_notebook_keeps_ids_drops_solutions_only_and_outputs():
    nb = exercise_notebook(_solution_notebook())
    assert [c.id for c in nb.cells] == ["cell-0", "cell-2", "cell-3"]
    assert "raise NotImplementedError" in nb.cells[1].source
    assert nb.cells[1].metadata["tags"] == ["answer"]
    assert nb.cells[2].outputs == [] and nb.cells[2].execution_count is None
    nbformat.validate(nb)


def test_a_notebook_without_answer_cells_is_refused():
    nb = _solution_notebook()
    nb.cells[2].metadata = {}
    with pytest.raises(BuildError):
        exercise_notebook(nb)


def _fake_execute(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.execution_count = i + 1
    nbformat.write(nb, path)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setattr(build_module, "ANSWER_CELLS_FILE", tmp_path / "answer_cells.json")
    (tmp_path / "solutions").mkdir()
    nbformat.write(_solution_notebook(), tmp_path / "solutions" / "01_demo.ipynb")
    build(tmp_path / "solutions", tmp_path / "exercises", execute=_fake_execute, log=lambda _: None)
    return tmp_path


def test_built_tree_verifies(tree: Path):
    assert verify(tree / "solutions", tree / "exercises") == []


def test_verify_ignores_volatile_metadata_and_outputs(tree: Path):
    path = tree / "exercises" / "01_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["language_info"] = {"name": "python", "version": "3.99"}
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="something else\n")]
    nbformat.write(nb, path)
    assert verify(tree / "solutions", tree / "exercises") == []


def test_verify_catches_a_changed_solution(tree: Path):
    path = tree / "solutions" / "01_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "# A new title"
    nbformat.write(nb, path)
    problems = verify(tree / "solutions", tree / "exercises")
    assert [p.message for p in problems] == ["cell 0 differs in its source"]


def test_build_records_the_answer_cells_and_verify_catches_a_changed_id(tree: Path):
    ids = released_answer_cells(tree / "answer_cells.json")
    assert ids == answer_cell_ids(solution_paths(tree / "solutions")) and ids
    path = tree / "solutions" / "01_demo.ipynb"
    nb = nbformat.read(path, as_version=4)
    answer = next(c for c in nb.cells if c.get("id") in ids.values())
    answer.id = "renamed-answer"
    nbformat.write(nb, path)
    problems = {(p.path.name, p.message) for p in verify(tree / "solutions", tree / "exercises")}
    assert ("answer_cells.json", "names other answer cells than the solutions notebooks") in problems


def test_the_package_ships_the_answer_cells_of_the_committed_solutions():
    assert released_answer_cells(ANSWER_CELLS_FILE) == answer_cell_ids(solution_paths(ROOT / "solutions"))


def test_verify_catches_unexecuted_missing_and_extra_notebooks(tree: Path):
    build(tree / "solutions", tree / "exercises", execute=None, log=lambda _: None)
    assert any("never executed" in p.message for p in verify(tree / "solutions", tree / "exercises"))
    shutil.copy(tree / "solutions" / "01_demo.ipynb", tree / "solutions" / "02_more.ipynb")
    shutil.copy(tree / "solutions" / "01_demo.ipynb", tree / "exercises" / "09_stray.ipynb")
    messages = {(p.path.name, p.message) for p in verify(tree / "solutions", tree / "exercises")}
    assert ("02_more.ipynb", "missing") in messages
    assert ("09_stray.ipynb", "has no solutions notebook") in messages


def test_build_removes_stale_exercises(tree: Path):
    stray = tree / "exercises" / "09_stray.ipynb"
    shutil.copy(tree / "exercises" / "01_demo.ipynb", stray)
    build(tree / "solutions", tree / "exercises", execute=_fake_execute, log=lambda _: None)
    assert not stray.exists()


def test_cli_verify_exit_codes(tree: Path, capsys):
    assert cli.main(["exercises", "verify", "--root", str(tree)]) == 0
    (tree / "exercises" / "01_demo.ipynb").unlink()
    assert cli.main(["exercises", "verify", "--root", str(tree)]) == 1
    assert "lessonlib exercises build" in capsys.readouterr().err


def test_cli_build_without_execution(tree: Path):
    assert cli.main(["exercises", "build", "--root", str(tree), "--no-execute"]) == 0
    nb = nbformat.read(tree / "exercises" / "01_demo.ipynb", as_version=4)
    assert "raise NotImplementedError" in nb.cells[1].source


def test_cli_list_prints_every_exercise(capsys):
    assert cli.main(["exercises", "list"]) == 0
    out = capsys.readouterr().out
    assert "tiled_attention" in out and "q2_attention_not_causal" in out


def test_cli_takes_new_command_groups():
    def add_demo(subparsers: argparse._SubParsersAction) -> None:
        sub = subparsers.add_parser("demo")
        sub.set_defaults(func=lambda args: 7)

    cli.COMMAND_GROUPS.append(add_demo)
    try:
        assert cli.main(["demo"]) == 7
    finally:
        cli.COMMAND_GROUPS.remove(add_demo)


def test_committed_exercises_are_up_to_date_with_solutions():
    assert verify(ROOT / "solutions", ROOT / "exercises") == []
