"""The grading process's own memory stays small whatever a submission's size or an answer's output.

Learners: one hands in a 2 GiB notebook (a sparse file: it costs no disk), one whose every
answer returns 8 MB, the most a value may hold, on every case; and, each under the 32 MB a
notebook may have, two notebooks whose metadata is a list of empty objects ``[{},{},...]`` (ten
million objects when parsed), one with a 30 MB written answer and one with a 30 MB cell id. The
grading process runs in a subprocess that reports its own peak resident memory; before sizes were
checked ahead of reading, the first learner alone cost it 2 GB and the second about 1 GB; before
the values, ids and written answers were capped, the last four cost it 1,005 MB and made
grades.json 29 MB (benchmarks/hostile_notebooks.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.grading import MEMORY_MB, TIMEOUT, load
from helpers.measure import MEASURED
from helpers.submissions import SOLUTIONS, correct_learner, notebook, write_learner

from lessonlib.exercises import EXERCISES
from lessonlib.grading.notebooks import MAX_CELL_ID_CHARS, MAX_JSON_VALUES, MAX_NOTEBOOK_BYTES, MAX_WRITTEN_CHARS

PEAK_LIMIT_MB = 300  # about 80-210 MB here; 2,088 MB before sizes were checked ahead of reading
MB = 2**20

def _solution(name: str) -> dict:
    return json.loads((SOLUTIONS / name).read_text())


def _hostile_notebooks() -> dict[str, str]:
    """Notebooks under the size limit built to cost the reader memory, by "learner/notebook"."""
    objects = _solution("02_masking.ipynb")
    objects["cells"][0]["metadata"]["x"] = "PLACEHOLDER"
    text = json.dumps(objects)
    objects_text = text.replace('"PLACEHOLDER"', "[" + "{}," * ((MAX_NOTEBOOK_BYTES - len(text) - 64) // 3) + "{}]")
    written = _solution("05_interpretation.ipynb")
    cell = next(c for c in written["cells"] if "manual" in c["metadata"].get("tags", []))
    cell["source"] = "Attention weights are not effects. " * (30 * MB // 36)
    long_id = _solution("02_masking.ipynb")
    next(c for c in long_id["cells"] if "answer" in c["metadata"].get("tags", []))["id"] = "a" * (30 * MB)
    return {"objects-1/02_masking.ipynb": objects_text, "objects-2/02_masking.ipynb": objects_text,
            "written/05_interpretation.ipynb": json.dumps(written), "cell-id/02_masking.ipynb": json.dumps(long_id)}


def _flooding_answers(notebook_name: str) -> dict[str, str]:
    answers = {}
    for name, exercise in EXERCISES.items():
        if exercise.notebook == notebook_name:
            answers[name] = (f"{name} = np.zeros(2**20)" if exercise.kind == "value" else
                             f"def {name}(*args, **kwargs):\n    return np.zeros(2**20)  # 8 MB")
    return answers


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, dict[str, dict]]]:
    root = tmp_path_factory.mktemp("sizes")
    subs, out = root / "submissions", root / "gradebook"
    correct_learner(subs / "control")
    names = sorted({e.notebook for e in EXERCISES.values()})
    write_learner(subs / "flooder", {n: notebook(n, answers=_flooding_answers(n)) for n in names})
    huge = subs / "sparse" / "02_masking.ipynb"
    huge.parent.mkdir(parents=True)
    with open(huge, "wb") as f:
        f.truncate(2**31)
    for name, text in _hostile_notebooks().items():
        learner, notebook_name = name.split("/")
        write_learner(subs / learner, {notebook_name: text})
    command = [sys.executable, "-c", MEASURED, "grade", *map(str, sorted(subs.iterdir())), "--out", str(out),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), "--quiet", "--workers", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    peak_kb = int(result.stderr.split("PEAK")[-1].split()[0])
    data, _ = load(out)
    grades = {lr["learner"]: {e["exercise"]: e for e in lr["exercises"]} for lr in data["learners"]}
    return peak_kb, grades


def test_the_grading_process_stays_small(measured) -> None:
    peak_kb, _ = measured
    assert peak_kb < PEAK_LIMIT_MB * 1024, f"the grading process held {peak_kb / 1024:.0f} MB"


def test_a_huge_notebook_is_refused_unread(measured) -> None:
    _, grades = measured
    grade = grades["sparse"]["masked_softmax"]
    assert grade["points"] == 0 and "2048 MB" in json.dumps(grade), grade["reason"]


def test_answers_that_flood_stop_at_the_limits(measured) -> None:
    _, grades = measured
    statuses = {g["status"] for g in grades["flooder"].values() if g.get("kind") != "manual"}
    assert "result_too_large" in statuses, statuses
    assert all(g["points"] in (0, None) for g in grades["flooder"].values()), grades["flooder"]
    control = grades["control"]
    assert all(g["points"] == g["max_points"] for g in control.values() if g.get("kind") != "manual")


def test_notebooks_that_would_parse_into_too_much_are_refused_with_the_limit(measured) -> None:
    _, grades = measured
    for learner in ("objects-1", "objects-2"):
        grade = grades[learner]["masked_softmax"]
        assert grade["status"] == "malformed" and grade["points"] == 0
        assert f"more than the {MAX_JSON_VALUES:,} a notebook may have" in grade["reason"], grade["reason"]
    grade = grades["cell-id"]["causal_mask"]
    assert grade["status"] == "malformed" and f"at most {MAX_CELL_ID_CHARS}" in grade["reason"], grade["reason"]
    assert "31,457,280 characters" in grade["reason"]


def test_a_long_written_answer_is_kept_cut_with_a_note(measured) -> None:
    _, grades = measured
    written = next(g for g in grades["written"].values() if g.get("kind") == "manual" and g["answer_text"])
    assert written["status"] == "needs_manual_grading"
    assert len(written["answer_text"]) < MAX_WRITTEN_CHARS + 200
    assert written["answer_text"].endswith(f"the grader keeps the first {MAX_WRITTEN_CHARS:,}]")


def test_nothing_large_is_left_in_the_output_folder(measured, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = Path(tmp_path_factory.getbasetemp()) / "sizes0" / "gradebook"
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total < 16 * 2**20, f"{total / 2**20:.0f} MB left in the output folder"


def test_the_course_notebooks_are_far_below_the_value_cap() -> None:
    """The cap refuses only notebooks built to exhaust the grader: a solved exercise notebook holds
    a few thousand values, under a hundredth of it."""
    from lessonlib.grading.notebooks import json_values

    for path in sorted(SOLUTIONS.glob("0*.ipynb")):
        assert json_values(path.read_bytes()) < MAX_JSON_VALUES // 100, path.name


def test_values_are_counted_outside_strings() -> None:
    from lessonlib.grading.notebooks import json_values

    quoted = json.dumps({"source": ["{}," * MAX_JSON_VALUES]}).encode()  # braces in a string build nothing
    assert json_values(quoted) < 10
    escaped = json.dumps({"source": ['say "{,}",' * MAX_JSON_VALUES, "ends in a backslash \\", "[,"]}).encode()
    assert json_values(escaped) == 5  # { [ and two commas outside strings, plus one
    assert json_values(json.dumps([{}] * (MAX_JSON_VALUES + 1)).encode()) > MAX_JSON_VALUES
