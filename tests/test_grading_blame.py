"""A grading process that dies is blamed on a learner only where learner code could have killed it.

In the bubblewrap sandbox learner code cannot reach the grading process, so when it dies (here:
kill -9 while an honest, slow answer runs) the exercise that was running is run again by the
next run of the same command, and earns its points.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from grading_submissions import CORRECT_MASKED_SOFTMAX, masking, write_learner
from test_grading_hostile import MEMORY_MB, REQUIRED, TIMEOUT, load, run_cli

SLOW = CORRECT_MASKED_SOFTMAX + '''
import time

_first = []

def masked_softmax(scores, allowed):
    if not _first:
        _first.append(1)
        time.sleep(1.5)  # honest but slow, in each process: the clock allows 2 * 1.5 + 1 = 4 s for both
    return _correct(scores, allowed)
'''


def _wait_for(path: Path, needle: bytes, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if needle in path.read_bytes():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def test_a_killed_grader_is_not_blamed_on_the_learner_in_the_sandbox(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        if REQUIRED:
            pytest.fail("bubblewrap is required (REQUIRE_BUBBLEWRAP=1) but not installed")
        pytest.skip("needs bubblewrap: at level limits a dead grader is blamed on purpose")
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    write_learner(subs / "slow", masking({"masked_softmax": SLOW}))
    command = [sys.executable, "-m", "lessonlib.cli", "grade", str(subs / "slow"), "--out", str(out),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), "--quiet", "--isolation", "bubblewrap"]
    grader = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = _wait_for(out / ".grading" / "work" / "slow" / "worker.out", b"02_masking--masked_softmax", 60)
        assert started, "the slow exercise never started"
        time.sleep(0.5)
        os.kill(grader.pid, signal.SIGKILL)
    finally:
        grader.kill()
        grader.wait()
    run_cli([subs / "slow"], out, "--isolation", "bubblewrap")
    data, _ = load(out)
    grade = {e["exercise"]: e for e in data["learners"][0]["exercises"]}["masked_softmax"]
    assert grade["status"] == "passed" and grade["points"] == grade["max_points"], grade["reason"]
