"""What this machine offers: its cores, its last-level cache and its available memory, and a
runner that spreads independent pieces of work over threads with BLAS held to one thread meanwhile.

Nothing here knows about attention; :mod:`lessonlib.fast` re-exports the public names, and the
shared input checks compare a call's size with :func:`available_memory` before it allocates.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from lessonlib._checks import check_callable, check_positive_int

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

Item = TypeVar("Item")

# Where Linux describes the first core's caches (one index* folder per cache, each with a size).
CACHE_DIRECTORY = Path("/sys/devices/system/cpu/cpu0/cache")
# Used when the system does not say how big its last-level cache is: a modest laptop's size.
FALLBACK_CACHE_BYTES = 8 << 20
# Where Linux says how much memory new allocations can get without swapping (MemAvailable).
MEMINFO = Path("/proc/meminfo")
# A container's memory limit and use, cgroup v2 then v1: inside one, /proc/meminfo shows the host's.
CGROUP_MEMORY = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"), Path("/sys/fs/cgroup/memory/memory.usage_in_bytes")),
)
# Used when the system says nothing about its memory: what a modest laptop has free.
FALLBACK_MEMORY_BYTES = 4 << 30


# --- threads ---------------------------------------------------------------------------------------


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system reports it), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class _Shared:
    """Module state, changed only under ``lock``: the thread setting, the helper pool, the BLAS limit."""

    lock = threading.Lock()
    threads = available_cores()
    pool: ThreadPoolExecutor | None = None
    pool_workers = 0
    blas_users = 0  # calls now running on blocks, which share one BLAS limit
    blas_limit = None  # threadpoolctl's limiter while blas_users > 0


def get_num_threads() -> int:
    """How many threads :func:`run_blocks` may use (default: the number of available cores)."""
    return _Shared.threads


def set_num_threads(num_threads: int | None) -> int:
    """Let :func:`run_blocks` (lessonlib.fast's masked softmax) use up to ``num_threads`` threads.

    None = all available cores. Returns the previous setting, so a caller can put it back. Its
    blocks hold BLAS to one thread, so with 1 thread such a call uses one core. Attention's own
    row blocks run one after another and leave the cores to BLAS. Results do not depend on the
    setting beyond rounding.
    """
    if num_threads is None:
        num_threads = available_cores()
    num_threads = check_positive_int(num_threads, "num_threads")
    with _Shared.lock:
        previous, _Shared.threads = _Shared.threads, num_threads
    return previous


@dataclass(frozen=True)
class ThreadInfo:
    """Who may run how many threads right now: run_blocks, BLAS (outside it), the machine."""

    fast_threads: int  # get_num_threads(): threads run_blocks may use
    blas_threads: dict[str, int]  # BLAS library -> its current thread count
    cores: int  # available_cores()
    cache_bytes: int  # cache_bytes(): the size that decides between whole arrays and row blocks

    def __str__(self) -> str:
        blas = ", ".join(f"{name} {n}" for name, n in self.blas_threads.items()) or "none found"
        return (f"lessonlib.fast: {self.fast_threads} thread(s) for masked_softmax's row blocks, each with "
                f"BLAS on 1; BLAS otherwise (attention's products): {blas}; cores available: {self.cores}; "
                f"last-level cache: {self.cache_bytes / 2**20:g} MiB")


def thread_info() -> ThreadInfo:
    """How many threads run where: print it beside a timing so the reader knows what was measured."""
    blas = {
        f"{lib.internal_api} ({os.path.basename(lib.filepath)})": lib.num_threads
        for lib in _controller().select(user_api="blas").lib_controllers
    }
    return ThreadInfo(get_num_threads(), blas, available_cores(), cache_bytes())


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared pool of helper threads, rebuilt when the wanted number of helpers changes."""
    with _Shared.lock:
        if _Shared.pool is None or _Shared.pool_workers != workers:
            if _Shared.pool is not None:
                _Shared.pool.shutdown(wait=False)
            _Shared.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lessonlib")
            _Shared.pool_workers = workers
        return _Shared.pool


def _start_afresh_after_fork() -> None:
    """A forked child has none of the parent's threads (and perhaps a lock held by one of them)."""
    _Shared.lock = threading.Lock()
    _Shared.pool, _Shared.pool_workers, _Shared.blas_users, _Shared.blas_limit = None, 0, 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_start_afresh_after_fork)


@functools.cache
def _controller() -> ThreadpoolController:
    """threadpoolctl's view of the loaded BLAS libraries (found once: the search takes ~1 ms)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside: small matrices gain nothing from its threads, which only wake and wait
    (and would swamp a timing). Concurrent calls share the limit; the last one out lifts it."""
    with _Shared.lock:
        if _Shared.blas_users == 0:
            _Shared.blas_limit = _controller().limit(limits=1, user_api="blas")
        _Shared.blas_users += 1
    try:
        yield
    finally:
        with _Shared.lock:
            _Shared.blas_users -= 1
            if _Shared.blas_users == 0:
                _Shared.blas_limit.restore_original_limits()


def run_blocks(work: Callable[[Item], None], items: Sequence[Item]) -> None:
    """Call ``work(item)`` for every item (each writing its own slice), on up to get_num_threads() threads.

    One item runs on the calling thread, BLAS left as it is. Otherwise the calling thread works
    too, each thread takes the next item when it finishes one (a core slowed by another program
    does fewer), BLAS runs on one thread, and the first error is raised once every thread stopped.
    """
    check_callable(work, "work")
    if not isinstance(items, Sequence):
        raise TypeError(f"items must be a sequence (a list or tuple) of work items, got {type(items).__name__}")
    if len(items) == 1:
        work(items[0])
        return
    workers = min(get_num_threads(), len(items))
    counter, counter_lock, failed = itertools.count(), threading.Lock(), threading.Event()

    def take_items() -> None:
        while not failed.is_set():
            with counter_lock:
                i = next(counter)
            if i >= len(items):
                return
            try:
                work(items[i])
            except BaseException:
                failed.set()
                raise

    with one_blas_thread():
        helpers = [_pool(workers - 1).submit(take_items) for _ in range(workers - 1)]
        try:
            take_items()
        finally:
            # A helper that never started has nothing left to do (every item is taken); cancelling
            # it rather than waiting also keeps a call made from inside a helper from waiting on itself.
            errors = [helper.exception() for helper in helpers if not helper.cancel()]
        for error in errors:
            if error is not None:
                raise error


# --- the last-level cache ------------------------------------------------------------------------


def _size_in_bytes(text: str) -> int:
    """'32768K' or '1M' (how Linux writes a cache size) in bytes."""
    text, units = text.strip(), {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)


@functools.cache
def cache_bytes() -> int:
    """The last-level cache of the first core, as Linux describes it; FALLBACK_CACHE_BYTES elsewhere.

    Read from sysfs rather than ``sysconf``: inside a virtual machine ``sysconf`` can report the
    host's cache, which this process does not have to itself.
    """
    try:
        sizes = [_size_in_bytes(path.read_text()) for path in CACHE_DIRECTORY.glob("index*/size")]
    except (OSError, ValueError):
        sizes = []
    return max(sizes, default=FALLBACK_CACHE_BYTES)


# --- available memory ----------------------------------------------------------------------------


def _meminfo_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (Linux), else None."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the file counts in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """The container's memory limit minus what it uses, when a cgroup sets one, else None."""
    for limit_file, usage_file in CGROUP_MEMORY:
        try:
            limit, usage = limit_file.read_text().strip(), int(usage_file.read_text())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # "max", or v1's huge number, mean no limit
            return max(int(limit) - usage, 0)
    return None


def _sysconf_memory() -> int | None:
    """Free physical memory from sysconf, or (macOS has no count of free pages) all of it; else None."""
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            continue
    return None


def _windows_memory() -> int | None:
    """Available physical memory from GlobalMemoryStatusEx (Windows), else None."""
    if os.name != "nt":
        return None
    import ctypes

    class MemoryStatus(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong), ("total", ctypes.c_ulonglong),
                    ("available", ctypes.c_ulonglong), ("total_page", ctypes.c_ulonglong),
                    ("available_page", ctypes.c_ulonglong), ("total_virtual", ctypes.c_ulonglong),
                    ("available_virtual", ctypes.c_ulonglong), ("available_extended", ctypes.c_ulonglong)]

    status = MemoryStatus()
    status.length = ctypes.sizeof(MemoryStatus)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        return None
    return int(status.available)


def available_memory() -> int:
    """Bytes this process can allocate now without swapping, as the system reports them.

    Linux: MemAvailable of /proc/meminfo, or less when a container's cgroup limit leaves less
    room; elsewhere sysconf or GlobalMemoryStatusEx; FALLBACK_MEMORY_BYTES when nothing says.
    Read afresh on every call: it changes as this and other programs allocate.
    """
    system = _meminfo_available() or _windows_memory() or _sysconf_memory() or FALLBACK_MEMORY_BYTES
    room = _cgroup_room()
    return system if room is None else min(system, room)
