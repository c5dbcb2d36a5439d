"""What learner code can hold on the host, and for how long: memory per exercise, and nothing
outliving the grader.

Each batch runs `lessonlib grade` through the command line in a subprocess, as an instructor
would. The lifetime tests send Ctrl-C (SIGINT to the grader's process group) or kill -9 to the
grader while learners' answers sleep with forked processes around them, and check that none of
the processes started under the grader (each known by its pid and start time) is alive 5 s
later. The memory test samples, from outside, the memory of every process under the grader
while an answer's forked processes each touch more than the limit allows in total.

Each runs at level bubblewrap (skipped without bubblewrap, a failure with REQUIRE_BUBBLEWRAP=1,
as in CI) and at level limits. CI runs this file as root and as an ordinary user; the limit that
holds memory differs (a control group, or no extra process at all), and the tests read which
from grades.json.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.measure import alive, descendants, memory_kb, process_table
from helpers.submissions import masking, write_learner

from lessonlib.grading.isolation import cgroups, sandbox, wire, workers
from lessonlib.grading.isolation.sandbox import Limits

REQUIRED = os.environ.get("REQUIRE_BUBBLEWRAP") == "1"
TIMEOUT = 1.5  # CPU seconds per exercise; the clock allows 4 s
MEMORY_MB = 512

SLEEPER = '''
import os
import time

def masked_softmax(scores, allowed):
    for _ in range(3):
        try:
            if os.fork() == 0:
                os.setsid()
                time.sleep(10_000)
                os._exit(0)
        except OSError:
            pass  # no process allowed: the answer sleeps alone
    time.sleep(10_000)
'''

HOARDERS = '''
import os
import time

def masked_softmax(scores, allowed):
    for _ in range(4):
        if os.fork() == 0:
            hoard = b"x" * (300 * 2**20)  # written, so resident: 4 x 300 MB, more than 512 MB together
            time.sleep(10_000)
            os._exit(0)
    time.sleep(10_000)
'''


def _level(level: str, *, graded: bool = True) -> list[str]:
    """``--isolation level``, or a skip where it is not to be had (``graded``: for ``lessonlib grade``,
    which refuses level limits to an ordinary user; a worker started by hand runs there)."""
    if level == "bubblewrap" and sandbox.bwrap() is None:
        assert not REQUIRED, "REQUIRE_BUBBLEWRAP=1 but bwrap is not installed"
        pytest.skip("bubblewrap is not installed (Debian/Ubuntu: apt install bubblewrap)")
    if level == "limits" and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")
    if level == "limits" and graded and os.geteuid() != 0:
        pytest.skip("level limits refuses an ordinary user's graded work: learner code would own the gradebook")
    return ["--isolation", level]


def _command(subs: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lessonlib.cli", "grade", str(subs), "--out", str(out), "--quiet",
            "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), *extra]


def _forks_allowed() -> bool:
    """Whether learner code may start processes here: only inside a control group (see workers.held)."""
    return bool(cgroups.detect().kind)


def _tasks_running(out: Path) -> int:
    """Workers whose exercise has started (a ``started`` record in their worker.out)."""
    work = out / ".grading" / "work"
    outs = [p / sandbox.OUT_FILE for p in work.glob("*")] if work.is_dir() else []
    return sum(1 for p in outs if p.exists() and b'"started"' in p.read_bytes())


@pytest.mark.parametrize("level", ["bubblewrap", "limits"])
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_no_sandbox_process_outlives_the_grader(tmp_path: Path, level: str, how: str) -> None:
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    for name in ("ann", "ben", "cat"):
        write_learner(subs / name, masking({"masked_softmax": SLEEPER}))
    # As from a terminal: SIGINT at its default, even when these tests were started in the background
    # (a shell without job control starts background commands with SIGINT ignored, and a child keeps that).
    grader = subprocess.Popen(_command(subs, out, "--workers", "2", *_level(level)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen: dict[int, str] = {}
    # per worker: bubblewrap (at that level), the worker, the exercise's process, and its sleepers
    expected = 2 * (int(level == "bubblewrap") + 2 + 3 * _forks_allowed())
    try:
        deadline = time.monotonic() + 120
        while len(seen) < expected and grader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = descendants(grader.pid) if _tasks_running(out) == 2 else {}
        assert grader.poll() is None, grader.communicate()[0].decode()[-2000:]
        assert len(seen) >= expected, f"{len(seen)} processes under the grader, expected {expected}"
        if how == "SIGINT":  # as Ctrl-C in a terminal: the grader's whole process group
            os.killpg(grader.pid, signal.SIGINT)
        else:
            grader.kill()
        grader.wait(timeout=30)
        time.sleep(5)
        left = {pid: start for pid, start in seen.items() if alive(pid, start)}
        assert not left, f"{len(left)} of {len(seen)} processes outlived the grader by 5 s ({how})"
        if how == "SIGINT":
            assert grader.returncode == 130, grader.communicate()[0].decode()[-2000:]
    finally:
        for pid, start in seen.items():  # never leave them behind, whatever failed
            if alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
        cgroups.sweep(cgroups.detect().parents)  # the empty groups a killed grader leaves, as its next run does


SAMPLING_SLACK_MB = 16  # what reading the processes one by one may count twice (the bound is 832 MB)


@pytest.mark.parametrize("level", ["bubblewrap", "limits"])
def test_forked_processes_together_are_held_within_the_memory_limit(tmp_path: Path, level: str) -> None:
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    write_learner(subs / "hoarder", masking({"masked_softmax": HOARDERS}))
    grader = subprocess.Popen(_command(subs, out, "--workers", "1", *_level(level)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    peak = 0
    while grader.poll() is None:
        before = descendants(grader.pid)
        first, second = ({pid: memory_kb(pid) for pid in before} for _ in range(2))  # two passes
        if descendants(grader.pid) == before:  # none ended or started while they were read one by one
            # What each process held in both passes was held by all of them at once: a process read
            # before it was killed, while a sibling then grew into the memory it freed, is not
            # counted twice (a killed process stays listed until it is reaped, holding nothing).
            peak = max(peak, sum(min(first[pid], second[pid]) for pid in before) // 1024)
        time.sleep(0.05)
    assert grader.returncode == 0, grader.communicate()[0].decode()[-2000:]
    data = json.loads((out / "grades.json").read_text())
    limits = data["isolation"]["limits"]
    grade = next(g for g in data["learners"][0]["exercises"] if g["exercise"] == "masked_softmax")
    assert limits["host_memory_mb"] is not None, limits
    # The processes are read one after another, not at one instant: a reading counts only when the
    # same processes ran before and after it, and each counts what it held in both of two passes;
    # what is left is a few MB of pages changing hands as they are read.
    assert peak <= limits["host_memory_mb"] + SAMPLING_SLACK_MB, f"{peak} MB held at once, more than {limits}"
    if limits["memory"].startswith("cgroup"):
        assert grade["status"] == "memory", grade["reason"]
        assert f"memory limit ({MEMORY_MB} MB" in grade["reason"]
    else:  # no control group: learner code may start no process, so one process's limit bounds the exercise
        assert limits["extra_processes"] == 0
        assert grade["status"] == "process_limit", grade["reason"]


def test_without_a_control_group_learner_code_may_start_no_process() -> None:
    limits = Limits(memory_mb=300)
    none = cgroups.Plan(reason="none here")
    contained = workers.contained_limits(limits, none)
    assert contained.processes == 0 and contained.memory_mb == 300
    record = workers.held("bubblewrap", contained, none, could_fork=False)
    assert record["memory"] == "per process" and record["extra_processes"] == 0
    assert record["host_memory_mb"] == 300 + workers.WORKER_MB + 3 * limits.scratch_mb
    assert "tmpfs" in record["margin"] and "none here" in record["how"]
    unbounded = workers.held("limits", contained, none, could_fork=True)  # root is exempt from RLIMIT_NPROC
    assert unbounded["host_memory_mb"] is None and unbounded["processes"] == "not limited"
    group = cgroups.Plan("cgroup v2", "a group per worker", (Path("/nonexistent"),))
    assert workers.contained_limits(limits, group) == limits
    assert workers.held("limits", limits, group, could_fork=True)["host_memory_mb"] == 300 + workers.WORKER_MB


def test_a_systemd_scope_gets_the_limits_on_its_command_line() -> None:
    plan = cgroups.Plan("cgroup v2 (systemd scope)", "a scope per worker",
                        systemd=("systemd-run", "--user", "--scope", "--quiet", "--collect"))
    group = cgroups.new_group(plan, 3, 768 * 2**20, 36)
    assert group is not None
    prefix = group.prefix()
    assert prefix[:5] == list(plan.systemd) and prefix[-1] == "--"
    assert f"--unit=lessonlib-{os.getpid()}-3" in prefix
    assert {"MemoryMax=805306368", "MemorySwapMax=0", "TasksMax=36"} <= set(prefix)
    assert cgroups.new_group(cgroups.Plan(), 1, 1, 1) is None


def test_a_control_group_holds_kills_and_is_removed() -> None:
    plan = cgroups.detect()
    if not plan.kind or plan.systemd:
        pytest.skip(f"no control group this test can create here: {plan.reason}")
    group = cgroups.new_group(plan, 999, 64 * 2**20, 4)
    assert group is not None
    group.create()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        group.adopt([sleeper.pid])
        (events,) = group.open_events()  # no measured group: the worker's own counter alone
        assert "oom_kill 0" in os.pread(events, 4096, 0).decode().splitlines()
        os.close(events)
        forks = "read go; for i in 1 2 3 4 5 6; do sleep 60 & done; wait"  # forks once it is in the group
        shell = subprocess.Popen(["sh", "-c", forks], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        group.adopt([shell.pid])
        assert shell.stdin is not None
        shell.stdin.write(b"go\n")
        shell.stdin.close()
        time.sleep(0.3)
        assert len(cgroups._members(group.folders[0])) <= 4  # pids.max: the shell could not start six
        group.kill()
        assert sleeper.wait(timeout=5) == -signal.SIGKILL
        assert shell.wait(timeout=5) in (-signal.SIGKILL, 2)  # killed, or gave up when a fork failed
        assert cgroups._members(group.folders[0]) == []
    finally:
        sleeper.kill()
        group.kill()
        group.remove()
    assert all(not f.exists() for f in group.folders) and group.folders == []


def test_a_measured_child_joins_a_group_of_its_own_and_its_peak_is_read_there() -> None:
    """The grading process opens the measured group's files; a process given the descriptors (as
    the zygote's child is) joins by writing 0 and its peak is read through the other. The peak
    counts what it allocated after joining, whatever it does to its own counters."""
    plan = cgroups.detect()
    if not plan.peak:
        pytest.skip(f"no control group with a peak memory file here: {plan.reason or plan.kind}")
    group = cgroups.new_group(plan, 998, 256 * 2**20, 8, measured=2)
    assert group is not None
    group.create()
    try:
        assert [f.name for f in group.measured_groups()] == ["measured-0", "measured-1"]
        join, peak, *_ = group.open_measured()
        hoard = ("import os, sys\nos.write(int(sys.argv[1]), b'0')\nos.close(int(sys.argv[1]))\n"
                 "x = bytearray(64 * 2**20)\nx[::4096] = b'x' * len(x[::4096])")
        done = subprocess.run([sys.executable, "-c", hoard, str(join)], pass_fds=[join], timeout=60)
        assert done.returncode == 0
        assert int(os.pread(peak, 64, 0)) >= 64 * 2**20
        os.close(join)
        os.close(peak)
    finally:
        group.kill()
        group.remove()
    assert group.folders == [] and group.inner == []


def test_the_zygote_reads_a_measured_child_s_peak_from_its_own_group(tmp_path: Path) -> None:
    """A task whose cases trace memory: the worker gets a measured group per such child, the child
    joins it before learner code runs, and the zygote reports that group's peak (64 MB held here)."""
    plan = cgroups.detect()
    if not plan.peak:
        pytest.skip(f"no control group with a peak memory file here: {plan.reason or plan.kind}")
    _level("limits", graded=False)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    limits = workers.contained_limits(Limits(cpu_seconds=10, memory_mb=512), plan)
    hoard = "def masked_softmax():\n    x = bytearray(64 * 2**20)\n    x[::4096] = b'x' * len(x[::4096])\n    return 0"
    case = {"id": "public-1", "call": True, "trace_memory": True, "args": wire.encode_args((), [])}
    task = {"key": "02_masking--masked_softmax", "exercise": "masked_softmax", "cases": [case],
            "program": [{"label": "answer", "filename": "<answer>", "source": hoard}]}
    job = {**workers.job_head("limits", limits.for_job(sandbox.nproc_base("limits", 1))), "tasks": [task]}
    workers.write_job(job_dir, job)
    assert workers.measured_children(job) == 1
    worker = workers.start_worker(job_dir, "limits", limits, protected=[], plan=plan, measured=1)
    try:
        worker.process.wait(timeout=60)
    finally:
        workers.stop_worker(worker)
    (result,) = [h for h, _ in workers.read_records(job_dir, limits) if h.get("kind") == "result"]
    assert result["fate"]["group_peak_kb"] >= 64 * 1024, result["fate"]


def test_a_worker_whose_lifeline_breaks_ends_what_it_started(tmp_path: Path) -> None:
    """kill -9 of the grader, seen from the worker: the lifeline breaks, nothing else happens."""
    _level("limits", graded=False)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    limits = workers.contained_limits(Limits(cpu_seconds=30), cgroups.Plan())
    task = {"key": "02_masking--masked_softmax", "exercise": "masked_softmax", "cases": [],
            "program": [{"label": "answer", "filename": "<answer>", "source": "import time\ntime.sleep(10_000)"}]}
    job = {**workers.job_head("limits", limits.for_job(sandbox.nproc_base("limits", 1))), "tasks": [task]}
    workers.write_job(job_dir, job)
    worker = workers.start_worker(job_dir, "limits", limits, protected=[], plan=cgroups.Plan())
    try:
        deadline = time.monotonic() + 30
        while b'"started"' not in (job_dir / sandbox.OUT_FILE).read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        seen = descendants(worker.process.pid) | {worker.process.pid: process_table()[worker.process.pid][1]}
        assert len(seen) == 3, seen  # the worker, its keeper and the exercise's process
        worker.lifeline.close()  # what the kernel does when the grader dies
        assert worker.process.wait(timeout=5) == 75
        time.sleep(0.2)
        assert not [pid for pid, start in seen.items() if alive(pid, start)]
    finally:
        workers.stop_worker(worker)


def test_the_memory_limit_that_held_is_recorded_with_the_isolation(tmp_path: Path) -> None:
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    write_learner(subs / "ann", masking())
    level = _level("bubblewrap" if shutil.which("bwrap") or REQUIRED else "limits")
    done = subprocess.run(_command(subs, out, *level), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    limits = json.loads((out / "grades.json").read_text())["isolation"]["limits"]
    plan = cgroups.detect()
    assert limits["memory"] == (plan.kind or "per process")
    assert limits["extra_processes"] == (32 if plan.kind else 0)
    assert limits["margin_mb"] == workers.margin_mb(level[1], Limits())


def test_an_exercise_that_sleeps_holds_the_clock_once(tmp_path: Path) -> None:
    """The public and the hidden cases share the exercise's time on the clock: when the public
    child sleeps past it, the hidden child is never started (and ends as the public one did)."""
    _level("limits", graded=False)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    limits = workers.contained_limits(Limits(cpu_seconds=0.5), cgroups.Plan())
    task = {"key": "02_masking--masked_softmax", "exercise": "masked_softmax", "cases": [], "hidden": True,
            "hidden_memory": False,
            "program": [{"label": "answer", "filename": "<answer>", "source": "import time\ntime.sleep(10_000)"}]}
    job = {**workers.job_head("limits", limits.for_job(sandbox.nproc_base("limits", 1))), "tasks": [task]}
    workers.write_job(job_dir, job, secrets=workers.secret_part(job["limits"], hidden={"masked_softmax": []}))
    worker = workers.start_worker(job_dir, "limits", limits, protected=[], plan=cgroups.Plan())
    try:
        worker.process.wait(timeout=60)
    finally:
        workers.stop_worker(worker)
    (result,) = [h for h, _ in workers.read_records(job_dir, limits) if h.get("kind") == "result"]
    assert result["fate"]["timed_out"] == "wall"
    assert result["hidden_fate"]["not_started"] is True and result["hidden_fate"]["timed_out"] == "wall"
