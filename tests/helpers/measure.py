"""Measuring the grader's processes from outside: a command's peak memory, a process's own memory.

``tests/grading/test_sizes.py`` and ``benchmarks/hostile_notebooks.py`` run ``lessonlib`` under
:data:`MEASURED`; ``tests/grading/test_lifetime.py`` and ``benchmarks/containment.py`` follow the grader's
:func:`descendants`, whether they are :func:`alive` and their :func:`memory_kb`.
"""

from __future__ import annotations

import os

# ``python -c MEASURED ARGS...`` runs ``lessonlib ARGS...`` and prints ``PEAK <kB>`` on stderr as it
# exits: VmHWM, the high-water mark of this process's own memory (getrusage's ru_maxrss would not do:
# Linux carries it across execve, so it also holds the parent's size at the fork).
MEASURED = ("import atexit, sys\n"
            "def peak():\n"
            "    with open('/proc/self/status') as f:\n"
            "        kb = next(int(line.split()[1]) for line in f if line.startswith('VmHWM:'))\n"
            "    print('PEAK', kb, file=sys.stderr)\n"
            "atexit.register(peak)\n"
            "from lessonlib.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


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


def process_table() -> dict[int, tuple[int, str]]:
    """Every process now: pid -> (parent pid, start time)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[19])
    return table


def descendants(root: int) -> dict[int, str]:
    """Processes below ``root``: pid -> start time (a pid alone could be reused by then)."""
    table = process_table()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def alive(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (not a zombie, not a new one)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"
