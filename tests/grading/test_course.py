"""The course gradebook behind `lessonlib grade`, through the command line as an instructor uses it:
the cases where grades were silently wrong before there was one database per course.

- two graders started on one course: the second stops, naming the first, and loses nothing;
- learner keys given in arrival order: a late folder ``Bob`` moved ``bob``'s key, and a hand
  decision given to ``bob-2`` moved to a learner who wrote nothing;
- a late-submissions folder graded into the same output folder rewrote the files from that run's
  learners only;
- an override needs a reason, shows in the feedback and the summary, and is in the history.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.submissions import grade_masking, masking, summary_rows, write_learner

from lessonlib import cli

MASKING = "02_masking.ipynb"
SLOW = '''
import time

def masked_softmax(scores, allowed):
    time.sleep(60)
'''


def _points(out: Path, learner: str, exercise: str) -> float:
    data = json.loads((out / "grades.json").read_text())
    grades = {lr["key"]: {e["exercise"]: e for e in lr["exercises"]} for lr in data["learners"]}
    return grades[learner][exercise]["points"]


def test_a_second_grader_on_the_course_stops_naming_the_first(tmp_path: Path) -> None:
    subs, out = tmp_path / "submissions", tmp_path / "week2"
    write_learner(subs / "slow", masking({"masked_softmax": SLOW}))
    write_learner(subs / "ann", masking())
    first = subprocess.Popen([sys.executable, "-m", "lessonlib.cli", "grade", str(subs), "--out", str(out),
                              "--timeout", "30", "--memory", "512", "--notebooks", MASKING, "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "gradebook.db.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        second = grade_masking(str(subs), "--out", str(tmp_path / "week2"))
        assert second.returncode == 2, second.stderr
        assert str(first.pid) in second.stderr and "lessonlib" in second.stderr, second.stderr
    finally:
        first.kill()
        first.wait()
    done = grade_masking(str(subs), "--out", str(out))  # the first was killed: its lock went with it
    assert done.returncode == 0, done.stderr
    assert set(summary_rows(out)) == {"ann", "slow"}


def test_a_late_folder_moves_no_key_and_no_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "week2"
    write_learner(tmp_path / "on-time" / "bob", masking({"masked_softmax": SLOW.replace("60", "0")}))
    write_learner(tmp_path / "on-time" / "bob-2", masking())
    assert grade_masking(str(tmp_path / "on-time"), "--out", str(out)).returncode == 0
    assert cli.main(["override", "--out", str(out), "bob-2", "masked_softmax", "1", "--reason",
                     "regrade request: the answer is right up to rounding"]) == 0
    before = summary_rows(out)
    assert set(before) == {"bob", "bob-2"}

    write_learner(tmp_path / "late" / "Bob", masking())  # a late folder, named like bob
    assert grade_masking(str(tmp_path / "late"), "--out", str(out)).returncode == 0
    after = summary_rows(out)
    assert set(after) == {"bob", "bob-2", "Bob-3"}, after  # every learner of the assignment, keys unmoved
    assert after["bob-2"]["points"] == before["bob-2"]["points"]
    assert _points(out, "bob-2", "masked_softmax") == 1.0
    assert "regrade request" in (out / "feedback" / "bob-2.md").read_text()
    assert "regrade request" not in (out / "feedback" / "Bob-3.md").read_text()
    assert _points(out, "bob", "masked_softmax") == 0.0


def test_an_override_needs_a_reason_and_is_in_the_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "week2"
    write_learner(tmp_path / "subs" / "ann", masking())
    assert grade_masking(str(tmp_path / "subs"), "--out", str(out)).returncode == 0
    with pytest.raises(SystemExit):
        cli.main(["override", "--out", str(out), "ann", "causal_mask", "0"])  # no --reason
    assert cli.main(["override", "--out", str(out), "ann", "causal_mask", "0", "--reason", "copied answer"]) == 0
    assert _points(out, "ann", "causal_mask") == 0.0
    capsys.readouterr()
    assert cli.main(["history", "--out", str(out), "ann"]) == 0
    history = capsys.readouterr().out
    assert "override" in history and "copied answer" in history
    assert cli.main(["override", "--out", str(out), "ann", "causal_mask", "--clear", "--reason", "cleared"]) == 0
    assert _points(out, "ann", "causal_mask") > 0


def test_an_unknown_learner_or_exercise_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "week2"
    write_learner(tmp_path / "subs" / "ann", masking())
    assert grade_masking(str(tmp_path / "subs"), "--out", str(out)).returncode == 0
    capsys.readouterr()
    assert cli.main(["override", "--out", str(out), "zed", "causal_mask", "1", "--reason", "x"]) == 2
    assert "zed" in capsys.readouterr().err
    assert cli.main(["override", "--out", str(out), "ann", "no_such_exercise", "1", "--reason", "x"]) == 2
    assert "no_such_exercise" in capsys.readouterr().err
