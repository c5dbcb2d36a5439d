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
  never runs as root) with resource limits only. Learner code can read whatever that user can
  (solutions/ included) and use the network: :data:`LIMITS_WARNING` says so, loudly, at every run.
  It changes files only beneath its scratch folder where the kernel has Landlock, and elsewhere
  what it leaves is removed after each child (``worker/cleanup.py``). Where it would run as the
  owner of the output folder or the gradebook (an ordinary user grading), the level is refused:
  learner code could read the secret seed and rewrite grades (:data:`GRADEBOOK_REACHABLE`).

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
import functools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lessonlib

LEVELS = ("bubblewrap", "limits")
WORKER = Path(__file__).parent.parent / "worker"  # the worker's package; its entry point is main.py
WIRE = Path(__file__).with_name("wire.py")
RUNNER = Path(__file__).resolve().parents[2] / "exercises" / "runner.py"

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
    "limits": "learner code runs as nobody (the grader runs as root) under resource limits only",
}
LIMITS_WARNING = (
    "WARNING: learner code is NOT isolated. It runs as {user} and can read every file {user} can "
    "(solutions/ and other learners' submissions included, where their folders let others read), and "
    "open network connections; the output folder and the gradebook are the grader's alone. Only CPU time, "
    "memory, processes and file size are limited. Install bubblewrap (Debian/Ubuntu: apt install bubblewrap) "
    "to isolate it."
)
# Why level limits is refused where learner code would run as the owner of the gradebook (one line).
GRADEBOOK_REACHABLE = (
    "learner code would run as {user}, who can {what}: it could read the secret seed and rewrite grades. "
    "Grade at level bubblewrap (install it: sudo apt install bubblewrap, then run the same command again), "
    "or as root, where learner code runs as nobody"
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


def user_name(uid: int) -> str:
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


def real_path(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def interpreter_folders() -> list[Path]:
    """Folders the worker's Python needs: the environment, its base installation, NumPy's folder."""
    import numpy as np

    found: list[Path] = []
    for p in (sys.prefix, sys.base_prefix, Path(sys.executable).parent, Path(np.__file__).parent):
        for path in {Path(os.path.abspath(p)), real_path(p)}:
            if path.is_dir() and not any(_within(path, f) for f in found):
                found = [f for f in found if not _within(f, path)] + [path]
    return sorted(found)


def installed_package() -> Path | None:
    """The folder of the installed lessonlib package (None when it runs from a source checkout,
    which the sandbox does not bind at all)."""
    return None if project_root() is not None else real_path(Path(lessonlib.__file__).parent)


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
    return [real_path(p) for p in paths]


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
