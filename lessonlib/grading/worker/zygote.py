"""The zygote: the worker's first process, which forks the keeper and the children and watches them.

It is PID 1 of the sandbox's PID namespace at level "bubblewrap" (learner code cannot signal it),
a child subreaper at level "limits". Not dumpable, so learner code cannot open its descriptors or
memory through /proc. It runs no learner code and never holds a probe's description or a hidden
input. Per exercise it forks a child for the public cases, then one for the hidden cases; after
each it kills whatever the child left behind, reads the child's peak memory (from the control
group the child ran in, where the grading process gave it one, else from the kernel's wait4
against what the child held before learner code ran), and removes what the child left in the
machine's shared folders (at level "limits" on a kernel without Landlock: the folders the trial
found the learner's user can write; the sandbox's own are emptied after a hidden child).
The two children share the exercise's time on the clock.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import child, keeper, protocol
from .cleanup import remove_new_temp, temp_entries, wipe, writable_folders
from .protocol import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl, quietly

# Modules a learner is likely to import, imported once in the zygote so each child starts fast.
_PREIMPORT = (
    "math", "cmath", "itertools", "functools", "collections", "operator", "typing", "dataclasses",
    "fractions", "decimal", "statistics", "random", "string", "re", "copy", "numbers", "warnings",
    "numpy", "numpy.linalg", "numpy.fft", "numpy.random", "numpy.lib.stride_tricks", "encodings.idna",
)


SEARCH_SECONDS = 60  # the trial's search for the folders learner code can write, where Landlock is missing


@dataclass
class Zygote:
    """The zygote's state: where records go, its lifeline, the control group's out-of-memory
    counters, the measured groups not used yet (each a descriptor to join it and one to read its
    peak), the keeper, and the largest peak memory of a process reaped since the last child."""

    runner: Any
    wire: Any
    out: int
    lifeline: int | None = None
    counters: list[int] = field(default_factory=list)
    measured: list[tuple[int, int]] = field(default_factory=list)
    keeper: int | None = None
    control: socket.socket | None = None
    leftover_peak_kb: int = 0
    temp_before: set[tuple[str, int]] = field(default_factory=set)

    # --- records and the grader ------------------------------------------------------------

    def emit(self, header: dict[str, Any], payload: bytes = b"") -> None:
        """Send one record to the grading process."""
        protocol.write_all(self.out, self.wire.record(header, payload))

    def grader_gone(self, pid: int) -> None:
        """The lifeline broke: end the running child and whatever it left, then the worker itself."""
        _kill_child(pid)
        self.kill_leftovers()
        os._exit(75)

    def oom_kills(self) -> int | None:
        """Processes the control group's out-of-memory killer has killed so far (None: no group)."""
        if not self.counters:
            return None
        total = 0
        for fd in self.counters:
            kills = _field(fd, "oom_kill")
            if kills is None:
                return None
            total += kills
        return total

    # --- processes ---------------------------------------------------------------------------

    def fork(self, body: Callable[[], Any], name: str, *, close: int) -> int:
        """Fork a process that closes ``close`` (the parent's end), runs ``body`` and exits: 0, or 70
        (its error said on stderr) when it raised."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status = 70
            try:
                os.close(close)
                body()
                status = 0
            except BaseException as exc:  # noqa: BLE001 - a forked process must never return into the zygote
                print(f"worker: the {name} stopped: {protocol.exception_text(self.runner, exc)}",
                      file=sys.stderr, flush=True)
            finally:
                os._exit(status)
        return pid

    def start_keeper(self) -> None:
        """Fork the keeper (before anything of the job is read) and wait until it holds the secrets."""
        mine, theirs = socket.socketpair()
        pid = self.fork(lambda: keeper.serve(theirs, self.runner, self.wire), "keeper", close=mine.fileno())
        theirs.close()
        mine.settimeout(120)
        if mine.recv(1) != b"R":
            raise RuntimeError("the keeper could not read the secret part of the job")
        mine.settimeout(None)
        self.keeper, self.control = pid, mine

    def reap(self) -> None:
        """Reap every ended child, keeping the largest peak memory among them (a forked helper's too)."""
        while True:
            try:
                pid, _, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.keeper:
                self.keeper = None  # learner code killed it: nothing is spared from now on
            else:
                self.leftover_peak_kb = max(self.leftover_peak_kb, usage.ru_maxrss)

    def others(self) -> list[int]:
        """Processes to end after a child: all of this namespace's but PID 1 (at level bubblewrap), or
        this subreaper's children (at level limits); never the zygote or the keeper."""
        me = os.getpid()
        found = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in (1, me, self.keeper)]
        return found if me == 1 else [pid for pid in found if _parent_of(pid) == me]

    def kill_leftovers(self) -> None:
        """Kill every process the child left behind (fork bombs, daemons), then reap them."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = self.others()
            for kid in kids:
                quietly(os.kill, kid, signal.SIGKILL)
            self.reap()
            if not kids:
                return
            time.sleep(0.002)

    # --- one child -----------------------------------------------------------------------------

    def supervise(self, pid: int, r: int, limits: dict[str, Any], cap: int | None = None,
                  deadline: float | None = None) -> tuple[bytes, dict[str, Any]]:
        """Read the child's frames until it ends, is killed for time (``deadline``, on the monotonic
        clock: by default the wall-clock allowance from now), or sends more than ``cap`` bytes."""
        deadline = time.monotonic() + limits["wall_seconds"] if deadline is None else deadline
        cap = limits["result_bytes"] if cap is None else cap
        chunks: list[bytes] = []
        size = 0
        fate: dict[str, Any] = {"timed_out": None, "over_limit": False}
        waited = None
        eof = False
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        os.set_blocking(r, False)
        while True:
            if waited is None:
                got, status, usage = os.wait4(pid, os.WNOHANG)
                if got:
                    waited = (status, usage)
                    deadline = min(deadline, time.monotonic() + 0.5)  # only leftovers still hold the pipe
            if waited is not None and (eof or not select.select([r], [], [], 0)[0]):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                fate["timed_out"] = "wall" if waited is None else None
                break
            watch = ([] if eof else [r]) + ([pidfd] if pidfd is not None and waited is None else [])
            watch += [self.lifeline] if self.lifeline is not None else []
            ready = select.select(watch, [], [], min(remaining, 0.05 if pidfd is None else 1.0))[0]
            if self.lifeline is not None and self.lifeline in ready:
                self.grader_gone(pid)
            if r in ready:
                try:
                    chunk = os.read(r, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    eof = True
                elif size + len(chunk) > cap:
                    fate["over_limit"] = True
                    break
                else:
                    chunks.append(chunk)
                    size += len(chunk)
        if waited is None:
            _kill_child(pid)
            _, status, usage = os.wait4(pid, 0)
            waited = (status, usage)
        if pidfd is not None:
            os.close(pidfd)
        os.close(r)
        self.kill_leftovers()
        status, usage = waited
        fate["peak_rss_kb"] = max(usage.ru_maxrss, self.leftover_peak_kb)  # the kernel's count, learner code's or not
        code = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
        fate.update({
            "exit_code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
            "cpu_seconds": round(cpu, 3),
            "max_rss_kb": usage.ru_maxrss,
            "bytes": size,
        })
        if fate["timed_out"] is None and fate["signal"] in (signal.SIGXCPU, signal.SIGKILL) and (
            fate["signal"] == signal.SIGXCPU or cpu >= limits["cpu_seconds"] - 0.05
        ):
            fate["timed_out"] = "cpu"
        return b"".join(chunks), fate

    def fork_child(self, task: dict[str, Any], part: str, cases: list[dict[str, Any]],
                   cases_args: list[tuple[Any, ...]], job: dict[str, Any], cap: int,
                   deadline: float) -> tuple[bytes, dict[str, Any]]:
        """Run one part of an exercise in a fresh child, until ``deadline`` at the latest."""
        assert self.control is not None
        r, w = os.pipe()
        channel = keeper.open_line(self.control, hidden=part == "hidden")
        self.leftover_peak_kb = 0
        shared = job.get("shared_folders", []) if job["level"] == "limits" else []
        self.temp_before = temp_entries(os.getuid(), shared)
        group = self.measured.pop(0) if child.measures_memory(task, part) and self.measured else None
        join = group[0] if group is not None else None
        pid = self.fork(lambda: child.run_exercise(task, part, cases, cases_args, w, channel, job, self.runner,
                                                   self.wire, join=join), "child", close=r)
        os.close(w)
        os.close(channel)
        before = self.oom_kills()
        data, fate = self.supervise(pid, r, job["limits"], cap, deadline)
        if group is not None:
            fate["group_peak_kb"] = _group_peak_kb(group)
        after = self.oom_kills()
        remove_new_temp(os.getuid(), self.temp_before, shared)
        fate["oom_kills"] = after - before if after is not None and before is not None else None
        data, fate["base_rss_kb"] = _birth(data, self.wire)
        fate["job_limit"] = fate["over_limit"] and cap < job["limits"]["result_bytes"]
        return data, fate

    def run_tasks(self, job: dict[str, Any], inputs: list[Any]) -> None:
        """Run each task in fresh children, public then hidden (see the module docstring); records per
        task: ``started`` before the first child, ``result`` after (``split``: how many bytes are the
        public child's). Both children share the exercise's allowance on the clock; when the public
        child ran out of time, the hidden one is not started and ends as it did."""
        limits = job["limits"]
        budget = limits["job_result_bytes"]
        # where learner code can leave files: the scratch folder, and in the sandbox its /tmp and /dev/shm
        writable = [job["scratch"], "/tmp", "/dev/shm"] if job["level"] == "bubblewrap" else [job["scratch"]]
        for task in job["tasks"]:
            key = task["key"]
            self.emit({"kind": "started", "key": key, "solo": job["solo"], "level": job["level"]})
            cases_args = [self.wire.decode_args(c["args"], inputs) for c in task["cases"]]
            deadline = time.monotonic() + limits["wall_seconds"]
            cap = min(limits["result_bytes"], budget)
            public, fate = self.fork_child(task, "public", task["cases"], cases_args, job, cap, deadline)
            hidden, hidden_fate = b"", None
            if task.get("hidden") and fate["timed_out"]:
                hidden_fate = {**fate, "bytes": 0, "not_started": True}
            elif task.get("hidden"):
                cap = min(limits["result_bytes"], budget - len(public))
                hidden, hidden_fate = self.fork_child(task, "hidden", [], [], job, cap, deadline)
                wipe(writable)  # nothing the hidden child wrote reaches a later public one
            budget -= len(public) + len(hidden)
            self.emit({"kind": "result", "key": key, "fate": fate, "hidden_fate": hidden_fate,
                       "split": len(public)}, public + hidden)

    def probe(self, job: dict[str, Any]) -> None:
        """The trial: one child reports what learner code can reach (see child.probe)."""
        r, w = os.pipe()
        pid = self.fork(lambda: child.probe(job, w, self.runner), "probe", close=r)
        os.close(w)
        data, fate = self.supervise(pid, r, job["limits"])
        try:
            report = json.loads(data.decode() or "{}")
        except ValueError:
            report = {}
        report["fate"] = fate
        report["oom_counter"] = self.oom_kills()
        if job["level"] == "limits" and report.get("wrote_outside_scratch"):  # no Landlock: where can it write?
            report["writable_folders"], report["search_finished"] = writable_folders(job["scratch"], SEARCH_SECONDS)
        self.emit({"kind": "probe", "report": report})


def _field(fd: int, name: str) -> int | None:
    """The number after ``name`` in a control group's flat-keyed file (None: unreadable)."""
    try:
        text = os.pread(fd, 4096, 0).decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    return None


def _group_peak_kb(group: tuple[int, int]) -> int | None:
    """The peak memory of a measured group (kB), read once its child has ended; its descriptors are
    closed (each group serves one child). None when it cannot be read."""
    join, peak = group
    try:
        text = os.pread(peak, 64, 0).decode().strip()
        return int(text) // 1024 if text.isdigit() else None
    except OSError:
        return None
    finally:
        os.close(join)
        os.close(peak)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _kill_child(pid: int) -> None:
    """SIGKILL a child and its process group."""
    quietly(os.killpg, pid, signal.SIGKILL)
    quietly(os.kill, pid, signal.SIGKILL)


def _birth(data: bytes, wire: Any) -> tuple[bytes, int | None]:
    """The child's frames without its first, "born" (written before learner code ran), and the
    resident memory that frame gave (kB; None when the child never got that far)."""
    try:
        kind, length = wire.unpack_header(data[:wire.HEADER_SIZE])
        born = wire.load_json(data[wire.HEADER_SIZE:wire.HEADER_SIZE + length]) if kind == "json" else None
    except wire.WireError:
        return data, None
    if not isinstance(born, dict) or born.get("kind") != "born" or not isinstance(born.get("rss_kb"), int):
        return data, None
    return data[wire.HEADER_SIZE + length:], born["rss_kb"]


# --- entry point --------------------------------------------------------------------------------------


def _await_grader(argv: list[str]) -> tuple[int | None, list[int], list[tuple[int, int]]]:
    """Wait for "go" on the lifeline: the grading process has put this worker in its control group.
    Returns the lifeline, the control group's out-of-memory counters and the measured groups
    (each a descriptor to join it and one to read its peak); None and nothing without a lifeline."""
    if "--lifeline" not in argv:
        return None, [], []
    fd = int(argv[argv.index("--lifeline") + 1])
    line = socket.socket(fileno=fd)
    message, fds, _, _ = socket.recv_fds(line, 4096, 250)
    line.detach()
    if not message.startswith(b"go"):  # the grading process let go before the start
        os._exit(75)
    layout = json.loads(message[2:] or b"{}")
    counters = int(layout.get("counters", len(fds)))
    pairs = fds[counters:]
    return fd, fds[:counters], [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]


def _read_job(wire: Any) -> tuple[dict[str, Any], list[Any]]:
    """The job and its input arrays, from stdin (then stdin is closed)."""
    data = sys.stdin.buffer.read()  # the grading process wrote it: no limit but its size
    frames, problem = wire.read_frames(io.BytesIO(data), len(data), array_limit=len(data), json_limit=len(data))
    if problem or not frames or not isinstance(frames[0], dict):
        raise ValueError(f"the job on stdin is not a JSON frame and its inputs ({problem})")
    job, inputs = frames[0], frames[1:]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return job, inputs


def _guard_parent(grader_pid: int, lifeline: int | None) -> None:
    # With a lifeline the worker ends itself and what it started when the grader dies; a death signal
    # would kill the worker first and leave the processes it adopted (a subreaper's orphans) running.
    if lifeline is None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the grading process died: so do we
    if os.getppid() != grader_pid:
        os._exit(75)


def _preimport() -> None:
    import contextlib
    import importlib

    for name in _PREIMPORT:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def main(argv: list[str]) -> int:
    """``worker/main.py [--probe] [--lifeline FD] RUNNER WIRE``: see the package's docstring."""
    probe = "--probe" in argv[1:]
    runner_path, wire_path = [a for a in argv[1:] if a != "--probe"][-2:]
    lifeline, counters, measured = _await_grader(argv)
    out = os.dup(1)  # results go here; print() and stray writes go to the log (stderr)
    os.dup2(2, 1)
    runner = None
    try:
        prctl(PR_SET_DUMPABLE, 0)  # learner code (the same user) cannot open /proc/<zygote or keeper>/mem
        runner = protocol.load(runner_path, "_grading_runner")
        wire = protocol.load(wire_path, "_grading_wire")
        zygote = Zygote(runner, wire, out, lifeline, counters, measured)
        zygote.start_keeper()  # it reads the secret part of stdin; the zygote reads the rest
        job, inputs = _read_job(wire)
        if job["level"] == "limits":
            _guard_parent(job["grader_pid"], lifeline)
        else:  # PID 1 of the sandbox: bubblewrap is the parent, and dies with the grader
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        job["scratch"] = os.getcwd()  # the sandbox's empty /scratch, or the job's scratch folder
        _preimport()
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # processes the child leaves behind come back to us
        if os.getpid() == 1:  # PID 1 ignores signals it has no handler for: drop Python's SIGINT handler
            signal.signal(signal.SIGINT, signal.SIG_DFL)
    except Exception as exc:
        message = protocol.exception_text(runner, exc)
        print(f"worker: could not start: {message}", file=sys.stderr, flush=True)
        payload = json.dumps({"kind": "fatal", "error": message, "size": 0}).encode()
        try:  # a JSON frame written by hand: wire.py itself may be what failed to load
            protocol.write_all(out, b"J" + len(payload).to_bytes(8, "big") + payload)
        except OSError:
            pass
        return 3
    if probe:
        zygote.probe(job)
    else:
        zygote.run_tasks(job, inputs)
    return 0
