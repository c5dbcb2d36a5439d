"""The keeper: the one process that holds probes and hidden inputs.

Forked first, before the job is read, it reads the secret part of the job (the first frames on
stdin) itself, so the zygote, and every child forked from it, never holds a probe's description
or a hidden input. Each child gets a socket to the keeper: a "public" child may only call probes;
a "hidden" child may also fetch its exercise's hidden cases. The keeper is not dumpable and runs
no learner code: nothing learner code can read says which mask a layer has.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
from typing import Any

from . import protocol
from .protocol import PR_SET_PDEATHSIG, prctl


def _read_secrets(wire: Any) -> dict[str, Any]:
    """The secret part of the job, from stdin: a JSON frame, then its ``.npy`` frames (read with
    unbuffered reads, so the zygote's stdin starts exactly after it)."""
    kind, payload = protocol.read_frame_fd(0, wire, 1 << 26)
    if kind != "json":
        raise ValueError("the job does not start with its secret part")
    secrets = json.loads(payload.decode())
    limit = secrets["array_bytes"]
    arrays = []
    for _ in range(int(secrets["arrays"])):
        kind, payload = protocol.read_frame_fd(0, wire, limit + 4096)
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


def _serve(line: socket.socket, hidden: bool, secrets: dict[str, Any], runner: Any, wire: Any) -> None:
    head, arrays = protocol.recv_message(line, wire, secrets["array_bytes"])
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


def serve(control: socket.socket, runner: Any, wire: Any) -> None:
    """The keeper's life: read the secrets, say ready, then answer children until the zygote goes."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    secrets = _read_secrets(wire)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.closerange(3, control.fileno())
    os.closerange(control.fileno() + 1, 1 << 16)
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
                _serve(line, lines[line], secrets, runner, wire)
            except (OSError, EOFError, ValueError, KeyError, TypeError):
                lines.pop(line)
                line.close()


def open_line(control: socket.socket, hidden: bool) -> int:
    """A new socket to the keeper for one child: the child's end (the keeper got the other)."""
    child_end, keeper_end = socket.socketpair()
    # the keeper may be gone (learner code may kill it): probe calls will fail then, nothing else
    protocol.quietly(socket.send_fds, control, [b"H" if hidden else b"P"], [keeper_end.fileno()])
    keeper_end.close()
    return child_end.detach()
