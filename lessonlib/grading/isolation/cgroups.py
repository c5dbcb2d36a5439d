"""One control group per worker: memory and processes bounded for everything learner code starts.

Resource limits (``setrlimit``) bound each process alone: an answer that forks could hold its
memory limit once per process. A control group bounds them together, so :func:`detect` looks for
one that this grading process may create, in this order:

- ``cgroup v2``: as root, a group under ``/sys/fs/cgroup/lessonlib`` (the memory and pids
  controllers enabled on the way down);
- ``cgroup v1``: as root, a group in the memory and in the pids hierarchy, under the grading
  process's own groups;
- ``cgroup v2 (systemd scope)``: as root or as an ordinary user on a machine whose systemd
  delegates the memory controller, each worker started by ``systemd-run --scope`` (``--user``
  for an ordinary user) with ``MemoryMax`` and ``TasksMax``;
- none: the grading process then allows learner code no extra process at all, so that the
  memory limit of its one process bounds the exercise (see ``sandbox.contained_limits``).

The worker's command joins its group before it becomes the worker (:data:`JOIN`, or
systemd-run), so that everything it does is charged there; the grading process checks that the
worker is in its group before the worker runs anything (the worker waits for word on its
lifeline, see ``sandbox.start_worker``), hands it the group's out-of-memory
counter (``memory.events``, or ``memory.oom_control`` in v1) so that a kill by the group is
reported as the memory limit, and kills and removes the group when the worker is done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MOUNT = Path("/sys/fs/cgroup")
V2_PARENT = "lessonlib"  # under the v2 mount, as root
PREFIX = "lessonlib-"  # every group is named lessonlib-<grading pid>-<number>
CONTROLLERS = ("memory", "pids")
# Joins the groups whose cgroup.procs files it is given, then becomes the command after "--": the
# worker's memory is charged to its group from its first page (no preexec_fn in a threaded process).
JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'


class CgroupError(OSError):
    """A control group could not be created, joined or read."""


@dataclass(frozen=True)
class Plan:
    """How this machine gives a worker its control group (``kind`` empty: it does not)."""

    kind: str = ""
    reason: str = ""
    parents: tuple[Path, ...] = ()  # v2: one folder; v1: the memory folder, then the pids folder
    systemd: tuple[str, ...] = ()  # the systemd-run command up to its properties
    bus: tuple[tuple[str, str], ...] = ()  # how systemd-run --user finds the user's service manager
    peak: str = ""  # the file of a group's peak memory, where a child can have a group of its own


@dataclass
class Group:
    """One worker's control group, from creation to removal (``measured``: how many groups of their
    own to make inside it, for children whose peak memory is read)."""

    plan: Plan
    name: str
    memory_bytes: int
    pids: int
    measured: int = 0
    folders: list[Path] = field(default_factory=list)  # v2 or systemd: one; v1: memory, pids
    inner: list[Path] = field(default_factory=list)  # v2: the worker's own group first; then the measured ones

    def homes(self) -> list[Path]:
        """Where the worker's processes go: its ``worker`` group in v2, the group's folders in v1."""
        if self.plan.kind == "cgroup v2" and self.inner:
            return [self.inner[0]]
        return self.folders

    def prefix(self) -> list[str]:
        """What goes before the worker's command: ``systemd-run ... --``, or a shell that joins the group."""
        if not self.plan.systemd:
            return ["/bin/sh", "-c", JOIN, "lessonlib-join", *[str(f / "cgroup.procs") for f in self.homes()], "--"]
        return [*self.plan.systemd, f"--unit={self.name}", "-p", f"MemoryMax={self.memory_bytes}",
                "-p", "MemorySwapMax=0", "-p", f"TasksMax={self.pids}", "--"]

    def create(self) -> None:
        """Make the group's folders and write the limits (a systemd scope is made by systemd-run)."""
        if self.plan.systemd:
            return
        try:
            for parent in self.plan.parents:
                folder = parent / self.name
                folder.mkdir()
                self.folders.append(folder)
            if self.plan.kind == "cgroup v2":
                _write(self.folders[0] / "memory.max", self.memory_bytes)
                _write(self.folders[0] / "memory.swap.max", 0, missing_ok=True)
                _write(self.folders[0] / "pids.max", self.pids)
            else:
                _write(self.folders[0] / "memory.limit_in_bytes", self.memory_bytes)
                _write(self.folders[0] / "memory.memsw.limit_in_bytes", self.memory_bytes, missing_ok=True)
                _write(self.folders[1] / "pids.max", self.pids)
            self._create_inner()
        except OSError as exc:
            self.remove()
            raise CgroupError(f"could not create the control group {self.name}: {exc}") from None

    def _create_inner(self) -> None:
        """The groups inside: in v2 the worker's own (its group then holds no process, so that it may
        hold groups with the memory controller), then one per measured child."""
        if not self.plan.peak:
            return
        names = [f"measured-{k}" for k in range(self.measured)]
        if self.plan.kind == "cgroup v2":
            _write(self.folders[0] / "cgroup.subtree_control", "+memory")
            names.insert(0, "worker")
        for name in names:
            (self.folders[0] / name).mkdir()
            self.inner.append(self.folders[0] / name)

    def measured_groups(self) -> list[Path]:
        return [f for f in self.inner if f.name.startswith("measured-")]

    def adopt(self, pids: Iterable[int], *, timeout: float = 10.0) -> None:
        """Make sure ``pids`` are in the group (the prefix put the first one there, or systemd-run did:
        wait for it), before the worker is told to go."""
        pids = list(pids)
        if self.plan.systemd:
            self.folders = [_wait_for_scope(pids[0], f"{self.name}.scope", timeout)]
            return
        for folder in self.homes():
            for pid in pids:
                try:
                    _write(folder / "cgroup.procs", pid)
                except ProcessLookupError:
                    pass  # it ended already
                except OSError as exc:
                    raise CgroupError(f"could not move process {pid} into {folder}: {exc}") from None

    def open_events(self) -> list[int]:
        """Read-only descriptors of the out-of-memory counters the worker adds up: the group's (v2
        counts the groups inside too), and in v1 each measured group's as well."""
        name = "memory.events" if self.plan.kind != "cgroup v1" else "memory.oom_control"
        folders = self.folders[:1] + (self.measured_groups() if self.plan.kind == "cgroup v1" else [])
        opened: list[int] = []
        try:
            for folder in folders:
                opened.append(os.open(folder / name, os.O_RDONLY | os.O_CLOEXEC))
        except (OSError, IndexError) as exc:
            for fd in opened:
                os.close(fd)
            raise CgroupError(f"could not open the out-of-memory counter of {self.name}: {exc}") from None
        return opened

    def open_measured(self) -> list[int]:
        """Per measured group, a descriptor that moves the process writing ``0`` into it, and one that
        reads its peak memory. Opened here by the grading process: the worker (another user, or
        root's nobody) may write and read through them, never open the files itself."""
        opened: list[int] = []
        try:
            for folder in self.measured_groups():
                opened.append(os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
                opened.append(os.open(folder / self.plan.peak, os.O_RDONLY | os.O_CLOEXEC))
        except OSError as exc:
            for fd in opened:
                os.close(fd)
            raise CgroupError(f"could not open the measured groups of {self.name}: {exc}") from None
        return opened

    def kill(self) -> None:
        """SIGKILL every process in the group (``cgroup.kill`` where the kernel has it)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                _write(folder / "cgroup.kill", 1)
                continue
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                left = _members(folder)
                for pid in left:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                if not left:
                    break
                time.sleep(0.005)

    def remove(self) -> None:
        """Remove the group's folders once their processes are gone (systemd removes its scopes)."""
        if self.plan.systemd:
            return
        for folder in [*self.inner, *self.folders]:
            _rmdir(folder)
        self.inner, self.folders = [], []


def _write(path: Path, value: object, *, missing_ok: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(f"{value}\n")
    except FileNotFoundError:
        if not missing_ok:
            raise


def _members(folder: Path) -> list[int]:
    """The processes in ``folder`` and in the groups inside it."""
    found = []
    for inside, _, _ in os.walk(folder):
        try:
            found += [int(line) for line in (Path(inside) / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def _rmdir(folder: Path, timeout: float = 5.0) -> bool:
    """Remove an empty group; a group empties once its killed processes are reaped."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def group_path(controller: str | None, pid: int | str = "self") -> str | None:
    """The group of process ``pid`` in ``controller``'s v1 hierarchy, or (None) in the v2 hierarchy."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, names, path = line.split(":", 2)
        if (controller is None and number == "0" and names == "") or controller in names.split(","):
            return path
    return None


def _wait_for_scope(pid: int, scope: str, timeout: float) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = group_path(None, pid)
        if path is not None and path.endswith("/" + scope):
            return MOUNT / path.lstrip("/")
        time.sleep(0.005)
    raise CgroupError(f"systemd-run did not start {scope} within {timeout:g} s")


# --- what this machine allows --------------------------------------------------------------------


def _controllers(folder: Path) -> set[str]:
    try:
        return set((folder / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _enable(folder: Path) -> None:
    """Enable the memory and pids controllers for ``folder``'s children (an error says why not)."""
    try:
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
    except OSError as exc:
        raise CgroupError(f"cannot read {folder / 'cgroup.subtree_control'}: {exc.strerror}") from None
    missing = [c for c in CONTROLLERS if c not in enabled]
    if missing:
        try:
            _write(folder / "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
        except OSError as exc:
            raise CgroupError(f"cannot enable {' and '.join(missing)} in {folder}: {exc.strerror}") from None


def _v2_parent() -> Path:
    """As root: ``/sys/fs/cgroup/lessonlib``, with memory and pids enabled for its children."""
    lacking = [c for c in CONTROLLERS if c not in _controllers(MOUNT)]
    if lacking:
        raise CgroupError(f"the cgroup v2 hierarchy offers no {' and no '.join(lacking)} controller")
    _enable(MOUNT)
    parent = MOUNT / V2_PARENT
    try:
        parent.mkdir(exist_ok=True)
    except OSError as exc:
        raise CgroupError(f"cannot create {parent}: {exc.strerror}") from None
    _enable(parent)
    return parent


def _v1_parents() -> tuple[Path, Path]:
    """As root: this process's own groups in the memory and the pids hierarchy."""
    parents = []
    for controller in CONTROLLERS:
        path = group_path(controller)
        folder = MOUNT / controller / (path or "").lstrip("/")
        if path is None or not (folder / "cgroup.procs").exists():
            raise CgroupError(f"no cgroup v1 {controller} hierarchy is mounted at {MOUNT / controller}")
        if not os.access(folder, os.W_OK):
            raise CgroupError(f"{folder} is not writable")
        parents.append(folder)
    return parents[0], parents[1]


BUS_VARIABLES = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")


def bus_environment() -> tuple[tuple[str, str], ...]:
    """The variables systemd-run --user needs (the worker's environment has nothing of the grader's)."""
    return tuple((k, os.environ[k]) for k in BUS_VARIABLES if k in os.environ)


def _systemd_command(user: bool) -> tuple[str, ...]:
    exe = shutil.which("systemd-run")
    if exe is None:
        raise CgroupError("systemd-run is not installed")
    return (exe, *(["--user"] if user else []), "--scope", "--quiet", "--collect")


def _try_systemd(user: bool) -> tuple[str, ...]:
    """systemd-run's command when a trial scope really gets its memory and pids limits."""
    command = _systemd_command(user)
    memory, tasks = 64 * 2**20, 8
    shell = ('g=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup); '
             'cat "$g/memory.max" "$g/pids.max" && test -r "$g/memory.events"')
    trial = [*command, f"--unit=lessonlib-probe-{os.getpid()}", "-p", f"MemoryMax={memory}", "-p",
             f"TasksMax={tasks}", "--", "/bin/sh", "-c", shell]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **dict(bus_environment())}
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CgroupError(f"systemd-run failed: {exc}") from None
    if done.returncode != 0 or done.stdout.split() != [str(memory), str(tasks)]:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise CgroupError(f"a trial scope of systemd-run{' --user' if user else ''} did not get its memory "
                          f"and pids limits ({said[:200]})")
    return command


def _groups_inside(folder: Path) -> list[Path]:
    try:
        return [f for f in folder.iterdir() if f.is_dir()]
    except OSError:
        return []


def sweep(parents: Iterable[Path]) -> None:
    """Remove empty groups left by grading processes that were killed (their pid is gone)."""
    for parent in parents:
        try:
            entries = list(parent.iterdir())
        except OSError:
            continue
        for folder in entries:
            owner = folder.name.removeprefix(PREFIX).split("-")[0]
            if folder.name.startswith(PREFIX) and owner.isdigit() and not Path(f"/proc/{owner}").exists():
                for inner in [*_groups_inside(folder), folder]:
                    with contextlib.suppress(OSError):
                        inner.rmdir()


def detect() -> Plan:
    """The first way to a control group that works here, or why there is none."""
    refused = []
    if os.geteuid() == 0:
        if (MOUNT / "cgroup.controllers").exists():
            try:
                parent = _v2_parent()
                sweep([parent])
                peak = "memory.peak" if (parent / "memory.peak").exists() else ""  # Linux 5.19 and later
                return Plan("cgroup v2", f"a group per worker under {parent}", (parent,), peak=peak)
            except CgroupError as exc:
                refused.append(str(exc))
        elif (MOUNT / "memory").is_dir():
            try:
                parents = _v1_parents()
                sweep(parents)
                return Plan("cgroup v1", f"a group per worker under {parents[0]} and {parents[1]}", parents,
                            peak="memory.max_usage_in_bytes")
            except CgroupError as exc:
                refused.append(str(exc))
    if (MOUNT / "cgroup.controllers").exists():
        user = os.geteuid() != 0
        try:
            command = _try_systemd(user)
            how = "systemd-run --user --scope" if user else "systemd-run --scope"
            return Plan("cgroup v2 (systemd scope)", f"a {how} per worker", systemd=command, bus=bus_environment())
        except CgroupError as exc:
            refused.append(str(exc))
    elif os.geteuid() != 0:
        refused.append("an ordinary user gets a control group only from cgroup v2 (with systemd's delegation); "
                       "this machine has cgroup v1")
    return Plan("", "; ".join(refused) or "no cgroup hierarchy is mounted at /sys/fs/cgroup")


def new_group(plan: Plan, number: int, memory_bytes: int, pids: int, measured: int = 0) -> Group | None:
    """A group for one worker (not yet created), or None where ``plan`` has none (``measured``: the
    worker's children whose peak memory is read, each given a group of its own where ``plan`` can)."""
    if not plan.kind:
        return None
    return Group(plan, f"{PREFIX}{os.getpid()}-{number}", memory_bytes, pids, measured)
