"""The worker's isolation, seen from the grading process: levels, limits, start-up and a probe.

Three levels, the strongest that works here is chosen (``--isolation auto``):

- ``namespaces`` (root, and the kernel lets us unshare): new mount, PID, network, IPC and UTS
  namespaces; the course files, the output folder, every submission, /root, /home and the temp
  folders hidden under empty tmpfs mounts; learner code runs as ``nobody`` with no network.
- ``nobody`` (root, namespaces refused): learner code runs as ``nobody``: it cannot write the
  output folder or signal the grader, but it can read world-readable files and use the network.
- ``limits`` (not root): learner code runs as the grading user, in a separate process with
  resource limits and a scratch folder, and can read and write whatever that user can.

All levels apply the same resource limits (CPU time, address space, processes, file size) and
the same bounded, plain-data results. The probe tests the chosen level before the batch starts,
and the gradebook records what it found.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import lessonlib

LEVELS = ("namespaces", "nobody", "limits")
WORKER = Path(__file__).with_name("worker.py")
WIRE = Path(__file__).with_name("wire.py")
RUNNER = Path(__file__).resolve().parents[1] / "exercises" / "runner.py"

# Folders that must stay visible whatever else is hidden (never masked, nor any of their parents).
_SYSTEM = ("/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/dev", "/sys", "/opt", "/var")
_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")

# At level "nobody", when nobody cannot read the interpreter's own files, these are imported
# before learner code runs (numpy and the common standard modules always are).
PREIMPORT_FOR_NOBODY = ("matplotlib", "matplotlib.pyplot", "heapq", "bisect", "array", "struct", "time",
                        "textwrap", "pprint", "enum", "contextlib", "inspect", "json", "csv")

SUMMARY = {
    "namespaces": "learner code runs as nobody, without network, with the course files, the output "
                  "folder and other submissions hidden, under resource limits",
    "nobody": "learner code runs as nobody under resource limits; it can read world-readable files "
              "(including the course files) and use the network",
    "limits": "learner code runs as the grading user under resource limits; it can read and write "
              "whatever that user can",
}


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
        }


@dataclass(frozen=True)
class Isolation:
    """The level in use, why, and what the probe verified."""

    level: str
    summary: str
    reason: str = ""
    verified: dict[str, Any] = field(default_factory=dict)
    uid: int | None = None
    gid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("uid")
        data.pop("gid")
        return data


def nobody() -> tuple[int, int]:
    """uid and gid of the unprivileged user ``nobody`` (65534 when the system has no such entry)."""
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def project_root() -> Path | None:
    """The source checkout holding the course files, when lessonlib runs from one."""
    root = Path(lessonlib.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").exists() else None


def _is_system(path: Path) -> bool:
    text = str(path)
    return any(s == text or s.startswith(text.rstrip("/") + "/") for s in _SYSTEM)


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def hidden_folders(out_dir: Path, submissions: Sequence[Path]) -> list[Path]:
    """Every folder the namespaces level hides under an empty tmpfs."""
    package = _real(Path(lessonlib.__file__).parent)
    root = project_root()
    wanted = [root or package, out_dir, Path.home(), Path("/root"), Path("/home"), Path.cwd()]
    wanted += [s if s.is_dir() else s.parent for s in submissions]
    wanted += [Path(t) for t in _TEMP_DIRS] + [Path(tempfile.gettempdir())]
    found: list[Path] = []
    for path in map(_real, wanted):
        if path.is_dir() and not _is_system(path) and path not in found:
            found.append(path)
    return found


def isolation_plan(isolation: Isolation, *, out_dir: Path, submissions: Sequence[Path],
                   job_dir: Path) -> dict[str, Any]:
    """The ``isolation`` part of a job: level, user, and for namespaces what to hide and keep."""
    plan: dict[str, Any] = {"level": isolation.level, "uid": isolation.uid, "gid": isolation.gid,
                            "masks": [], "keeps": [], "late_masks": [], "preimport": []}
    if isolation.level == "nobody" and isolation.verified.get("interpreter_imports") is False:
        # nobody cannot read the interpreter's files here: load what answer cells commonly use first
        plan["preimport"] = list(PREIMPORT_FOR_NOBODY)
    if isolation.level != "namespaces":
        return plan
    temp = {str(_real(t)) for t in (*_TEMP_DIRS, tempfile.gettempdir())}
    for path in hidden_folders(out_dir, submissions):
        writable_temp = str(path) in temp
        plan["masks"].append({"path": str(path), "mode": "1777" if writable_temp else "0755",
                              "size": "16m" if writable_temp else "1m"})
    keeps = [sys.prefix, sys.base_prefix, Path(np.__file__).parent]
    plan["keeps"] = [{"path": str(_real(k)), "writable": False} for k in keeps]
    plan["keeps"].append({"path": str(_real(job_dir)), "writable": True})
    package = _real(Path(lessonlib.__file__).parent)
    if any(str(package).startswith(k["path"] + "/") for k in plan["keeps"]):
        plan["late_masks"].append(str(package))  # lessonlib installed inside a kept folder
    return plan


def scratch_folder(isolation: Isolation, job_dir: Path) -> Path:
    """Where learner code runs. At level "nobody" it must lie outside the (private) output folder."""
    if isolation.level == "nobody":
        path = Path(tempfile.mkdtemp(prefix="lessonlib-scratch-"))
        os.chown(path, isolation.uid or 65534, isolation.gid or 65534)
        return path
    path = job_dir / "scratch"  # namespaces: a tmpfs is mounted here; limits: used as it is
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def worker_env() -> dict[str, str]:
    """A small environment: nothing of the grader's (no tokens, no seed) reaches the worker."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def start_worker(job_dir: Path, *, probe: bool = False) -> subprocess.Popen:
    """Start ``worker.py`` on ``job_dir`` in its own session; its stderr goes to worker.log."""
    command = [sys.executable, "-I", "-B", str(WORKER)] + (["--probe"] if probe else []) + [str(job_dir)]
    log_path = job_dir / "worker.log"
    log_path.touch(mode=0o600)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            env=worker_env(), cwd=job_dir, start_new_session=True, close_fds=True,
        )


def stop_worker(process: subprocess.Popen) -> None:
    """Kill the worker's whole process group (its zygote and children die with it)."""
    try:
        os.killpg(process.pid, 9)
    except OSError:
        pass
    try:
        process.kill()
    except OSError:
        pass
    process.wait()


def count_processes(uid: int) -> int:
    """Processes running as ``uid`` now (the process limit for nobody counts from here)."""
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("Uid:"):
                    n += int(line.split()[1]) == uid
                    break
    return n


def base_job(isolation: Isolation, limits: Limits, *, job_dir: Path, out_dir: Path,
             submissions: Sequence[Path], workers: int) -> dict[str, Any]:
    """The parts of job.json every job shares (tasks and probe settings are added by the caller)."""
    nproc_base = count_processes(isolation.uid) + workers if isolation.uid is not None else 0
    return {
        "version": 1, "grader_pid": os.getpid(), "solo": False,
        "runner_path": str(RUNNER), "wire_path": str(WIRE),
        "isolation": isolation_plan(isolation, out_dir=out_dir, submissions=submissions, job_dir=job_dir),
        "limits": limits.for_job(nproc_base), "tasks": [],
    }


# --- the probe ----------------------------------------------------------------------------------


def _course_file() -> Path:
    root = project_root()
    if root is not None:
        for candidate in sorted((root / "solutions").glob("*.ipynb")):
            return candidate
    return Path(lessonlib.__file__)


def _probe(level: str, limits: Limits, work: Path, out_dir: Path, submissions: Sequence[Path]) -> dict[str, Any]:
    uid, gid = nobody() if level != "limits" else (None, None)
    candidate = Isolation(level, SUMMARY[level], uid=uid, gid=gid)
    job_dir = work / f"probe-{level}"
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True)
    os.chmod(job_dir, 0o711)
    secret = work / "probe-secret.txt"
    secret.write_text("only the grading process may read this\n")
    readable = {"course_file": str(_course_file()), "output_folder": str(secret)}
    files = [s for s in submissions if s.is_file()]
    files += [p for s in submissions if s.is_dir() for p in sorted(s.rglob("*.ipynb"))[:1]]
    if files:
        readable["submission"] = str(files[0])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    scratch = scratch_folder(candidate, job_dir)
    try:
        job = base_job(candidate, limits, job_dir=job_dir, out_dir=out_dir, submissions=submissions, workers=1)
        job["scratch"] = str(scratch)
        job["probe"] = {"read": list(readable.values()), "write": [str(work / "probe-write.txt")],
                        "connect": list(listener.getsockname())}
        (job_dir / "job.json").write_text(json.dumps(job))
        process = start_worker(job_dir, probe=True)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            stop_worker(process)
        fatal = job_dir / "fatal.json"
        if fatal.exists():
            return {"error": json.loads(fatal.read_text())["error"]}
        report_path = job_dir / "probe.json"
        if not report_path.exists():
            log = (job_dir / "worker.log").read_text(errors="replace")[-500:]
            return {"error": f"the probe worker ended with status {process.returncode} ({log.strip()})"}
        report = json.loads(report_path.read_text())
    finally:
        listener.close()
        shutil.rmtree(job_dir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
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
        "runs_as": "nobody" if uid == nobody()[0] else f"uid {uid}",
        "course_files_readable": readable.get("course_file"),
        "other_submissions_readable": readable.get("submission"),
        "output_folder_readable": readable.get("output_folder"),
        "output_folder_writable": wrote,
        "network": report.get("network") is True,
        "can_signal_parent": report.get("can_signal_parent"),
        "interpreter_imports": report.get("imports") is True,
    }
    problems = []
    if level in ("namespaces", "nobody"):
        if uid != nobody()[0]:
            problems.append(f"learner code ran as uid {uid}, not nobody")
        if wrote:
            problems.append("learner code could write into the output folder")
        if report.get("can_signal_parent"):
            problems.append("learner code could signal the worker")
    if level == "namespaces":
        problems += [f"learner code could read the {what.replace('_', ' ')}" for what, ok in readable.items() if ok]
        if verified["network"]:
            problems.append("learner code could open a network connection")
        if not verified["interpreter_imports"]:
            problems.append(f"the interpreter's modules were not importable ({report.get('imports')})")
    return verified, problems


def choose_isolation(requested: str, limits: Limits, *, work: Path, out_dir: Path,
                     submissions: Sequence[Path]) -> Isolation:
    """The strongest level that holds here (``requested="auto"``), or the requested one, probed."""
    if requested not in ("auto", *LEVELS):
        raise IsolationError(f"unknown isolation {requested!r}: expected auto, {', '.join(LEVELS)}")
    root = os.geteuid() == 0
    if requested in ("namespaces", "nobody") and not root:
        raise IsolationError(f"isolation {requested!r} needs the grader to run as root")
    if requested == "auto":
        candidates = ["namespaces", "nobody", "limits"] if root else ["limits"]
    else:
        candidates = [requested]
    refused: list[str] = []
    for level in candidates:
        report = _probe(level, limits, work, out_dir, submissions)
        if "error" in report:
            refused.append(f"{level}: {report['error']}")
            continue
        verified, problems = _findings(report, level)
        if problems:
            refused.append(f"{level}: {'; '.join(problems)}")
            continue
        uid, gid = nobody() if level != "limits" else (None, None)
        if refused:
            reason = "stronger levels failed here (" + " | ".join(refused) + ")"
        elif level == "limits" and not root:
            reason = "the grader does not run as root, so it cannot change user or hide files"
        elif level == requested == "limits" and root:
            reason = "requested with --isolation; as root, the kernel does not apply the process limit"
        elif level == requested:
            reason = "requested with --isolation"
        else:
            reason = "the strongest level; it holds here"
        return Isolation(level, SUMMARY[level], reason, verified, uid, gid)
    raise IsolationError("no isolation level could be set up: " + " | ".join(refused))
