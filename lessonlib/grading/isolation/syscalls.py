"""The system calls learner code may not make: one table, each row with the errno it gets and why.

The worker installs the filter in every child, at both isolation levels, after the child joins a
fresh session keyring and makes itself non-dumpable and before the first line of learner code
(see ``worker/child.py``). The kernel keeps a filter across fork and exec, and no process can
remove one, so learner code and everything it starts stay under it. The grading process builds
the filter once with libseccomp and hands the worker the compiled BPF program in the job.

The denylist follows Docker's default profile and Flatpak's ``setup_seccomp``
(``common/flatpak-run.c``): a denylist lets through system calls newer than itself, an allowlist
does not, but an allowlist would have to follow every call that NumPy, OpenBLAS and a learner's
ordinary Python may make on every libc; what learner code needs is ordinary, what it must not
reach is listed here. Rows whose call this libseccomp does not know are left out, and
:func:`build` says which.

The binding is ``pyseccomp``: a ctypes interface to the system's ``libseccomp.so.2`` (Debian's
``libseccomp2``, present wherever systemd or apt is) with the API of libseccomp's own Python
module. It installs from PyPI into any virtual environment on any CPython, where Debian's
``python3-seccomp`` serves the system Python only and libseccomp's Cython module has no wheels.
"""

from __future__ import annotations

import base64
import errno
import functools
import os
from dataclasses import dataclass
from typing import Any

# clone(2) flags that make a namespace (linux/sched.h)
_NEW_NAMESPACES = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}
CLONE_THREAD = 0x00010000  # a thread of the same process, not a new one
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PER_LINUX = 0
PR_SET_DUMPABLE = 4


INT_BITS = 0xFFFFFFFF  # an ``int`` argument: the kernel reads its low 32 bits and ignores the rest


@dataclass(frozen=True)
class Rule:
    """A system call denied with ``errno``; with ``arg``, only when ``args[arg] & bits == value``
    (``equal=False``: only when ``args[arg] & bits != value``).

    Every argument the rules read is an ``int`` in the kernel (a ``clone`` flag sits in the low 32
    bits of its ``unsigned long``), so ``bits`` never reaches above them: a rule that compared all
    64 bits would let ``prctl(0x100000004, 1)`` through, which the kernel reads as option 4.
    """

    call: str
    errno: int
    why: str
    arg: int | None = None
    bits: int = INT_BITS
    value: int = 0
    equal: bool = True


def _calls(names: str, code: int, why: str) -> list[Rule]:
    return [Rule(name, code, why) for name in names.split()]


KEYRINGS = "kernel keyrings are not namespaced: the grading user's keys, and nobody's, shared by every run"
IPC = "SysV and POSIX IPC objects outlive the process: they would carry hidden inputs to a later child"
NAMESPACES = "a new namespace would undo the sandbox's (user, mount, network, IPC)"
MOUNTS = "mounting would change what the sandbox shows"
TRACING = "reading or steering another process, or the kernel's counters"
KERNEL = "the kernel's and the machine's own settings: no exercise needs them"
NUMA = "memory placement across the machine's nodes (Flatpak denies it too)"
PEAK = "a dumpable process could reset its own peak memory (/proc/self/clear_refs) before the grader reads it"
IO_URING = ("its submission ring does reads, writes and opens that no system call filter sees (Docker's profile "
            "denies it too); ENOSYS, as on a kernel without it, so libraries fall back to ordinary calls")
EXEC = "a new program is dumpable again: where memory is measured, learner code runs no other program"
PROCESS = ("where memory is measured, everything learner code holds sits in the one process whose peak is read: "
           "no new process, at any level and as any user (threads stay)")

DENIED: tuple[Rule, ...] = (
    *_calls("add_key keyctl request_key", errno.EPERM, KEYRINGS),
    *_calls("shmget shmat shmdt shmctl msgget msgsnd msgrcv msgctl semget semop semtimedop semctl ipc "
            "mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr", errno.EPERM, IPC),
    *_calls("unshare setns", errno.EPERM, NAMESPACES),
    *[Rule("clone", errno.EPERM, f"{NAMESPACES} ({flag})", arg=0, bits=bit, value=bit)
      for flag, bit in _NEW_NAMESPACES.items()],
    Rule("clone3", errno.ENOSYS, "its flags sit in memory the filter cannot read; libc falls back to clone"),
    *_calls("mount umount umount2 pivot_root chroot open_tree move_mount fsopen fsconfig fsmount fspick "
            "mount_setattr", errno.EPERM, MOUNTS),
    *_calls("ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp perf_event_open bpf userfaultfd "
            "lookup_dcookie open_by_handle_at", errno.EPERM, TRACING),
    *_calls("kexec_load kexec_file_load init_module finit_module delete_module reboot swapon swapoff syslog acct "
            "quotactl quotactl_fd settimeofday clock_settime clock_adjtime adjtimex iopl ioperm modify_ldt uselib "
            "vhangup nfsservctl _sysctl sysfs ustat", errno.EPERM, KERNEL),
    *_calls("mbind migrate_pages move_pages set_mempolicy", errno.EPERM, NUMA),
    Rule("personality", errno.EPERM, "another personality (a 32-bit address space, say) is no exercise's need",
         arg=0, value=PER_LINUX, equal=False),
    Rule("ioctl", errno.EPERM, "typing into the grading user's terminal (TIOCSTI)", arg=1, value=TIOCSTI),
    Rule("ioctl", errno.EPERM, "the virtual console's own commands (TIOCLINUX)", arg=1, value=TIOCLINUX),
    Rule("prctl", errno.EPERM, PEAK, arg=0, value=PR_SET_DUMPABLE),
    *_calls("io_uring_setup io_uring_enter io_uring_register", errno.ENOSYS, IO_URING),
)
# Only where the child's memory is measured (an exercise that checks peak memory).
STRICT: tuple[Rule, ...] = (
    *_calls("execve execveat", errno.EPERM, EXEC),
    *_calls("fork vfork", errno.EPERM, PROCESS),
    Rule("clone", errno.EPERM, PROCESS, arg=0, bits=CLONE_THREAD, value=0),
)


class FilterError(RuntimeError):
    """The filter cannot be built here (no libseccomp, or no binding for it)."""


def _seccomp() -> Any:
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # OSError: the binding found no libseccomp.so.2
        raise FilterError(f"libseccomp is not usable ({exc}): install the system package libseccomp2 "
                          "(Debian/Ubuntu) and the Python package pyseccomp") from None
    return pyseccomp


def _comparisons(seccomp: Any, rule: Rule) -> list[list[Any]]:
    """The argument comparisons of ``rule``, each list one libseccomp rule (they deny when any matches).

    Only masked equality reads an argument's low 32 bits alone (libseccomp's other operators compare
    all 64), so "not equal" becomes one rule per bit: the argument differs from ``value`` where
    some bit of ``bits`` differs.
    """
    if rule.arg is None:
        return [[]]
    if rule.equal:
        return [[seccomp.Arg(rule.arg, seccomp.MASKED_EQ, rule.bits, rule.value)]]
    bits = [1 << i for i in range(32) if rule.bits >> i & 1]
    return [[seccomp.Arg(rule.arg, seccomp.MASKED_EQ, bit, ~rule.value & bit)] for bit in bits]


def _export(rules: tuple[Rule, ...]) -> tuple[bytes, list[str]]:
    """The BPF program that allows every call but ``rules``, and the calls this libseccomp does not know."""
    seccomp = _seccomp()
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    unknown = []
    for rule in rules:
        if seccomp.resolve_syscall(seccomp.Arch.NATIVE, rule.call) < 0:
            unknown.append(rule.call)
            continue
        for args in _comparisons(seccomp, rule):
            f.add_rule(seccomp.ERRNO(rule.errno), rule.call, *args)
    fd = os.memfd_create("lessonlib-seccomp")
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            f.export_bpf(out)
        os.lseek(fd, 0, os.SEEK_SET)
        program = b""
        while chunk := os.read(fd, 1 << 16):
            program += chunk
    finally:
        os.close(fd)
    return program, sorted(set(unknown))


PROBED = ("keyctl", "prctl", "io_uring_setup")  # calls the trial child makes by number (see worker/child.py)


@functools.cache
def build() -> dict[str, Any]:
    """The filters for the job: ``filter`` (every child) and ``strict`` (a child whose memory is
    measured), base64 BPF programs; ``keyctl``, the number of the call that joins a fresh session
    keyring; ``calls``, the numbers of the calls in :data:`PROBED` that this machine has (the trial
    child tries them); ``unknown``, denied calls this libseccomp could not name (so not in the filter).

    Raises FilterError when libseccomp cannot be used: learner code never runs without the filter.
    """
    program, unknown = _export(DENIED)
    strict, _ = _export(DENIED + STRICT)
    seccomp = _seccomp()
    numbers = {name: seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) for name in PROBED}
    calls = {name: number for name, number in numbers.items() if number >= 0}
    return {"filter": base64.b64encode(program).decode(), "strict": base64.b64encode(strict).decode(),
            "keyctl": calls.get("keyctl"), "calls": calls, "unknown": unknown}
