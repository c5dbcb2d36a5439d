"""What a child leaves behind in files, removed before the next child runs.

At level bubblewrap the sandbox's scratch folder, /tmp and /dev/shm are its own: they are emptied
after each hidden child, so nothing it wrote reaches a later public one. At level limits a child
may write only beneath its scratch folder where the kernel has Landlock (``landlock.py``).
Where it has not, the trial finds every folder outside the scratch folder that the learner's user
can write (:func:`writable_folders`: the machine's world-writable folders, /tmp, /var/tmp,
/dev/shm, /run/lock and any other, and that user's own), and every entry that user made there
during a child is removed when the child ends (what it owned before is left alone).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from .protocol import quietly

# Filesystems that hold no files a process leaves behind: the kernel's views, and POSIX message
# queues (which the filter denies). The trial's search does not enter them.
PSEUDO = frozenset({"proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs", "pstore",
                    "bpf", "configfs", "fusectl", "binfmt_misc", "autofs", "efivarfs", "selinuxfs", "nsfs",
                    "mqueue", "rpc_pipefs"})


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


def _pseudo_mounts() -> set[str]:
    """Mount points of :data:`PSEUDO` filesystems, from /proc/self/mounts."""
    found = set()
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] in PSEUDO:
                    found.add(fields[1].replace("\\040", " "))
    except OSError:
        pass
    return found


def writable_folders(skip: str, seconds: float, top: str = "/") -> tuple[list[str], bool]:
    """Every folder this process's user may create files in, from ``top`` down, outside ``skip``
    (the scratch folder) and the kernel's own filesystems; symbolic links are not followed. Run as
    the user learner code runs as, so that the kernel answers for it (modes, owners, ACLs,
    read-only mounts). Returns the folders and whether the search finished within ``seconds``."""
    deadline = time.monotonic() + seconds
    pruned = _pseudo_mounts() | {os.path.realpath(skip)}
    found: list[str] = []
    stack = [top]
    while stack:
        if time.monotonic() > deadline:
            return sorted(found), False
        folder = stack.pop()
        if os.access(folder, os.W_OK | os.X_OK):
            found.append(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False) and entry.path not in pruned:
                    stack.append(entry.path)
            except OSError:
                continue
    return sorted(found), True


def temp_entries(uid: int, folders: Iterable[str]) -> set[tuple[str, int]]:
    """The entries of ``folders`` that ``uid`` owns, by path and inode."""
    found = set()
    for folder in folders:
        for name in _names(folder):
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if info.st_uid == uid:
                found.add((path, info.st_ino))
    return found


def remove_new_temp(uid: int, before: set[tuple[str, int]], folders: Iterable[str]) -> None:
    """Remove what a child (running as ``uid``) made in ``folders``: every entry that ``uid`` owns
    now and did not own before the child started."""
    _remove([path for path, _ in temp_entries(uid, folders) - before])
