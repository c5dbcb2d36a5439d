"""The probe: a trial worker at each level, what it could reach, and the level a run uses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lessonlib.grading.isolation import cgroups, sandbox
from lessonlib.grading.isolation.sandbox import (
    GRADEBOOK_REACHABLE,
    LEVELS,
    LIMITS_WARNING,
    SUMMARY,
    Isolation,
    IsolationError,
    Limits,
    course_folder,
    interpreter_folders,
    nobody,
    nproc_base,
    protected_folders,
    python_refused_to_nobody,
    real_path,
    user_name,
)
from lessonlib.grading.isolation.workers import held, job_head, read_records, start_worker, stop_worker, write_job


def _first_file(top: Path, installed: set[Path]) -> Path | None:
    """The first file found under ``top`` outside the ``installed`` Python folders (which the sandbox
    binds on purpose): what the probe tries to read there."""
    for folder, subfolders, files in os.walk(top):
        if files:
            return Path(folder, sorted(files)[0])
        subfolders[:] = sorted(d for d in subfolders if real_path(os.path.join(folder, d)) not in installed)
    return None


def _course_file(installed: set[Path]) -> Path | None:
    """A file of the course for the probe to try: a solution notebook, else any file of the course folder."""
    course = course_folder()
    solutions = sorted((course / "solutions").glob("*.ipynb"))
    return solutions[0] if solutions else _first_file(course, installed)


TRIAL_FILE = ".lessonlib-trial-write"  # what the trial child tries to create in the grader's folders


def _probe(level: str, limits: Limits, work: Path, out_dir: Path, submissions: Sequence[Path],
           plan: cgroups.Plan, gradebook: Path | None = None) -> dict[str, Any]:
    """Run the trial worker at ``level`` in ``work`` (a folder of the trial's own, never a learner's:
    no learner-chosen name can meet these files) and return its report. It tries to read a file in
    the output folder and the gradebook, and to create a file in the output folder and beside the
    gradebook (the grader removes what it made)."""
    job_dir = work / level
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True, mode=0o700)
    os.chmod(work, 0o700)
    secret = work / "secret.txt"
    secret.write_text("only the grading process may read this\n")
    readable = {"output_folder": str(secret)}
    if gradebook is not None and gradebook.is_file():
        readable["gradebook"] = str(gradebook)
    writable = {"output_folder": str(out_dir / TRIAL_FILE)}
    if gradebook is not None:
        writable["gradebook_folder"] = str(gradebook.parent / TRIAL_FILE)
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
               "probe": {"read": list(readable.values()), "write": list(writable.values()),
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
        for path in writable.values():
            Path(path).unlink(missing_ok=True)
    report["names"] = {v: k for k, v in readable.items()}
    report["write_names"] = {v: k for k, v in writable.items()}
    return report


# What the trial child tries of what the kernel shares (child.py's report keys), and how it is named.
KERNEL_CHECKS = {"user_keyring": "a kernel keyring", "session_keyring": "the session keyring",
                 "sysv_ipc": "SysV shared memory", "new_user_namespace": "a new user namespace",
                 "clear_refs": "/proc/self/clear_refs", "io_uring": "io_uring"}


def _findings(report: dict[str, Any], level: str, limits: Limits,
              plan: cgroups.Plan) -> tuple[dict[str, Any], list[str]]:
    """What the probe saw, in words, and what falls short of the level's promise."""
    names, write_names = report.get("names", {}), report.get("write_names", {})
    readable = {names.get(p, p): v is True for p, v in report.get("readable", {}).items()}
    written = {write_names.get(p, p): v is True for p, v in report.get("writable", {}).items()}
    wrote = written.get("output_folder", False)
    uid = report.get("uid")
    verified = {
        "runs_as": user_name(uid) if isinstance(uid, int) and level == "limits" else
        ("nobody" if os.geteuid() == 0 else f"{user_name(os.getuid())} in a user namespace (uid {uid} inside)"),
        "course_files_readable": readable.get("course_file"),
        "other_submissions_readable": readable.get("submission"),
        "home_folder_readable": readable.get("home_file"),
        "output_folder_readable": readable.get("output_folder"),
        "output_folder_writable": wrote,
        "gradebook_readable": readable.get("gradebook", False),
        "gradebook_folder_writable": written.get("gradebook_folder", False),
        "writes_confined": not report.get("wrote_outside_scratch"),
        "network": report.get("network") is True,
        "can_signal_grader": report.get("can_signal_grader") is True,
        "can_fork": report.get("fork") is True,
        "interpreter_imports": report.get("imports") is True,
    }
    kernel = report.get("kernel") if isinstance(report.get("kernel"), dict) else {}
    reached = {key for key, value in kernel.items() if value is True}
    verified.update({
        "seccomp_filter": kernel.get("seccomp") == "2",
        "keyrings_reachable": bool(reached & {"user_keyring", "session_keyring"}),
        "sysv_ipc": "sysv_ipc" in reached,
        "new_namespaces": "new_user_namespace" in reached,
        "peak_memory_resettable": "clear_refs" in reached,
        "io_uring": "io_uring" in reached,
        "installed_lessonlib_importable": "lessonlib" in reached,
    })
    problems = [f"learner code could reach {what}" for key, what in KERNEL_CHECKS.items() if key in reached]
    if not verified["seccomp_filter"]:
        problems.append(f"the seccomp filter was not in force in learner code (Seccomp: {kernel.get('seccomp')})")
    if level == "bubblewrap" and verified["installed_lessonlib_importable"]:
        problems.append("learner code could import the installed lessonlib past the stand-in")
    reads = [f"read the {what.replace('_', ' ')}" for what, ok in readable.items() if ok]
    writes = [f"write into the {what.replace('_', ' ')}" for what, ok in written.items() if ok]
    graders = [r for r in reads if r in ("read the output folder", "read the gradebook")] + writes
    if level == "limits" and graders:  # learner code runs as the owner of the gradebook
        problems.append(GRADEBOOK_REACHABLE.format(user=verified["runs_as"], what=" and ".join(graders)))
    if level == "limits" and not verified["writes_confined"]:
        verified["writable_folders"] = report.get("writable_folders") or []
        if not report.get("search_finished"):
            problems.append(f"this kernel has no Landlock, so learner code could write outside its scratch folder "
                            f"({report.get('wrote_outside_scratch')}), and the search for every folder it could "
                            "write did not finish in time: use bubblewrap")
    if level == "bubblewrap":
        problems += [f"learner code could {what}" for what in reads + writes]
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
                     submissions: Sequence[Path], plan: cgroups.Plan | None = None,
                     gradebook: Path | None = None) -> Isolation:
    """The strongest level that holds here (``requested="auto"``), or the requested one, probed.

    ``limits`` as :func:`contained_limits` makes them for ``plan`` (the control groups to use).
    A level where learner code could reach the output folder or the ``gradebook`` (learner code
    running as their owner, at level limits) is refused, saying which level to use instead.
    """
    plan = plan if plan is not None else cgroups.Plan(reason="none was asked for")
    if requested not in ("auto", *LEVELS):
        raise IsolationError(f"unknown isolation {requested!r}: expected auto, {', '.join(LEVELS)}")
    candidates = list(LEVELS) if requested == "auto" else [requested]
    refused: list[str] = []
    for level in candidates:
        if level == "bubblewrap" and sandbox.bwrap() is None:
            refused.append("bubblewrap: bwrap is not installed")
            continue
        if level == "limits" and (why := python_refused_to_nobody()):
            refused.append(f"limits: {why}")
            continue
        report = _probe(level, limits, work, out_dir, submissions, plan, gradebook)
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
        user = user_name(nobody()[0] if os.geteuid() == 0 else os.getuid())
        warning = LIMITS_WARNING.format(user=user) if level == "limits" else ""
        limited = held(level, limits, plan, could_fork=verified["can_fork"])
        return Isolation(level, SUMMARY[level], reason, verified, warning, limited)
    raise IsolationError("no isolation level could be set up: " + " | ".join(refused))
