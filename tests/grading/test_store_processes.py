"""The course gradebook across processes: one grader at a time, and ``kill -9`` loses nothing committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lessonlib.grading import store

HOLD = """
import sys
from lessonlib.grading import store
gb = store.open_gradebook(sys.argv[1], sys.argv[2], wait=sys.argv[3] == "wait")
print("locked", flush=True)
sys.stdin.readline()  # hold the lock until told (or killed)
gb.close()
"""

WRITE = """
import sys
from lessonlib.grading import records as r, store
gb = store.open_gradebook(sys.argv[1], "lessonlib grade (kill test)")
store.ensure_assignment(gb, "week2", ["02_masking.ipynb"], seed=5)
start = gb.conn.execute("SELECT COUNT(*) FROM learners").fetchone()[0]
for i in range(start, start + 100000):
    with gb.transaction():  # one learner: the learner, the submission, three results, their history
        key = store.register(gb, f"learner{i:05d}").key
        grades = [r.ExerciseGrade("02_masking.ipynb", f"ex{j}", 1.0, 1.0, "passed") for j in range(3)]
        store.record_result(gb, "week2", r.LearnerResult(key, key, "fp", "limits", "t", grades))
        if sys.argv[2] == "open" and i == start + 5:  # a transaction left open, never committed
            for j in range(40):  # 8 MB, more than SQLite's page cache: pages reach the file before COMMIT
                key = store.register(gb, f"uncommitted{j:03d}").key
                store.record_result(gb, "week2", r.LearnerResult(key, key, "fp", "limits", "t", grades,
                                                                 notes=["x" * 200_000]))
            print("open", flush=True)
            sys.stdin.readline()
    print(i, flush=True)  # committed
"""


def _start(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _expect(process: subprocess.Popen, line: str) -> None:
    got = process.stdout.readline().strip()
    if got != line:
        process.kill()
        raise AssertionError(f"expected {line!r} from the child, got {got!r}: {process.stderr.read()[-2000:]}")


# --- one grader at a time --------------------------------------------------------------------------------


def test_a_second_grader_stops_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.db"
    first = _start(HOLD, str(path), "lessonlib grade subs/ --out week2", "no-wait")
    try:
        _expect(first, "locked")
        with pytest.raises(store.GraderBusy) as busy:
            store.open_gradebook(path, "lessonlib grade other/ --out week2")
        message = str(busy.value)
        assert f"process {first.pid}" in message and "lessonlib grade subs/ --out week2" in message
        assert "running since 20" in message and "wait" in message
        assert busy.value.holder["pid"] == first.pid
        with store.open_gradebook(path, "read", lock=False) as reader:  # reading needs no lock
            assert reader.conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    finally:
        first.communicate("\n", timeout=60)
    assert first.returncode == 0
    store.open_gradebook(path, "lessonlib grade other/ --out week2").close()  # free again


def test_a_waiting_grader_proceeds_when_the_first_ends(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.db"
    first = _start(HOLD, str(path), "first", "no-wait")
    _expect(first, "locked")
    second = _start(HOLD, str(path), "second", "wait")
    try:
        time.sleep(1.5)
        assert second.poll() is None  # still waiting: it has printed nothing
        with pytest.raises(store.GraderBusy, match="after waiting 0.5 s"):
            store.open_gradebook(path, "third", wait=True, timeout=0.5)
        first.communicate("\n", timeout=60)
        _expect(second, "locked")
    finally:
        second.communicate("\n", timeout=60)
        first.kill()
    assert second.returncode == 0


def test_a_dead_graders_lock_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.db"
    first = _start(HOLD, str(path), "killed grader", "no-wait")
    _expect(first, "locked")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=60)
    assert "killed grader" in store.lock.lock_path(path).read_text()  # its name is still in the file...
    with store.open_gradebook(path, "next grader") as gb:  # ...but the kernel released its lock
        assert gb.lock is not None and gb.lock.holder["command"] == "next grader"


# --- kill -9 ---------------------------------------------------------------------------------------------


def _check(path: Path) -> list[str]:
    """The learners in the gradebook, after checking that each transaction is there whole."""
    conn = store.open_gradebook(path, "check", lock=False).conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    keys = [row[0] for row in conn.execute("SELECT key FROM learners ORDER BY key")]
    per_learner = conn.execute(
        "SELECT l.key, (SELECT COUNT(*) FROM results r WHERE r.learner_id = l.id), "
        "(SELECT COUNT(*) FROM history h WHERE h.learner_id = l.id) FROM learners l").fetchall()
    assert all(tuple(row[1:]) == (3, 4) for row in per_learner), per_learner  # 3 results; learner + 3 results
    conn.close()
    return keys


@pytest.mark.parametrize("commits", [3, 17, 40])
def test_kill_9_during_writes_keeps_every_commit_and_no_half(tmp_path: Path, commits: int) -> None:
    path = tmp_path / "gradebook.db"
    writer = _start(WRITE, str(path), "loop")
    printed = []
    while len(printed) < commits:
        line = writer.stdout.readline()
        assert line, writer.stderr.read()[-2000:]
        printed.append(int(line))
    os.kill(writer.pid, signal.SIGKILL)  # somewhere in the next transaction (or between two)
    writer.wait(timeout=60)
    keys = _check(path)
    reported = {f"learner{i:05d}" for i in printed}
    assert reported <= set(keys)  # every commit the writer saw is there
    assert len(keys) <= len(reported) + 1  # at most one more: committed, killed before it said so


def test_kill_9_inside_an_open_transaction_leaves_none_of_it(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.db"
    writer = _start(WRITE, str(path), "open")
    _expect(writer, "0")
    for i in range(1, 5):
        _expect(writer, str(i))
    _expect(writer, "open")  # 40 learners and 8 MB written inside a transaction that is never committed
    assert store.lock.lock_path(path).exists()
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=60)
    keys = _check(path)
    assert keys == [f"learner{i:05d}" for i in range(5)]  # the five commits, nothing of the sixth
    with store.open_gradebook(path, "lessonlib grade (after the kill)") as gb:  # and it can be written again
        assert store.register(gb, "after").key == "after"
