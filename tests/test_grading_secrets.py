"""Attacks on what the grader keeps from learner code: probes, hidden inputs, measured memory.

One batch (through the command line, with a fixed seed) holds a correct learner, the control,
and one learner per attack. Each attack is written to earn the points if the secret it looks
for is anywhere it can reach, and to fail every case otherwise, so a test that sees it fail
knows the secret was not found:

- the probe handed to leaks_future, mask_polarity and is_order_sensitive: its mask, polarity or
  position read off the function's closure, or any probe description found in the process;
- the order of the cases: answers given by counting calls, from the published order of the kinds;
- hidden inputs: every array the public process holds, raised as an error's text;
- peak memory for tiled_attention: a dense answer that silences tracemalloc, and one that
  computes in a forked process.

Apart from the batch: where learner code would run as the gradebook's owner, no learner code runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from grading_submissions import CORRECT_MASKED_SOFTMAX, correct_learner, masking, notebook, write_learner
from test_grading_hostile import load, run_cli

from lessonlib.exercises import EXERCISES
from lessonlib.grading import store
from lessonlib.grading.isolation import sandbox

SEED = 20261130

# Reads the probe's state wherever this process could hold it: the function's closure (and the
# closures inside it), then every object the garbage collector knows. Returns None when nothing
# is found, and None fails every case.
SNOOP = '''
import gc

def _hidden_state(fn):
    seen = [fn]
    for obj in list(seen):
        for cell in getattr(obj, "__closure__", None) or ():
            seen.append(cell.cell_contents)
            for inner in getattr(cell.cell_contents, "__closure__", None) or ():
                seen.append(inner.cell_contents)
    for obj in seen:
        state = {k: getattr(obj, k) for k in ("mask", "polarity", "position") if hasattr(obj, k)}
        if state:
            return state
    prefix = "".join(["probe", ":{"])  # built at run time: no constant of this cell holds it
    for obj in gc.get_objects():
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        for item in items:
            if isinstance(item, str) and item.startswith(prefix) and len(item) > 20:
                raise RuntimeError("FOUND A PROBE DESCRIPTION " + item)
    return None
'''

SNOOPING_ANSWERS = {
    "leaks_future": SNOOP + '''
def leaks_future(layer, length, n_queries, d_model):
    state = _hidden_state(layer)
    return None if state is None else state["mask"] in ("none", "inverted", "next", "last", "early")
''',
    "mask_polarity": SNOOP + '''
def mask_polarity(attention_fn):
    state = _hidden_state(attention_fn)
    return None if state is None else state["polarity"]
''',
}
SNOOPING_POSITION = SNOOP + '''
def is_order_sensitive(layer, x):
    state = _hidden_state(layer)
    return None if state is None else (state["position"] not in ("none", "rowwise") or state["mask"] != "none")
'''

# The published order of the kinds: public cases first, then the hidden ones. A marker file in the
# working folder carries the count into a second process, should the hidden cases run in one.
COUNTER = '''
import os

_ORDER = [False, False, True, False, True, True] + [False, True, False, False, True, True, True, True, True]
_PUBLIC = 6
_calls = []

def leaks_future(layer, length, n_queries, d_model):
    if not _calls:  # a fresh process that finds the marker runs the hidden cases
        _calls.append(_PUBLIC if os.path.exists(".public-done") else 0)
    n = _calls[0] + len(_calls) - 1
    _calls.append(n)
    if n == _PUBLIC - 1:
        open(".public-done", "w").close()
    return _ORDER[n % len(_ORDER)]
'''

# Correct, but raises with the first number of every array this process can find, on the first call.
EXFILTRATE = CORRECT_MASKED_SOFTMAX + '''
import gc

def masked_softmax(scores, allowed):
    found = []
    for obj in gc.get_objects():
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        for item in items:
            if isinstance(item, np.ndarray) and item.size and item.dtype.kind == "f":
                found.append(repr(float(item.flat[0])))
    with open("carried.txt", "a") as f:  # for a later exercise to read, should the file survive
        f.write(repr(float(scores.flat[0])) + " ")
    raise SystemExit("LEAK " + " ".join(sorted(set(found))))
'''

CARRY = '''
import os

def causal_mask(length):
    if os.path.exists("carried.txt"):
        raise SystemExit("CARRIED " + open("carried.txt").read())
    return np.tri(length, dtype=bool)
'''

DENSE = '''
def _dense(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])  # (..., L, S): the whole matrix
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ value
'''

DENSE_QUIET = DENSE + '''
import tracemalloc

tracemalloc.get_traced_memory = lambda: (0, 0)  # every peak reads as nothing
tracemalloc.reset_peak = lambda: None

def tiled_attention(query, key, value, block_size):
    return _dense(query, key, value)
'''

DENSE_FORKED = DENSE + '''
import os
import pickle

def tiled_attention(query, key, value, block_size):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the whole matrix lives in another process
        os.write(w, pickle.dumps(_dense(query, key, value)))
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return pickle.loads(data)
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, dict]], Path]:
    root = tmp_path_factory.mktemp("secrets")
    subs, out = root / "submissions", root / "gradebook"
    correct_learner(subs / "control")
    learners = {
        "snooper": {"02_masking.ipynb": notebook("02_masking.ipynb", answers=SNOOPING_ANSWERS),
                    "03_position.ipynb": notebook("03_position.ipynb",
                                                  answers={"is_order_sensitive": SNOOPING_POSITION})},
        "counter": {"02_masking.ipynb": notebook("02_masking.ipynb", answers={"leaks_future": COUNTER})},
        "exfiltrator": {"02_masking.ipynb": notebook("02_masking.ipynb",
                                                      answers={"masked_softmax": EXFILTRATE, "causal_mask": CARRY})},
        "quiet": {"04_cost.ipynb": notebook("04_cost.ipynb", answers={"tiled_attention": DENSE_QUIET})},
        "forker": {"04_cost.ipynb": notebook("04_cost.ipynb", answers={"tiled_attention": DENSE_FORKED})},
    }
    for name, notebooks in learners.items():
        write_learner(subs / name, notebooks)
    # The whole-matrix answers take seconds of clock on their largest hidden case when the machine
    # is loaded; a generous budget keeps the clock out of the verdicts these tests read.
    run_cli(sorted(subs.iterdir()), out, "--workers", "2", "--seed", str(SEED), "--timeout", "30")
    data, _ = load(out)
    grades = {lr["learner"]: {e["exercise"]: e for e in lr["exercises"]} for lr in data["learners"]}
    return grades, out


def test_the_control_gets_full_marks(graded) -> None:
    grades, _ = graded
    for exercise, grade in grades["control"].items():
        if grade.get("kind") != "manual":
            assert grade["points"] == grade["max_points"], (exercise, grade["status"], grade["reason"])


@pytest.mark.parametrize("exercise", ["leaks_future", "mask_polarity", "is_order_sensitive"])
def test_a_probe_holds_nothing_learner_code_can_read(graded, exercise: str) -> None:
    grades, _ = graded
    grade = grades["snooper"][exercise]
    assert grade["points"] == 0, (grade["status"], grade["reason"])
    assert "FOUND A PROBE DESCRIPTION" not in json.dumps(grade)


def test_counting_calls_does_not_give_the_hidden_answers(graded) -> None:
    grades, _ = graded
    grade = grades["counter"]["leaks_future"]
    hidden = [f for f in grade["failed_cases"] if f["hidden"]]
    assert hidden, "the hidden cases came in the published order of their kinds"


def test_no_hidden_input_reaches_the_feedback(graded) -> None:
    grades, out = graded
    grade = grades["exfiltrator"]["masked_softmax"]
    assert "LEAK" in grade["reason"]  # the attack ran, and its public text is shown
    # the files the hidden cases wrote were gone before the next exercise ran
    assert grades["exfiltrator"]["causal_mask"]["status"] == "passed"
    texts = json.dumps(grades["exfiltrator"]) + (out / "feedback" / "exfiltrator.md").read_text()
    hidden = [a for case in EXERCISES["masked_softmax"].hidden_cases(SEED) for a in case.args
              if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    assert hidden
    for array in hidden:
        assert repr(float(array.flat[0])) not in texts


def test_memory_is_measured_from_outside_the_answer(graded) -> None:
    grades, _ = graded
    control = grades["control"]["tiled_attention"]
    assert control["points"] == control["max_points"]
    for learner in ("quiet", "forker"):
        grade = grades[learner]["tiled_attention"]
        assert grade["points"] < grade["max_points"], (learner, grade["reason"])
    quiet = grades["quiet"]["tiled_attention"]
    assert [f["case"] for f in quiet["failed_cases"]] == ["memory"], quiet["failed_cases"]


# Reads the course gradebook beside the output folder (the secret seed is in it) and writes over it.
TAMPERER = CORRECT_MASKED_SOFTMAX + '''
def masked_softmax(scores, allowed):
    with open({path!r}, "r+b") as f:
        f.read()
        f.seek(0)
        f.write(b"tampered")
    return _correct(scores, allowed)
'''


def test_level_limits_is_refused_where_learner_code_would_own_the_gradebook(tmp_path: Path,
                                                                             request: pytest.FixtureRequest) -> None:
    """At level limits learner code runs as the grading user (nobody, for root). Where that user owns
    the gradebook (an ordinary user grading; for root, here, a course folder handed to nobody), learner
    code could read the seed, give itself an override and delete history: the run is refused before
    any learner code runs, in one line that says which level to use and how to get it."""
    root = os.geteuid() == 0
    if root and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")
    # root's pytest folders are closed to nobody: the course goes where nobody can reach it
    course = Path(tempfile.mkdtemp(prefix="lessonlib-course-")) if root else tmp_path / "course"
    request.addfinalizer(lambda: shutil.rmtree(course, ignore_errors=True))
    gradebook, out = course / "gradebook.db", course / "week2"
    write_learner(tmp_path / "submissions" / "mallory",
                  masking({"masked_softmax": TAMPERER.format(path=str(gradebook))}))
    with store.open_gradebook(gradebook, "lessonlib grade (an earlier run)"):
        pass
    if root:
        for path in [course, *course.rglob("*")]:
            os.chown(path, *sandbox.nobody())
        os.chmod(course, 0o755)
    done = subprocess.run([sys.executable, "-m", "lessonlib.cli", "grade", str(tmp_path / "submissions"), "--out",
                           str(out), "--isolation", "limits", "--notebooks", "02_masking.ipynb", "--timeout", "2",
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    user = "nobody" if root else sandbox.user_name(os.getuid())
    assert lines[0].startswith(f"lessonlib grade: no isolation level could be set up: limits: learner code would "
                               f"run as {user}, who can read the "), lines[0]
    assert "read the gradebook: it could read the secret seed and rewrite grades" in lines[0]
    assert "Grade at level bubblewrap (install it: sudo apt install bubblewrap" in lines[0]
    assert "or as root, where learner code runs as nobody" in lines[0]
    assert not (out / "grades.json").exists()
    assert b"tampered" not in gradebook.read_bytes()


def test_the_guide_quotes_the_refusal_and_the_warning_as_the_grader_prints_them() -> None:
    """docs/instructor-guide.md quotes both in "If you cannot use bubblewrap"; each fixed piece of
    the text (between its placeholders) must appear there as printed."""
    import re

    guide = (Path(__file__).resolve().parents[1] / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("**If you cannot use bubblewrap.**"):guide.index("### Memory and processes")]
    quoted = " ".join(line.strip().lstrip(">").strip() for line in section.splitlines()
                      if line.strip().startswith(">"))
    for text in (sandbox.GRADEBOOK_REACHABLE, sandbox.LIMITS_WARNING):
        for piece in re.split(r"\{\w+\}", text):
            assert piece.strip() in quoted, piece
