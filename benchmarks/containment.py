"""What learner code can hold on the host while `lessonlib grade` runs it, and what outlives the grader.

Two attacks, each through the command line as an instructor runs it:

- memory: one learner whose answer forks CHILDREN processes that each touch MB megabytes and then
  sleep, graded under ``--memory``. The script samples, every 0.1 s, the memory that every process
  descending from the grader holds of its own (anonymous and shared-memory pages, proportional
  shares where the kernel shows them, else resident), and prints the most held at once, for how
  long more than ``--memory`` was held, the exercise's status, and which limit the gradebook says
  held.
- lifetime: LEARNERS learners whose answers fork sleeping processes and sleep; once PROCESSES of
  them run, the grader gets Ctrl-C (SIGINT to its process group) or kill -9, and the script counts
  the processes started under the grader that are still alive 5 s later (a process counts by its
  pid and start time), and how long the last one lived.

    python benchmarks/containment.py                        # both attacks, as the default sizes
    python benchmarks/containment.py --attack memory --children 6 --mb 900 --memory 1024
    python benchmarks/containment.py --attack lifetime --isolation limits   # as root alone

Run it as root and as an ordinary user: the limits that hold differ (see the instructor guide);
level limits refuses an ordinary user's graded work, so ``--isolation limits`` needs root.
It reports, it does not assert; tests/test_grading_lifetime.py asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's lessonlib, installed or not

from lessonlib.grading.run.notebooks import course_notebooks  # noqa: E402

ANSWER = '''
import os
import time

def masked_softmax(scores, allowed):
    for _ in range({children}):
        try:
            if os.fork() == 0:
                hoard = b"x" * ({mb} * 2**20)  # every page written: resident, not only reserved
                time.sleep(10_000)
                os._exit(0)
        except OSError:
            pass
    time.sleep(10_000)
'''


def learner(folder: Path, children: int, mb: int) -> None:
    """A learner folder: the released masking notebook with the hostile answer to masked_softmax."""
    course = next(c for c in course_notebooks() if c.name == "02_masking.ipynb")
    nb = nbformat.read(ROOT / "exercises" / course.name, as_version=4)
    cell_id = course.answer_cells["masked_softmax"]
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            cell.source = ANSWER.format(children=children, mb=mb).strip()
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / course.name)


def descendants(root: int) -> dict[int, str]:
    """Processes descending from ``root`` (not ``root`` itself): pid -> start time."""
    parents: dict[int, int] = {}
    starts: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)], starts[int(entry)] = int(fields[1]), fields[19]
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = starts[child]
                frontier.append(child)
    return found


def alive(pid: int, start: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"


def memory_kb(pid: int) -> int:
    """Memory a process holds of its own: anonymous and shared-memory pages (a shared library's pages
    stay cached for every process that maps them). Proportional shares where readable, else resident."""
    for name, keys in (("smaps_rollup", ("Pss_Anon:", "Pss_Shmem:")), ("status", ("RssAnon:", "RssShmem:"))):
        try:
            with open(f"/proc/{pid}/{name}") as f:
                found = [int(line.split()[1]) for line in f if line.startswith(keys)]
        except OSError:
            continue
        if len(found) == 2:
            return sum(found)
    return 0


def grade_command(subs: Path, out: Path, args: argparse.Namespace) -> list[str]:
    extra = ["--isolation", args.isolation] if args.isolation else []
    return [sys.executable, "-m", "lessonlib.cli", "grade", str(subs), "--out", str(out), "--quiet",
            "--timeout", str(args.timeout), "--memory", str(args.memory), "--workers", str(args.workers), *extra]


def memory_attack(work: Path, args: argparse.Namespace) -> list[str]:
    subs, out = work / "memory", work / "memory-out"
    learner(subs / "hoarder", args.children, args.mb)
    grader = subprocess.Popen(grade_command(subs, out, args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, above, last = 0, 0.0, time.monotonic()
    while grader.poll() is None:
        held = sum(memory_kb(pid) for pid in descendants(grader.pid)) // 1024
        now = time.monotonic()
        if held > args.memory:
            above += now - last
        last, peak = now, max(peak, held)
        time.sleep(0.1)
    data = json.loads((out / "grades.json").read_text()) if (out / "grades.json").exists() else {}
    grades = [g for lr in data.get("learners", []) for g in lr["exercises"] if g["exercise"] == "masked_softmax"]
    held_by = data.get("isolation", {}).get("limits", {}).get("memory", "(not recorded)")
    return [f"memory: {args.children} children x {args.mb} MB", f"--memory {args.memory}",
            f"{peak:,} MB at most", f"{above:.1f} s above --memory",
            grades[0]["status"] if grades else f"no gradebook (exit {grader.returncode})", held_by]


def lifetime_attack(work: Path, args: argparse.Namespace, how: str) -> list[str]:
    subs, out = work / f"lifetime-{how}", work / f"lifetime-{how}-out"
    for i in range(args.learners):
        learner(subs / f"sleeper{i}", 3, 1)
    grader = subprocess.Popen(grade_command(subs, out, args), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    seen: dict[int, str] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and grader.poll() is None:
        seen.update(descendants(grader.pid))
        if len(seen) >= args.processes:
            break
        time.sleep(0.1)
    seen.update(descendants(grader.pid))
    if how == "SIGINT":
        os.killpg(grader.pid, signal.SIGINT)
    else:
        grader.kill()
    sent = time.monotonic()
    left_at_5 = None
    while time.monotonic() - sent < args.wait:
        left = [p for p, s in seen.items() if alive(p, s)]
        if time.monotonic() - sent >= 5 and left_at_5 is None:
            left_at_5 = len(left)
        if not left:
            break
        time.sleep(0.1)
    left = [p for p, s in seen.items() if alive(p, s)]
    for pid in left:  # the script cleans up after the grader it measured
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    grader.wait()
    lived = f"{time.monotonic() - sent:.1f} s" if not left else f"more than {args.wait:g} s"
    return [f"lifetime: {how} to the grader", f"{len(seen)} processes seen",
            f"{left_at_5 if left_at_5 is not None else 0} alive after 5 s", f"the last lived {lived}", "", ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attack", choices=("memory", "lifetime", "both"), default="both")
    parser.add_argument("--children", type=int, default=6, help="processes the memory attack forks")
    parser.add_argument("--mb", type=int, default=900, help="megabytes each of them touches")
    parser.add_argument("--memory", type=int, default=1024, help="--memory of the grader (MB)")
    parser.add_argument("--timeout", type=float, default=10, help="--timeout of the grader (CPU s)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--learners", type=int, default=4, help="learners of the lifetime attack")
    parser.add_argument("--processes", type=int, default=12, help="processes to wait for before the signal")
    parser.add_argument("--wait", type=float, default=60, help="seconds to watch the survivors")
    parser.add_argument("--isolation", default="", help="--isolation of the grader (default: auto)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="containment-") as tmp:
        if args.attack in ("memory", "both"):
            rows.append(memory_attack(Path(tmp), args))
        if args.attack in ("lifetime", "both"):
            rows += [lifetime_attack(Path(tmp), args, how) for how in ("SIGINT", "SIGKILL")]
    print(f"as {'root' if os.geteuid() == 0 else 'uid ' + str(os.geteuid())}, isolation {args.isolation or 'auto'}")
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
