"""Jobs and workers, from the grading process: the job file, memory and processes per exercise,
starting and stopping a worker, and reading back its records.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lessonlib.grading.isolation import cgroups, syscalls, wire
from lessonlib.grading.isolation.sandbox import (
    JOB_FILE,
    OUT_FILE,
    PER_WORKER,
    IsolationError,
    Limits,
    launch,
    worker_env,
)


def kernel_guard() -> dict[str, Any]:
    """What each child installs before learner code runs (``syscalls.build``: the seccomp filters and
    the call that joins a fresh session keyring). Raises IsolationError where it cannot be built:
    learner code never runs without it, at either level."""
    try:
        return syscalls.build()
    except syscalls.FilterError as exc:
        raise IsolationError(str(exc)) from None


def job_head(level: str, limits: dict[str, Any], *, solo: bool = False) -> dict[str, Any]:
    """What every job starts with: the level, the limits (``Limits.for_job``), the kernel guard
    each child installs, and the grading process's pid; ``tasks`` (or ``probe``) follow."""
    return {"version": 2, "grader_pid": os.getpid(), "level": level, "solo": solo, "tasks": [],
            "limits": limits, "kernel": kernel_guard()}


def secret_part(limits: dict[str, Any], probes: dict[str, str] | None = None,
                hidden: dict[str, list[dict[str, Any]]] | None = None, arrays: int = 0) -> dict[str, Any]:
    """The head of the job that only the worker's keeper reads: the probes' descriptions by handle,
    each exercise's hidden cases (their arrays follow as ``arrays`` ``.npy`` frames), and the limits
    the keeper needs."""
    return {"probes": probes or {}, "hidden": hidden or {}, "arrays": arrays,
            "array_bytes": limits["array_bytes"], "memory_bytes": limits["memory_bytes"]}


def write_job(job_dir: Path, job: dict[str, Any], arrays: Sequence[bytes] = (), *,
              secrets: dict[str, Any] | None = None, secret_arrays: Sequence[bytes] = ()) -> None:
    """The worker's stdin: the secret part (a JSON frame and its arrays, read by the keeper alone),
    then the job as one JSON frame, then the public inputs' ``.npy`` frames."""
    path = job_dir / JOB_FILE
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(wire.json_frame(secrets or secret_part(job["limits"])))
        f.write(b"".join(secret_arrays))
        f.write(wire.json_frame(job))
        f.write(b"".join(arrays))


# --- memory and processes per exercise, on the host ----------------------------------------------

WORKER_MB = 128  # the zygote and the keeper: Python, NumPy and the modules imported for learner code


def margin_mb(level: str, limits: Limits) -> int:
    """Host memory a worker may hold beyond ``--memory``: the worker itself and, at level bubblewrap,
    the sandbox's /tmp, /scratch and /dev/shm (tmpfs: their files live in memory)."""
    return WORKER_MB + (3 * limits.scratch_mb if level == "bubblewrap" else 0)


def contained_limits(limits: Limits, plan: cgroups.Plan) -> Limits:
    """The limits a job runs under: without a control group, learner code may start no process, so
    that the address-space limit of its one process bounds the whole exercise."""
    return limits if plan.kind else replace(limits, processes=0)


def held(level: str, limits: Limits, plan: cgroups.Plan, *, could_fork: bool) -> dict[str, Any]:
    """What bounds memory and processes at ``level``, for the gradebook (``limits`` as contained)."""
    margin = margin_mb(level, limits)
    parts = f"{WORKER_MB} MB for the worker itself (the zygote and the keeper)"
    if level == "bubblewrap":
        parts += f" and {3 * limits.scratch_mb} MB for the sandbox's /tmp, /scratch and /dev/shm (tmpfs)"
    record: dict[str, Any] = {
        "memory": plan.kind or "per process", "processes": plan.kind or "per user (RLIMIT_NPROC)",
        "extra_processes": limits.processes, "host_memory_mb": limits.memory_mb + margin,
        "margin_mb": margin, "margin": parts, "how": plan.reason if plan.kind else
        f"no control group ({plan.reason}): learner code may start no process",
        "peak_memory": f"{plan.peak} of a control group of the child's own" if plan.peak else
        "the child's peak resident memory from the kernel (wait4); the child is not dumpable, so it cannot reset it",
    }
    if not plan.kind and could_fork:  # root is exempt from RLIMIT_NPROC (level limits, as root)
        record.update(processes="not limited", host_memory_mb=None,
                      how=f"no control group ({plan.reason}), and learner code could start processes: "
                          "memory is limited per process only")
    return record


# --- starting and stopping a worker -----------------------------------------------------------------


@dataclass
class Worker:
    """A running worker: its process, the grading process's end of its lifeline, its sandbox's PID 1
    (a pidfd, at level bubblewrap) and its control group."""

    process: subprocess.Popen
    lifeline: socket.socket
    group: cgroups.Group | None = None
    sandbox: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _popen(job_dir: Path, command: list[str], cwd: Path, pass_fds: Sequence[int],
           bus: Sequence[tuple[str, str]] = ()) -> subprocess.Popen:
    """Start ``command`` on ``job_dir/job.bin`` in its own session; stdout to worker.out, stderr to worker.log
    (``bus``: what systemd-run needs besides the worker's environment)."""
    log_path = job_dir / "worker.log"
    log_path.touch(mode=0o600)
    out_fd = os.open(job_dir / OUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(job_dir / JOB_FILE, "rb") as stdin, open(out_fd, "wb") as stdout, open(log_path, "ab") as log:
        return subprocess.Popen(
            command, stdin=stdin, stdout=stdout, stderr=log, env={**worker_env(str(cwd)), **dict(bus)},
            cwd=cwd, start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds),
        )


def _read_info(fd: int, timeout: float = 30.0) -> dict[str, Any]:
    """bubblewrap's ``--info-fd`` JSON (empty when bubblewrap ended without writing it)."""
    data = b""
    while select.select([fd], [], [], timeout)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
            return info if isinstance(info, dict) else {}
        except ValueError:
            continue
    return {}


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from /proc."""
    parents = {int(e): _parent_of(int(e)) for e in os.listdir("/proc") if e.isdigit()}
    found = [pid]
    for p in found:
        found += [child for child, parent in parents.items() if parent == p and child not in found]
    return found


def _sandbox_pidfd(info_fd: int, bwrap_pid: int) -> int | None:
    """A pidfd of the sandbox's PID 1 (bubblewrap's child): killing it ends every process in the sandbox."""
    child = _read_info(info_fd).get("child-pid")
    if not isinstance(child, int):
        return None
    try:
        pidfd = os.pidfd_open(child)
    except OSError:
        return None
    if _parent_of(child) != bwrap_pid:  # it ended, and its pid went to another process
        os.close(pidfd)
        return None
    return pidfd


def measured_children(job: dict[str, Any]) -> int:
    """How many of the job's children have their peak memory read: a task's public child when one
    of its cases traces memory, its hidden child when one of the hidden cases does."""
    return sum(any(c.get("trace_memory") for c in task.get("cases", [])) + bool(task.get("hidden_memory"))
               for task in job.get("tasks", []))


def go_message(counters: int, measured: int) -> bytes:
    """What the grading process sends on the lifeline with its descriptors: "go", then how many of
    them are out-of-memory counters; the rest are pairs (join, peak), one per measured group."""
    return b"go " + json.dumps({"counters": counters, "measured": measured}).encode()


def start_worker(job_dir: Path, level: str, limits: Limits, *, protected: Sequence[Path], plan: cgroups.Plan,
                 number: int = 0, probe: bool = False, measured: int = 0) -> Worker:
    """Start the worker on ``job_dir/job.bin``, in its control group when ``plan`` has one (with
    ``measured`` groups of their own inside it, for the children whose peak memory is read).

    The worker waits for word on its lifeline before it runs anything: the grading process first
    puts bubblewrap and the sandbox in the group, then sends "go" with the group's out-of-memory
    counters and the measured groups' descriptors (see :func:`go_message`). Raises CgroupError
    when the group cannot be made or joined (learner code never runs outside it then).
    """
    lifeline, far = socket.socketpair()
    info_r, info_w = os.pipe() if level == "bubblewrap" else (None, None)
    group = cgroups.new_group(plan, number, (limits.memory_mb + margin_mb(level, limits)) * 2**20,
                              limits.processes + PER_WORKER + 1,  # bubblewrap, the zygote, the keeper, the child
                              measured)
    try:
        if group is not None:
            group.create()
        command, cwd = launch(level, limits, job_dir, protected=protected, probe=probe, lifeline=far.fileno(),
                              info_fd=info_w)
        prefix = group.prefix() if group is not None else []
        fds = [far.fileno()] + ([info_w] if info_w is not None else [])
        process = _popen(job_dir, prefix + command, cwd, fds, plan.bus)
    except BaseException:
        lifeline.close()
        if info_r is not None:
            os.close(info_r)
        if group is not None:
            group.remove()
        raise
    finally:
        far.close()
        if info_w is not None:
            os.close(info_w)
    worker = Worker(process, lifeline, group)
    try:
        if info_r is not None:
            worker.sandbox = _sandbox_pidfd(info_r, process.pid)
        sent: list[int] = []
        counters = 0
        try:
            if group is not None:
                group.adopt(_descendants(process.pid))
                sent += group.open_events()
                counters = len(sent)
                sent += group.open_measured()
            with contextlib.suppress(OSError):  # the worker ended already: its log says why
                socket.send_fds(lifeline, [go_message(counters, (len(sent) - counters) // 2)], sent)
        finally:
            for fd in sent:
                os.close(fd)
    except BaseException:
        stop_worker(worker)
        raise
    finally:
        if info_r is not None:
            os.close(info_r)
    return worker


def stop_worker(worker: Worker) -> None:
    """End the worker and everything it started, then remove its control group. Safe to call again,
    and after the worker ended by itself.

    Each way alone would do: the lifeline breaks (the worker kills what it started and exits), the
    sandbox's PID 1 is killed (the kernel ends its PID namespace), the group is killed.
    """
    with worker.lock:
        worker.lifeline.close()
        if worker.sandbox is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(worker.sandbox, signal.SIGKILL)
        if worker.process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                worker.process.kill()
        if worker.group is not None:
            worker.group.kill()
        worker.process.wait()
        if worker.sandbox is not None:
            os.close(worker.sandbox)
            worker.sandbox = None
        if worker.group is not None:
            worker.group.remove()


Part = tuple[list[Any], "str | None"]  # a child's frames, and what was wrong with the rest of them


def read_records(job_dir: Path, limits: Limits, *, frames: bool = True) -> Iterator[tuple[dict[str, Any], list[Part]]]:
    """The worker's records from ``worker.out``, read once, one at a time: a JSON header (``kind``:
    started, result, probe or fatal; ``size``), then ``size`` bytes of frames in two parts (a task's
    public child's, then its hidden child's, split at ``split``). Each size is checked before it is
    read; a cut-off tail ends the records. ``frames=False``: the frames are skipped unread."""
    try:
        f = open(job_dir / OUT_FILE, "rb")
    except OSError:
        return
    with f:
        total = os.fstat(f.fileno()).st_size
        while total - f.tell() >= wire.HEADER_SIZE:
            try:
                kind, length = wire.unpack_header(f.read(wire.HEADER_SIZE))
                if kind != "json" or length > min(wire.MAX_JSON_FRAME, total - f.tell()):
                    return
                header = wire.load_json(f.read(length))
            except wire.WireError:
                return
            size = header.get("size") if isinstance(header, dict) else None
            if type(size) is not int or not 0 <= size <= min(limits.job_result_mb * 2**20 + 2**16, total - f.tell()):
                return
            split = header.get("split")
            split = split if type(split) is int and 0 <= split <= size else size
            if not frames:
                f.seek(size, os.SEEK_CUR)
            yield header, [wire.read_frames(f, n, array_limit=limits.array_mb * 2**20)
                           for n in (split, size - split)] if frames else []
