"""Learner folders for the grader's tests: released notebooks with answers swapped in or cells removed.

Each hostile learner hands in 02_masking.ipynb with one answer (usually masked_softmax) replaced by
something broken or hostile, and correct answers to the other exercises, so a test can check that
only that exercise suffers.
"""

from __future__ import annotations

import copy
import csv
import subprocess
import sys
from pathlib import Path

import nbformat

from lessonlib.grading.notebooks import course_notebooks

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
ANSWER_CELLS = {ex: cell for nb in course_notebooks() for ex, cell in nb.answer_cells.items()}

CORRECT_MASKED_SOFTMAX = '''
def _correct(scores, allowed):
    masked = np.where(allowed, scores, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(masked - top)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
'''

LOOP = '''
def masked_softmax(scores, allowed):
    while True:
        pass
'''

SLEEP = '''
import time

def masked_softmax(scores, allowed):
    time.sleep(10_000)
'''

MEMORY = '''
def masked_softmax(scores, allowed):
    hoard = []
    while True:
        hoard.append(bytearray(20_000_000))
'''

SYS_EXIT = '''
import sys

def masked_softmax(scores, allowed):
    sys.exit(3)
'''

OS_EXIT = '''
import os

def causal_mask(length):
    os._exit(0)
'''

WRONG_PADDING = '''
def padding_mask(lengths, max_length):
    return np.arange(max_length)[None, :] >= np.asarray(lengths)[:, None]  # inverted on purpose
'''

# Kill the parent, and the grandparent when it can be found: with the worker in between, the
# grandparent is the grading process. The answer is correct if it survives.
KILL_PARENT = CORRECT_MASKED_SOFTMAX + '''
import os
import signal

def masked_softmax(scores, allowed):
    parent = os.getppid()
    targets = [parent]
    try:
        with open(f"/proc/{parent}/stat") as f:
            targets.insert(0, int(f.read().rsplit(")", 1)[1].split()[1]))
    except (OSError, ValueError, IndexError):
        pass
    for entry in os.listdir("/proc"):  # and the grading command itself, wherever it is visible
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"lessonlib.cli" in f.read():
                    targets.append(int(entry))
        except (OSError, ValueError):
            pass
    for pid in targets:
        if pid > 0:
            os.kill(pid, signal.SIGKILL)
    return _correct(scores, allowed)
'''

FORK_BOMB = '''
import os

def masked_softmax(scores, allowed):
    while True:
        os.fork()
'''

RAISES_ON_IMPORT = '''
import lessonlib_course_helpers_that_do_not_exist

def masked_softmax(scores, allowed):
    return scores
'''

HUGE_PRINT = CORRECT_MASKED_SOFTMAX + '''
print("cell output " * 1_000_000)

def masked_softmax(scores, allowed):
    for _ in range(20):
        print("x" * 1_000_000)
    import sys
    sys.stderr.write("warning: " * 100_000)
    import warnings
    warnings.warn("a warning on stderr costs nothing")
    return _correct(scores, allowed)
'''

MONKEYPATCH = '''
np.allclose = lambda *args, **kwargs: True
np.isclose = lambda a, b, *args, **kwargs: np.ones(np.broadcast_shapes(np.shape(a), np.shape(b)), bool)
np.array_equal = lambda *args, **kwargs: True
import lessonlib
import lessonlib.exercises
import lessonlib.exercises.judge
import lessonlib.exercises.spec
lessonlib.exercises.spec.close = lambda *args, **kwargs: True
lessonlib.exercises.judge.judge = lambda *args, **kwargs: None
lessonlib.exercises.check = lambda *args, **kwargs: None

def masked_softmax(scores, allowed):
    return np.zeros(np.broadcast_shapes(np.shape(scores), np.shape(allowed)))
'''

USES_LESSONLIB = '''
import lessonlib

def masked_softmax(scores, allowed):
    return lessonlib.masked_softmax(scores, allowed)
'''

IMPORTS_LESSONLIB = '''
from lessonlib.attention import masked_softmax
'''

ENORMOUS = '''
def masked_softmax(scores, allowed):
    return np.broadcast_to(np.float64(0.5), (1 << 20, 1 << 20))  # 8 TB if it were copied
'''


def reads_files(paths: list[str]) -> str:
    """An answer that tries to read ``paths`` (solutions, other learners) and uses the solution."""
    return CORRECT_MASKED_SOFTMAX + f'''
import json

def masked_softmax(scores, allowed):
    for path in {paths!r}:
        with open(path) as f:
            f.read()
    return _correct(scores, allowed)  # only reached when every file could be read
'''


def connects(port: int) -> str:
    return CORRECT_MASKED_SOFTMAX + f'''
import socket

def masked_softmax(scores, allowed):
    with socket.create_connection(("127.0.0.1", {port}), timeout=2) as s:
        s.sendall(b"learner code got out")
    return _correct(scores, allowed)
'''


def writes_into(out: Path) -> str:
    return CORRECT_MASKED_SOFTMAX + f'''
from pathlib import Path

def masked_softmax(scores, allowed):
    out = Path({str(out)!r})
    out.mkdir(parents=True, exist_ok=True)
    for name in ["grades.csv", "summary.csv", "learners/alice.json", "planted.txt"]:
        (out / name).write_text("learner,points\\nmallory,1000\\n")
    return _correct(scores, allowed)
'''


def notebook(name: str, *, answers: dict[str, str] | None = None, delete: tuple[str, ...] = (),
             extra: list[tuple[int, str]] | None = None, source: Path = SOLUTIONS) -> nbformat.NotebookNode:
    """``name`` from ``source`` with answer cells replaced (by exercise), deleted, or cells inserted."""
    nb = copy.deepcopy(nbformat.read(source / name, as_version=4))
    ids = {ANSWER_CELLS[ex]: code for ex, code in (answers or {}).items()}
    gone = {ANSWER_CELLS[ex] for ex in delete}
    cells = []
    for cell in nb.cells:
        if cell.get("id") in gone:
            continue
        if cell.get("id") in ids:
            cell.source = ids[cell.get("id")].strip("\n")
        cells.append(cell)
    for index, code in extra or []:
        cells.insert(index, nbformat.v4.new_code_cell(code))
    nb.cells = cells
    return nb


def write_learner(folder: Path, notebooks: dict[str, nbformat.NotebookNode | str]) -> Path:
    """A learner folder holding ``notebooks`` (a string is written as the file's raw text)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, nb in notebooks.items():
        if isinstance(nb, str):
            (folder / name).write_text(nb)
        else:
            nbformat.write(nb, folder / name)
    return folder


def correct_learner(folder: Path) -> Path:
    return write_learner(folder, {p.name: notebook(p.name) for p in sorted(SOLUTIONS.glob("*.ipynb"))})


def stub_learner(folder: Path) -> Path:
    names = sorted(p.name for p in EXERCISES.glob("*.ipynb"))
    return write_learner(folder, {name: notebook(name, source=EXERCISES) for name in names})


def masking(answers: dict[str, str] | None = None, **kwargs: object) -> dict[str, nbformat.NotebookNode]:
    return {"02_masking.ipynb": notebook("02_masking.ipynb", answers=answers, **kwargs)}


def grade_masking(*args: str) -> subprocess.CompletedProcess:
    """``lessonlib grade ARGS`` on 02_masking.ipynb alone, in a process of its own (2 s, 512 MB, quiet)."""
    return subprocess.run([sys.executable, "-m", "lessonlib.cli", "grade", *args, "--timeout", "2", "--memory", "512",
                           "--notebooks", "02_masking.ipynb", "--quiet"], capture_output=True, text=True, timeout=300)


def summary_rows(out: Path) -> dict[str, dict[str, str]]:
    """summary.csv of the output folder ``out``, by learner (the class rows in parentheses left out)."""
    with open(out / "summary.csv", newline="") as f:
        return {row["learner"]: row for row in csv.DictReader(f) if not row["learner"].startswith("(")}


# An answer's helper that computes attention over the whole (L, S) score matrix at once: the
# tiled exercises' tests build learners on it.
DENSE_MATRIX = '''
def _dense(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2) / np.sqrt(query.shape[-1])  # (..., L, S): the whole matrix
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ value
'''
