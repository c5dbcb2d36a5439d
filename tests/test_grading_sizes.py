"""The grading process's own memory stays small whatever a submission's size or an answer's output.

Two learners: one hands in a 2 GiB notebook (a sparse file: it costs no disk), one whose every
answer returns 8 MB, the most a value may hold, on every case. The grading process runs in a
subprocess that reports its own peak resident memory; before sizes were checked ahead of
reading, the first learner alone cost it 2 GB and the second about 1 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from grading_submissions import correct_learner, notebook, write_learner
from test_grading_hostile import MEMORY_MB, TIMEOUT, load

from lessonlib.exercises import EXERCISES

PEAK_LIMIT_MB = 300  # about 80-150 MB here; 2,088 MB before sizes were checked ahead of reading

# Report the process's own peak resident memory (kB) when it exits, then run the command line. The
# peak is VmHWM, the high-water mark of this process's own memory: getrusage's ru_maxrss would not
# do, since Linux carries it across execve, so it also holds the parent's size at the fork (the
# pytest process, several hundred MB late in a full run).
MEASURED = ("import atexit, sys\n"
            "def peak():\n"
            "    with open('/proc/self/status') as f:\n"
            "        kb = next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))\n"
            "    print('PEAK', kb, file=sys.stderr)\n"
            "atexit.register(peak)\n"
            "from lessonlib.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


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


def test_nothing_large_is_left_in_the_output_folder(measured, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = Path(tmp_path_factory.getbasetemp()) / "sizes0" / "gradebook"
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total < 16 * 2**20, f"{total / 2**20:.0f} MB left in the output folder"
