"""What the worker's processes share: prctl, loading files by path, and reading and writing frames.

Frames are ``wire.py``'s (loaded by path, passed in as ``wire``): the zygote writes records to
the grading process, a child streams frames to the zygote, and a child and the keeper exchange
messages (a JSON frame whose ``arrays`` counts the ``.npy`` frames after it).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import socket
import sys
import types
from typing import Any

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 36, 38
SECCOMP_MODE_FILTER = 2

libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int, arg: int = 0) -> None:
    if libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(arg), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl {option}: {os.strerror(errno)}")


def load(path: str, name: str) -> types.ModuleType:
    """The module in the file ``path``, under ``name`` (never an import of lessonlib)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def exception_text(runner: Any, exc: BaseException, filename: str | None = None) -> str:
    """The runner's ``error_text`` (one function for the notebook's check() and the grader)."""
    if runner is None:  # the runner itself failed to load
        return f"{type(exc).__name__}: {exc}"[:2000]
    return runner.error_text(exc, filename)


def quietly(action: Any, *args: Any) -> None:
    try:
        action(*args)
    except OSError:
        pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_exact(read: Any, n: int) -> bytes:
    """``n`` bytes from ``read`` (os.read on a descriptor, or a socket's recv), however they come."""
    chunks, got = [], 0
    while got < n:
        chunk = read(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the stream ended early")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame_fd(fd: int, wire: Any, limit: int) -> tuple[str, bytes]:
    kind, length = wire.unpack_header(read_exact(lambda k: os.read(fd, k), wire.HEADER_SIZE))
    if length > limit:
        raise ValueError(f"a frame of {length} bytes in the job (limit {limit})")
    return kind, read_exact(lambda k: os.read(fd, k), length)


def recv_message(line: socket.socket, wire: Any, array_limit: int) -> tuple[dict[str, Any], list[Any]]:
    """One message: a JSON frame whose ``arrays`` counts the ``.npy`` frames after it (at most 64)."""
    kind, length = wire.unpack_header(read_exact(line.recv, wire.HEADER_SIZE))
    if kind != "json" or length > wire.MAX_JSON_FRAME:
        raise ValueError("a message that does not start with a JSON frame")
    head = wire.load_json(read_exact(line.recv, length))
    count = head.get("arrays", 0) if isinstance(head, dict) else -1
    if not isinstance(count, int) or not 0 <= count <= 64:
        raise ValueError("a message with an unreadable array count")
    arrays = []
    for _ in range(count):
        kind, length = wire.unpack_header(read_exact(line.recv, wire.HEADER_SIZE))
        if kind != "npy" or length > array_limit + 4096:
            raise ValueError("an array frame too large or of the wrong kind")
        arrays.append(wire.load_npy(read_exact(line.recv, length), array_limit))
    return head, arrays
