"""Measuring the grader's processes from outside: a command's peak memory, a process's own memory.

``tests/grading/test_sizes.py`` and ``benchmarks/hostile_notebooks.py`` run ``lessonlib`` under
:data:`MEASURED`; ``tests/grading/test_lifetime.py`` and ``benchmarks/containment.py`` read
:func:`memory_kb` of the grader's descendants.
"""

from __future__ import annotations

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
