"""Cutting attention into blocks of query rows and running the blocks on several threads.

Why threads help: NumPy's element-wise passes (max, exp, sums) run on one core, and in dense
attention they cost more than the matmuls. NumPy releases the GIL inside its ufuncs and inside
matmul, so independent blocks of query rows can run at the same time in plain Python threads.
Every block also calls BLAS for its matmuls, so while the blocks run BLAS is held to one thread
per worker (with threadpoolctl); otherwise each worker would start BLAS threads on the same cores.

Why blocks: each block's scores are still in cache when its softmax passes and its second matmul
read them, and a block writes straight into the result arrays, so no other n x n array is made.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from lessonlib._checks import check_positive_int

Item = TypeVar("Item")

# Rows per block of dense attention: about this many bytes of scores. Such a block stays in cache
# (the last level, if not a core's own 1-2 MiB) between its matmul and its softmax passes; smaller
# blocks cost more in BLAS, which repacks the whole key and value matrices for every call.
BLOCK_BYTES = 1 << 22
# Below these sizes the plain whole-array code is faster: the per-block bookkeeping (tens of
# microseconds of Python and thread hand-over per block) costs more than threads save. Measured on
# 2 cores: blocks win from n = 512 for one (n, n) matrix and from n = 256 for eight.
MIN_BLOCKED_SCORES = 1 << 15  # scores in one (L, S) matrix
MIN_BLOCKED_TOTAL = 1 << 17  # scores in the whole (..., L, S) stack


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
    blas_users = 0  # run_blocks calls now running, which share one BLAS limit
    blas_limit = None  # threadpoolctl's limiter while blas_users > 0


def get_num_threads() -> int:
    """How many threads dense and tiled attention may use (default: the number of available cores)."""
    return _Shared.threads


def set_num_threads(num_threads: int | None) -> int:
    """Let dense and tiled attention use up to ``num_threads`` threads; None = all available cores.

    Returns the previous setting, so a caller can put it back. The blocks call BLAS on one thread
    each, so with 1 thread these functions use one core. Results do not depend on the setting
    beyond rounding (a different split into blocks can change the last bit of a sum).
    """
    if num_threads is None:
        num_threads = available_cores()
    num_threads = check_positive_int(num_threads, "num_threads")
    with _Shared.lock:
        previous, _Shared.threads = _Shared.threads, num_threads
    return previous


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
    return ThreadpoolController()


def _hold_blas_to_one_thread() -> None:
    """Limit BLAS to one thread; concurrent callers share the limit and the last one lifts it."""
    with _Shared.lock:
        if _Shared.blas_users == 0:
            _Shared.blas_limit = _controller().limit(limits=1, user_api="blas")
        _Shared.blas_users += 1


def _release_blas() -> None:
    with _Shared.lock:
        _Shared.blas_users -= 1
        if _Shared.blas_users == 0:
            _Shared.blas_limit.restore_original_limits()
            _Shared.blas_limit = None


def run_blocks(work: Callable[[Item], None], items: Sequence[Item]) -> None:
    """Call ``work(item)`` for every item, spread over up to :func:`get_num_threads` threads.

    Items must be independent (each writes its own slice of an output). The calling thread works
    too; each thread takes the next unstarted item when it finishes one, so a core slowed by
    another program simply does fewer items. BLAS runs on one thread meanwhile. The first error
    raised by an item is raised here once every thread has stopped.
    """
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

    _hold_blas_to_one_thread()
    try:
        if workers <= 1:
            take_items()
            return
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
    finally:
        _release_blas()


def worth_blocking(n_rows: int, n_cols: int, n_matrices: int = 1) -> bool:
    """Whether a stack of ``n_matrices`` (n_rows, n_cols) score matrices is big enough for blocks."""
    scores = n_rows * n_cols
    return scores >= MIN_BLOCKED_SCORES and n_matrices * scores >= MIN_BLOCKED_TOTAL


def rows_per_block(n_rows: int, row_bytes: int, n_matrices: int = 1) -> int:
    """Rows of one block of a stack of ``n_matrices`` (n_rows, .) matrices with rows of ``row_bytes``.

    About BLOCK_BYTES per block, but no more rows than give every thread two blocks to take.
    """
    rows = BLOCK_BYTES // max(row_bytes, 1)
    blocks_per_matrix = -(-2 * get_num_threads() // max(n_matrices, 1))  # ceiling division
    rows = min(rows, -(-n_rows // blocks_per_matrix))
    return max(1, min(n_rows, rows))


def row_blocks(batch: tuple[int, ...], n_rows: int, rows: int) -> list[tuple[tuple[int, ...], slice]]:
    """(batch index, row slice) of every block of ``rows`` rows in every matrix of a (*batch, n_rows, .) stack."""
    starts = range(0, n_rows, rows)
    return [(index, slice(r0, r0 + rows)) for index in np.ndindex(batch) for r0 in starts]
