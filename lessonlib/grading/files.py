"""Writing files so that a reader sees the old version or the new one, never half of either, and
that only their owner can read: grades, feedback and keys are the instructor's alone (0600 files,
0700 folders), whatever the umask."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write to a temporary file in the same folder, flush it to disk, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: Path, data: Any, *, mode: int = 0o600) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, allow_nan=False) + "\n", mode=mode)


def owner_only(folder: Path) -> None:
    """Make ``folder`` and everything in it readable by its owner alone (no access for the group or
    others), as earlier versions, which wrote 0755 folders and 0644 files, may have left it."""
    for top, folders, files in os.walk(folder):
        os.chmod(top, stat.S_IMODE(os.lstat(top).st_mode) & 0o700)
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & 0o700)
        folders[:] = [d for d in folders if not os.path.islink(os.path.join(top, d))]


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def os_error_line(exc: OSError) -> str:
    """An operating system's error while reading or writing the grader's files, as one line that says
    what to do (what was saved before it stays saved)."""
    import errno

    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return (f"no space left on the disk{where}: free some space and run the same command again (what was saved "
                "is kept)")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"cannot write{where}: the folder is read-only or not yours; give yourself write permission, or "
                "use a folder you can write")
    return f"{exc.strerror or exc}{where}"
