"""The grading worker: runs one learner's answers and sends back plain-data results.

Started by the grading process (see ``sandbox.launch``), never imported by it:

    python -I -B worker.py [--lifeline FD] RUNNER WIRE            grade the job read from stdin
    python -I -B worker.py --probe [--lifeline FD] RUNNER WIRE    test the isolation, run no learner code

FD is the worker's end of its lifeline, a socket whose other end only the grading process holds.
The worker waits on it for "go" (with its control group's out-of-memory counter, when there is
one) before it does anything, and when it breaks (the grading process ended, even by kill -9) the
worker kills everything it started and exits.

It imports the standard library and NumPy only, and loads two files by path before any learner
code runs: ``exercises/runner.py`` (call an answer on one case, reduce what came back to plain
data) and ``grading/wire.py`` (the format of what goes back). It never imports ``lessonlib``:
learner code that does gets a stand-in whose functions refuse to run and are recorded.

The job comes on stdin: first its secret part (probe descriptions and hidden cases, a JSON frame
and its ``.npy`` frames), read by the keeper alone; then the job (a JSON frame, then the public
inputs as ``.npy`` frames). The results go to stdout as records (``wire.record``): ``started``
before a task's first child starts, ``result`` (both children's frames and how each ended)
after. The worker needs no view of the job folder, so inside the bubblewrap sandbox there is
none; learner code has neither descriptor.

Processes:

    worker   the zygote: PID 1 of the sandbox's PID namespace at level "bubblewrap" (learner code
             cannot signal it), a child subreaper at level "limits". Not dumpable, so learner
             code cannot open its descriptors or memory through /proc. It runs no learner code
             and never holds a probe's description or a hidden input.
    keeper   forked first, before the job is read: reads the secret part, then answers the
             children through one socket each: probe calls (the learner's process holds only a
             handle) and, for a hidden child only, its exercise's hidden cases.
    child    two per exercise, forked by the zygote: one for the public cases, then one for the
             hidden cases, so that nothing the public one reports can carry a hidden input.
             rlimits (CPU, address space, processes, file size), no new privileges, first in
             line for the out-of-memory killer; runs the cells and the cases, streams frames to
             the zygote through a pipe and ends. The zygote then kills whatever it left behind,
             and reads the child's peak memory from the kernel (wait4) against what it held
             before learner code ran.

Namespaces, hidden files and the user (nobody, for root) are bubblewrap's work, not this file's.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import types
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl {option}: {os.strerror(errno)}")


# --- loading the two helper files without importing lessonlib ------------------------------------


def _load(path: str, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


# Modules a learner is likely to import, imported once in the zygote so each child starts fast.
_PREIMPORT = (
    "math", "cmath", "itertools", "functools", "collections", "operator", "typing", "dataclasses",
    "fractions", "decimal", "statistics", "random", "string", "re", "copy", "numbers", "warnings",
    "numpy", "numpy.linalg", "numpy.fft", "numpy.random", "numpy.lib.stride_tricks", "encodings.idna",
)


def _preimport() -> None:
    for name in _PREIMPORT:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


# --- the stand-in lessonlib ------------------------------------------------------------------------

_LESSONLIB_CALLS: list[str] = []


# The grader's own exceptions are named "grader.*" (see runner.error_types): a class that learner
# code defines is named "__main__.*", so it is never taken for one of these.
class LessonlibUnavailable(RuntimeError):
    """Raised by every function of the stand-in ``lessonlib`` seen by learner code."""

    __module__ = "grader"


def _refuse(qualname: str) -> Any:
    def standin(*args: Any, **kwargs: Any) -> Any:
        _LESSONLIB_CALLS.append(qualname)
        raise LessonlibUnavailable(
            f"{qualname} is the course's own implementation and is not available while grading: "
            "write the answer with NumPy"
        )

    standin.__name__ = standin.__qualname__ = qualname.rsplit(".", 1)[-1]
    return standin


def _calls_since(mark: int) -> list[str]:
    """Stand-in functions called since ``mark`` (names cut short; learner code chooses them)."""
    return sorted({name[:200] for name in _LESSONLIB_CALLS[mark:]})[:20]


class _StandInModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        # check() does nothing here: checks run in the grading process
        value = (lambda *args, **kwargs: None) if attr == "check" else _refuse(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every import of ``lessonlib`` and its submodules with a stand-in module."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "lessonlib" or fullname.startswith("lessonlib."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__all__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _install_standin() -> None:
    for name in [m for m in sys.modules if m == "lessonlib" or m.startswith("lessonlib.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _StandInFinder())


# --- output that learner code prints -------------------------------------------------------------


class _Sink(io.TextIOBase):
    """Counts what is printed and keeps nothing: printing cannot flood the grader."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.count += len(s)
        return len(s)

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


# --- the size of a returned value -------------------------------------------------------------------


class ResultTooLarge(Exception):
    """A returned value holds more array data than the grader accepts."""

    __module__ = "grader"


def _megabytes(n: float) -> str:
    return f"{n / 2**20:,.1f} MB" if n < 2**30 else f"{n / 2**30:,.1f} GB"


def _estimate(obj: Any, limit: int, depth: int = 0) -> int:
    """Bytes the grader would copy to describe ``obj`` (arrays counted without copying them)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        return int(np.ndarray.nbytes.__get__(obj, type(obj)))  # a subclass cannot make it smaller
    if isinstance(obj, (list, tuple)):
        if len(obj) > 1_000_000:
            return len(obj) * 8
        total = 8 * len(obj)
        if depth < 3:
            for item in obj:
                total += _estimate(item, limit, depth + 1)
                if total > limit:
                    break
        return total
    return 8


def _check_size(obj: Any, limit: int) -> None:
    size = _estimate(obj, limit)
    if size > limit:
        raise ResultTooLarge(
            f"the returned value holds {_megabytes(size)} of data, more than the grader accepts "
            f"({_megabytes(limit)}); the expected result is far smaller"
        )


class _Guarded:
    """Calls the answer, then refuses results too large to describe. Keeps the answer's code
    object visible, so an error still names the line of the answer cell."""

    def __init__(self, answer: Any, limit: int) -> None:
        self._answer = answer
        self._limit = limit

    @property
    def __code__(self) -> Any:
        return getattr(self._answer, "__code__", None)

    def __call__(self, *args: Any) -> Any:
        result = self._answer(*args)
        _check_size(result, self._limit)
        return result


# --- one exercise, in the child ------------------------------------------------------------------


_RUNNER: Any = None  # exercises/runner.py, loaded by path in main()


def _exception_text(exc: BaseException, filename: str | None = None) -> str:
    """The runner's ``error_text`` (one function for the notebook's check() and the grader)."""
    if _RUNNER is None:  # the runner itself failed to load
        return f"{type(exc).__name__}: {exc}"[:2000]
    return _RUNNER.error_text(exc, filename)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _limit_child(limits: dict[str, Any], *, extra_processes: int | None = None) -> None:
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
    _prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid programs: privileges cannot come back


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor from 3 up except those in ``keep``."""
    start = 3
    for fd in sorted(keep):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)


def _prepare_child(w: int, job: dict[str, Any], *, channel: int | None = None,
                   extra_processes: int | None = None) -> _Sink:
    """Everything between fork and the first line of learner code. The child keeps two
    descriptors: ``w`` (its frames) and ``channel`` (its line to the keeper, for probes)."""
    os.setpgid(0, 0)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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
    _limit_child(job["limits"], extra_processes=extra_processes)
    sink = _Sink()
    sys.stdout = sys.stderr = sink
    sys.stdin = io.StringIO("")
    _install_standin()
    return sink


def _fresh_main() -> dict[str, Any]:
    """A namespace that is also ``__main__``, as in a notebook kernel (not the worker's module)."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main.__dict__


def _run_cells(task: dict[str, Any], namespace: dict[str, Any], me: int) -> list[dict[str, Any]]:
    report = []
    for step in task["program"]:
        mark = len(_LESSONLIB_CALLS)
        outcome = None
        try:
            code = compile(step["source"], step["filename"], "exec", dont_inherit=True)
            exec(code, namespace)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            outcome = _RUNNER.raised(exc, step["filename"])
        if os.getpid() != me:
            os._exit(0)  # a copy forked by learner code never reports
        report.append({"label": step["label"], "raised": outcome and outcome.error, "lessonlib": _calls_since(mark),
                       "error_types": list(outcome.error_types) if outcome else [],
                       "errno": outcome and outcome.errno})
    return report


def _run_one_case(runner: Any, answer: Any, case: dict[str, Any], args: tuple[Any, ...], limit: int) -> Any:
    try:
        if not case["call"]:
            _check_size(answer, limit)
            return runner.run_case(answer, args, call=False)
        target = _Guarded(answer, limit) if callable(answer) else answer
        return runner.run_case(target, args, call=True, trace_memory=case["trace_memory"])
    except BaseException as exc:  # noqa: BLE001 - a value too large, or reading it failed
        return runner.raised(exc)


def _child(task: dict[str, Any], part: str, cases: list[dict[str, Any]], cases_args: list[tuple[Any, ...]],
           w: int, channel: int, job: dict[str, Any], runner: Any, wire: Any) -> None:
    """Run the cells, then the answer on one part's cases ("public", or "hidden": their inputs come
    from the keeper, before any learner code runs, and never pass through the zygote)."""
    me = os.getpid()
    try:
        memory = any(c["trace_memory"] for c in cases) or (part == "hidden" and task.get("hidden_memory"))
        sink = _prepare_child(w, job, channel=channel, extra_processes=0 if memory else None)
        line = socket.socket(fileno=channel)
        line.settimeout(job["limits"]["wall_seconds"])
        if part == "hidden":
            cases, cases_args = _fetch_hidden(line, task["exercise"], wire, job["limits"])
        runner.REMOTE_CALL = _RemoteCall(line, wire, job["limits"]["array_bytes"])
    except Exception as exc:  # the grader's fault, not the learner's: say so
        _write_all(w, wire.json_frame({"kind": "setup_failed", "error": _exception_text(exc)}))
        return
    # Written before any learner code runs, so learner code cannot change it: the zygote reads
    # the child's peak memory (from the kernel) against this.
    _write_all(w, wire.json_frame({"kind": "born", "rss_kb": _resident_kb()}))
    namespace = _fresh_main()
    cells = _run_cells(task, namespace, me)
    missing = object()
    answer = namespace.get(task["exercise"], missing)
    _write_all(w, wire.json_frame({
        "kind": "cells", "cells": cells, "defined": answer is not missing,
        "answer_type": type(answer).__name__[:200] if answer is not missing else None, "printed": sink.count,
    }))
    if answer is missing:
        _write_all(w, wire.json_frame({"kind": "done"}))
        return
    limit = job["limits"]["array_bytes"]
    for case, args in zip(cases, cases_args):
        mark, printed, start = len(_LESSONLIB_CALLS), sink.count, time.perf_counter()
        outcome = _run_one_case(runner, answer, case, args, limit)
        if os.getpid() != me:
            os._exit(0)
        arrays: list[Any] = []
        try:
            encoded = wire.encode_outcome(outcome, arrays)
            frames = [wire.npy_frame(a) for a in arrays]
        except BaseException as exc:  # noqa: BLE001
            arrays, frames = [], []
            encoded = {"status": "raised", "value": None, "peak_bytes": None,
                       "error": f"the returned value could not be sent back ({_exception_text(exc)})"}
        header = wire.json_frame({
            "kind": "case", "id": case["id"], "outcome": encoded, "arrays": len(frames),
            "lessonlib": _calls_since(mark), "printed": sink.count - printed,
            "seconds": round(time.perf_counter() - start, 6),
        })
        _write_all(w, header + b"".join(frames))
    _write_all(w, wire.json_frame({"kind": "done", "printed": sink.count}))


# --- the keeper: the one process that holds probes and hidden inputs -------------------------------
#
# Forked before the job is read, it reads the secret part of the job (the first frames on stdin)
# itself, so the zygote, and every child forked from it, never holds a probe's description or a
# hidden input. Each child gets a socket to the keeper: a "public" child may only call probes; a
# "hidden" child may also fetch its exercise's hidden cases. The keeper is not dumpable and runs
# no learner code: nothing learner code can read says which mask a layer has.


def _read_exact(read: Any, n: int) -> bytes:
    """``n`` bytes from ``read`` (os.read on a descriptor, or a socket's recv), however they come."""
    chunks, got = [], 0
    while got < n:
        chunk = read(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the stream ended early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_frame_fd(fd: int, wire: Any, limit: int) -> tuple[str, bytes]:
    kind, length = wire.unpack_header(_read_exact(lambda k: os.read(fd, k), wire.HEADER_SIZE))
    if length > limit:
        raise ValueError(f"a frame of {length} bytes in the job (limit {limit})")
    return kind, _read_exact(lambda k: os.read(fd, k), length)


def _recv_frames(line: socket.socket, wire: Any, array_limit: int) -> tuple[dict[str, Any], list[Any]]:
    """One message: a JSON frame whose ``arrays`` counts the ``.npy`` frames after it (at most 8)."""
    kind, length = wire.unpack_header(_read_exact(line.recv, wire.HEADER_SIZE))
    if kind != "json" or length > wire.MAX_JSON_FRAME:
        raise ValueError("a message that does not start with a JSON frame")
    head = wire.load_json(_read_exact(line.recv, length))
    count = head.get("arrays", 0) if isinstance(head, dict) else -1
    if not isinstance(count, int) or not 0 <= count <= 64:
        raise ValueError("a message with an unreadable array count")
    arrays = []
    for _ in range(count):
        kind, length = wire.unpack_header(_read_exact(line.recv, wire.HEADER_SIZE))
        if kind != "npy" or length > array_limit + 4096:
            raise ValueError("an array frame too large or of the wrong kind")
        arrays.append(wire.load_npy(_read_exact(line.recv, length), array_limit))
    return head, arrays


class _RemoteCall:
    """The learner's side of a probe call: the arrays go to the keeper, the output comes back."""

    def __init__(self, line: socket.socket, wire: Any, array_limit: int) -> None:
        self._line, self._wire, self._limit = line, wire, array_limit

    def __call__(self, handle: str, arrays: list[Any]) -> Any:
        message = self._wire.json_frame({"op": "call", "handle": handle, "arrays": len(arrays)})
        self._line.sendall(message + b"".join(self._wire.npy_frame(a) for a in arrays))
        head, out = _recv_frames(self._line, self._wire, self._limit)
        error = head.get("error")
        if error is not None or len(out) != 1:
            name, _, text = str(error).partition(": ")
            raise {"ValueError": ValueError, "TypeError": TypeError}.get(name, RuntimeError)(text or name)
        return out[0]


def _fetch_hidden(line: socket.socket, exercise: str, wire: Any,
                  limits: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
    """This exercise's hidden cases and their inputs, from the keeper."""
    line.sendall(wire.json_frame({"op": "hidden", "exercise": exercise, "arrays": 0}))
    head, arrays = _recv_frames(line, wire, limits["array_bytes"])
    if head.get("error") is not None:
        raise RuntimeError(f"the keeper refused the hidden cases: {head['error']}")
    cases = head["cases"]
    return cases, [wire.decode_args(c["args"], arrays) for c in cases]


def _read_secrets(wire: Any) -> dict[str, Any]:
    """The secret part of the job, from stdin: a JSON frame, then its ``.npy`` frames (read with
    unbuffered reads, so the zygote's stdin starts exactly after it)."""
    kind, payload = _read_frame_fd(0, wire, 1 << 26)
    if kind != "json":
        raise ValueError("the job does not start with its secret part")
    secrets = json.loads(payload.decode())
    limit = secrets["array_bytes"]
    arrays = []
    for _ in range(int(secrets["arrays"])):
        kind, payload = _read_frame_fd(0, wire, limit + 4096)
        arrays.append(wire.load_npy(payload, limit))
    secrets["inputs"] = arrays
    return secrets


def _hidden_message(secrets: dict[str, Any], exercise: str, wire: Any) -> bytes:
    """The keeper's answer to a hidden child: the cases, then the arrays they refer to, re-numbered."""
    cases = secrets["hidden"].get(exercise)
    if cases is None:
        return wire.json_frame({"error": f"no hidden cases for {exercise[:60]!r}", "arrays": 0})
    frames: list[bytes] = []
    renumbered = []
    for case in cases:
        args = []
        for arg in case["args"]:
            if "array" in arg:
                frames.append(wire.npy_frame(secrets["inputs"][arg["array"]]))
                arg = {"array": len(frames) - 1}
            args.append(arg)
        renumbered.append({**case, "args": args})
    return wire.json_frame({"error": None, "cases": renumbered, "arrays": len(frames)}) + b"".join(frames)


def _serve_request(line: socket.socket, hidden: bool, secrets: dict[str, Any], runner: Any, wire: Any) -> None:
    head, arrays = _recv_frames(line, wire, secrets["array_bytes"])
    op = head.get("op")
    if op == "hidden":
        reply = (_hidden_message(secrets, str(head.get("exercise")), wire) if hidden else
                 wire.json_frame({"error": "hidden cases are not for this process", "arrays": 0}))
    elif op == "call":
        description = secrets["probes"].get(str(head.get("handle")))
        try:
            if description is None:
                raise ValueError("an unknown probe")
            out = runner.call_probe(description, arrays)
            if out.dtype == object or out.nbytes > secrets["array_bytes"]:
                raise ValueError("the probe's output cannot be sent back")
            reply = wire.json_frame({"error": None, "arrays": 1}) + wire.npy_frame(out)
        except Exception as exc:  # the probe's own errors go back to the caller, as text
            reply = wire.json_frame({"error": f"{type(exc).__name__}: {exc}"[:500], "arrays": 0})
    else:
        raise ValueError("an unknown request")
    line.sendall(reply)


def _keeper(control: socket.socket, runner: Any, wire: Any) -> None:
    """The keeper's life: read the secrets, say ready, then answer children until the zygote goes."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    secrets = _read_secrets(wire)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    _close_all_but({2, control.fileno()})
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (secrets["memory_bytes"], secrets["memory_bytes"]))
    control.sendall(b"R")
    lines: dict[socket.socket, bool] = {}
    while True:
        ready = select.select([control, *lines], [], [])[0]
        for line in ready:
            if line is control:
                message, fds, _, _ = socket.recv_fds(control, 1, 1)
                if not message:
                    return  # the zygote is gone
                for fd in fds:
                    new = socket.socket(fileno=fd)
                    new.settimeout(5)
                    lines[new] = message == b"H"
                continue
            try:
                _serve_request(line, lines[line], secrets, runner, wire)
            except (OSError, EOFError, ValueError, KeyError, TypeError):
                lines.pop(line)
                line.close()


_KEEPER: int | None = None  # the keeper's pid, in the zygote
_CONTROL: socket.socket | None = None  # the zygote's end of the keeper's control socket


def _fork(body: Callable[[], Any], name: str, *, close: int) -> int:
    """Fork a process that closes ``close`` (the parent's end), runs ``body`` and exits: 0, or 70 (its
    error said on stderr) when it raised."""
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
            print(f"worker: the {name} stopped: {_exception_text(exc)}", file=sys.stderr, flush=True)
        finally:
            os._exit(status)
    return pid


def _start_keeper(runner: Any, wire: Any) -> None:
    """Fork the keeper (before anything of the job is read) and wait until it holds the secrets."""
    global _KEEPER, _CONTROL
    mine, theirs = socket.socketpair()
    pid = _fork(lambda: _keeper(theirs, runner, wire), "keeper", close=mine.fileno())
    theirs.close()
    mine.settimeout(120)
    if mine.recv(1) != b"R":
        raise RuntimeError("the keeper could not read the secret part of the job")
    mine.settimeout(None)
    _KEEPER, _CONTROL = pid, mine


def _open_line(hidden: bool) -> int:
    """A new socket to the keeper for one child: the child's end (the keeper got the other)."""
    assert _CONTROL is not None
    child_end, keeper_end = socket.socketpair()
    # the keeper may be gone (learner code may kill it): probe calls will fail then, nothing else
    _quietly(socket.send_fds, _CONTROL, [b"H" if hidden else b"P"], [keeper_end.fileno()])
    keeper_end.close()
    return child_end.detach()


# --- the zygote: fork a child per task, watch it, store its frames ------------------------------


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


_LEFTOVER_PEAK_KB = 0  # the largest peak resident memory of a process reaped since the last reset


def _reap() -> None:
    """Reap every ended child, keeping the largest peak memory among them (a forked helper's too)."""
    global _KEEPER, _LEFTOVER_PEAK_KB
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == _KEEPER:
            _KEEPER = None  # learner code killed it: nothing is spared from now on
        else:
            _LEFTOVER_PEAK_KB = max(_LEFTOVER_PEAK_KB, usage.ru_maxrss)


def _others() -> list[int]:
    """Processes to end after a child: all of this namespace's but PID 1 (at level bubblewrap), or
    this subreaper's children (at level limits); never the zygote or the keeper."""
    me = os.getpid()
    found = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) not in (1, me, _KEEPER)]
    return found if me == 1 else [pid for pid in found if _parent_of(pid) == me]


def _kill_child(pid: int) -> None:
    """SIGKILL a child and its process group."""
    _quietly(os.killpg, pid, signal.SIGKILL)
    _quietly(os.kill, pid, signal.SIGKILL)


def _kill_leftovers() -> None:
    """Kill every process the child left behind (fork bombs, daemons), then reap them."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kids = _others()
        for kid in kids:
            _quietly(os.kill, kid, signal.SIGKILL)
        _reap()
        if not kids:
            return
        time.sleep(0.002)


def _supervise(pid: int, r: int, limits: dict[str, Any], cap: int | None = None) -> tuple[bytes, dict[str, Any]]:
    """Read the child's frames until it ends, is killed for time, or sends more than ``cap`` bytes."""
    deadline = time.monotonic() + limits["wall_seconds"]
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
        watch += [_LIFELINE] if _LIFELINE is not None else []
        ready = select.select(watch, [], [], min(remaining, 0.05 if pidfd is None else 1.0))[0]
        if _LIFELINE is not None and _LIFELINE in ready:
            _grader_gone(pid)
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
    _kill_leftovers()
    status, usage = waited
    fate["peak_rss_kb"] = max(usage.ru_maxrss, _LEFTOVER_PEAK_KB)  # the kernel's count, learner code's or not
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


_OUT: int | None = None  # the worker's results descriptor (its original stdout)
_LIFELINE: int | None = None  # the worker's end of its lifeline (see the module docstring)
_OOM: int | None = None  # the control group's out-of-memory counter, when there is one


def _await_grader(argv: list[str]) -> None:
    """Wait for "go" on the lifeline: the grading process has put this worker in its control group."""
    global _LIFELINE, _OOM
    if "--lifeline" not in argv:
        return
    fd = int(argv[argv.index("--lifeline") + 1])
    lifeline = socket.socket(fileno=fd)
    message, fds, _, _ = socket.recv_fds(lifeline, 16, 1)
    lifeline.detach()
    if message != b"go":  # the grading process let go before the start
        os._exit(75)
    _LIFELINE, _OOM = fd, (fds[0] if fds else None)


def _grader_gone(pid: int) -> None:
    """The lifeline broke: end the running child and whatever it left, then the worker itself."""
    _kill_child(pid)
    _kill_leftovers()
    os._exit(75)


def _oom_kills() -> int | None:
    """Processes the control group's out-of-memory killer has killed so far (None: no group)."""
    if _OOM is None:
        return None
    try:
        os.lseek(_OOM, 0, os.SEEK_SET)
        text = os.read(_OOM, 4096).decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return None


def _emit(wire: Any, header: dict[str, Any], payload: bytes = b"") -> None:
    """Send one record to the grading process."""
    assert _OUT is not None
    _write_all(_OUT, wire.record(header, payload))


def _resident_kb() -> int:
    """This process's resident memory now (kB): what a child holds when it is forked."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


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


def _fork_child(task: dict[str, Any], part: str, cases: list[dict[str, Any]], cases_args: list[tuple[Any, ...]],
                job: dict[str, Any], runner: Any, wire: Any, cap: int) -> tuple[bytes, dict[str, Any]]:
    global _LEFTOVER_PEAK_KB
    r, w = os.pipe()
    channel = _open_line(hidden=part == "hidden")
    _LEFTOVER_PEAK_KB = 0
    pid = _fork(lambda: _child(task, part, cases, cases_args, w, channel, job, runner, wire), "child", close=r)
    os.close(w)
    os.close(channel)
    before = _oom_kills()
    data, fate = _supervise(pid, r, job["limits"], cap)
    after = _oom_kills()
    fate["oom_kills"] = after - before if after is not None and before is not None else None
    data, fate["base_rss_kb"] = _birth(data, wire)
    fate["job_limit"] = fate["over_limit"] and cap < job["limits"]["result_bytes"]
    return data, fate


def _wipe(folders: list[str]) -> None:
    """Empty ``folders``: their files belong to this user, so a folder made unreadable is opened
    first; no recursion, so no depth of nesting stops it."""
    stack = [(os.path.join(folder, name), False) for folder in folders for name in _names(folder)]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            _quietly(os.rmdir, path)
        elif os.path.isdir(path) and not os.path.islink(path):
            _quietly(os.chmod, path, 0o700)
            stack.append((path, True))
            stack += [(os.path.join(path, name), False) for name in _names(path)]
        else:
            _quietly(os.unlink, path)


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _quietly(action: Any, *args: Any) -> None:
    try:
        action(*args)
    except OSError:
        pass


def _zygote(job: dict[str, Any], inputs: list[Any], runner: Any, wire: Any) -> None:
    """Run each task in fresh children, public then hidden (see the module docstring); records per task:
    ``started`` before the first child, ``result`` after (``split``: how many bytes are the public child's)."""
    budget = job["limits"]["job_result_bytes"]
    # where learner code can leave files: the scratch folder, and in the sandbox its /tmp and /dev/shm
    writable = [job["scratch"], "/tmp", "/dev/shm"] if job["level"] == "bubblewrap" else [job["scratch"]]
    for task in job["tasks"]:
        key = task["key"]
        _emit(wire, {"kind": "started", "key": key, "solo": job["solo"], "level": job["level"]})
        cases_args = [wire.decode_args(c["args"], inputs) for c in task["cases"]]
        cap = min(job["limits"]["result_bytes"], budget)
        public, fate = _fork_child(task, "public", task["cases"], cases_args, job, runner, wire, cap)
        hidden, hidden_fate = b"", None
        if task.get("hidden"):
            cap = min(job["limits"]["result_bytes"], budget - len(public))
            hidden, hidden_fate = _fork_child(task, "hidden", [], [], job, runner, wire, cap)
            _wipe(writable)  # nothing the hidden child wrote reaches a later public one
        budget -= len(public) + len(hidden)
        _emit(wire, {"kind": "result", "key": key, "fate": fate, "hidden_fate": hidden_fate, "split": len(public)},
              public + hidden)


# --- the probe: does the isolation hold here? -------------------------------------------------------


def _probe_child(job: dict[str, Any], w: int) -> None:
    _prepare_child(w, job)
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
        report["network"] = _exception_text(exc)
    try:
        importlib.import_module("json.tool")  # a module nobody imported yet: is the interpreter readable?
        report["imports"] = True
    except Exception as exc:
        report["imports"] = _exception_text(exc)
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
        report["fork"] = _exception_text(exc)
    _write_all(w, json.dumps(report).encode())


def _probe(job: dict[str, Any], wire: Any) -> None:
    r, w = os.pipe()
    pid = _fork(lambda: _probe_child(job, w), "probe", close=r)
    os.close(w)
    data, fate = _supervise(pid, r, job["limits"])
    try:
        report = json.loads(data.decode() or "{}")
    except ValueError:
        report = {}
    report["fate"] = fate
    report["oom_counter"] = _oom_kills()
    _emit(wire, {"kind": "probe", "report": report})


# --- entry point --------------------------------------------------------------------------------------


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


def _guard_parent(grader_pid: int) -> None:
    # With a lifeline the worker ends itself and what it started when the grader dies; a death signal
    # would kill the worker first and leave the processes it adopted (a subreaper's orphans) running.
    if _LIFELINE is None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the grading process died: so do we
    if os.getppid() != grader_pid:
        os._exit(75)


def main(argv: list[str]) -> int:
    global _OUT, _RUNNER
    probe = "--probe" in argv[1:]
    runner_path, wire_path = [a for a in argv[1:] if a != "--probe"][-2:]
    _await_grader(argv)
    _OUT = os.dup(1)  # results go here; print() and stray writes go to the log (stderr)
    os.dup2(2, 1)
    try:
        _prctl(PR_SET_DUMPABLE, 0)  # learner code (the same user) cannot open /proc/<zygote or keeper>/mem
        _RUNNER = runner = _load(runner_path, "_grading_runner")
        wire = _load(wire_path, "_grading_wire")
        _start_keeper(runner, wire)  # it reads the secret part of stdin; the zygote reads the rest
        job, inputs = _read_job(wire)
        if job["level"] == "limits":
            _guard_parent(job["grader_pid"])
        else:  # PID 1 of the sandbox: bubblewrap is the parent, and dies with the grader
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        job["scratch"] = os.getcwd()  # the sandbox's empty /scratch, or the job's scratch folder
        _preimport()
        _prctl(PR_SET_CHILD_SUBREAPER, 1)  # processes the child leaves behind come back to us
        if os.getpid() == 1:  # PID 1 ignores signals it has no handler for: drop Python's SIGINT handler
            signal.signal(signal.SIGINT, signal.SIG_DFL)
    except Exception as exc:
        message = _exception_text(exc)
        print(f"worker: could not start: {message}", file=sys.stderr, flush=True)
        payload = json.dumps({"kind": "fatal", "error": message, "size": 0}).encode()
        try:  # a JSON frame written by hand: wire.py itself may be what failed to load
            _write_all(_OUT, b"J" + len(payload).to_bytes(8, "big") + payload)
        except OSError:
            pass
        return 3
    if probe:
        _probe(job, wire)
    else:
        _zygote(job, inputs, runner, wire)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
