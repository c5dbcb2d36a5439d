"""The child: the one process that runs learner code, one per part of an exercise.

Between fork and the first line of learner code :func:`prepare` moves it into its control group
when its peak memory is read there, gives it a process group, a death signal, no descriptors but
its two, a scratch folder, a small environment, rlimits (CPU, address space, processes, file
size), no new privileges, files it may change only beneath its scratch folder (Landlock, see
``landlock.py``), and then :func:`guard_kernel`: a fresh empty session keyring, non-dumpable, and
the seccomp filter of ``syscalls.py``. Then it runs the cells
and the cases, streams frames to the zygote through a pipe, and ends.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import ctypes
import errno
import importlib
import importlib.util
import io
import json
import os
import resource
import signal
import socket
import sys
import time
import types
from typing import Any

from . import landlock, protocol
from .protocol import PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, PR_SET_SECCOMP, libc, prctl
from .standin import Guarded, Sink, StandIn, check_size

KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING = 0, 1
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING = -3, -4
CLONE_NEWUSER = 0x10000000


def limit(limits: dict[str, Any], *, extra_processes: int | None = None) -> None:
    """rlimits of a child. ``extra_processes`` (default: the --processes limit) is 0 for a part that
    measures memory: all of its memory then sits in the one process whose peak the zygote reads."""
    cpu = int(limits["cpu_seconds"] + 0.999)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
    extra = limits["processes"] if extra_processes is None else extra_processes
    processes = limits["nproc_base"] + extra  # the grading process counted the base
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    # when the control group runs out of memory, the kernel kills learner code, never the zygote
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid programs: privileges cannot come back


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def guard_kernel(kernel: dict[str, Any], *, strict: bool) -> None:
    """What the kernel shares, kept from learner code (after ``limit``: no new privileges is set).

    A fresh, empty session keyring replaces the one inherited from the grading user's session;
    the process becomes non-dumpable, so its /proc files (clear_refs, which resets the peak memory
    the zygote reads) are root's; then the seccomp filter (``strict``: also no other program).
    """
    keyctl = kernel.get("keyctl")
    if keyctl is not None and libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING),
                                           ctypes.c_void_p(None)) < 0:
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EPERM, errno.EACCES):  # no keyrings, or an outer filter denies them
            raise OSError(code, f"joining a fresh session keyring: {os.strerror(code)}")
    prctl(PR_SET_DUMPABLE, 0)
    program = base64.b64decode(kernel["strict" if strict else "filter"])
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    prctl(PR_SET_SECCOMP, protocol.SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor from 3 up except those in ``keep``."""
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)


def measures_memory(task: dict[str, Any], part: str) -> bool:
    """Whether the peak memory of ``task``'s ``part`` ("public" or "hidden") child is read: one of
    its cases traces memory (the hidden cases say so in ``hidden_memory``, before they are fetched)."""
    if part == "hidden":
        return bool(task.get("hidden_memory"))
    return any(c["trace_memory"] for c in task["cases"])


def prepare(w: int, job: dict[str, Any], standin: StandIn, *, channel: int | None = None,
            memory: bool = False, join: int | None = None) -> Sink:
    """Everything between fork and the first line of learner code. The child keeps two
    descriptors: ``w`` (its frames) and ``channel`` (its line to the keeper, for probes).
    ``memory``: this part's peak memory is measured (no extra process, no other program);
    ``join``: the measured control group to move into first, so that all it holds is counted there."""
    if join is not None:
        os.write(join, b"0")  # "0": the writer itself; the grading process opened the file, we cannot
    os.setpgid(0, 0)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    _close_all_but({w} if channel is None else {w, channel})
    scratch = job["scratch"]
    os.chdir(scratch)
    os.environ.clear()
    os.environ.update({
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch,
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": scratch, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
    })
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    limit(job["limits"], extra_processes=0 if memory else None)
    landlock.confine(scratch)  # changes to files beneath the scratch folder only, where the kernel can say so
    guard_kernel(job["kernel"], strict=memory)
    sink = Sink()
    sys.stdout = sys.stderr = sink
    sys.stdin = io.StringIO("")
    standin.install()
    return sink


def _fresh_main() -> dict[str, Any]:
    """A namespace that is also ``__main__``, as in a notebook kernel (not the worker's module)."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main.__dict__


def _run_cells(task: dict[str, Any], namespace: dict[str, Any], me: int, runner: Any,
               standin: StandIn) -> list[dict[str, Any]]:
    report = []
    for step in task["program"]:
        mark = len(standin.calls)
        outcome = None
        try:
            code = compile(step["source"], step["filename"], "exec", dont_inherit=True)
            exec(code, namespace)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            outcome = runner.raised(exc, step["filename"])
        if os.getpid() != me:
            os._exit(0)  # a copy forked by learner code never reports
        report.append({"label": step["label"], "raised": outcome and outcome.error, "lessonlib": standin.since(mark),
                       "error_types": list(outcome.error_types) if outcome else [],
                       "errno": outcome and outcome.errno})
    return report


def _run_one_case(runner: Any, answer: Any, case: dict[str, Any], args: tuple[Any, ...], limit: int) -> Any:
    try:
        if not case["call"]:
            check_size(answer, limit)
            return runner.run_case(answer, args, call=False)
        target = Guarded(answer, limit) if callable(answer) else answer
        return runner.run_case(target, args, call=True, trace_memory=case["trace_memory"])
    except BaseException as exc:  # noqa: BLE001 - a value too large, or reading it failed
        return runner.raised(exc)


class RemoteCall:
    """The learner's side of a probe call: the arrays go to the keeper, the output comes back."""

    def __init__(self, line: socket.socket, wire: Any, array_limit: int) -> None:
        self._line, self._wire, self._limit = line, wire, array_limit

    def __call__(self, handle: str, arrays: list[Any]) -> Any:
        message = self._wire.json_frame({"op": "call", "handle": handle, "arrays": len(arrays)})
        self._line.sendall(message + b"".join(self._wire.npy_frame(a) for a in arrays))
        head, out = protocol.recv_message(self._line, self._wire, self._limit)
        error = head.get("error")
        if error is not None or len(out) != 1:
            name, _, text = str(error).partition(": ")
            raise {"ValueError": ValueError, "TypeError": TypeError}.get(name, RuntimeError)(text or name)
        return out[0]


def _fetch_hidden(line: socket.socket, exercise: str, wire: Any,
                  limits: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """This exercise's hidden cases and their inputs, from the keeper."""
    line.sendall(wire.json_frame({"op": "hidden", "exercise": exercise, "arrays": 0}))
    head, arrays = protocol.recv_message(line, wire, limits["array_bytes"])
    if head.get("error") is not None:
        raise RuntimeError(f"the keeper refused the hidden cases: {head['error']}")
    cases = head["cases"]
    return cases, [wire.decode_args(c["args"], arrays) for c in cases]


def resident_kb() -> int:
    """This process's resident memory now (kB): what a child holds when it is forked."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_exercise(task: dict[str, Any], part: str, cases: list[dict[str, Any]], cases_args: list[tuple[Any, ...]],
                 w: int, channel: int, job: dict[str, Any], runner: Any, wire: Any, *,
                 join: int | None = None) -> None:
    """Run the cells, then the answer on one part's cases ("public", or "hidden": their inputs come
    from the keeper, before any learner code runs, and never pass through the zygote); ``join``:
    the control group whose peak memory the zygote reads (see ``prepare``)."""
    me = os.getpid()
    standin = StandIn()
    write = protocol.write_all
    try:
        sink = prepare(w, job, standin, channel=channel, memory=measures_memory(task, part), join=join)
        line = socket.socket(fileno=channel)
        line.settimeout(job["limits"]["wall_seconds"])
        if part == "hidden":
            cases, cases_args = _fetch_hidden(line, task["exercise"], wire, job["limits"])
        runner.REMOTE_CALL = RemoteCall(line, wire, job["limits"]["array_bytes"])
    except Exception as exc:  # the grader's fault, not the learner's: say so
        write(w, wire.json_frame({"kind": "setup_failed", "error": protocol.exception_text(runner, exc)}))
        return
    # Written before any learner code runs, so learner code cannot change it: the zygote reads
    # the child's peak memory (from the kernel) against this.
    write(w, wire.json_frame({"kind": "born", "rss_kb": resident_kb()}))
    namespace = _fresh_main()
    cells = _run_cells(task, namespace, me, runner, standin)
    missing = object()
    answer = namespace.get(task["exercise"], missing)
    write(w, wire.json_frame({
        "kind": "cells", "cells": cells, "defined": answer is not missing,
        "answer_type": type(answer).__name__[:200] if answer is not missing else None, "printed": sink.count,
    }))
    if answer is missing:
        write(w, wire.json_frame({"kind": "done"}))
        return
    limit_bytes = job["limits"]["array_bytes"]
    for case, args in zip(cases, cases_args):
        mark, printed, start = len(standin.calls), sink.count, time.perf_counter()
        outcome = _run_one_case(runner, answer, case, args, limit_bytes)
        if os.getpid() != me:
            os._exit(0)
        arrays: list[Any] = []
        try:
            encoded = wire.encode_outcome(outcome, arrays)
            frames = [wire.npy_frame(a) for a in arrays]
        except BaseException as exc:  # noqa: BLE001
            arrays, frames = [], []
            encoded = {"status": "raised", "value": None, "peak_bytes": None,
                       "error": f"the returned value could not be sent back ({protocol.exception_text(runner, exc)})"}
        header = wire.json_frame({
            "kind": "case", "id": case["id"], "outcome": encoded, "arrays": len(frames),
            "lessonlib": standin.since(mark), "printed": sink.count - printed,
            "seconds": round(time.perf_counter() - start, 6),
        })
        write(w, header + b"".join(frames))
    write(w, wire.json_frame({"kind": "done", "printed": sink.count}))


# --- the trial: does the isolation hold here? ---------------------------------------------------


def _attempt(action: Any) -> Any:
    """True when ``action`` worked, else what stopped it (an errno's name, or the exception's class)."""
    try:
        action()
        return True
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__


def _syscall(*args: int) -> None:
    if libc.syscall(*[ctypes.c_long(a) for a in args]) < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


HIGH_BIT = 1 << 32  # above an int argument: the kernel ignores it, a filter comparing 64 bits would not


def _reset_peak(calls: dict[str, int]) -> None:
    """What a learner would do to reset the peak memory the zygote reads: make the process dumpable
    (an int's high bit set, as a filter reading 64 bits would miss), then open /proc/self/clear_refs."""
    if "prctl" in calls:
        with contextlib.suppress(OSError):
            _syscall(calls["prctl"], HIGH_BIT | PR_SET_DUMPABLE, 1)
    open("/proc/self/clear_refs", "w").close()


def _io_uring(calls: dict[str, int]) -> None:
    """Set up an io_uring of one entry (its parameters: 120 zero bytes), and close it."""
    if "io_uring_setup" not in calls:
        raise OSError(errno.ENOSYS, "this machine has no io_uring")
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(ctypes.c_long(calls["io_uring_setup"]), ctypes.c_long(1), params)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    os.close(fd)


def _kernel_report(kernel: dict[str, Any]) -> dict[str, Any]:
    """What learner code can reach of what the kernel shares (each True when it could)."""
    keyctl = kernel.get("keyctl")
    calls = kernel.get("calls", {})

    def shared_memory() -> None:
        shmid = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if shmid < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        libc.shmctl(shmid, 0, None)  # IPC_RMID: the trial leaves nothing behind

    with open("/proc/self/status") as f:
        mode = next((line.split()[1] for line in f if line.startswith("Seccomp:")), None)
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StandIn)]  # past the stand-in, as an attack goes
    try:
        spec = importlib.util.find_spec("lessonlib")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    return {
        "seccomp": mode,
        "user_keyring": _attempt(lambda: _syscall(keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0))
        if keyctl is not None else "no keyctl",
        "session_keyring": _attempt(lambda: _syscall(keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0))
        if keyctl is not None else "no keyctl",
        "sysv_ipc": _attempt(shared_memory),
        "new_user_namespace": _attempt(_unshare_user),
        "clear_refs": _attempt(lambda: _reset_peak(calls)),
        "io_uring": _attempt(lambda: _io_uring(calls)),
        "lessonlib": any(os.path.exists(os.path.join(f, "attention.py")) for f in folders),
    }


def _write_outside(scratch: str) -> str | bool:
    """A folder outside ``scratch`` where a new file could be made (then removed at once), else False."""
    for folder in ("/tmp", "/var/tmp", "/dev/shm", os.path.dirname(scratch)):
        path = os.path.join(folder, f".lessonlib-trial-{os.getpid()}")
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError:
            continue
        os.unlink(path)
        return folder
    return False


def _unshare_user() -> None:
    if libc.unshare(ctypes.c_int(CLONE_NEWUSER)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def probe(job: dict[str, Any], w: int, runner: Any) -> None:
    """The trial child: learner code's view, as ``prepare`` leaves it, sent back as one JSON report."""
    prepare(w, job, StandIn())
    report: dict[str, Any] = {"uid": os.getuid(), "euid": os.geteuid(), "readable": {}, "writable": {}}
    for field, key, mode in (("readable", "read", "rb"), ("writable", "write", "ab")):
        for path in job["probe"][key]:
            try:
                with open(path, mode) as f:
                    if f.readable():
                        f.read(1)
                report[field][path] = True
            except OSError as exc:
                report[field][path] = f"{type(exc).__name__}: {exc.strerror}"
    host, port = job["probe"]["connect"]
    try:
        socket.create_connection((host, port), timeout=2).close()
        report["network"] = True
    except Exception as exc:
        report["network"] = protocol.exception_text(runner, exc)
    try:
        importlib.import_module("json.tool")  # a module nobody imported yet: is the interpreter readable?
        report["imports"] = True
    except Exception as exc:
        report["imports"] = protocol.exception_text(runner, exc)
    try:
        os.kill(job["probe"]["grader_pid"], 0)
        report["can_signal_grader"] = True
    except OSError:
        report["can_signal_grader"] = False
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        report["fork"] = True
    except OSError as exc:
        report["fork"] = protocol.exception_text(runner, exc)
    report["wrote_outside_scratch"] = _write_outside(job["scratch"])
    report["kernel"] = _kernel_report(job["kernel"])
    protocol.write_all(w, json.dumps(report).encode())
