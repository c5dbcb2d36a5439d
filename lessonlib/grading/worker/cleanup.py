"""What a child leaves behind in files, removed before the next child runs.

At level bubblewrap the sandbox's scratch folder, /tmp and /dev/shm are its own: they are emptied
after each hidden child, so nothing it wrote reaches a later public one. At level limits learner
code can also write to the machine's shared temporary folders: every entry that the learner's
user made there during a child is removed when the child ends (what it owned before is left
alone: at that level learner code can change that user's own files, as the warning says).
"""

from __future__ import annotations

import os

from .protocol import quietly

# Folders every user may write, outside the sandbox.
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def wipe(folders: list[str]) -> None:
    """Empty ``folders``: their files belong to this user, so a folder made unreadable is opened
    first; no recursion, so no depth of nesting stops it."""
    _remove([os.path.join(folder, name) for folder in folders for name in _names(folder)])


def _remove(paths: list[str]) -> None:
    stack = [(path, False) for path in paths]
    while stack:
        path, emptied = stack.pop()
        if emptied:
            quietly(os.rmdir, path)
        elif os.path.isdir(path) and not os.path.islink(path):
            quietly(os.chmod, path, 0o700)
            stack.append((path, True))
            stack += [(os.path.join(path, name), False) for name in _names(path)]
        else:
            quietly(os.unlink, path)


def temp_entries(uid: int) -> set[tuple[str, int]]:
    """The entries of the shared temporary folders that ``uid`` owns, by path and inode."""
    found = set()
    for folder in SHARED_TEMP:
        for name in _names(folder):
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if info.st_uid == uid:
                found.add((path, info.st_ino))
    return found


def remove_new_temp(uid: int, before: set[tuple[str, int]]) -> None:
    """Remove what a child (running as ``uid``) made in the shared temporary folders: every entry
    that ``uid`` owns now and did not own before the child started."""
    _remove([path for path, _ in temp_entries(uid) - before])
