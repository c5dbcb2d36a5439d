"""Explorer for notebook 04: how big the dense score matrix gets, and what this machine measures.

The prediction is exact arithmetic: one dense score matrix holds B * H * n * n numbers of the
chosen dtype (:func:`lessonlib.score_matrix_bytes`), and it is set against memory sizes a
learner knows. The measured part times dense attention for one example and one head on this
machine; it is bounded so an update stays fast: only sizes up to ``Settings.max_measured_n``,
at most one new size per update, and every measurement cached per (n, dtype, d_head). ``show()``
measures all the sizes once before the first picture, so moving a control never waits for one.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from lessonlib._checks import (
    BYTE_UNITS,
    check_callable,
    check_choice,
    check_flag,
    check_instance,
    check_positive_int,
    format_bytes,
)
from lessonlib._machine import one_blas_thread
from lessonlib.attention import scaled_dot_product_attention
from lessonlib.cost import Measurement, dtype_bytes, measure, score_matrix_bytes
from lessonlib.plots import LogBarPanel, LogLinesPanel, PartialRedraw, new_figure, pin_layout

# Memory sizes a learner can picture: name and capacity in bytes, all in binary units. An
# accelerator sold as "80 GB" carries 80 GiB of memory (80 * 2**30 bytes).
MEMORY_SIZES: tuple[tuple[str, int], ...] = (
    ("32 MiB cache", 32 * 2**20),
    ("16 GiB laptop", 16 * 2**30),
    ("80 GiB accelerator", 80 * 2**30),
)
N_CHOICES = tuple(2**k for k in range(8, 18))  # 256 .. 131072
HEAD_CHOICES = (1, 2, 4, 8, 16, 32, 64)
BATCH_CHOICES = (1, 2, 4, 8, 16, 32)
DTYPE_CHOICES = ("float16", "bfloat16", "float32", "float64")
# NumPy has no bfloat16 and no fast float16 matrix product, so only these are timed.
MEASURABLE_DTYPES = ("float32", "float64")
MEASURE_SIZES = (64, 128, 256, 512)


@dataclass(frozen=True)
class Settings:
    """What the learner controls (the defaults are the explorer's first view)."""

    n: int = 4096  # sequence length; the score matrix is n x n
    heads: int = 8
    batch: int = 1
    dtype: str = "float32"
    measure: bool = True  # time dense attention on this machine (B = H = 1)
    max_measured_n: int = 512  # never measure beyond this length
    d_head: int = 32  # query/key/value width of the measured head

    def __post_init__(self) -> None:
        for name in ("n", "heads", "batch", "max_measured_n", "d_head"):
            check_positive_int(getattr(self, name), name)
        check_choice(self.dtype, "dtype", DTYPE_CHOICES)
        check_flag(self.measure, "measure")


@dataclass(frozen=True)
class Result:
    """What the explorer shows for one setting."""

    settings: Settings
    score_bytes: int  # B * H * n * n * itemsize
    memory_names: tuple[str, ...]
    memory_bytes: tuple[int, ...]
    fits: tuple[bool, ...]  # score matrix <= each memory size
    longest_n: tuple[int, ...]  # longest n whose score matrix fits each memory size, same B, H, dtype
    measured_n: tuple[int, ...]  # lengths measured so far for this dtype (B = H = 1)
    measured_seconds: tuple[float, ...]  # median wall time of one dense attention call
    measured_peak: tuple[int, ...]  # peak traced bytes of that call
    predicted_at_measured: tuple[int, ...]  # one score matrix (B = H = 1) at each measured n
    pending_n: tuple[int, ...]  # lengths up to the cap still to be measured (one per update)


def longest_fitting_length(memory_bytes: int, batch: int = 1, heads: int = 1, dtype: str = "float32") -> int:
    """Largest n with score_matrix_bytes(batch, heads, n, dtype) <= memory_bytes (0 if none).

    B * H * n^2 * s <= M  exactly when  n <= isqrt(M // (B * H * s)), all integers.
    """
    memory_bytes = check_positive_int(memory_bytes, "memory_bytes", minimum=0)
    per_cell = score_matrix_bytes(batch, heads, 1, dtype=dtype)  # B * H * s
    return math.isqrt(int(memory_bytes) // per_cell)


class CpuClock:
    """Wrap ``fn`` so every call also records the CPU time this process spent in it.

    Hand the wrapper to :func:`lessonlib.measure` and read ``seconds`` afterwards. Wall time
    counts the moments the operating system gave the processor to another program; CPU time
    does not, so on a busy shared machine the fastest CPU time is the steadier measure of work.
    """

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.seconds: list[float] = []

    def __call__(self) -> object:
        start = time.process_time()
        out = self.fn()
        self.seconds.append(time.process_time() - start)
        return out


@dataclass(frozen=True)
class Timing:
    """One function timed on this machine: wall and CPU time of the timed calls, and peak memory."""

    wall_seconds: float  # median wall-clock time of the timed calls
    cpu_seconds: float  # median CPU time of the same calls, summed over the process's threads
    fastest_cpu_seconds: float  # the shortest of those CPU times: the steadiest measure of work
    peak_bytes: int  # peak traced allocation of one more call
    cores_per_call: tuple[float, ...]  # CPU / wall time of each timed call: how many cores worked on it


def time_and_memory(fn: Callable[[], object], *, repeat: int = 3) -> Timing:
    """Time ``fn()`` with BLAS held to one thread: one warm-up call, ``repeat`` timed calls, one traced call.

    :func:`lessonlib.measure` does the timing and the tracing; :class:`CpuClock` adds each call's CPU time.
    """
    check_callable(fn, "fn")
    repeat = check_positive_int(repeat, "repeat")
    clock = CpuClock(fn)
    with one_blas_thread():
        measured = measure(clock, repeat=repeat)
    timed = clock.seconds[1:1 + repeat]  # the warm-up call comes first and the traced call last
    cores = tuple(cpu / wall for cpu, wall in zip(timed, measured.times))
    return Timing(measured.median_seconds, statistics.median(timed), min(timed), measured.peak_bytes, cores)


def dense_attention_measurement(n: int, dtype: str = "float32", d_head: int = 32, *, seed: int = 0,
                                repeat: int = 1) -> Measurement:
    """Time and peak memory of one dense attention call, one example and one head of length n.

    query, key, value (n, d_head) drawn once from ``seed``; the call builds the (n, n) scores.
    One timed call after a warm-up by default: the explorer shows a point, not a benchmark, and
    each call of :func:`lessonlib.measure` also pays for a full garbage collection per repeat.
    """
    rng = np.random.default_rng(seed)
    query, key, value = (rng.standard_normal((n, d_head)).astype(dtype) for _ in range(3))  # (n, d)
    with one_blas_thread():
        return measure(lambda: scaled_dot_product_attention(query, key, value), repeat=repeat)


# (n, dtype, d_head) -> Measurement, shared by every explorer on the page
_MEASURED: dict[tuple[int, str, int], Measurement] = {}


def _measure_points(settings: Settings, cache: dict[tuple[int, str, int], Measurement],
                    new_points: int) -> tuple[list[int], list[int]]:
    """Measure up to ``new_points`` missing sizes (smallest first); return (measured, pending) sizes."""
    if not settings.measure or settings.dtype not in MEASURABLE_DTYPES:
        return [], []
    wanted = [n for n in MEASURE_SIZES if n <= min(settings.n, settings.max_measured_n)]
    for n in wanted:
        key = (n, settings.dtype, settings.d_head)
        if key not in cache and new_points > 0:
            cache[key] = dense_attention_measurement(n, settings.dtype, settings.d_head)
            new_points -= 1
    done = [n for n in wanted if (n, settings.dtype, settings.d_head) in cache]
    return done, [n for n in wanted if n not in done]


def compute(settings: Settings, *, cache: dict[tuple[int, str, int], Measurement] | None = None,
            new_points: int = 1) -> Result:
    """Predicted bytes against the memory sizes, plus the measured points (at most ``new_points`` new).

    ``cache`` defaults to the module's shared cache, so a repeated setting never remeasures.
    """
    check_instance(settings, Settings, "settings")
    if cache is not None and not isinstance(cache, dict):
        raise TypeError(f"cache must be a dict of measurements, or None for the shared one; got {type(cache).__name__}")
    new_points = check_positive_int(new_points, "new_points", minimum=0)
    score = score_matrix_bytes(settings.batch, settings.heads, settings.n, dtype=settings.dtype)
    names = tuple(name for name, _ in MEMORY_SIZES)
    sizes = tuple(size for _, size in MEMORY_SIZES)
    cache = _MEASURED if cache is None else cache
    done, pending = _measure_points(settings, cache, new_points)
    points = [cache[(n, settings.dtype, settings.d_head)] for n in done]
    return Result(
        settings=settings,
        score_bytes=score,
        memory_names=names,
        memory_bytes=sizes,
        fits=tuple(score <= size for size in sizes),
        longest_n=tuple(longest_fitting_length(size, settings.batch, settings.heads, settings.dtype)
                        for size in sizes),
        measured_n=tuple(done),
        measured_seconds=tuple(p.median_seconds for p in points),
        measured_peak=tuple(p.peak_bytes for p in points),
        predicted_at_measured=tuple(score_matrix_bytes(1, 1, n, dtype=settings.dtype) for n in done),
        pending_n=tuple(pending),
    )


def describe(result: Result) -> str:
    """The readout under the controls: the predicted numbers only (measured ones vary by run)."""
    s = check_instance(result, Result, "result").settings
    fits = [name for name, ok in zip(result.memory_names, result.fits) if ok]
    too_big = [name for name, ok in zip(result.memory_names, result.fits) if not ok]
    return (
        f"B={s.batch} x H={s.heads} x n={s.n}^2 x {dtype_bytes(s.dtype)} B ({s.dtype}) = "
        f"{format_bytes(result.score_bytes)} ({result.score_bytes:,} B); "
        f"fits in: {', '.join(fits) or 'none'}; too big for: {', '.join(too_big) or 'none'}; "
        f"longest n for the {result.memory_names[1]}: {result.longest_n[1]:,}"
    )


def alt_text(result: Result) -> str:
    """A sentence saying what the figure shows, for readers who cannot see it."""
    s = result.settings
    left = (f"left, bars on a log scale: the score matrix ({format_bytes(result.score_bytes)}) beside "
            + ", ".join(result.memory_names))
    if not s.measure:
        right = "right, nothing measured (measuring is off)"
    elif s.dtype not in MEASURABLE_DTYPES:
        right = f"right, nothing measured ({s.dtype} is not timed: NumPy has no fast {s.dtype} matrix product)"
    else:
        right = (f"right, log-log: measured peak memory of dense attention (B = H = 1, {s.dtype}) at "
                 f"n = {', '.join(map(str, result.measured_n)) or 'none yet'}, beside one predicted score "
                 "matrix at the same n")
    return f"{left}; {right}"


def _binary_ticks(ax: Any) -> None:
    """Major y ticks at 1 KiB, 1 MiB, 1 GiB, ... labelled by name: few texts, readable units."""
    ax.yaxis.set_major_locator(FixedLocator([1024.0**k for k in range(1, len(BYTE_UNITS))]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"1 {BYTE_UNITS[round(math.log(v, 1024))]}"))


class Figure:
    """Left: predicted bytes beside memory sizes (log bars). Right: measured points (log-log).

    Only what a new setting changes is redrawn: the bars, the points, both titles and both y axes
    (their ranges follow the data); frames, bar labels, the legend and the axis labels are
    rasterised once.
    """

    def __init__(self) -> None:
        self.fig, (left, right) = new_figure(ncols=2)
        self.fig.subplots_adjust(left=0.14, bottom=0.22, wspace=0.45)
        self.bars = LogBarPanel(left, ["scores", "cache", "laptop", "accel."], hatched=(0,))
        self.points = LogLinesPanel(right, [
            dict(marker="o", ls="none", color="#3b528b", label="measured peak"),
            dict(ls="--", color="0.3", label="one n x n matrix"),
        ], xlabel="n (B = H = 1)")
        right.xaxis.set_minor_locator(NullLocator())
        right.set_xticks(MEASURE_SIZES, [str(n) for n in MEASURE_SIZES])
        for ax in (left, right):
            pin_layout(ax, max_yticks=None)
            _binary_ticks(ax)
            # the y axes are redrawn with their moving ticks; their label is a separate, static text
            ax.text(-0.24, 0.5, "bytes", transform=ax.transAxes, rotation=90, ha="center", va="center",
                    fontsize=8)
        dynamic = [*self.bars.rects, *self.points.lines, left.title, right.title, left.yaxis, right.yaxis,
                   *left.spines.values(), *right.spines.values()]
        self.redraw = PartialRedraw(self.fig, dynamic)

    def draw(self, result: Result) -> PartialRedraw:
        """Show ``result``; returns the figure's renderer (``figure_png`` turns it into an image)."""
        self.bars.update([result.score_bytes, *result.memory_bytes], title=format_bytes(result.score_bytes))
        s = result.settings
        if result.measured_n:
            total = len(result.measured_n) + len(result.pending_n)
            title = (f"n={result.measured_n[-1]}: {1e3 * result.measured_seconds[-1]:.1f} ms "
                     f"({len(result.measured_n)} of {total} sizes)")
        elif s.measure and s.dtype in MEASURABLE_DTYPES:
            title = "nothing measured yet"
        else:
            title = "measuring off" if not s.measure else f"{s.dtype} not timed"
        self.points.update([(result.measured_n, result.measured_peak),
                            (result.measured_n, result.predicted_at_measured)],
                           title=title, xlim=(MEASURE_SIZES[0] / 1.5, MEASURE_SIZES[-1] * 1.5))
        if not result.measured_n:
            self.points.ax.set_ylim(2**10, 2**30)
        return self.redraw


def show(settings: Settings = Settings()) -> Any:
    """The widget: length, heads, batch and dtype controls wired to compute() and draw()."""
    check_instance(settings, Settings, "settings")
    import ipywidgets as widgets

    from lessonlib.explorers._wiring import build_explorer

    # measure every point once, up front (well under a second), so no later update has to wait
    for dtype in MEASURABLE_DTYPES:
        compute(replace(settings, dtype=dtype, n=max(settings.n, settings.max_measured_n)),
                new_points=len(MEASURE_SIZES))
    figure = Figure()
    wide = {"description_width": "initial"}
    controls = {
        # drop-downs, not sliders: ipywidgets' slider handles carry no accessible name
        "n": widgets.Dropdown(options=N_CHOICES, value=settings.n, description="length n"),
        "heads": widgets.Dropdown(options=HEAD_CHOICES, value=settings.heads, description="heads H"),
        "batch": widgets.Dropdown(options=BATCH_CHOICES, value=settings.batch, description="batch B"),
        "dtype": widgets.Dropdown(options=DTYPE_CHOICES, value=settings.dtype, description="dtype"),
        "measure": widgets.Checkbox(value=settings.measure, description="measure on this machine (B = H = 1)",
                                    style=wide),
    }

    return build_explorer(controls, settings, compute=compute, describe=describe,
                          draw=figure.draw, alt_text=alt_text, title="Cost explorer: the n x n score matrix")
