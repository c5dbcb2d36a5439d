"""What attention costs on this machine: lessonlib's reference and fast paths against torch.

For every size n (d = 64, a batch of one, H heads, float32 and float64) this times, in one run,
interleaved round by round in a shuffled order so that a busy machine slows every method alike,
each method named by the function it calls:

- reference dense   ``lessonlib.scaled_dot_product_attention``: the formula, whole arrays, one
                    thread for the element-wise passes (BLAS as configured); output, weights, scores;
- fast dense        ``lessonlib.fast.scaled_dot_product_attention``: the same result, row blocks
                    on ``fast.get_num_threads()`` threads;
- fast output only  the same with ``need_weights=False``: the output alone, no (n, n) array kept;
- reference tiled   ``lessonlib.tiled_attention`` at a few block sizes (output and logsumexp);
- fast tiled        ``lessonlib.fast.tiled_attention``, its query blocks on threads;
- torch SDPA        ``F.scaled_dot_product_attention`` on (1, H, n, d) tensors (its fused path);
- torch naive       ``softmax(q @ k^T / sqrt(d)) @ v``, as most course notebooks write it;
- write floor       no attention at all: two fresh (H, n, n) arrays filled once, on as many
                    threads as lessonlib.fast uses. Dense attention that returns scores and
                    weights can never be faster than this on the same machine.

It prints the median wall time, the time as a fraction of the machine's measured matmul rate
(attention does 4 * H * n^2 * d floating-point operations), the peak memory of one extra call,
the fitted log-log slopes of time and memory against n, and the targets of the performance
issue; it saves a plot (and the raw numbers as JSON). Without torch the torch columns are skipped.

Peak memory is the most the allocator holds during one extra call, beyond what it held before:
for lessonlib through tracemalloc (NumPy reports its buffers to it); for torch, whose CPU
allocator keeps no running statistics and is not seen by tracemalloc, from the allocation and
free records of torch's own profiler (profile_memory=True), summed in time order. Both count the
bytes asked of the allocator. (Resident-set growth was not used: glibc keeps freed blocks below
32 MiB for reuse, so it reads zero for every size under n = 4096 in float32.)

    python benchmarks/attention.py --targets          # what the performance targets need: H = 1, float32
    python benchmarks/attention.py --quick            # n <= 2048, one head, float32: about a minute
    python benchmarks/attention.py --max-n 4096       # everything up to n = 4096
    python benchmarks/attention.py                    # n = 256 ... 8192, H = 1 and 8, both dtypes

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
REFERENCE, DENSE, OUTPUT_ONLY = "reference dense", "fast dense", "fast output only"
SDPA, NAIVE, FLOOR = "torch SDPA", "torch naive", "write floor"
DENSE_METHODS = (REFERENCE, DENSE, OUTPUT_ONLY, NAIVE, FLOOR)  # skipped above --max-gib


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
    heads: int
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
    """The whole run: the machine, its matmul rates, and one row per (size, heads, dtype, method)."""

    machine: dict[str, object]
    matmul_gflops: dict[str, float]
    rows: list[Row] = field(default_factory=list)


# --- the machine ----------------------------------------------------------------------------------


def import_torch(wanted: bool):
    """torch, or None (with a message) when it is not installed or not wanted."""
    if not wanted:
        print("torch columns skipped (--no-torch)")
        return None
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
    """Wall time and process CPU time of one call, after a garbage collection frees earlier results."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_interleaved(methods: list[Method], repeat: int, seed: int = 0) -> dict[str, list[tuple[float, float]]]:
    """One warm-up call each, then ``repeat`` rounds that call every method once, in a shuffled order.

    Shuffled, not rotated: a call pays for what the call before it left behind (BLAS or OpenMP
    threads still spinning, freed memory the kernel must compact into huge pages again), and a
    rotation would keep the same neighbour before each method in every round.
    """
    for method in methods:
        method.run()
    times: dict[str, list[tuple[float, float]]] = {method.name: [] for method in methods}
    order = np.random.default_rng(seed)
    for _ in range(repeat):
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


def write_two_matrices(heads: int, n: int, dtype: np.dtype) -> Callable[[], object]:
    """Fill two fresh (H, n, n) arrays, rows split over lessonlib.fast's thread count: the write floor."""
    from concurrent.futures import ThreadPoolExecutor

    threads = fast.get_num_threads()
    pool = ThreadPoolExecutor(threads)

    def run() -> tuple[np.ndarray, np.ndarray]:
        pair = np.empty((heads, n, n), dtype), np.empty((heads, n, n), dtype)
        bounds = np.linspace(0, heads * n, threads + 1).astype(int)
        blocks = [array.reshape(-1, n)[a:b] for array in pair for a, b in zip(bounds[:-1], bounds[1:])]
        list(pool.map(lambda block: block.fill(1.0), blocks))
        return pair

    return run


def make_methods(q: np.ndarray, k: np.ndarray, v: np.ndarray, block_sizes: list[int], torch) -> list[Method]:
    """The methods compared at one size, all on the same (H, n, d) inputs."""
    methods = [
        Method(REFERENCE, lambda: L.scaled_dot_product_attention(q, k, v), False),
        Method(DENSE, lambda: fast.scaled_dot_product_attention(q, k, v), False),
        Method(OUTPUT_ONLY, lambda: fast.scaled_dot_product_attention(q, k, v, need_weights=False), False),
        Method(FLOOR, write_two_matrices(q.shape[0], q.shape[1], q.dtype), False),
    ]
    for block in block_sizes:
        methods.append(Method(f"reference tiled b={block}",
                              functools.partial(L.tiled_attention, q, k, v, block_size=block), False))
        methods.append(Method(f"fast tiled b={block}",
                              functools.partial(fast.tiled_attention, q, k, v, block_size=block), False))
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(x)[None] for x in (q, k, v))  # (1, H, n, d), no copy
        scale = 1.0 / math.sqrt(q.shape[-1])

        def sdpa():
            with torch.inference_mode():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)

        def naive():
            with torch.inference_mode():
                scores = tq @ tk.transpose(-2, -1) * scale  # (1, H, n, n)
                return torch.softmax(scores, dim=-1) @ tv  # (1, H, n, d)

        methods += [Method(SDPA, sdpa, True), Method(NAIVE, naive, True)]
    return methods


def dense_bytes(heads: int, n: int, dtype: np.dtype) -> int:
    """What the dense methods hold at once: scores and weights, H * n * n each."""
    return 2 * heads * n * n * np.dtype(dtype).itemsize


def measure_size(n: int, heads: int, dtype: np.dtype, args, torch, gflops: float) -> list[Row]:
    """Rows for every method at one (n, heads, dtype); dense methods over the memory cap are skipped."""
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((heads, n, D_HEAD)).astype(dtype) for _ in range(3))  # (H, n, d)
    methods = make_methods(q, k, v, args.block_sizes, torch)
    too_big = dense_bytes(heads, n, dtype) > args.max_gib * 2**30
    skipped = [m for m in methods if too_big and m.name in DENSE_METHODS]
    methods = [m for m in methods if m not in skipped]
    times = time_interleaved(methods, args.repeat)
    flops = 4.0 * heads * n * n * D_HEAD
    rows = []
    for method in methods:
        walls = [wall for wall, _ in times[method.name]]
        median = statistics.median(walls)
        rows.append(Row(
            n, heads, np.dtype(dtype).name, method.name, median, walls,
            statistics.median(cpu for _, cpu in times[method.name]),
            flops / median / (gflops * 1e9),
            torch_peak(torch, method.run) if method.uses_torch else traced_peak(method.run),
        ))
    for method in skipped:
        gib = dense_bytes(heads, n, dtype) / 2**30
        rows.append(Row(n, heads, np.dtype(dtype).name, method.name, math.nan, [], math.nan, math.nan, None,
                        note=f"skipped: needs {gib:.1f} GiB > --max-gib {args.max_gib:g}"))
    check_agreement(methods, dtype)
    return rows


def check_agreement(methods: list[Method], dtype: np.dtype) -> None:
    """Every method must give the reference's output (to 1e-4 in float32, 1e-10 in float64): a guard, not a test."""
    outputs = {
        m.name: np.asarray(getattr(result := m.run(), "output", result)) for m in methods if m.name != FLOOR
    }
    reference = next(iter(outputs.values()))
    tolerance = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    for name, out in outputs.items():
        out = out.reshape(reference.shape)
        if not np.allclose(out, reference, atol=tolerance, rtol=0):
            raise AssertionError(f"{name} differs from {methods[0].name} by {np.max(np.abs(out - reference)):.2e}")


# --- reporting ------------------------------------------------------------------------------------


def fmt_mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f}"


def print_table(report: Report) -> None:
    """One line per method and size; 'x SDPA' is the time over torch SDPA's in the same run.

    'CPU ms' is the process's CPU time per call (all threads): on a machine shared with other work
    it shows the cost of a method when the wall time is stretched by waiting for a core.
    """
    sdpa = {(r.n, r.heads, r.dtype): r.median_s for r in report.rows if r.method == SDPA}
    header = f"{'n':>5} {'H':>2} {'dtype':<7} {'method':<22} {'median ms':>10} {'CPU ms':>8} {'x SDPA':>7} " \
             f"{'% matmul':>8} {'peak MiB':>9}"
    print(header)
    print("-" * len(header))
    for r in report.rows:
        if r.note:
            print(f"{r.n:>5} {r.heads:>2} {r.dtype:<7} {r.method:<22} {r.note}")
            continue
        ref = sdpa.get((r.n, r.heads, r.dtype))
        ratio = f"{r.median_s / ref:.2f}" if ref else "-"
        print(f"{r.n:>5} {r.heads:>2} {r.dtype:<7} {r.method:<22} {r.median_s * 1e3:>10.2f} "
              f"{r.cpu_median_s * 1e3:>8.1f} {ratio:>7} "
              f"{100 * r.matmul_fraction:>7.1f}% {fmt_mib(r.peak_bytes):>9}")


def series(report: Report, heads: int, dtype: str, method: str, what: str, min_n: int = 0) -> tuple[list, list]:
    """(sizes, values) of one method, keeping measured rows with n >= min_n and a positive value."""
    pairs = []
    for r in report.rows:
        if (r.heads, r.dtype, r.method) == (heads, dtype, method) and not r.note and r.n >= min_n:
            value = {"time": r.median_s, "memory": r.peak_bytes}[what]
            if value and value > 0:
                pairs.append((r.n, value))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def configs(report: Report) -> list[tuple[int, str]]:
    return sorted({(r.heads, r.dtype) for r in report.rows})


def methods_in(report: Report) -> list[str]:
    return list(dict.fromkeys(r.method for r in report.rows))


def print_slopes(report: Report, min_n: int) -> None:
    """Fitted log-log slopes of time and memory against n (1 = linear, 2 = quadratic), over n >= min_n."""
    print(f"\nlog-log slopes against n, fitted over n >= {min_n} (1 = linear growth, 2 = quadratic)")
    print(f"{'H':>2} {'dtype':<7} {'method':<22} {'time':>6} {'memory':>7}  sizes")
    for heads, dtype in configs(report):
        for method in methods_in(report):
            sizes, times = series(report, heads, dtype, method, "time", min_n)
            mem_sizes, mems = series(report, heads, dtype, method, "memory", min_n)
            t = f"{L.loglog_slope(sizes, times):.2f}" if len(sizes) >= 2 else "-"
            m = f"{L.loglog_slope(mem_sizes, mems):.2f}" if len(mem_sizes) >= 2 else "-"
            if sizes:
                print(f"{heads:>2} {dtype:<7} {method:<22} {t:>6} {m:>7}  {sizes[0]}-{sizes[-1]}")


def find(report: Report, n: int, heads: int, dtype: str, method: str) -> Row | None:
    for r in report.rows:
        if (r.n, r.heads, r.dtype, r.method) == (n, heads, dtype, method) and not r.note:
            return r
    return None


def print_targets(report: Report, block_sizes: list[int]) -> None:
    """The issue's targets (float32, d = 64, n = 2048 and 4096), for every head count measured."""
    print("\ntargets (float32, d = 64): met / not met, with the measured figures")
    for heads in sorted({r.heads for r in report.rows if r.dtype == "float32"}):
        for n in (2048, 4096):
            dense, output_only, sdpa, naive, floor = (
                find(report, n, heads, "float32", m) for m in (DENSE, OUTPUT_ONLY, SDPA, NAIVE, FLOOR)
            )
            if dense is None or sdpa is None:
                continue
            ratio = dense.median_s / sdpa.median_s
            print(f"  H={heads} n={n}: fast dense <= 1.5 x SDPA: {ratio <= 1.5} ({ratio:.2f} x; writing the two "
                  f"n x n results alone takes {floor.median_s / sdpa.median_s:.2f} x SDPA)")
            if naive is not None:
                ratio = dense.median_s / naive.median_s
                print(f"  H={heads} n={n}: fast dense faster than torch naive: {ratio < 1} ({ratio:.2f} x naive)")
            if output_only is not None:
                ratio = output_only.median_s / sdpa.median_s
                print(f"  H={heads} n={n}: fast output only <= 1.3 x SDPA: {ratio <= 1.3} ({ratio:.2f} x)")
        for block in block_sizes:
            for kind in ("reference", "fast"):
                method = f"{kind} tiled b={block}"
                sizes, mems = series(report, heads, "float32", method, "memory", 1024)
                if len(sizes) >= 2 and sizes[-1] >= 8192:
                    slope = L.loglog_slope(sizes, mems)
                    print(f"  H={heads} {method} memory slope over {sizes[0]}-{sizes[-1]} <= 1.05: "
                          f"{slope <= 1.05} ({slope:.2f})")
                tiled = find(report, 8192, heads, "float32", method)
                dense = find(report, 8192, heads, "float32", DENSE)
                if tiled is not None and dense is not None:
                    share = tiled.peak_bytes / dense.peak_bytes
                    print(f"  H={heads} {method} peak at n=8192 <= 3% of fast dense: {share <= 0.03} "
                          f"({100 * share:.2f}%)")


def save_plot(report: Report, path: Path) -> None:
    """Time and peak memory against n (log-log), one row of panels per (heads, dtype)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    rows, names = configs(report), methods_in(report)
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(names)))
    markers = "osD^v<>p*h"
    fig = Figure(figsize=(10, 3.2 * len(rows)), dpi=100)
    axes = fig.subplots(len(rows), 2, squeeze=False)
    for (heads, dtype), (ax_time, ax_mem) in zip(rows, axes):
        for i, name in enumerate(names):
            style = dict(color=colours[i], marker=markers[i % len(markers)], label=name, linewidth=1.2)
            sizes, times = series(report, heads, dtype, name, "time")
            if sizes:
                ax_time.plot(sizes, np.asarray(times) * 1e3, **style)
            sizes, mems = series(report, heads, dtype, name, "memory")
            if sizes:
                ax_mem.plot(sizes, np.asarray(mems) / 2**20, **style)
        for ax, what in ((ax_time, "median time (ms)"), (ax_mem, "peak memory (MiB)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("sequence length n")
            ax.set_ylabel(what)
            ax.set_title(f"H={heads}, {dtype}, d={D_HEAD}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
    axes[0][1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    print(f"\nplot saved to {path}: median time and peak memory against n, log-log, one line per method")


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-n", type=int, default=256, help="smallest n (a power of two; default 256)")
    parser.add_argument("--max-n", type=int, default=8192, help="largest n (default 8192)")
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 8], help="head counts (default 1 8)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], help="default float32 float64")
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[128, 256, 512, 1024],
                        help="tiled block sizes (default 128 256 512 1024)")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds per size (default 5)")
    parser.add_argument("--threads", type=int, default=None,
                        help="lessonlib.fast.set_num_threads and torch.set_num_threads (default: all cores)")
    parser.add_argument("--max-gib", type=float, default=4.5,
                        help="skip dense methods whose scores + weights exceed this many GiB (default 4.5)")
    parser.add_argument("--quick", action="store_true",
                        help="n <= 2048, one head, float32, three rounds: about a minute")
    parser.add_argument("--targets", action="store_true",
                        help="n = 1024 ... 8192, one head, float32, tiled b=256: what the targets need")
    parser.add_argument("--no-torch", action="store_true", help="leave torch out even if installed")
    parser.add_argument("--plot", type=Path, default=ROOT / "artifacts" / "attention_benchmark.png")
    parser.add_argument("--json", type=Path, default=None, help="raw numbers (default: the plot path, .json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_n, args.heads, args.dtypes, args.repeat = min(args.max_n, 2048), [1], ["float32"], 3
    if args.targets:
        args.min_n, args.max_n, args.heads, args.dtypes, args.block_sizes = 1024, 8192, [1], ["float32"], [256]
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
        for heads in args.heads:
            for n in sizes:
                rows = measure_size(n, heads, np.dtype(dtype), args, torch, report.matmul_gflops[dtype])
                report.rows += rows
                print(f"  measured n={n} H={heads} {dtype} ({time.perf_counter() - started:.0f} s so far)",
                      file=sys.stderr)
    print_matmul_rates(report, torch)
    print()
    print_table(report)
    print_slopes(report, min_n=1024 if args.max_n >= 2048 else args.min_n)
    print_targets(report, args.block_sizes)
    save_plot(report, args.plot)
    args.json.write_text(json.dumps(asdict(report), indent=1, default=str))
    print(f"raw numbers saved to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
