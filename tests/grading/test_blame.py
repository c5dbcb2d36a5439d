"""A grading process that dies is never blamed on a learner: learner code cannot kill it.

In the bubblewrap sandbox learner code cannot reach the grading process; level limits is refused
to an ordinary user, and root's learner code runs as nobody. So when the grader dies (here: kill -9
while an honest, slow answer runs) the exercise that was running is run again by the next run of
the same command, and earns its points, at either level.
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
from helpers.grading import MEMORY_MB, REQUIRED, TIMEOUT, load, run_cli
from helpers.submissions import CORRECT_MASKED_SOFTMAX, masking, write_learner

from lessonlib.grading.isolation import sandbox

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


def _level_or_skip(level: str) -> None:
    if level == "bubblewrap" and shutil.which("bwrap") is None:
        if REQUIRED:
            pytest.fail("bubblewrap is required (REQUIRE_BUBBLEWRAP=1) but not installed")
        pytest.skip("needs bubblewrap")
    if level == "limits" and os.geteuid() != 0:
        pytest.skip("level limits refuses an ordinary user's graded work (test_secrets.py)")
    if level == "limits" and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")


@pytest.mark.parametrize("level", ["bubblewrap", "limits"])
def test_a_killed_grader_is_not_blamed_on_the_learner(tmp_path: Path, level: str) -> None:
    _level_or_skip(level)
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    write_learner(subs / "slow", masking({"masked_softmax": SLOW}))
    command = [sys.executable, "-m", "lessonlib.cli", "grade", str(subs / "slow"), "--out", str(out),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), "--quiet", "--isolation", level]
    grader = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = _wait_for(out / ".grading" / "work" / "slow" / "worker.out", b"02_masking--masked_softmax", 60)
        assert started, "the slow exercise never started"
        time.sleep(0.5)
        os.kill(grader.pid, signal.SIGKILL)
    finally:
        grader.kill()
        grader.wait()
    run_cli([subs / "slow"], out, "--isolation", level)
    data, _ = load(out)
    grade = {e["exercise"]: e for e in data["learners"][0]["exercises"]}["masked_softmax"]
    assert grade["status"] == "passed" and grade["points"] == grade["max_points"], grade["reason"]
