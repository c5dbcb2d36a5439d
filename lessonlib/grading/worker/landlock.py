"""Where learner code may write: beneath its scratch folder, and nowhere else (Landlock).

Landlock (Linux 5.13 and later, when the kernel enables it) lets a process give up rights over the
filesystem for itself and everything it starts, without privileges: :func:`confine` keeps every
way of changing a file (writing, truncating, creating, removing, renaming across folders) only
beneath the scratch folder, and writing to ``/dev/null``. Reading is left as it was. A child
confined so leaves nothing for a later child in the machine's shared folders (``/tmp``,
``/run/lock``, ``/var/tmp``, ``/dev/shm``, any other that its user may write), and cannot change a
file its user owns. From Landlock's version 6 (Linux 6.12) it also cannot signal a process
outside its own (the zygote, another learner's worker: at level limits they all run as nobody)
nor reach another's abstract Unix socket (a line to a learner graded at the same time). Where the
kernel has no Landlock, :func:`confine` says so and the zygote removes what each child left in
every folder its user can write (see ``cleanup.py``).
"""

from __future__ import annotations

import ctypes
import errno
import os

from .protocol import libc

# The system calls (the same number on every architecture) and the rights (linux/landlock.h).
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
WRITE_FILE = 1 << 1
WRITES = (WRITE_FILE | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10  # remove a folder or a file,
          | 1 << 11 | 1 << 12)  # make a device, folder, file, socket, pipe or link
REFER, TRUNCATE = 1 << 13, 1 << 14  # moving a file between folders (ABI 2); truncating one (ABI 3)
SCOPED = 1 << 0 | 1 << 1  # abstract Unix sockets and signals, to this process's own domain only (ABI 6)
# A kernel without Landlock, one that has it turned off, or a container's filter that denies calls
# it does not know (Docker's before it knew Landlock's)
UNAVAILABLE = (errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM)


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _call(number: int, *args: object) -> int:
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"landlock: {os.strerror(code)}")
    return result


def abi() -> int:
    """The Landlock version this kernel offers; 0 where it has none."""
    try:
        return _call(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError as exc:
        if exc.errno in UNAVAILABLE:
            return 0
        raise


def _allow(ruleset: int, path: str, rights: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = _PathBeneath(rights, fd)
        _call(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def confine(scratch: str) -> bool:
    """Allow this process (and all it starts) to change files only beneath ``scratch``, and to write
    to ``/dev/null``; from version 6, to signal and reach abstract Unix sockets only within. Needs
    no new privileges set first. False where the kernel has no Landlock."""
    version = abi()
    if version == 0:
        return False
    handled = WRITES | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0)
    # struct landlock_ruleset_attr: the filesystem rights, the network's (none), what is scoped;
    # a kernel before version 6 reads the first two fields alone
    attr = (ctypes.c_uint64 * 3)(handled, 0, SCOPED if version >= 6 else 0)
    size = ctypes.sizeof(attr) if version >= 6 else 8
    ruleset = _call(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        _allow(ruleset, scratch, handled)
        _allow(ruleset, os.devnull, WRITE_FILE | (handled & TRUNCATE))
        _call(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return True
