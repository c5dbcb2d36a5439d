"""One verdict: the grader sees what the learner's notebook defines, as check() does, or says what it cannot run.

Learners' notebooks with helper cells (constants computed by calls, imports, functions, cells
below the answer) run top to bottom in a kernel and graded by ``lessonlib grade``: the two
verdicts agree. The cell slicing both use is tested in tests/test_exercises_one_verdict.py.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from helpers import exercise_answers, learner_answers
from helpers.markdown_view import shown

from lessonlib.notebook_tools import execute_notebook

ROOT = Path(__file__).resolve().parents[2]

SETUP = "import math\n\nimport numpy as np\n\nfrom lessonlib.exercises import check"


# --- notebooks run top to bottom, then graded ------------------------------------------------------

HELPERS_02 = '''import math as m

FILL = float("-inf")  # a call: a grader that kept only constant definitions would drop it
LOG_TINY = m.log(np.finfo(float).tiny)
print("helpers ready")


def _exclude(scores, allowed):
    return np.where(allowed, scores, FILL)
'''

MASKED_SOFTMAX_02 = '''def masked_softmax(scores, allowed):
    masked = _exclude(scores, allowed)
    top = np.max(masked, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(masked - top)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > LOG_TINY * 0)
'''

BELOW_02 = '''def _tri(n):
    return np.arange(n)[None, :] <= np.arange(n)[:, None]


SIZES = list(range(3))
SIZES.append(99)
'''

CAUSAL_02 = '''def causal_mask(length):
    assert SIZES[-1] == 99
    return _tri(length)
'''

DISPLAY_02 = '''def padding_mask(lengths, max_length):
    display("a Jupyter-only helper")
    return np.arange(max_length)[None, :] < np.asarray(lengths)[:, None]
'''

# Right weights, but the bias subtracted from the caller's scores in place.
ALIBI_IN_PLACE_03 = inspect.getsource(learner_answers.alibi_biased_in_place).replace(
    "def alibi_biased_in_place(", "def alibi_weights(")

# The full-matrix answer of the diagnosis tests, as a learner would name it in the answer cell.
FULL_MATRIX_04 = inspect.getsource(exercise_answers.tiled_full_then_blocks).replace(
    "def tiled_full_then_blocks(", "def tiled_attention(")


def _learner_notebook(name: str, answers: dict[str, str], extra: dict[str, tuple[str, str]]) -> nbformat.NotebookNode:
    """The released notebook with answer cells replaced and extra cells ('before'/'after', id) added."""
    nb = nbformat.read(ROOT / "exercises" / name, as_version=4)
    cells = []
    for cell in nb.cells:
        if cell.get("id") in answers:
            cell.source = answers[cell.id]
        placed = [(where, src) for cid, (where, src) in extra.items() if cid == cell.get("id")]
        cells += [nbformat.v4.new_code_cell(src) for where, src in placed if where == "before"]
        cells.append(cell)
        cells += [nbformat.v4.new_code_cell(src) for where, src in placed if where == "after"]
    nb.cells = cells
    return nb


_HEADLINE = re.compile(r"^(\w+): (passed|failed|not attempted yet), ([\d.]+) / ([\d.]+) points", re.M)


def _check_outputs(path: Path) -> tuple[dict[str, tuple[str, float]], str]:
    """exercise -> (status, points) from the executed check cells, and all their text."""
    nb = nbformat.read(path, as_version=4)
    verdicts, texts = {}, []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            texts.append(text)
            for name, status, points, _ in _HEADLINE.findall(text):
                verdicts[name] = (status, float(points))
    return verdicts, "\n".join(texts)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("one-verdict")
    learner = root / "submissions" / "lee"
    learner.mkdir(parents=True)
    notebooks = {
        "02_masking.ipynb": _learner_notebook(
            "02_masking.ipynb",
            {"masked-softmax-answer": MASKED_SOFTMAX_02, "causal-answer": CAUSAL_02, "padding-answer": DISPLAY_02},
            {"masked-softmax-prompt": ("before", HELPERS_02), "causal-answer": ("after", BELOW_02)},
        ),
        "04_cost.ipynb": _learner_notebook("04_cost.ipynb", {"tiled-answer": FULL_MATRIX_04}, {}),
        "03_position.ipynb": _learner_notebook("03_position.ipynb", {"alibi-weights-answer": ALIBI_IN_PLACE_03}, {}),
    }
    for name, nb in notebooks.items():
        nbformat.write(nb, learner / name)
        execute_notebook(learner / name)
    out = root / "grades"
    subprocess.run([sys.executable, "-m", "lessonlib.cli", "grade", str(learner), "--out", str(out), "--quiet"],
                   check=True, capture_output=True, text=True, timeout=600)
    data = json.loads((out / "grades.json").read_text())
    grades = {g["exercise"]: g for g in data["learners"][0]["exercises"]}
    checks, text = {}, ""
    for name in notebooks:
        verdicts, more = _check_outputs(learner / name)
        checks.update(verdicts)
        text += more
    feedback = shown(next((out / "feedback").glob("*.md")).read_text())  # as a viewer renders it
    return grades, checks, text, feedback


def test_helpers_in_other_cells_give_one_verdict(graded):
    grades, checks, _, _ = graded
    for name in ("masked_softmax", "causal_mask"):
        assert checks[name] == ("passed", grades[name]["max_points"]), name
        assert grades[name]["status"] == "passed", grades[name]
        assert grades[name]["points"] == checks[name][1]


def test_a_full_matrix_tiled_answer_loses_the_memory_points_in_both(graded):
    grades, checks, text, _ = graded
    assert checks["tiled_attention"][0] == "failed" and grades["tiled_attention"]["status"] == "failed"
    assert checks["tiled_attention"][1] == grades["tiled_attention"]["points"] < grades["tiled_attention"]["max_points"]
    assert "builds_full_score_matrix" in text
    assert "builds_full_score_matrix" in [d["name"] for d in grades["tiled_attention"]["diagnoses"]]


def test_what_the_grader_cannot_run_is_said_in_check_and_in_the_feedback(graded):
    grades, checks, text, feedback = graded
    assert checks["padding_mask"][0] == "passed"  # the kernel has display()
    assert "would not run everything this answer uses" in text and "`display`" in text
    assert grades["padding_mask"]["status"] != "passed"  # the grader has not ...
    assert any("`display`" in note for note in grades["padding_mask"]["notes"])  # ... and says why
    assert "`display`" in feedback


def test_an_answer_that_writes_into_its_inputs_fails_in_both_with_the_reason(graded):
    grades, checks, text, feedback = graded
    grade = grades["alibi_weights"]
    assert checks["alibi_weights"] == ("failed", 0.0) and grade["status"] == "failed" and grade["points"] == 0
    assert "changed `scores` in place" in text and "changed `scores` in place" in feedback
    assert grade["diagnoses"] == []

