"""What attention costs on this machine: lessonlib's fast path against plain NumPy, a floor and torch.

For every size n and input shape (B, H, n, d) with d = 64 (one head by default; ``--shapes 2x8``
for a batch of two with eight heads) and every dtype, this times in one run, interleaved round by
round in a shuffled order so that a busy machine slows every method alike:

- floor             two BLAS matmuls and one exp over the n x n scores, nothing else (no scale,
                    no maximum, no normalisation): a lower bound for dense attention in NumPy;
- floor + weights   the same, keeping the scores and their exp as two n x n arrays: the lower bound
                    for a call that returns its weights and scores;
- plain             the shortest correct, stable NumPy version, in place (:func:`plain`): scale
                    the queries, matmul, subtract the row maximum, exp, matmul, divide by row sums;
- fast              ``lessonlib.fast.scaled_dot_product_attention(..., need_weights=False)``;
- plain + weights   the same eight lines returning what ``lessonlib.fast`` returns with weights:
                    output, weights and scores (:func:`plain_with_weights`);
- fast + weights    ``lessonlib.fast.scaled_dot_product_attention``: output, weights, scores;
- reference dense   ``lessonlib.scaled_dot_product_attention``: the formula as the lesson writes it;
- reference tiled   ``lessonlib.tiled_attention`` at a few block sizes (output and logsumexp;
                    ``lessonlib.fast.tiled_attention`` is the same function);
- torch SDPA        ``F.scaled_dot_product_attention`` (its fused path), and torch naive,
                    ``softmax(q @ k^T / sqrt(d)) @ v``, where torch is installed.

It prints the median wall time, the time as a fraction of the machine's measured matmul rate
(attention does 4 * B * H * n^2 * d floating-point operations), the peak memory of one extra call,
the fitted log-log slopes of time and memory against n, and then the table of the fast path
against plain NumPy and the floor, with its targets: at every size fast no slower than plain
(within 5%), with and without weights, and from n = 4096 no slower than the floor. It saves a
plot (and the raw numbers as JSON). Without torch the torch columns are skipped.

Each round calls every method once, in a new shuffled order, and there are as many rounds as fit
in about ``--seconds`` per size (at least ``--repeat``). Calls follow each other with nothing in
between: their results are freed as they are dropped, as in a learner's loop.

Peak memory is the most the allocator holds during one extra call, beyond what it held before:
for lessonlib through tracemalloc (NumPy reports its buffers to it); for torch, whose CPU
allocator keeps no running statistics and is not seen by tracemalloc, from the allocation and
free records of torch's own profiler (profile_memory=True), summed in time order. Both count the
bytes asked of the allocator. (Resident-set growth was not used: glibc keeps freed blocks below
32 MiB for reuse, so it reads zero for every size under n = 4096 in float32.)

    python benchmarks/attention.py --targets          # the fast-path table: n = 256 ... 8192, float32,
                                                      # one head, and a batch of 2 x 8 heads to 4096
    python benchmarks/attention.py --quick            # n <= 2048, one head, float32: about a minute
    python benchmarks/attention.py --max-n 4096       # everything up to n = 4096
    python benchmarks/attention.py                    # n = 256 ... 8192, 1x1 and 1x8, both dtypes

Timings depend on the machine and on what else runs on it: the script reports, it does not assert.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure this checkout's lessonlib, installed or not

import lessonlib as L  # noqa: E402
from lessonlib import fast  # noqa: E402

D_HEAD = 64
BLAS_ENVIRONMENT = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
FLOOR, PLAIN, FAST = "floor", "plain", "fast"
FLOOR_WEIGHTS, PLAIN_WEIGHTS, FAST_WEIGHTS = "floor + weights", "plain + weights", "fast + weights"
REFERENCE, SDPA, NAIVE = "reference dense", "torch SDPA", "torch naive"
DENSE_METHODS = (FLOOR, PLAIN, FAST, FLOOR_WEIGHTS, PLAIN_WEIGHTS, FAST_WEIGHTS, REFERENCE, NAIVE)  # above --max-gib


@dataclass
class Method:
    """One way of computing attention: a name, a zero-argument call, and who allocates its memory."""

    name: str
    run: Callable[[], object]
    uses_torch: bool


@dataclass
class Row:
    """Everything measured for one method at one size."""

    n: int
    shape: str  # "BxH": batch and heads of the (B, H, n, d) inputs
    dtype: str
    method: str
    median_s: float
    times_s: list[float]
    cpu_median_s: float  # CPU time of the whole process (all its threads) per call
    matmul_fraction: float  # achieved FLOP/s over the machine's matmul FLOP/s
    peak_bytes: int | None  # tracemalloc for lessonlib, torch's profiler for torch
    note: str = ""


@dataclass
class Report:
    """The whole run: the machine, its matmul rates, and one row per (size, shape, dtype, method)."""

    machine: dict[str, object]
    matmul_gflops: dict[str, float]
    rows: list[Row] = field(default_factory=list)


# --- the machine ----------------------------------------------------------------------------------


def import_torch(wanted: bool):
    """torch, or None (with a message) when it is not installed or not wanted."""
    if not wanted:
        print("torch columns skipped (--no-torch)")
        return None
    # torch's OpenMP threads otherwise spin for a while after each call, holding the cores that the
    # next method in the round needs; waiting passively, they slow only torch's own next call.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        print("torch is not installed: the torch SDPA and torch naive columns are skipped")
        return None
    return torch


def describe_machine(torch) -> dict[str, object]:
    """Versions, cores, thread settings and the BLAS kernel NumPy runs (via threadpoolctl)."""
    from threadpoolctl import threadpool_info

    blas = [
        f"{lib.get('internal_api')} {lib.get('version')} kernel={lib.get('architecture')} "
        f"threads={lib.get('num_threads')}"
        for lib in threadpool_info()
        if lib.get("user_api") == "blas"
    ]
    return {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "numpy_blas": blas,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "threads": str(fast.thread_info()),
        "torch": None if torch is None else f"{torch.__version__} threads={torch.get_num_threads()}",
        "environment": {name: os.environ.get(name) for name in BLAS_ENVIRONMENT if name in os.environ},
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def matmul_gflops(dtype: np.dtype, torch, n: int = 2048, repeat: int = 7) -> float:
    """The machine's matmul rate for ``dtype``: best of NumPy's and torch's (n x n) @ (n x n), GFLOP/s.

    The fastest of ``repeat`` calls is used: the rate the hardware reaches, not a typical one.
    """
    a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
    calls = [lambda: a @ a]
    if torch is not None:
        t = torch.from_numpy(a)
        calls.append(lambda: t @ t)
    best = min(min(seconds(call)[0] for _ in range(repeat)) for call in calls)
    return 2.0 * n**3 / best / 1e9


def print_matmul_rates(report: Report, torch) -> None:
    """Measure the matmul rate again after the run, keep the higher figure, rescale the fractions.

    A rate measured while another program holds a core comes out low; measuring at both ends of
    the run and keeping the best makes the '% matmul' column less dependent on that moment.
    """
    for dtype, before in list(report.matmul_gflops.items()):
        after = matmul_gflops(np.dtype(dtype), torch)
        best = max(before, after)
        for row in report.rows:
            if row.dtype == dtype and not row.note:
                row.matmul_fraction *= before / best
        report.matmul_gflops[dtype] = best
        sources = "NumPy" if torch is None else "NumPy and torch"
        print(f"machine matmul rate, {dtype}: {best:.0f} GFLOP/s (fastest (2048 x 2048) @ (2048 x 2048) of "
              f"{sources}; {before:.0f} before the run, {after:.0f} after)")


# --- measuring ------------------------------------------------------------------------------------


def seconds(call: Callable[[], object]) -> tuple[float, float]:
    """Wall time and process CPU time of one call (its result is freed as soon as it is dropped)."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_interleaved(methods: list[Method], repeat: int, budget_s: float,
                     seed: int = 0) -> dict[str, list[tuple[float, float]]]:
    """One warm-up call each, then rounds that call every method once, in a shuffled order.

    As many rounds as the warm-up calls say fit in ``budget_s``, at least ``repeat`` and at most
    300. Shuffled, not rotated: a call pays for what the call before it left behind (BLAS threads
    still spinning, freed memory the system must map and zero again), and a rotation would keep
    the same neighbour before each method in every round.
    """
    warm_up = sum(seconds(method.run)[0] for method in methods)
    times: dict[str, list[tuple[float, float]]] = {method.name: [] for method in methods}
    order = np.random.default_rng(seed)
    for _ in range(min(300, max(repeat, int(budget_s / warm_up)))):
        for i in order.permutation(len(methods)):
            times[methods[i].name].append(seconds(methods[i].run))
    return times


def traced_peak(call: Callable[[], object]) -> int:
    """Peak bytes NumPy allocates during one call (tracemalloc, relative to the start)."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return max(peak - base, 0)


def torch_peak(torch, call: Callable[[], object]) -> int:
    """Peak bytes torch's CPU allocator holds during one call, from its profiler's memory records.

    Each profiler event carries the bytes its own code allocated (positive) or freed (negative);
    their running sum in time order is what torch holds, and its maximum the peak.
    """
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    stderr = os.dup(2)
    try:  # the profiler writes a start and a stop line to stderr: keep them out of the report
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                call()
    finally:
        os.dup2(stderr, 2)
        os.close(stderr)
    held = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        held += event.self_cpu_memory_usage
        peak = max(peak, held)
    return peak


# --- the methods ----------------------------------------------------------------------------------


def plain(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The shortest correct, stable NumPy attention, in place: what a learner writes after 01 and 04."""
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # (..., n, d)
    s = q @ np.swapaxes(k, -1, -2)  # (..., n, n) scores
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)  # unnormalised weights
    out = s @ v  # (..., n, d)
    out /= s.sum(axis=-1, keepdims=True)
    return out


def plain_with_weights(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`plain` returning what lessonlib.fast returns with weights: output, weights, scores."""
    q = q * (1.0 / math.sqrt(q.shape[-1]))  # (..., n, d)
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n, n), kept
    weights = scores - scores.max(axis=-1, keepdims=True)  # (..., n, n)
    np.exp(weights, out=weights)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights, scores


def floor(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Two matmuls and one exp over the n x n scores, nothing else: no dense attention in NumPy is faster."""
    s = q @ np.swapaxes(k, -1, -2)  # (..., n, n)
    np.exp(s, out=s)
    return s @ v  # (..., n, d)


def floor_with_weights(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`floor` keeping the scores and their exp, as a call that returns its weights must."""
    scores = q @ np.swapaxes(k, -1, -2)  # (..., n, n)
    weights = np.exp(scores)  # (..., n, n), unnormalised
    return weights @ v, weights, scores


def make_methods(q: np.ndarray, k: np.ndarray, v: np.ndarray, args, torch) -> list[Method]:
    """The methods compared at one size, all on the same (B, H, n, d) inputs."""
    methods = [
        Method(FLOOR, lambda: floor(q, k, v), False),
        Method(PLAIN, lambda: plain(q, k, v), False),
        Method(FAST, lambda: fast.scaled_dot_product_attention(q, k, v, need_weights=False), False),
        Method(FLOOR_WEIGHTS, lambda: floor_with_weights(q, k, v), False),
        Method(PLAIN_WEIGHTS, lambda: plain_with_weights(q, k, v), False),
        Method(FAST_WEIGHTS, lambda: fast.scaled_dot_product_attention(q, k, v), False),
    ]
    if not args.no_reference:
        methods.append(Method(REFERENCE, lambda: L.scaled_dot_product_attention(q, k, v), False))
    for block in args.block_sizes:
        methods.append(Method(f"reference tiled b={block}",
                              functools.partial(L.tiled_attention, q, k, v, block_size=block), False))
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))  # (B, H, n, d), no copy
        scale = 1.0 / math.sqrt(q.shape[-1])

        def sdpa():
            with torch.inference_mode():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)

        def naive():
            with torch.inference_mode():
                scores = tq @ tk.transpose(-2, -1) * scale  # (B, H, n, n)
                return torch.softmax(scores, dim=-1) @ tv  # (B, H, n, d)

        methods += [Method(SDPA, sdpa, True), Method(NAIVE, naive, True)]
    return methods


def dense_bytes(batch: int, heads: int, n: int, dtype: np.dtype) -> int:
    """What the dense methods hold at once: scores and weights, B * H * n * n each."""
    return 2 * batch * heads * n * n * np.dtype(dtype).itemsize


def measure_size(n: int, shape: str, dtype: np.dtype, args, torch, gflops: float) -> list[Row]:
    """Rows for every method at one (n, shape, dtype); dense methods over the memory cap are skipped."""
    batch, heads = (int(x) for x in shape.split("x"))
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((batch, heads, n, D_HEAD)).astype(dtype) for _ in range(3))  # (B, H, n, d)
    methods = make_methods(q, k, v, args, torch)
    too_big = dense_bytes(batch, heads, n, dtype) > args.max_gib * 2**30
    skipped = [m for m in methods if too_big and m.name in DENSE_METHODS]
    methods = [m for m in methods if m not in skipped]
    times = time_interleaved(methods, args.repeat, args.seconds)
    flops = 4.0 * batch * heads * n * n * D_HEAD
    rows = []
    for method in methods:
        walls = [wall for wall, _ in times[method.name]]
        median = statistics.median(walls)
        peak = None
        if not args.no_memory:
            peak = torch_peak(torch, method.run) if method.uses_torch else traced_peak(method.run)
        rows.append(Row(
            n, shape, np.dtype(dtype).name, method.name, median, walls,
            statistics.median(cpu for _, cpu in times[method.name]),
            flops / median / (gflops * 1e9), peak,
        ))
    for method in skipped:
        gib = dense_bytes(batch, heads, n, dtype) / 2**30
        rows.append(Row(n, shape, np.dtype(dtype).name, method.name, math.nan, [], math.nan, math.nan, None,
                        note=f"skipped: needs {gib:.1f} GiB > --max-gib {args.max_gib:g}"))
    check_agreement(methods, dtype)
    return rows


def check_agreement(methods: list[Method], dtype: np.dtype) -> None:
    """Every method must give plain's output (to 1e-4 in float32, 1e-10 in float64): a guard, not a test."""
    outputs = {}
    for m in methods:
        if m.name not in (FLOOR, FLOOR_WEIGHTS):
            result = m.run()
            result = result[0] if isinstance(result, tuple) else getattr(result, "output", result)
            outputs[m.name] = np.asarray(result)
    reference = next(iter(outputs.values()))
    tolerance = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    for name, out in outputs.items():
        out = out.reshape(reference.shape)
        if not np.allclose(out, reference, atol=tolerance, rtol=0):
            raise AssertionError(f"{name} differs from {PLAIN} by {np.max(np.abs(out - reference)):.2e}")


# --- reporting ------------------------------------------------------------------------------------


def fmt_mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f}"


def print_table(report: Report) -> None:
    """One line per method and size; 'x SDPA' is the time over torch SDPA's in the same run.

    'CPU ms' is the process's CPU time per call (all threads): on a machine shared with other work
    it shows the cost of a method when the wall time is stretched by waiting for a core.
    """
    sdpa = {(r.n, r.shape, r.dtype): r.median_s for r in report.rows if r.method == SDPA}
    header = f"{'n':>5} {'BxH':>4} {'dtype':<7} {'method':<22} {'median ms':>10} {'CPU ms':>8} {'x SDPA':>7} " \
             f"{'% matmul':>8} {'peak MiB':>9}"
    print(header)
    print("-" * len(header))
    for r in report.rows:
        if r.note:
            print(f"{r.n:>5} {r.shape:>4} {r.dtype:<7} {r.method:<22} {r.note}")
            continue
        ref = sdpa.get((r.n, r.shape, r.dtype))
        ratio = f"{r.median_s / ref:.2f}" if ref else "-"
        print(f"{r.n:>5} {r.shape:>4} {r.dtype:<7} {r.method:<22} {r.median_s * 1e3:>10.2f} "
              f"{r.cpu_median_s * 1e3:>8.1f} {ratio:>7} "
              f"{100 * r.matmul_fraction:>7.1f}% {fmt_mib(r.peak_bytes):>9}")


def series(report: Report, shape: str, dtype: str, method: str, what: str, min_n: int = 0) -> tuple[list, list]:
    """(sizes, values) of one method, keeping measured rows with n >= min_n and a positive value."""
    pairs = []
    for r in report.rows:
        if (r.shape, r.dtype, r.method) == (shape, dtype, method) and not r.note and r.n >= min_n:
            value = {"time": r.median_s, "memory": r.peak_bytes}[what]
            if value and value > 0:
                pairs.append((r.n, value))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def configs(report: Report) -> list[tuple[str, str]]:
    return sorted({(r.shape, r.dtype) for r in report.rows})


def methods_in(report: Report) -> list[str]:
    return list(dict.fromkeys(r.method for r in report.rows))


def print_slopes(report: Report, min_n: int) -> None:
    """Fitted log-log slopes of time and memory against n (1 = linear, 2 = quadratic), over n >= min_n."""
    print(f"\nlog-log slopes against n, fitted over n >= {min_n} (1 = linear growth, 2 = quadratic)")
    print(f"{'BxH':>4} {'dtype':<7} {'method':<22} {'time':>6} {'memory':>7}  sizes")
    for shape, dtype in configs(report):
        for method in methods_in(report):
            sizes, times = series(report, shape, dtype, method, "time", min_n)
            mem_sizes, mems = series(report, shape, dtype, method, "memory", min_n)
            t = f"{L.loglog_slope(sizes, times):.2f}" if len(sizes) >= 2 else "-"
            m = f"{L.loglog_slope(mem_sizes, mems):.2f}" if len(mem_sizes) >= 2 else "-"
            if sizes:
                print(f"{shape:>4} {dtype:<7} {method:<22} {t:>6} {m:>7}  {sizes[0]}-{sizes[-1]}")


def find(report: Report, n: int, shape: str, dtype: str, method: str) -> Row | None:
    for r in report.rows:
        if (r.n, r.shape, r.dtype, r.method) == (n, shape, dtype, method) and not r.note:
            return r
    return None


def print_against_plain(report: Report, margin: float = 1.05) -> bool:
    """The fast path against plain NumPy and the floor, per size: median ms and ratios, and the targets.

    Targets: fast <= plain and fast + weights <= plain + weights (within ``margin``) at every size;
    from n = 4096, fast <= floor. 'fw/flw' (fast + weights over floor + weights) is shown, not a
    target: normalising the weights is a pass over them that the floor leaves out.
    Returns whether every target was met.
    """
    print(f"\nfast path against plain NumPy (median ms of interleaved rounds; targets within {margin - 1:.0%})")
    header = (f"{'BxH':>4} {'dtype':<7} {'n':>5} {'floor':>8} {'plain':>8} {'fast':>8} {'SDPA':>8} "
              f"{'plain/floor':>11} {'fast/plain':>10} {'fast/floor':>10} {'plain+w':>8} {'fast+w':>8} "
              f"{'fw/pw':>6} {'fw/flw':>6}  targets")
    print(header)
    print("-" * len(header))
    all_met = True
    for shape, dtype in configs(report):
        for n in sorted({r.n for r in report.rows if (r.shape, r.dtype) == (shape, dtype)}):
            fl, pl, fa, sd, flw, pw, fw = (find(report, n, shape, dtype, m) for m in
                                           (FLOOR, PLAIN, FAST, SDPA, FLOOR_WEIGHTS, PLAIN_WEIGHTS, FAST_WEIGHTS))
            if None in (fl, pl, fa, flw, pw, fw):
                continue
            ms = [x.median_s * 1e3 for x in (fl, pl, fa)]
            sdpa = f"{sd.median_s * 1e3:>8.2f}" if sd else f"{'-':>8}"
            checks = [fa.median_s <= margin * pl.median_s, fw.median_s <= margin * pw.median_s]
            if n >= 4096:
                checks.append(fa.median_s <= fl.median_s)
            met = all(checks)
            all_met &= met
            print(f"{shape:>4} {dtype:<7} {n:>5} {ms[0]:>8.2f} {ms[1]:>8.2f} {ms[2]:>8.2f} {sdpa} "
                  f"{pl.median_s / fl.median_s:>11.2f} {fa.median_s / pl.median_s:>10.2f} "
                  f"{fa.median_s / fl.median_s:>10.2f} {pw.median_s * 1e3:>8.2f} {fw.median_s * 1e3:>8.2f} "
                  f"{fw.median_s / pw.median_s:>6.2f} {fw.median_s / flw.median_s:>6.2f}  "
                  f"{'met' if met else 'NOT met'}")
    cache = fast.cache_bytes() / 2**20
    print(f"fast: without weights, row blocks one after another once one score matrix outgrows {cache:g} MiB, "
          f"the last-level cache this machine reports; whole arrays below, and always with weights "
          f"(lessonlib.fast.blocks_pay). {fast.thread_info()}")
    print(f"all targets met: {all_met}")
    return all_met


def save_plot(report: Report, path: Path) -> None:
    """Time and peak memory against n (log-log), one row of panels per (shape, dtype)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    rows, names = configs(report), methods_in(report)
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(names)))
    markers = "osD^v<>p*h"
    fig = Figure(figsize=(10, 3.2 * len(rows)), dpi=100)
    axes = fig.subplots(len(rows), 2, squeeze=False)
    for (shape, dtype), (ax_time, ax_mem) in zip(rows, axes):
        for i, name in enumerate(names):
            style = dict(color=colours[i], marker=markers[i % len(markers)], label=name, linewidth=1.2)
            sizes, times = series(report, shape, dtype, name, "time")
            if sizes:
                ax_time.plot(sizes, np.asarray(times) * 1e3, **style)
            sizes, mems = series(report, shape, dtype, name, "memory")
            if sizes:
                ax_mem.plot(sizes, np.asarray(mems) / 2**20, **style)
        for ax, what in ((ax_time, "median time (ms)"), (ax_mem, "peak memory (MiB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length n")
            ax.set_ylabel(what)
            ax.set_title(f"BxH={shape}, {dtype}, d={D_HEAD}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="upper left")  # the time panel: the memory one is empty with --no-memory
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    print(f"\nplot saved to {path}: median time and peak memory against n, log-log, one line per method")


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-n", type=int, default=256, help="smallest n (a power of two; default 256)")
    parser.add_argument("--max-n", type=int, default=8192, help="largest n (default 8192)")
    parser.add_argument("--shapes", nargs="+", default=["1x1", "1x8"],
                        help="batch x heads of the (B, H, n, d) inputs (default 1x1 1x8)")
    parser.add_argument("--batched-max-n", type=int, default=None,
                        help="largest n for shapes other than 1x1 (default: --max-n)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], help="default float32 float64")
    parser.add_argument("--block-sizes", type=int, nargs="*", default=[128, 256, 512, 1024],
                        help="tiled block sizes (default 128 256 512 1024; none to skip tiled)")
    parser.add_argument("--repeat", type=int, default=5, help="fewest timed rounds per size (default 5)")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="time per size that decides how many rounds beyond --repeat (default 4)")
    parser.add_argument("--threads", type=int, default=None,
                        help="lessonlib.fast.set_num_threads and torch.set_num_threads (default: all cores)")
    parser.add_argument("--max-gib", type=float, default=4.5,
                        help="skip dense methods whose scores + weights exceed this many GiB (default 4.5)")
    parser.add_argument("--no-reference", action="store_true", help="leave out lessonlib's reference dense")
    parser.add_argument("--no-memory", action="store_true", help="skip the extra traced call per method")
    parser.add_argument("--quick", action="store_true",
                        help="n <= 2048, one head, float32, three rounds: about a minute")
    parser.add_argument("--targets", action="store_true",
                        help="the fast-path table: n = 256 ... 8192 at 1x1 and to 4096 at 2x8, float32, "
                             "no reference, tiled or memory, at least 7 rounds and about 8 s per size")
    parser.add_argument("--no-torch", action="store_true", help="leave torch out even if installed")
    parser.add_argument("--plot", type=Path, default=ROOT / "artifacts" / "attention_benchmark.png")
    parser.add_argument("--json", type=Path, default=None, help="raw numbers (default: the plot path, .json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_n, args.shapes, args.dtypes, args.repeat = min(args.max_n, 2048), ["1x1"], ["float32"], 3
    if args.targets:
        args.min_n, args.max_n, args.shapes, args.dtypes = 256, 8192, ["1x1", "2x8"], ["float32"]
        args.batched_max_n, args.block_sizes, args.repeat, args.seconds = 4096, [], 7, 8.0
        args.no_reference = args.no_memory = True
    if args.json is None:
        args.json = args.plot.with_suffix(".json")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch = import_torch(not args.no_torch)
    fast.set_num_threads(args.threads)
    if torch is not None and args.threads is not None:
        torch.set_num_threads(args.threads)
    report = Report(describe_machine(torch), {})
    for key, value in report.machine.items():
        print(f"{key}: {value}")
    for dtype in args.dtypes:
        report.matmul_gflops[dtype] = matmul_gflops(np.dtype(dtype), torch)
    sizes = [2**p for p in range(int(math.log2(args.min_n)), int(math.log2(args.max_n)) + 1)]
    started = time.perf_counter()
    for dtype in args.dtypes:
        for shape in args.shapes:
            for n in sizes:
                if shape != "1x1" and args.batched_max_n is not None and n > args.batched_max_n:
                    continue
                rows = measure_size(n, shape, np.dtype(dtype), args, torch, report.matmul_gflops[dtype])
                report.rows += rows
                print(f"  measured n={n} BxH={shape} {dtype} ({time.perf_counter() - started:.0f} s so far)",
                      file=sys.stderr)
    print_matmul_rates(report, torch)
    print()
    print_table(report)
    print_slopes(report, min_n=1024 if args.max_n >= 2048 else args.min_n)
    print_against_plain(report)
    save_plot(report, args.plot)
    args.json.write_text(json.dumps(asdict(report), indent=1, default=str))
    print(f"raw numbers saved to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
