"""The worker's isolation, seen from the grading process: levels, limits, the command line, a probe.

Two levels; ``--isolation auto`` takes the first that a trial run verifies:

- ``bubblewrap``: the worker runs inside a bubblewrap sandbox (``bwrap``, Debian/Ubuntu package
  ``bubblewrap``), for root and for an ordinary user alike. New user (as an ordinary user), mount,
  PID, network, IPC and UTS namespaces; the root is an empty tmpfs holding only the system
  libraries and the Python installation (read-only), the worker's files and an empty
  scratch folder: nothing of the course, the output folder or any submission exists in there.
  As root, learner code runs as ``nobody``. The worker is PID 1 of the sandbox, so learner code
  cannot signal it, and the grading process is not in its PID namespace at all.
- ``limits``: the worker runs as the grading user (as ``nobody`` when that is root: learner code
  never runs as root) with resource limits only. Learner code can
  read and write whatever that user can (solutions/ and the output folder included), use the
  network and signal the grader: :data:`LIMITS_WARNING` says so, loudly, at every run.

Both levels apply the same resource limits (CPU time, address space, processes, file size), the
same guard around what the kernel shares (a fresh session keyring, non-dumpable, and the seccomp
filter of ``syscalls.py``, installed in each child: :func:`kernel_guard`) and the same bounded,
plain-data results. At level bubblewrap the installed lessonlib's folder is empty inside the
sandbox; at level limits learner code can read it (the trial records whether it can import it:
``installed_lessonlib_importable``), as it can read everything the grading user can. The worker
reads its job on stdin and writes its results on stdout (see ``worker/``), so it needs no view of
the job folder.

Memory and processes are bounded per worker, on the host, by a control group where one can be
had (``cgroups.py``); where none can, learner code may start no extra process, so that the
address-space limit of its one process bounds the exercise (:func:`contained_limits`). Either
way an exercise holds at most ``--memory`` plus :func:`margin_mb` of the host's memory.

Nothing outlives the grading process: the worker holds one end of a lifeline (a socket whose
other end only the grading process holds) and ends everything it started when it breaks, even
after kill -9 of the grader; :func:`stop_worker` kills the sandbox's PID 1 (from bubblewrap's
``--info-fd``) and the control group from outside.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import lessonlib
from lessonlib.grading import cgroups, syscalls, wire

LEVELS = ("bubblewrap", "limits")
WORKER = Path(__file__).with_name("worker")  # the worker's package; its entry point is main.py
WIRE = Path(__file__).with_name("wire.py")
RUNNER = Path(__file__).resolve().parents[1] / "exercises" / "runner.py"

INSIDE = "/lessonlib-grader"  # where the worker's package, runner.py and wire.py appear in the sandbox
SCRATCH = "/scratch"
JOB_FILE = "job.bin"  # the job, fed to the worker's stdin: one JSON frame, then the inputs' .npy frames
OUT_FILE = "worker.out"  # the worker's stdout: records (see read_records)

# System folders bound read-only (a symbolic link, as /lib on merged-/usr systems, stays a link).
_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
# From /etc only what the dynamic loader and the time zone need (never passwd, shadow or keys).
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")

SUMMARY = {
    "bubblewrap": "learner code runs in a bubblewrap sandbox: no network, no course files, no output "
                  "folder, no other submissions, cannot signal the grader; under resource limits",
    "limits": "learner code runs as the grading user (nobody, for root) under resource limits only",
}
LIMITS_WARNING = (
    "WARNING: learner code is NOT isolated. It runs as {user} and can read and write every file "
    "{user} can (solutions/, the output folder and other learners' submissions included), open "
    "network connections, and signal the grading process. Only CPU time, memory, processes and "
    "file size are limited. Install bubblewrap (Debian/Ubuntu: apt install bubblewrap) to isolate it."
)


class IsolationError(RuntimeError):
    """The requested isolation cannot be set up on this machine."""


@dataclass(frozen=True)
class Limits:
    """What one exercise's run may use. ``cpu_seconds`` is the --timeout; the wall clock allows more."""

    cpu_seconds: float = 10.0
    memory_mb: int = 1024
    processes: int = 32
    file_mb: int = 16
    scratch_mb: int = 64
    result_mb: int = 32
    array_mb: int = 8
    job_result_mb: int = 64  # everything one learner's answers send back, all exercises together

    @property
    def wall_seconds(self) -> float:
        """Time allowed on the clock: a sleeping or blocked answer is stopped too."""
        return 2 * self.cpu_seconds + 1

    def for_job(self, nproc_base: int) -> dict[str, Any]:
        mb = 2**20
        return {
            "cpu_seconds": self.cpu_seconds, "wall_seconds": self.wall_seconds,
            "memory_bytes": self.memory_mb * mb, "processes": self.processes, "nproc_base": nproc_base,
            "file_bytes": self.file_mb * mb, "scratch_bytes": self.scratch_mb * mb,
            "result_bytes": self.result_mb * mb, "array_bytes": self.array_mb * mb,
            "job_result_bytes": self.job_result_mb * mb,
        }


@dataclass(frozen=True)
class Isolation:
    """The level in use, why, what the probe verified, and (for ``limits``) what is not protected."""

    level: str
    summary: str
    reason: str = ""
    verified: dict[str, Any] = field(default_factory=dict)
    warning: str = ""
    limits: dict[str, Any] = field(default_factory=dict)  # which limit holds memory and processes (see held)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def nobody() -> tuple[int, int]:
    """uid and gid of the unprivileged user ``nobody`` (65534 when the system has no such entry)."""
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def project_root() -> Path | None:
    """The source checkout holding the course files, when lessonlib runs from one."""
    root = Path(lessonlib.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").exists() else None


def count_processes(uid: int) -> int:
    """Processes running as ``uid`` now, from /proc (the process limit counts from here)."""
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("Uid:"):
                            n += int(line.split()[1]) == uid
                            break
            except OSError:
                pass
    return n


def bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return shutil.which("bwrap")


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def interpreter_folders() -> list[Path]:
    """Folders the worker's Python needs: the environment, its base installation, NumPy's folder."""
    import numpy as np

    found: list[Path] = []
    for p in (sys.prefix, sys.base_prefix, Path(sys.executable).parent, Path(np.__file__).parent):
        for path in {Path(os.path.abspath(p)), _real(p)}:
            if path.is_dir() and not any(_within(path, f) for f in found):
                found = [f for f in found if not _within(f, path)] + [path]
    return sorted(found)


def installed_package() -> Path | None:
    """The folder of the installed lessonlib package (None when it runs from a source checkout,
    which the sandbox does not bind at all)."""
    return None if project_root() is not None else _real(Path(lessonlib.__file__).parent)


def course_folder() -> Path:
    """The course learner code must not see: the checkout lessonlib runs from, or else (an installed
    package, as ``pip install`` leaves it) the folder the grader was started in."""
    return project_root() or Path.cwd()


def protected_folders(out_dir: Path, submissions: Sequence[Path]) -> list[Path]:
    """What learner code must never see: the course, the output folder, the submissions.

    The installed package is not among them: learners have lessonlib anyway, and an installed
    package sits inside the Python environment that the sandbox binds.
    """
    paths = [course_folder(), out_dir, *[s if s.is_dir() else s.parent for s in submissions]]
    return [_real(p) for p in paths]


def bwrap_command(python_args: list[str], limits: Limits, *, protected: Sequence[Path],
                  info_fd: int | None = None) -> list[str]:
    """The ``bwrap ...`` command that runs ``python_args`` (after the interpreter) in the sandbox
    (bubblewrap writes the sandbox's PID 1 to ``info_fd``, see :func:`start_worker`).

    Raises IsolationError when a folder the interpreter needs holds a protected folder (binding
    it would expose the course or the output folder).
    """
    exe = bwrap()
    if exe is None:
        raise IsolationError("bwrap is not installed")
    command = [exe, "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
    if info_fd is not None:
        command += ["--info-fd", str(info_fd)]
    root = os.geteuid() == 0
    if root:  # no user namespace: learner code becomes the real nobody (setpriv, below)
        command += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    else:
        command += ["--unshare-all", "--unshare-user", "--disable-userns"]
    for folder in _SYSTEM:
        if os.path.islink(folder):
            command += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            command += ["--ro-bind", folder, folder]
    for entry in _ETC:
        command += ["--ro-bind-try", entry, entry]
    # The writable places, each of bounded size, come before the interpreter's folders: a Python
    # environment under /tmp (a checkout in a temporary folder) is then bound on top of the empty
    # /tmp instead of being hidden by it.
    for folder in ("/tmp", SCRATCH):
        command += ["--perms", "1777", "--size", str(limits.scratch_mb * 2**20), "--tmpfs", folder]
    made: set[str] = {"/tmp", SCRATCH}

    def parents(path: Path) -> list[str]:  # bubblewrap would make them 0700 as root: make them 0755
        new = [str(p) for p in reversed(path.parents) if str(p) != "/" and str(p) not in made]
        made.update(new)
        return [arg for p in new for arg in ("--perms", "0755", "--dir", p)]

    for folder in interpreter_folders():
        exposed = [p for p in protected if _within(p, folder)]
        if exposed:
            raise IsolationError(f"the Python installation in {folder} contains {exposed[0]}, which learner "
                                 "code must not see: use a Python installed elsewhere")
        command += [*parents(folder), "--ro-bind", str(folder), str(folder)]
    package = installed_package()
    if package is not None and any(_within(package, f) for f in interpreter_folders()):
        # the installed lessonlib is empty in here: learner code that removes the stand-in finds nothing
        command += ["--perms", "0555", "--tmpfs", str(package), "--remount-ro", str(package)]
    command += parents(Path(INSIDE, WORKER.name, "main.py"))
    for source in (WORKER, RUNNER, WIRE):
        command += ["--ro-bind", str(source), f"{INSIDE}/{source.name}"]
    command += ["--proc", "/proc", "--dev", "/dev"]
    command += ["--perms", "1777", "--size", str(limits.scratch_mb * 2**20), "--tmpfs", "/dev/shm"]
    # the sandbox's own root and /dev are unbounded tmpfs: read-only, so they cannot fill the memory
    command += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SCRATCH]
    for name, value in worker_env(SCRATCH).items():
        command += ["--setenv", name, value]
    command.append("--")
    return command + (as_nobody() if root else []) + [sys.executable, *python_args]


def as_nobody() -> list[str]:
    """The ``setpriv`` prefix that runs a command as the real ``nobody``, with no capabilities and
    no new privileges: learner code never runs as root, at either level."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    uid, gid = nobody()
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]


@functools.cache
def python_refused_to_nobody(python: str = sys.executable) -> str:
    """As root, why ``nobody`` (who runs learner code at level limits) cannot start ``python``;
    "" when it can, or when the grader is not root. A Python under a folder only root may read
    (one built in /root, say) cannot serve level limits as root."""
    if os.geteuid() != 0:
        return ""
    try:
        ran = subprocess.run([*as_nobody(), python, "-I", "-c", "pass"], capture_output=True, text=True,
                             timeout=60, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"learner code runs as nobody, who could not start {python}: {exc}"
    if ran.returncode == 0:
        return ""
    said = (ran.stderr.strip().splitlines() or [f"exit status {ran.returncode}"])[-1]
    return (f"learner code runs as nobody, who cannot start this Python ({said}); grade with a Python every "
            "user may run (a venv made from /usr/bin/python3, say) or as an ordinary user")


_SCRATCH_TOP: list[Path] = []  # the folder of this process's scratch folders for nobody, once made
SCRATCH_PREFIX = "lessonlib-scratch-"  # then the grading process's pid


def _sweep_scratch() -> None:
    """Remove the scratch folders of grading processes that no longer run (killed before their exit
    handler could)."""
    for top in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = top.name.removeprefix(SCRATCH_PREFIX).split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and top.stat().st_uid == os.geteuid():
            shutil.rmtree(top, ignore_errors=True)


def _nobody_scratch(job_dir: Path) -> Path:
    """As root at level limits, a fresh scratch folder owned by nobody, outside the grader's folders
    (which nobody cannot enter): in one folder per grading process, which nobody cannot list,
    removed when the process exits. ``job_dir/scratch`` links to it; the next launch replaces it."""
    link = job_dir / "scratch"
    if link.is_symlink():
        shutil.rmtree(os.readlink(link), ignore_errors=True)
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link, ignore_errors=True)
    if not _SCRATCH_TOP:
        _sweep_scratch()
        top = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        os.chmod(top, 0o711)
        atexit.register(shutil.rmtree, top, True)
        _SCRATCH_TOP.append(top)
    scratch = Path(tempfile.mkdtemp(dir=_SCRATCH_TOP[0]))
    os.chown(scratch, *nobody())
    link.symlink_to(scratch)
    return scratch


def worker_env(scratch: str) -> dict[str, str]:
    """A small environment: nothing of the grader's (no tokens, no seed) reaches the worker."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "HOME": scratch,
        "TMPDIR": scratch, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def launch(level: str, limits: Limits, job_dir: Path, *, protected: Sequence[Path], probe: bool = False,
           lifeline: int | None = None, info_fd: int | None = None) -> tuple[list[str], Path]:
    """The command that starts the worker (``worker/main.py``) for one job at ``level``, and the folder it starts in
    (``lifeline``: the worker's end of its lifeline; ``info_fd``: where bubblewrap writes the sandbox's PID)."""
    flags = (["--probe"] if probe else []) + (["--lifeline", str(lifeline)] if lifeline is not None else [])
    if level == "bubblewrap":
        args = ["-I", "-B", f"{INSIDE}/{WORKER.name}/main.py", *flags, f"{INSIDE}/{RUNNER.name}",
                f"{INSIDE}/{WIRE.name}"]
        return bwrap_command(args, limits, protected=protected, info_fd=info_fd), job_dir
    command = [sys.executable, "-I", "-B", str(WORKER / "main.py"), *flags, str(RUNNER), str(WIRE)]
    if os.geteuid() == 0:
        return as_nobody() + command, _nobody_scratch(job_dir)
    scratch = job_dir / "scratch"
    scratch.mkdir(mode=0o700, exist_ok=True)
    return command, scratch


PER_WORKER = 3  # processes of one worker before learner code starts one: the zygote, the keeper, the child


def nproc_base(level: str, workers: int) -> int:
    """Processes the limit counts before learner code starts one: RLIMIT_NPROC counts per user.

    In an ordinary user's sandbox (a new user namespace) only the sandbox's own processes count
    (the zygote, the keeper and the child); as root, learner code is the real nobody at either
    level, counted system-wide.
    """
    if level == "bubblewrap" and os.geteuid() != 0:
        return PER_WORKER
    return count_processes(nobody()[0] if os.geteuid() == 0 else os.getuid()) + PER_WORKER * workers


def kernel_guard() -> dict[str, Any]:
    """What each child installs before learner code runs (``syscalls.build``: the seccomp filters and
    the call that joins a fresh session keyring). Raises IsolationError where it cannot be built:
    learner code never runs without it, at either level."""
    try:
        return syscalls.build()
    except syscalls.FilterError as exc:
        raise IsolationError(str(exc)) from None


def job_head(level: str, limits: dict[str, Any], *, solo: bool = False) -> dict[str, Any]:
    """What every job starts with: the level, the limits (``Limits.for_job``), the kernel guard
    each child installs, and the grading process's pid; ``tasks`` (or ``probe``) follow."""
    return {"version": 2, "grader_pid": os.getpid(), "level": level, "solo": solo, "tasks": [],
            "limits": limits, "kernel": kernel_guard()}


def secret_part(limits: dict[str, Any], probes: dict[str, str] | None = None,
                hidden: dict[str, list[dict[str, Any]]] | None = None, arrays: int = 0) -> dict[str, Any]:
    """The head of the job that only the worker's keeper reads: the probes' descriptions by handle,
    each exercise's hidden cases (their arrays follow as ``arrays`` ``.npy`` frames), and the limits
    the keeper needs."""
    return {"probes": probes or {}, "hidden": hidden or {}, "arrays": arrays,
            "array_bytes": limits["array_bytes"], "memory_bytes": limits["memory_bytes"]}


def write_job(job_dir: Path, job: dict[str, Any], arrays: Sequence[bytes] = (), *,
              secrets: dict[str, Any] | None = None, secret_arrays: Sequence[bytes] = ()) -> None:
    """The worker's stdin: the secret part (a JSON frame and its arrays, read by the keeper alone),
    then the job as one JSON frame, then the public inputs' ``.npy`` frames."""
    path = job_dir / JOB_FILE
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(wire.json_frame(secrets or secret_part(job["limits"])))
        f.write(b"".join(secret_arrays))
        f.write(wire.json_frame(job))
        f.write(b"".join(arrays))


# --- memory and processes per exercise, on the host ----------------------------------------------

WORKER_MB = 128  # the zygote and the keeper: Python, NumPy and the modules imported for learner code


def margin_mb(level: str, limits: Limits) -> int:
    """Host memory a worker may hold beyond ``--memory``: the worker itself and, at level bubblewrap,
    the sandbox's /tmp, /scratch and /dev/shm (tmpfs: their files live in memory)."""
    return WORKER_MB + (3 * limits.scratch_mb if level == "bubblewrap" else 0)


def contained_limits(limits: Limits, plan: cgroups.Plan) -> Limits:
    """The limits a job runs under: without a control group, learner code may start no process, so
    that the address-space limit of its one process bounds the whole exercise."""
    return limits if plan.kind else replace(limits, processes=0)


def held(level: str, limits: Limits, plan: cgroups.Plan, *, could_fork: bool) -> dict[str, Any]:
    """What bounds memory and processes at ``level``, for the gradebook (``limits`` as contained)."""
    margin = margin_mb(level, limits)
    parts = f"{WORKER_MB} MB for the worker itself (the zygote and the keeper)"
    if level == "bubblewrap":
        parts += f" and {3 * limits.scratch_mb} MB for the sandbox's /tmp, /scratch and /dev/shm (tmpfs)"
    record: dict[str, Any] = {
        "memory": plan.kind or "per process", "processes": plan.kind or "per user (RLIMIT_NPROC)",
        "extra_processes": limits.processes, "host_memory_mb": limits.memory_mb + margin,
        "margin_mb": margin, "margin": parts, "how": plan.reason if plan.kind else
        f"no control group ({plan.reason}): learner code may start no process",
    }
    if not plan.kind and could_fork:  # root is exempt from RLIMIT_NPROC (level limits, as root)
        record.update(processes="not limited", host_memory_mb=None,
                      how=f"no control group ({plan.reason}), and learner code could start processes: "
                          "memory is limited per process only")
    return record


# --- starting and stopping a worker -----------------------------------------------------------------


@dataclass
class Worker:
    """A running worker: its process, the grading process's end of its lifeline, its sandbox's PID 1
    (a pidfd, at level bubblewrap) and its control group."""

    process: subprocess.Popen
    lifeline: socket.socket
    group: cgroups.Group | None = None
    sandbox: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _popen(job_dir: Path, command: list[str], cwd: Path, pass_fds: Sequence[int],
           bus: Sequence[tuple[str, str]] = ()) -> subprocess.Popen:
    """Start ``command`` on ``job_dir/job.bin`` in its own session; stdout to worker.out, stderr to worker.log
    (``bus``: what systemd-run needs besides the worker's environment)."""
    log_path = job_dir / "worker.log"
    log_path.touch(mode=0o600)
    out_fd = os.open(job_dir / OUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(job_dir / JOB_FILE, "rb") as stdin, open(out_fd, "wb") as stdout, open(log_path, "ab") as log:
        return subprocess.Popen(
            command, stdin=stdin, stdout=stdout, stderr=log, env={**worker_env(str(cwd)), **dict(bus)},
            cwd=cwd, start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds),
        )


def _read_info(fd: int, timeout: float = 30.0) -> dict[str, Any]:
    """bubblewrap's ``--info-fd`` JSON (empty when bubblewrap ended without writing it)."""
    data = b""
    while select.select([fd], [], [], timeout)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            info = json.loads(data)
            return info if isinstance(info, dict) else {}
        except ValueError:
            continue
    return {}


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from /proc."""
    parents = {int(e): _parent_of(int(e)) for e in os.listdir("/proc") if e.isdigit()}
    found = [pid]
    for p in found:
        found += [child for child, parent in parents.items() if parent == p and child not in found]
    return found


def _sandbox_pidfd(info_fd: int, bwrap_pid: int) -> int | None:
    """A pidfd of the sandbox's PID 1 (bubblewrap's child): killing it ends every process in the sandbox."""
    child = _read_info(info_fd).get("child-pid")
    if not isinstance(child, int):
        return None
    try:
        pidfd = os.pidfd_open(child)
    except OSError:
        return None
    if _parent_of(child) != bwrap_pid:  # it ended, and its pid went to another process
        os.close(pidfd)
        return None
    return pidfd


def start_worker(job_dir: Path, level: str, limits: Limits, *, protected: Sequence[Path], plan: cgroups.Plan,
                 number: int = 0, probe: bool = False) -> Worker:
    """Start the worker on ``job_dir/job.bin``, in its control group when ``plan`` has one.

    The worker waits for word on its lifeline before it runs anything: the grading process first
    puts bubblewrap and the sandbox in the group, then sends "go" with the group's out-of-memory
    counter. Raises CgroupError when the group cannot be made or joined (learner code never runs
    outside it then).
    """
    lifeline, far = socket.socketpair()
    info_r, info_w = os.pipe() if level == "bubblewrap" else (None, None)
    group = cgroups.new_group(plan, number, (limits.memory_mb + margin_mb(level, limits)) * 2**20,
                              limits.processes + PER_WORKER + 1)  # bubblewrap, the zygote, the keeper, the child
    try:
        if group is not None:
            group.create()
        command, cwd = launch(level, limits, job_dir, protected=protected, probe=probe, lifeline=far.fileno(),
                              info_fd=info_w)
        prefix = group.prefix() if group is not None else []
        fds = [far.fileno()] + ([info_w] if info_w is not None else [])
        process = _popen(job_dir, prefix + command, cwd, fds, plan.bus)
    except BaseException:
        lifeline.close()
        if info_r is not None:
            os.close(info_r)
        if group is not None:
            group.remove()
        raise
    finally:
        far.close()
        if info_w is not None:
            os.close(info_w)
    worker = Worker(process, lifeline, group)
    try:
        if info_r is not None:
            worker.sandbox = _sandbox_pidfd(info_r, process.pid)
        events = None
        if group is not None:
            group.adopt(_descendants(process.pid))
            events = group.open_events()
        try:
            socket.send_fds(lifeline, [b"go"], [events] if events is not None else [])
        except OSError:  # the worker ended already: its log says why
            pass
        finally:
            if events is not None:
                os.close(events)
    except BaseException:
        stop_worker(worker)
        raise
    finally:
        if info_r is not None:
            os.close(info_r)
    return worker


def stop_worker(worker: Worker) -> None:
    """End the worker and everything it started, then remove its control group. Safe to call again,
    and after the worker ended by itself.

    Each way alone would do: the lifeline breaks (the worker kills what it started and exits), the
    sandbox's PID 1 is killed (the kernel ends its PID namespace), the group is killed.
    """
    with worker.lock:
        worker.lifeline.close()
        if worker.sandbox is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(worker.sandbox, signal.SIGKILL)
        if worker.process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(worker.process.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                worker.process.kill()
        if worker.group is not None:
            worker.group.kill()
        worker.process.wait()
        if worker.sandbox is not None:
            os.close(worker.sandbox)
            worker.sandbox = None
        if worker.group is not None:
            worker.group.remove()


Part = tuple[list[Any], "str | None"]  # a child's frames, and what was wrong with the rest of them


def read_records(job_dir: Path, limits: Limits, *, frames: bool = True) -> Iterator[tuple[dict[str, Any], list[Part]]]:
    """The worker's records from ``worker.out``, read once, one at a time: a JSON header (``kind``:
    started, result, probe or fatal; ``size``), then ``size`` bytes of frames in two parts (a task's
    public child's, then its hidden child's, split at ``split``). Each size is checked before it is
    read; a cut-off tail ends the records. ``frames=False``: the frames are skipped unread."""
    try:
        f = open(job_dir / OUT_FILE, "rb")
    except OSError:
        return
    with f:
        total = os.fstat(f.fileno()).st_size
        while total - f.tell() >= wire.HEADER_SIZE:
            try:
                kind, length = wire.unpack_header(f.read(wire.HEADER_SIZE))
                if kind != "json" or length > min(wire.MAX_JSON_FRAME, total - f.tell()):
                    return
                header = wire.load_json(f.read(length))
            except wire.WireError:
                return
            size = header.get("size") if isinstance(header, dict) else None
            if type(size) is not int or not 0 <= size <= min(limits.job_result_mb * 2**20 + 2**16, total - f.tell()):
                return
            split = header.get("split")
            split = split if type(split) is int and 0 <= split <= size else size
            if not frames:
                f.seek(size, os.SEEK_CUR)
            yield header, [wire.read_frames(f, n, array_limit=limits.array_mb * 2**20)
                           for n in (split, size - split)] if frames else []


# --- the probe ----------------------------------------------------------------------------------


def _first_file(top: Path, installed: set[Path]) -> Path | None:
    """The first file found under ``top`` outside the ``installed`` Python folders (which the sandbox
    binds on purpose): what the probe tries to read there."""
    for folder, subfolders, files in os.walk(top):
        if files:
            return Path(folder, sorted(files)[0])
        subfolders[:] = sorted(d for d in subfolders if _real(os.path.join(folder, d)) not in installed)
    return None


def _course_file(installed: set[Path]) -> Path | None:
    """A file of the course for the probe to try: a solution notebook, else any file of the course folder."""
    course = course_folder()
    solutions = sorted((course / "solutions").glob("*.ipynb"))
    return solutions[0] if solutions else _first_file(course, installed)


def _probe(level: str, limits: Limits, work: Path, out_dir: Path, submissions: Sequence[Path],
           plan: cgroups.Plan) -> dict[str, Any]:
    """Run the trial worker at ``level`` in ``work`` (a folder of the trial's own, never a learner's:
    no learner-chosen name can meet these files) and return its report."""
    job_dir = work / level
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True, mode=0o700)
    os.chmod(work, 0o700)
    secret = work / "secret.txt"
    secret.write_text("only the grading process may read this\n")
    readable = {"output_folder": str(secret)}
    installed = set(interpreter_folders())
    for name, path in (("course_file", _course_file(installed)), ("home_file", _first_file(Path.home(), installed))):
        if path is not None:
            readable[name] = str(path)
    files = [s for s in submissions if s.is_file()]
    files += [p for s in submissions if s.is_dir() for p in sorted(s.rglob("*.ipynb"))[:1]]
    if files:
        readable["submission"] = str(files[0])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        job = {**job_head(level, limits.for_job(nproc_base(level, 1))),
               "probe": {"read": list(readable.values()), "write": [str(work / "write.txt")],
                         "connect": list(listener.getsockname()), "grader_pid": os.getpid()}}
        write_job(job_dir, job)
        worker = start_worker(job_dir, level, limits, protected=protected_folders(out_dir, submissions), plan=plan,
                              probe=True)
        try:
            worker.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pass
        finally:
            stop_worker(worker)
        records = [h for h, _ in read_records(job_dir, limits, frames=False)]
        fatal = [h for h in records if h.get("kind") == "fatal"]
        if fatal:
            return {"error": str(fatal[0].get("error"))[:500]}
        reports = [h["report"] for h in records if h.get("kind") == "probe" and isinstance(h.get("report"), dict)]
        if not reports:
            log = (job_dir / "worker.log").read_text(errors="replace")[-500:]
            return {"error": f"the probe worker ended with status {worker.process.returncode} ({log.strip()})"}
        report = reports[0]
    except (IsolationError, cgroups.CgroupError) as exc:
        return {"error": str(exc)}
    finally:
        listener.close()
        shutil.rmtree(job_dir, ignore_errors=True)
        secret.unlink(missing_ok=True)
        (work / "write.txt").unlink(missing_ok=True)
    report["names"] = {v: k for k, v in readable.items()}
    return report


# What the trial child tries of what the kernel shares (child.py's report keys), and how it is named.
KERNEL_CHECKS = {"user_keyring": "a kernel keyring", "session_keyring": "the session keyring",
                 "sysv_ipc": "SysV shared memory", "new_user_namespace": "a new user namespace",
                 "clear_refs": "/proc/self/clear_refs"}


def _findings(report: dict[str, Any], level: str, limits: Limits,
              plan: cgroups.Plan) -> tuple[dict[str, Any], list[str]]:
    """What the probe saw, in words, and what falls short of the level's promise."""
    names = report.get("names", {})
    readable = {names.get(p, p): v is True for p, v in report.get("readable", {}).items()}
    wrote = any(v is True for v in report.get("writable", {}).values())
    uid = report.get("uid")
    verified = {
        "runs_as": _user_name(uid) if isinstance(uid, int) and level == "limits" else
        ("nobody" if os.geteuid() == 0 else f"{_user_name(os.getuid())} in a user namespace (uid {uid} inside)"),
        "course_files_readable": readable.get("course_file"),
        "other_submissions_readable": readable.get("submission"),
        "home_folder_readable": readable.get("home_file"),
        "output_folder_readable": readable.get("output_folder"),
        "output_folder_writable": wrote,
        "network": report.get("network") is True,
        "can_signal_grader": report.get("can_signal_grader") is True,
        "can_fork": report.get("fork") is True,
        "interpreter_imports": report.get("imports") is True,
    }
    kernel = report.get("kernel") if isinstance(report.get("kernel"), dict) else {}
    reached = {what: kernel.get(key) is True for key, what in KERNEL_CHECKS.items()}
    verified.update({
        "seccomp_filter": kernel.get("seccomp") == "2",
        "keyrings_reachable": reached["a kernel keyring"] or reached["the session keyring"],
        "sysv_ipc": reached["SysV shared memory"],
        "new_namespaces": reached["a new user namespace"],
        "peak_memory_resettable": reached["/proc/self/clear_refs"],
        "installed_lessonlib_importable": kernel.get("lessonlib") is True,
    })
    problems = [f"learner code could reach {what}" for what, ok in reached.items() if ok]
    if not verified["seccomp_filter"]:
        problems.append(f"the seccomp filter was not in force in learner code (Seccomp: {kernel.get('seccomp')})")
    if level == "bubblewrap" and verified["installed_lessonlib_importable"]:
        problems.append("learner code could import the installed lessonlib past the stand-in")
    if level == "bubblewrap":
        problems += [f"learner code could read the {what.replace('_', ' ')}" for what, ok in readable.items() if ok]
        if wrote:
            problems.append("learner code could write into the output folder")
        if verified["network"]:
            problems.append("learner code could open a network connection")
        if verified["can_signal_grader"]:
            problems.append("learner code could signal the grading process")
    if os.geteuid() == 0 and uid != nobody()[0]:
        problems.append(f"learner code ran as uid {uid}, not nobody")
    if not verified["interpreter_imports"]:
        problems.append(f"the interpreter's modules were not importable ({report.get('imports')})")
    if limits.processes > 0 and not verified["can_fork"]:
        problems.append(f"learner code could not start a process within the limit ({report.get('fork')})")
    if plan.kind and not isinstance(report.get("oom_counter"), int):
        problems.append(f"the worker could not read its control group's out-of-memory counter ({plan.kind})")
    return verified, problems


def choose_isolation(requested: str, limits: Limits, *, work: Path, out_dir: Path,
                     submissions: Sequence[Path], plan: cgroups.Plan | None = None) -> Isolation:
    """The strongest level that holds here (``requested="auto"``), or the requested one, probed.

    ``limits`` as :func:`contained_limits` makes them for ``plan`` (the control groups to use).
    """
    plan = plan if plan is not None else cgroups.Plan(reason="none was asked for")
    if requested not in ("auto", *LEVELS):
        raise IsolationError(f"unknown isolation {requested!r}: expected auto, {', '.join(LEVELS)}")
    candidates = list(LEVELS) if requested == "auto" else [requested]
    refused: list[str] = []
    for level in candidates:
        if level == "bubblewrap" and bwrap() is None:
            refused.append("bubblewrap: bwrap is not installed")
            continue
        if level == "limits" and (why := python_refused_to_nobody()):
            refused.append(f"limits: {why}")
            continue
        report = _probe(level, limits, work, out_dir, submissions, plan)
        if "error" in report:
            refused.append(f"{level}: {report['error']}")
            continue
        verified, problems = _findings(report, level, limits, plan)
        if problems:
            refused.append(f"{level}: {'; '.join(problems)}")
            continue
        if refused:
            reason = "bubblewrap could not be used here (" + " | ".join(refused) + ")"
        elif level == requested:
            reason = "requested with --isolation"
        else:
            reason = "the strongest level; the probe verified it"
        user = _user_name(nobody()[0] if os.geteuid() == 0 else os.getuid())
        warning = LIMITS_WARNING.format(user=user) if level == "limits" else ""
        limited = held(level, limits, plan, could_fork=verified["can_fork"])
        return Isolation(level, SUMMARY[level], reason, verified, warning, limited)
    raise IsolationError("no isolation level could be set up: " + " | ".join(refused))
