"""`lessonlib grade` against broken and hostile submissions, each one a test.

One batch (run once, through the command line in a subprocess, as an instructor would) holds a
correct learner, a learner who attempted nothing, and one learner per hostile case. For each case
the test checks the status and reason of the attacked exercise, that the learner's other
exercises in the same notebook are graded normally, and (in the fixture) that the batch finished.
Isolation-dependent cases (reading solutions/ or the output folder, the network, signalling the
grader) skip unless the batch ran at level "bubblewrap", and say so; REQUIRE_BUBBLEWRAP=1 (CI)
turns that skip into a failure. CI runs this file as root and as an ordinary user.
LESSONLIB_TEST_ISOLATION=limits runs the batch without the sandbox, to exercise that path.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from grading_submissions import (
    ENORMOUS,
    FORK_BOMB,
    HUGE_PRINT,
    IMPORTS_LESSONLIB,
    KILL_PARENT,
    LOOP,
    MEMORY,
    MONKEYPATCH,
    OS_EXIT,
    RAISES_ON_IMPORT,
    SLEEP,
    SOLUTIONS,
    SYS_EXIT,
    USES_LESSONLIB,
    WRONG_PADDING,
    connects,
    correct_learner,
    masking,
    notebook,
    reads_files,
    stub_learner,
    write_learner,
    writes_into,
)
from markdown_view import view

from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS
from lessonlib.grading.isolation import cgroups, sandbox

TIMEOUT = 1.5  # CPU seconds per exercise; the clock allows 2 * 1.5 + 1 = 4 s
FORCED = os.environ.get("LESSONLIB_TEST_ISOLATION")  # None: the strongest level that works
REQUIRED = os.environ.get("REQUIRE_BUBBLEWRAP") == "1"
# The kernel exempts root from the process limit: no fork bomb when learner code may run as root,
# unless a control group's pids.max holds it.
BOMB_SAFE = not (os.geteuid() == 0 and (FORCED == "limits" or shutil.which("bwrap") is None)) or bool(
    cgroups.detect().kind)
MEMORY_MB = 512
MASKING = ("masked_softmax", "causal_mask", "padding_mask", "cached_causal_mask")

DRAWING_CELLS = [
    (3, "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2, 3])\nplt.show()"),
    (3, "import ipywidgets as w\nw.interact(lambda x: x, x=(0, 10))\ninput('press enter')"),
    (3, "while True:\n    pass  # a stray loop outside the answer cells never runs"),
    (3, "%matplotlib inline\ndef helper_scale(x):\n    return x * 1.0"),
]

RENAMED = "def causal_mask_v2(length):\n    return np.tri(length, dtype=bool)"

ANSWER_THAT_DRAWS = '''
import matplotlib.pyplot as plt

def causal_mask(length):
    return np.arange(length)[None, :] <= np.arange(length)[:, None]

plt.imshow(causal_mask(4))
plt.show()
'''


# Exceptions whose text looks like a limit the grader imposes: the class decides, never the message.
FORGED_PROCESS_LIMIT = '''
def masked_softmax(scores, allowed):
    raise BlockingIOError("[Errno 11] Resource temporarily unavailable")  # no errno: text only
'''

FORGED_MEMORY = '''
class MemoryError(Exception):  # a class of its own, named like the built-in one
    pass

def causal_mask(length):
    raise MemoryError("Unable to allocate 8.00 TiB")
'''

NUMPY_MEMORY = '''
def padding_mask(lengths, max_length):
    return np.ones(2**40) > 0  # numpy raises its own subclass of MemoryError
'''


class _Listener:
    """A TCP server on the grader's loopback: learner code must never reach it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                self.received.append(conn.recv(100) or b"(connected)")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@dataclass
class Batch:
    out: Path
    level: str
    runs: list[int]
    seconds: float
    grades: dict[str, dict[str, dict]] = field(default_factory=dict)
    csv_rows: list[dict[str, str]] = field(default_factory=list)
    received: list[bytes] = field(default_factory=list)

    def grade(self, learner: str, exercise: str) -> dict:
        return self.grades[learner][exercise]


def run_cli(submissions: list[Path], out: Path, *extra: str, attempts: int = 4) -> list[int]:
    """Run `lessonlib grade` until it finishes (a run killed by learner code is re-run)."""
    codes = []
    command = [sys.executable, "-m", "lessonlib.cli", "grade", *map(str, submissions), "--out", str(out),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), "--quiet", *extra]
    for _ in range(attempts):
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        codes.append(result.returncode)
        if result.returncode == 0:
            return codes
        assert result.returncode < 0 or result.returncode == 137, result.stderr  # only a kill may stop it
    raise AssertionError(f"lessonlib grade never finished: exit codes {codes}")


def load(out: Path) -> tuple[dict, list[dict[str, str]]]:
    data = json.loads((out / "grades.json").read_text())
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return data, rows


# Level limits refuses graded work where learner code would run as the gradebook's owner: an
# ordinary user grading (test_grading_secrets.py shows the refusal).
LIMITS_REFUSED = os.geteuid() != 0 and (FORCED == "limits" or (shutil.which("bwrap") is None and not REQUIRED))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Batch:
    if LIMITS_REFUSED:
        pytest.skip("level limits refuses an ordinary user's graded work: learner code would own the gradebook")
    root = tmp_path_factory.mktemp("hostile")
    subs, out = root / "submissions", root / "gradebook"
    listener = _Listener()
    correct_learner(subs / "alice")
    stub_learner(subs / "bob")
    learners = {
        "loop": masking({"masked_softmax": LOOP}),
        "sleeper": masking({"masked_softmax": SLEEP}),
        "hoarder": masking({"masked_softmax": MEMORY}),
        "exiter": masking({"masked_softmax": SYS_EXIT, "causal_mask": OS_EXIT, "padding_mask": WRONG_PADDING}),
        "killer": masking({"masked_softmax": KILL_PARENT}),
        **({"bomber": masking({"masked_softmax": FORK_BOMB})} if BOMB_SAFE else {}),
        "malformed": {"02_masking.ipynb": '{"cells": [{"cell_type": "code", "source": ',
                      "01_scaling.ipynb": notebook("01_scaling.ipynb")},
        "deleter": masking(delete=("masked_softmax",), answers={"causal_mask": RENAMED}),
        "importer": masking({"masked_softmax": RAISES_ON_IMPORT}),
        "printer": masking({"masked_softmax": HUGE_PRINT}),
        "patcher": masking({"masked_softmax": MONKEYPATCH}),
        "borrower": masking({"masked_softmax": USES_LESSONLIB, "causal_mask": IMPORTS_LESSONLIB.replace(
            "masked_softmax", "causal_mask").replace("lessonlib.attention", "lessonlib.masks")}),
        "reader": masking({"masked_softmax": reads_files(
            [str(SOLUTIONS / "02_masking.ipynb"), str(subs / "alice" / "02_masking.ipynb"),
             str(out.parent / "gradebook.db")])}),
        "networker": masking({"masked_softmax": connects(listener.port)}),
        "enormous": masking({"masked_softmax": ENORMOUS}),
        "writer": masking({"masked_softmax": writes_into(out)}),
        "artist": masking({"causal_mask": ANSWER_THAT_DRAWS}, extra=DRAWING_CELLS),
        "forger": masking({"masked_softmax": FORGED_PROCESS_LIMIT, "causal_mask": FORGED_MEMORY,
                           "padding_mask": NUMPY_MEMORY}),
    }
    for name, notebooks in learners.items():
        write_learner(subs / name, notebooks)
    start = time.perf_counter()
    try:
        forced = ["--isolation", FORCED] if FORCED else []
        codes = run_cli(sorted(subs.iterdir()), out, "--workers", "2", *forced)
    finally:
        listener.close()
    data, rows = load(out)
    result = Batch(out, data["isolation"]["level"], codes, time.perf_counter() - start, csv_rows=rows,
                   received=listener.received)
    for learner in data["learners"]:
        result.grades[learner["learner"]] = {e["exercise"]: e for e in learner["exercises"]}
    return result


def assert_others_pass(batch: Batch, learner: str, *attacked: str) -> None:
    """The learner's other masking exercises were graded as usual (all correct)."""
    for exercise in MASKING:
        if exercise not in attacked:
            grade = batch.grade(learner, exercise)
            assert grade["status"] == "passed", (learner, exercise, grade["status"], grade["reason"])
            assert grade["points"] == grade["max_points"]


ROWS_PER_LEARNER = len(EXERCISES) + len(MANUAL_QUESTIONS)


def test_the_batch_finishes_with_every_learner_and_exercise(batch: Batch) -> None:
    assert batch.runs[-1] == 0
    n = 20 if BOMB_SAFE else 19
    assert len(batch.grades) == n
    assert len(batch.csv_rows) == n * ROWS_PER_LEARNER  # every exercise and written question, each
    assert {row["status"] for row in batch.csv_rows} >= {"passed", "not_attempted", "timeout", "exited"}
    assert sorted(p.name for p in (batch.out / "feedback").iterdir()) == sorted(
        f"{n}.{kind}" for n in batch.grades for kind in ("html", "md"))


def test_innocent_learners_lose_nothing(batch: Batch) -> None:
    alice = batch.grades["alice"]
    auto = [g for g in alice.values() if g["kind"] == "auto"]
    assert all(g["status"] == "passed" and g["points"] == g["max_points"] for g in auto)
    assert alice["q2_attention_not_causal"]["status"] == "needs_manual_grading"
    assert all(g["status"] == "not_attempted" for g in batch.grades["bob"].values())
    summary = (batch.out / "summary.csv").read_text().splitlines()
    auto, manual = sum(e.points for e in EXERCISES.values()), sum(q.points for q in MANUAL_QUESTIONS.values())
    n, total = len(EXERCISES), auto + manual
    assert summary[1].startswith(f"alice,alice,{auto:g},{total:g},{100 * auto / total:.1f},{manual:g},{n},{n},,")


def test_infinite_loop_is_stopped_by_the_cpu_limit(batch: Batch) -> None:
    grade = batch.grade("loop", "masked_softmax")
    assert grade["status"] == "timeout" and grade["points"] == 0
    assert "CPU time" in grade["reason"] or "still running" in grade["reason"]
    assert_others_pass(batch, "loop", "masked_softmax")


def test_sleeping_answer_is_stopped_by_the_clock(batch: Batch) -> None:
    grade = batch.grade("sleeper", "masked_softmax")
    assert grade["status"] == "timeout"
    assert "still running after 4 s" in grade["reason"]
    assert_others_pass(batch, "sleeper", "masked_softmax")


def test_memory_exhaustion_hits_the_memory_limit(batch: Batch) -> None:
    grade = batch.grade("hoarder", "masked_softmax")
    assert grade["status"] == "memory"
    assert f"{MEMORY_MB} MB" in grade["reason"] and "MemoryError" in grade["reason"]
    assert_others_pass(batch, "hoarder", "masked_softmax")


def test_sys_exit_and_os_exit_cost_only_their_exercise(batch: Batch) -> None:
    sys_exit, os_exit = batch.grade("exiter", "masked_softmax"), batch.grade("exiter", "causal_mask")
    assert sys_exit["status"] == "exited" and "sys.exit()" in sys_exit["reason"]
    assert os_exit["status"] == "exited" and "os._exit()" in os_exit["reason"]
    # the next exercise still runs, and a wrong answer after a dead process is not marked passed
    padding = batch.grade("exiter", "padding_mask")
    assert padding["status"] == "failed" and padding["points"] == 0
    assert padding["diagnoses"][0]["name"] == "padding_inverted"


def test_killing_the_grading_process_is_refused(batch: Batch) -> None:
    """The kills are refused (another user at level limits; outside the exercise's own processes,
    where Landlock scopes signals) or do nothing (the worker is PID 1 of the sandbox): the run
    finishes, and the answer passes unless a refused kill raised in it."""
    grade = batch.grade("killer", "masked_softmax")
    assert batch.runs == [0]
    if grade["status"] != "passed":
        assert grade["status"] == "failed" and "PermissionError" in json.dumps(grade), grade["reason"]
    assert_others_pass(batch, "killer", "masked_softmax")


def test_fork_bomb_is_held_by_the_process_limit(batch: Batch) -> None:
    if not BOMB_SAFE:
        pytest.skip("forced level 'limits' as root without a control group: the kernel does not apply the "
                    "process limit to root")
    grade = batch.grade("bomber", "masked_softmax")
    assert grade["status"] in ("process_limit", "timeout"), grade["reason"]
    assert_others_pass(batch, "bomber", "masked_softmax")
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _started_by(p, batch.out)]
    assert not leftovers, "processes started by learner code outlived the batch"


def _started_by(proc: Path, out: Path) -> bool:
    """True for a process forked from one of this batch's workers (their command names its job folder)."""
    try:
        return str(out).encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_malformed_json_costs_only_that_notebook(batch: Batch) -> None:
    for exercise in MASKING:
        grade = batch.grade("malformed", exercise)
        assert grade["status"] == "malformed" and "not valid JSON" in grade["reason"]
    assert batch.grade("malformed", "scaled_dot_product_attention")["status"] == "passed"
    assert batch.grade("malformed", "q1_context")["status"] == "passed"


def test_deleted_answer_cell(batch: Batch) -> None:
    grade = batch.grade("deleter", "masked_softmax")
    assert grade["status"] == "missing_answer" and "missing" in grade["reason"]
    assert batch.grade("deleter", "padding_mask")["status"] == "passed"


def test_renamed_answer(batch: Batch) -> None:
    grade = batch.grade("deleter", "causal_mask")
    assert grade["status"] == "missing_answer"
    assert "no longer defines `causal_mask`" in grade["reason"] and "causal_mask_v2" in grade["reason"]


def test_answer_that_raises_on_import(batch: Batch) -> None:
    grade = batch.grade("importer", "masked_softmax")
    assert grade["status"] == "cell_error"
    assert "ModuleNotFoundError" in grade["reason"] and "never defined" in grade["reason"]
    assert_others_pass(batch, "importer", "masked_softmax")


def test_huge_printed_output_is_discarded_and_costs_nothing(batch: Batch) -> None:
    grade = batch.grade("printer", "masked_softmax")
    assert grade["status"] == "passed" and grade["points"] == grade["max_points"]
    assert any("printed" in note for note in grade["notes"])
    assert (batch.out / "grades.json").stat().st_size < 2_000_000
    assert_others_pass(batch, "printer", "masked_softmax")


def test_monkeypatching_numpy_and_lessonlib_does_not_pass_checks(batch: Batch) -> None:
    grade = batch.grade("patcher", "masked_softmax")
    assert grade["status"] == "failed" and grade["points"] == 0
    assert_others_pass(batch, "patcher", "masked_softmax")


def test_calling_lessonlib_earns_no_points(batch: Batch) -> None:
    for exercise in ("masked_softmax", "causal_mask"):
        grade = batch.grade("borrower", exercise)
        assert grade["status"] == "uses_lessonlib" and grade["points"] == 0
        assert "course's own implementation" in grade["reason"]
    assert batch.grade("borrower", "padding_mask")["status"] == "passed"


def test_an_error_that_only_looks_like_a_limit_is_an_ordinary_error(batch: Batch) -> None:
    for exercise, looks_like in (("masked_softmax", "[Errno 11]"), ("causal_mask", "MemoryError")):
        grade = batch.grade("forger", exercise)
        assert grade["status"] == "failed" and grade["points"] == 0, grade["reason"]
        assert looks_like in grade["diagnosis"]  # quoted as what the answer raised
    grade = batch.grade("forger", "padding_mask")  # a real MemoryError, of a class numpy derives from it
    assert grade["status"] == "memory" and "Unable to allocate" in grade["reason"]


def _needs_sandbox(batch: Batch) -> None:
    if batch.level != "bubblewrap":
        assert not REQUIRED, f"REQUIRE_BUBBLEWRAP=1 but the batch ran at level {batch.level!r}"
        pytest.skip(f"the batch ran at isolation level {batch.level!r}: hiding files and the network needs "
                    "bubblewrap (see docs/instructor-guide.md)")


def test_reading_solutions_from_disk_fails(batch: Batch) -> None:
    _needs_sandbox(batch)
    grade = batch.grade("reader", "masked_softmax")
    assert grade["status"] == "failed" and grade["points"] == 0
    assert "FileNotFoundError" in grade["diagnosis"] or "PermissionError" in grade["diagnosis"]
    assert_others_pass(batch, "reader", "masked_softmax")


def test_opening_a_network_connection_fails(batch: Batch) -> None:
    _needs_sandbox(batch)
    grade = batch.grade("networker", "masked_softmax")
    assert grade["status"] == "failed", grade["reason"]
    assert "ConnectionRefusedError" in grade["diagnosis"] or "unreachable" in grade["diagnosis"]
    assert batch.received == []
    assert_others_pass(batch, "networker", "masked_softmax")


def test_returning_an_enormous_array(batch: Batch) -> None:
    grade = batch.grade("enormous", "masked_softmax")
    assert grade["status"] == "result_too_large" and "more than the grader accepts" in grade["reason"]
    assert_others_pass(batch, "enormous", "masked_softmax")


def test_writing_into_the_output_folder(batch: Batch) -> None:
    # whatever the level, the gradebook is rebuilt from the grader's own results at the end
    assert batch.grade("alice", "masked_softmax")["status"] == "passed"
    assert "mallory" not in (batch.out / "grades.csv").read_text()
    assert "mallory" not in (batch.out / "summary.csv").read_text()
    # the output folder is the grader's alone: in the sandbox it is not there, at level limits
    # learner code runs as nobody (the grader is root), and the folder is 0700
    grade = batch.grade("writer", "masked_softmax")
    assert grade["status"] == "failed" and "Error" in grade["diagnosis"]
    assert not (batch.out / "planted.txt").exists()
    assert not (batch.out / "learners").exists()  # nothing planted (and the grader keeps no results there)


def test_drawing_and_widget_cells_neither_run_nor_hang(batch: Batch) -> None:
    for exercise in MASKING:
        assert batch.grade("artist", exercise)["status"] == "passed"


def test_feedback_copies_the_written_answer_for_manual_grading(batch: Batch) -> None:
    text = (batch.out / "feedback" / "alice.md").read_text()
    assert "**Needs manual grading**" in text and any("**Model answer.**" in b for b in view(text).code_blocks)
    loop = (batch.out / "feedback" / "loop.md").read_text()
    assert "masked_softmax: 0 / 3 points, stopped: time limit" in loop


def test_the_isolation_level_is_recorded(batch: Batch) -> None:
    data = json.loads((batch.out / "grades.json").read_text())
    assert data["isolation"]["level"] == batch.level
    if REQUIRED:
        assert batch.level == "bubblewrap", data["isolation"]["reason"]
    if batch.level == "bubblewrap":
        verified = data["isolation"]["verified"]
        assert verified["runs_as"] == "nobody" if os.geteuid() == 0 else "user namespace" in verified["runs_as"]
        assert not any(verified[k] for k in ("course_files_readable", "output_folder_readable", "home_folder_readable",
                                             "network",
                                             "output_folder_writable", "can_signal_grader"))
    else:
        assert data["isolation"]["warning"].startswith("WARNING: learner code is NOT isolated")
    assert {lr["isolation"] for lr in data["learners"]} == {batch.level}  # recorded per learner
    with open(batch.out / "summary.csv", newline="") as f:
        assert {row["isolation"] for row in csv.DictReader(f)} == {batch.level}


def test_killing_the_grading_process_at_level_limits_is_refused(tmp_path: Path) -> None:
    """Root's learner code runs as nobody, which cannot kill the grading process: the first run
    finishes. (An ordinary user's learner code could: that level is refused to an ordinary user.)"""
    if os.geteuid() != 0:
        pytest.skip("level limits refuses an ordinary user's graded work (test_grading_secrets.py)")
    if why := sandbox.python_refused_to_nobody():
        pytest.skip(f"level limits is not available here: {why}")
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    correct_learner(subs / "ann")
    write_learner(subs / "killer", masking({"masked_softmax": KILL_PARENT}))
    write_learner(subs / "zoe", masking())
    codes = run_cli(sorted(subs.iterdir()), out, "--workers", "2", "--isolation", "limits")
    assert codes == [0], codes
    grades = {lr["learner"]: {e["exercise"]: e for e in lr["exercises"]} for lr in load(out)[0]["learners"]}
    assert grades["killer"]["masked_softmax"]["status"] not in ("passed", "stopped_grader")
    assert all(g["status"] == "passed" for g in grades["ann"].values() if g["kind"] == "auto")
    assert all(grades["zoe"][e]["status"] == "passed" for e in MASKING)
