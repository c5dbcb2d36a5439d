"""The worker's isolation, seen from the grading process: levels, limits, the command line, a probe.

Two levels; ``--isolation auto`` takes the first that a trial run verifies:

- ``bubblewrap``: the worker runs inside a bubblewrap sandbox (``bwrap``, Debian/Ubuntu package
  ``bubblewrap``), for root and for an ordinary user alike. New user (as an ordinary user), mount,
  PID, network, IPC and UTS namespaces; the root is an empty tmpfs holding only the system
  libraries and the Python installation (read-only), the worker's three files and an empty
  scratch folder: nothing of the course, the output folder or any submission exists in there.
  As root, learner code runs as ``nobody``. The worker is PID 1 of the sandbox, so learner code
  cannot signal it, and the grading process is not in its PID namespace at all.
- ``limits``: the worker runs as the grading user with resource limits only. Learner code can
  read and write whatever that user can (solutions/ and the output folder included), use the
  network and signal the grader: :data:`LIMITS_WARNING` says so, loudly, at every run.

Both levels apply the same resource limits (CPU time, address space, processes, file size) and
the same bounded, plain-data results. The worker reads its job on stdin and writes its results
on stdout (see ``worker.py``), so it needs no view of the job folder.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lessonlib
from lessonlib.grading import wire

LEVELS = ("bubblewrap", "limits")
WORKER = Path(__file__).with_name("worker.py")
WIRE = Path(__file__).with_name("wire.py")
RUNNER = Path(__file__).resolve().parents[1] / "exercises" / "runner.py"

INSIDE = "/lessonlib-grader"  # where the worker's three files appear in the sandbox
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
    "limits": "learner code runs as the grading user under resource limits only",
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


def bwrap_command(python_args: list[str], limits: Limits, *, protected: Sequence[Path]) -> list[str]:
    """The ``bwrap ...`` command that runs ``python_args`` (after the interpreter) in the sandbox.

    Raises IsolationError when a folder the interpreter needs holds a protected folder (binding
    it would expose the course or the output folder).
    """
    exe = bwrap()
    if exe is None:
        raise IsolationError("bwrap is not installed")
    command = [exe, "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
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
    command += parents(Path(INSIDE, WORKER.name))
    for source in (WORKER, RUNNER, WIRE):
        command += ["--ro-bind", str(source), f"{INSIDE}/{source.name}"]
    command += ["--proc", "/proc", "--dev", "/dev"]
    command += ["--perms", "1777", "--size", str(limits.scratch_mb * 2**20), "--tmpfs", "/dev/shm"]
    # the sandbox's own root and /dev are unbounded tmpfs: read-only, so they cannot fill the memory
    command += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SCRATCH]
    for name, value in worker_env(SCRATCH).items():
        command += ["--setenv", name, value]
    command.append("--")
    if root:
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        uid, gid = nobody()
        command += [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs"]
    return command + [sys.executable, *python_args]


def worker_env(scratch: str) -> dict[str, str]:
    """A small environment: nothing of the grader's (no tokens, no seed) reaches the worker."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "HOME": scratch,
        "TMPDIR": scratch, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@dataclass(frozen=True)
class Launch:
    """How to start a worker at a given level: the command and the folder it starts in."""

    command: list[str]
    cwd: Path


def launch(level: str, limits: Limits, job_dir: Path, *, protected: Sequence[Path], probe: bool = False) -> Launch:
    """The command that starts ``worker.py`` for one job at ``level``."""
    flags = ["--probe"] if probe else []
    if level == "bubblewrap":
        args = ["-I", "-B", f"{INSIDE}/{WORKER.name}", *flags, f"{INSIDE}/{RUNNER.name}", f"{INSIDE}/{WIRE.name}"]
        return Launch(bwrap_command(args, limits, protected=protected), job_dir)
    scratch = job_dir / "scratch"
    scratch.mkdir(mode=0o700, exist_ok=True)
    return Launch([sys.executable, "-I", "-B", str(WORKER), *flags, str(RUNNER), str(WIRE)], scratch)


PER_WORKER = 3  # processes of one worker before learner code starts one: the zygote, the keeper, the child


def nproc_base(level: str, workers: int) -> int:
    """Processes the limit counts before learner code starts one: RLIMIT_NPROC counts per user.

    In an ordinary user's sandbox (a new user namespace) only the sandbox's own processes count
    (the zygote, the keeper and the child); as root, learner code is the real nobody, counted
    system-wide.
    """
    if level == "bubblewrap":
        return PER_WORKER if os.geteuid() != 0 else count_processes(nobody()[0]) + PER_WORKER * workers
    return count_processes(os.getuid()) + PER_WORKER * workers


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


def start_worker(job_dir: Path, command: Launch) -> subprocess.Popen:
    """Start the worker on ``job_dir/job.bin`` in its own session; stdout to worker.out, stderr to worker.log."""
    log_path = job_dir / "worker.log"
    log_path.touch(mode=0o600)
    out_fd = os.open(job_dir / OUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(job_dir / JOB_FILE, "rb") as stdin, open(out_fd, "wb") as stdout, open(log_path, "ab") as log:
        return subprocess.Popen(
            command.command, stdin=stdin, stdout=stdout, stderr=log, env=worker_env(str(command.cwd)),
            cwd=command.cwd, start_new_session=True, close_fds=True,
        )


def stop_worker(process: subprocess.Popen) -> None:
    """Kill the worker's whole process group (bubblewrap takes the sandbox down with it)."""
    try:
        os.killpg(process.pid, 9)
    except OSError:
        pass
    try:
        process.kill()
    except OSError:
        pass
    process.wait()


def read_records(job_dir: Path, result_limit: int) -> Iterator[tuple[dict[str, Any], bytes]]:
    """The worker's records from ``worker.out``, one at a time: (header, payload) pairs, a cut-off
    tail ignored. Memory holds one record at most: sizes are checked before anything is read.

    A record is a JSON frame with ``kind`` (started, result, probe, fatal) and ``size``, followed
    by ``size`` raw bytes (a task's frames, at most ``result_limit``).
    """
    try:
        f = open(job_dir / OUT_FILE, "rb")
    except OSError:
        return
    with f:
        total = os.fstat(f.fileno()).st_size
        at = 0
        while total - at >= wire.HEADER_SIZE:
            try:
                kind, length = wire.unpack_header(f.read(wire.HEADER_SIZE))
            except wire.WireError:
                return
            if kind != "json" or length > wire.MAX_JSON_FRAME or at + wire.HEADER_SIZE + length > total:
                return
            try:
                header = wire.load_json(f.read(length))
            except wire.WireError:
                return
            at += wire.HEADER_SIZE + length
            size = header.get("size", 0) if isinstance(header, dict) else -1
            if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= result_limit + 2**16 \
                    or at + size > total:
                return
            payload = f.read(size)
            at += size
            yield header, payload


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


def _probe(level: str, limits: Limits, work: Path, out_dir: Path, submissions: Sequence[Path]) -> dict[str, Any]:
    job_dir = work / f"probe-{level}"
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True, mode=0o700)
    secret = work / "probe-secret.txt"
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
        command = launch(level, limits, job_dir, protected=protected_folders(out_dir, submissions), probe=True)
        job = {"version": 2, "grader_pid": os.getpid(), "level": level, "solo": False,
               "limits": limits.for_job(nproc_base(level, 1)), "tasks": [],
               "probe": {"read": list(readable.values()), "write": [str(work / "probe-write.txt")],
                         "connect": list(listener.getsockname()), "grader_pid": os.getpid()}}
        write_job(job_dir, job)
        process = start_worker(job_dir, command)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            stop_worker(process)
        records = list(read_records(job_dir, limits.result_mb * 2**20))
        fatal = [h for h, _ in records if h.get("kind") == "fatal"]
        if fatal:
            return {"error": str(fatal[0].get("error"))[:500]}
        reports = [payload for h, payload in records if h.get("kind") == "probe"]
        if not reports:
            log = (job_dir / "worker.log").read_text(errors="replace")[-500:]
            return {"error": f"the probe worker ended with status {process.returncode} ({log.strip()})"}
        report = json.loads(reports[0].decode() or "{}")
    except IsolationError as exc:
        return {"error": str(exc)}
    finally:
        listener.close()
        shutil.rmtree(job_dir, ignore_errors=True)
        secret.unlink(missing_ok=True)
        (work / "probe-write.txt").unlink(missing_ok=True)
    report["names"] = {v: k for k, v in readable.items()}
    return report


def _findings(report: dict[str, Any], level: str) -> tuple[dict[str, Any], list[str]]:
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
    problems = []
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
    if not verified["can_fork"]:
        problems.append(f"learner code could not start a process within the limit ({report.get('fork')})")
    return verified, problems


def choose_isolation(requested: str, limits: Limits, *, work: Path, out_dir: Path,
                     submissions: Sequence[Path]) -> Isolation:
    """The strongest level that holds here (``requested="auto"``), or the requested one, probed."""
    if requested not in ("auto", *LEVELS):
        raise IsolationError(f"unknown isolation {requested!r}: expected auto, {', '.join(LEVELS)}")
    candidates = list(LEVELS) if requested == "auto" else [requested]
    refused: list[str] = []
    for level in candidates:
        if level == "bubblewrap" and bwrap() is None:
            refused.append("bubblewrap: bwrap is not installed")
            continue
        report = _probe(level, limits, work, out_dir, submissions)
        if "error" in report:
            refused.append(f"{level}: {report['error']}")
            continue
        verified, problems = _findings(report, level)
        if problems:
            refused.append(f"{level}: {'; '.join(problems)}")
            continue
        if refused:
            reason = "bubblewrap could not be used here (" + " | ".join(refused) + ")"
        elif level == requested:
            reason = "requested with --isolation"
        else:
            reason = "the strongest level; the probe verified it"
        warning = LIMITS_WARNING.format(user=_user_name(os.getuid())) if level == "limits" else ""
        return Isolation(level, SUMMARY[level], reason, verified, warning)
    raise IsolationError("no isolation level could be set up: " + " | ".join(refused))
