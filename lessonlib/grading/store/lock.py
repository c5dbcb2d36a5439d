"""One grader at a time per course: an exclusive ``flock`` on a lock file beside the gradebook.

The lock file (``gradebook.db.lock``) holds the holder's pid, command line and start time as JSON,
so that a second grader can name the first. The kernel releases an ``flock`` when its holder dies
(``kill -9`` included), so a lock file left by a dead process never blocks anyone: its stale
contents are simply overwritten by the next holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from lessonlib.grading.store.errors import GradebookError


class GraderBusy(GradebookError, RuntimeError):
    """Another grader holds the course's gradebook; the message names it."""

    def __init__(self, message: str, holder: dict[str, object]) -> None:
        super().__init__(message)
        self.holder = holder


def lock_path(database: Path) -> Path:
    return Path(database).with_name(Path(database).name + ".lock")


def _describe(holder: dict[str, object]) -> str:
    if not holder:
        return "another grader (it has not yet written who it is)"
    return (f"process {holder.get('pid', '?')} ({holder.get('command', '?')}), "
            f"running since {holder.get('started_at', '?')}")


def read_holder(path: Path) -> dict[str, object]:
    """What the lock file says about its holder ({} when it is empty or unreadable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class GraderLock:
    """The held lock; ``release()`` (or the holder's death) frees it."""

    path: Path
    fd: int
    holder: dict[str, object]

    def release(self) -> None:
        if self.fd < 0:
            return
        try:
            os.ftruncate(self.fd, 0)  # no stale name for the next reader
        except OSError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> GraderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(database: Path, command: str, *, wait: bool = False, timeout: float | None = None,
            poll: float = 0.2) -> GraderLock:
    """Take the course's grader lock for ``command``.

    wait=False: raise GraderBusy at once, naming the holder. wait=True: wait until the holder ends
    (at most ``timeout`` seconds when given, then GraderBusy).
    """
    path = lock_path(database)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = read_holder(path)
                if not wait or (deadline is not None and time.monotonic() >= deadline):
                    waited = f" after waiting {timeout:g} s" if wait else ""
                    raise GraderBusy(
                        f"the gradebook {database} is in use by {_describe(holder)}{waited}. One grader at a "
                        "time may write a course's gradebook: wait for it to end (or pass the option to wait), "
                        "or stop that process if it is stuck", holder) from None
                time.sleep(poll)
        holder = {"pid": os.getpid(), "command": command or " ".join(sys.argv),
                  "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)
        os.fsync(fd)
        return GraderLock(path, fd, holder)
    except BaseException:
        os.close(fd)
        raise
