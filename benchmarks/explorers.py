"""How long one explorer update takes: what a learner waits for after moving a control.

For every module in lessonlib/explorers/ that has a ``show()``, build the widget (no browser, no
kernel: ipywidgets works without one), then change each control back and forth between its
default value and a neighbouring one, timing each change. A change runs the explorer's whole
update: compute(), drawing into the figure, rendering it to PNG and setting the widgets. A second
row per explorer times compute + draw + PNG at exactly the default settings, without widgets.

    python benchmarks/explorers.py                     # all explorers, BLAS threads as configured
    python benchmarks/explorers.py --blas-threads 1    # limit OpenBLAS/OpenMP/MKL to one thread
    python benchmarks/explorers.py --compare-threads   # both of the above, alternating fresh processes

The budget (issue: explorer speed) is a median of at most 50 ms and a 95th percentile of at most
100 ms per update at default settings. The generation explorer has its own (``BUDGETS``): each
update writes its text one character at a time, every character a forward pass that needs the one
before, so its cost is the text's length times one pass (about 0.2 ms of NumPy calls on arrays of
one row), not a drawing; notebook 07 asks it to answer in about a second. Timings depend on the
machine and on its load: this script prints a table, it does not assert.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
MEDIAN_BUDGET_MS, P95_BUDGET_MS = 50.0, 100.0
# explorer -> (median, 95th percentile) in ms, where an update's work cannot fit the common budget:
# generation writes 200 characters by default (400 at most), 200 dependent forward passes of one row
# each (about 40 ms on one core) before the chart; a median of 300 ms leaves it room on a busy machine,
# and the 95th percentile of 1 s is "answers in about a second".
BUDGETS = {"generation": (300.0, 1000.0)}


@dataclass
class Row:
    """One measured line of the table."""

    explorer: str
    what: str
    n: int
    median_ms: float
    p95_ms: float
    max_ms: float
    cpu_median_ms: float  # CPU time of this process: the update's own cost, whatever else runs

    @property
    def within_budget(self) -> bool:
        median, p95 = BUDGETS.get(self.explorer, (MEDIAN_BUDGET_MS, P95_BUDGET_MS))
        return self.median_ms <= median and self.p95_ms <= p95


def summarise(explorer: str, what: str, seconds: list[float], cpu_seconds: list[float]) -> Row:
    """Median, 95th percentile and maximum of the wall times, and the median CPU time, in ms."""
    import numpy as np

    ms = np.asarray(seconds) * 1000.0
    cpu = np.asarray(cpu_seconds) * 1000.0
    return Row(explorer, what, len(ms), float(np.median(ms)), float(np.percentile(ms, 95)), float(ms.max()),
               float(np.median(cpu)))


def timed(action: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds taken by ``action()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def discover() -> tuple[list[str], dict[str, str]]:
    """Names of the explorer modules present now, and the import error of any that failed."""
    import lessonlib.explorers

    names = sorted(m.name for m in pkgutil.iter_modules(lessonlib.explorers.__path__) if not m.name.startswith("_"))
    failed: dict[str, str] = {}
    for name in names:
        try:
            importlib.import_module(f"lessonlib.explorers.{name}")
        except Exception as err:  # report it, measure the others
            failed[name] = f"{type(err).__name__}: {err}"
    return names, failed


def neighbour(widget: Any) -> Any | None:
    """A value next to the widget's current one, or None if this kind of control is not handled."""
    value = widget.value
    if isinstance(value, bool):
        return not value
    values = list(getattr(widget, "_options_values", ()))  # selection widgets: the option values
    if values:
        if value in values and len(values) > 1:
            i = values.index(value)
            return values[i + 1] if i + 1 < len(values) else values[i - 1]
        return None
    if isinstance(value, tuple) and value and all(isinstance(row, tuple) and row for row in value):
        rows = [list(row) for row in value]  # a grid of cells (e.g. allowed / blocked): flip one
        if isinstance(rows[0][-1], bool):
            rows[0][-1] = not rows[0][-1]
            return tuple(tuple(row) for row in rows)
        return None
    low, high, step = getattr(widget, "min", None), getattr(widget, "max", None), getattr(widget, "step", None)
    if None not in (low, high, step) and isinstance(value, (int, float)):
        up = value + step
        return up if up <= high else value - step
    return None


class Capture:
    """Stands in for build_explorer during show(), keeping what it was given."""

    def __init__(self, original: Callable[..., Any]) -> None:
        self.original = original
        self.controls: dict[str, Any] = {}
        self.settings: Any = None
        self.pure: dict[str, Callable[[Any], Any]] = {}  # compute, draw

    def __call__(self, controls: dict[str, Any], settings: Any, **kwargs: Any) -> Any:
        self.controls, self.settings = controls, settings
        self.pure = {"compute": kwargs["compute"], "draw": kwargs["draw"]}
        return self.original(controls, settings, **kwargs)


def measure_explorer(name: str, repeats: int, pause: float) -> tuple[list[Row], list[str]]:
    """Rows for one explorer: each control changed ``repeats`` times, and a render at defaults."""
    from lessonlib.explorers import _wiring
    from lessonlib.plots import figure_png

    module = importlib.import_module(f"lessonlib.explorers.{name}")
    capture = Capture(_wiring.build_explorer)
    _wiring.build_explorer = capture
    try:
        module.show()  # builds the controls and renders the default view once
    finally:
        _wiring.build_explorer = capture.original
    notes: list[str] = []
    if not capture.pure:
        return [], [f"{name}: show() did not call build_explorer, so it was not measured"]

    rows: list[Row] = []
    pooled: list[float] = []
    pooled_cpu: list[float] = []
    for control_name, widget in capture.controls.items():
        default = widget.value
        other = neighbour(widget)
        if other is None:
            notes.append(f"{name}: control '{control_name}' ({type(widget).__name__}) not varied: "
                         "no neighbouring value known")
            continue
        times, cpu_times = [], []
        for i in range(repeats + 2):  # two warm-up changes first
            target = other if i % 2 == 0 else default
            time.sleep(pause)  # a learner does not move controls back to back
            wall, cpu = timed(lambda w=widget, v=target: setattr(w, "value", v))
            if i >= 2:
                times.append(wall)
                cpu_times.append(cpu)
        widget.value = default
        pooled += times
        pooled_cpu += cpu_times
        change = (f"{default!r} <-> {other!r}" if len(repr(default)) + len(repr(other)) < 28
                  else "one entry changed")
        rows.append(summarise(name, f"control {control_name} ({change})", times, cpu_times))
    if pooled:
        rows.append(summarise(name, "all controls, pooled", pooled, pooled_cpu))

    settings = dataclasses.replace(capture.settings, **{k: w.value for k, w in capture.controls.items()})
    compute, draw = capture.pure["compute"], capture.pure["draw"]
    times, cpu_times = [], []
    for _ in range(repeats):
        time.sleep(pause)
        wall, cpu = timed(lambda: figure_png(draw(compute(settings))))
        times.append(wall)
        cpu_times.append(cpu)
    rows.append(summarise(name, "defaults: compute + draw + PNG", times, cpu_times))
    return rows, notes


def blas_report() -> str:
    """Which BLAS thread settings are in force (threadpoolctl when it is installed)."""
    env = ", ".join(f"{v}={os.environ[v]}" for v in BLAS_VARIABLES if v in os.environ) or "no thread variables set"
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return env
    pools = ", ".join(f"{p['internal_api']} {p['num_threads']} thread(s)" for p in threadpool_info())
    return f"{env}; {pools}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure every explorer with a show(); return rows and notes as plain data."""
    import matplotlib

    matplotlib.use("Agg")
    names, failed = discover()
    with_show, without_show = [], []
    for name in names:
        if name in failed:
            continue
        module = importlib.import_module(f"lessonlib.explorers.{name}")
        (with_show if callable(getattr(module, "show", None)) else without_show).append(name)
    rows: list[Row] = []
    notes = [f"{name}: import failed, not measured ({error})" for name, error in failed.items()]
    notes += [f"{name}: no show(), not measured" for name in without_show]
    for name in with_show:
        if args.only and name not in args.only:
            notes.append(f"{name}: left out by --only")
            continue
        try:
            found, extra = measure_explorer(name, args.repeats, args.pause)
        except Exception as err:  # one broken explorer must not hide the others' numbers
            notes.append(f"{name}: measuring failed ({type(err).__name__}: {err})")
            continue
        rows += found
        notes += extra
    return {
        "modules": names, "with_show": with_show, "blas": blas_report(),
        "load": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "rows": [asdict(r) for r in rows], "notes": notes, "failed": sorted(failed),
    }


def print_table(report: dict[str, Any], heading: str = "") -> None:
    """The measured rows as a fixed-width table, then the notes."""
    if heading:
        print(heading)
    print(f"explorer modules found: {', '.join(report['modules']) or 'none'}")
    print(f"with show(), measured: {', '.join(report['with_show']) or 'none'}")
    print(f"BLAS: {report['blas']}")
    print(f"load average while measuring (1, 5, 15 min): {report['load']}; CPUs: {os.cpu_count()}")
    print()
    print(f"{'explorer':<16}{'update':<44}{'n':>4}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}{'CPU ms':>8}  budget")
    for r in (Row(**d) for d in report["rows"]):
        verdict = "ok" if r.within_budget else "OVER"
        print(f"{r.explorer:<16}{r.what[:43]:<44}{r.n:>4}{r.median_ms:>11.1f}{r.p95_ms:>9.1f}"
              f"{r.max_ms:>9.1f}{r.cpu_median_ms:>8.1f}  {verdict}")
    own = "".join(f"; {name}: {median:.0f} ms and {p95:.0f} ms (see BUDGETS)"
                  for name, (median, p95) in BUDGETS.items())
    print(f"(wall-clock times; budget: median <= {MEDIAN_BUDGET_MS:.0f} ms and 95th percentile <= "
          f"{P95_BUDGET_MS:.0f} ms{own}. CPU ms: median CPU time of the update, all threads of this process;\n"
          " when it is well below the wall time, other processes were competing for the cores)")
    for note in report["notes"]:
        print(f"note: {note}")


def compare_threads(args: argparse.Namespace) -> int:
    """Alternate fresh processes with BLAS threads as configured and with one, ``--rounds`` times each.

    Alternating spreads any change in the machine's load over both settings. Prints each
    setting's full table from the first round, then a summary over all rounds.
    """
    import numpy as np

    settings = (("default threads", []), ("1 BLAS thread", ["--blas-threads", "1"]))
    pooled: dict[str, dict[str, list[dict[str, Any]]]] = {label: {} for label, _ in settings}
    failed = False
    for round_number in range(args.rounds):
        for label, extra in settings:
            cmd = [sys.executable, __file__, "--json", "--repeats", str(args.repeats), "--pause", str(args.pause),
                   *extra, *(["--only", *args.only] if args.only else [])]
            env = {k: v for k, v in os.environ.items() if not extra or k not in BLAS_VARIABLES}
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
            if done.returncode not in (0, 1) or not done.stdout.strip():
                print(f"{label}: the measuring process failed\n{done.stderr}")
                return 2
            report = json.loads(done.stdout)
            failed = failed or bool(report["failed"])
            if round_number == 0:
                print_table(report, heading=f"=== {label} (round 1 of {args.rounds}) ===")
                print()
            for row in report["rows"]:
                if row["what"] == "all controls, pooled":
                    pooled[label].setdefault(row["explorer"], []).append(row)
    print(f"=== all controls pooled, median over {args.rounds} alternating round(s): wall median / p95, CPU ms ===")
    print(f"{'explorer':<16}" + "".join(f"{label:>30}" for label, _ in settings))
    for name in sorted(set().union(*pooled.values())):
        cells = []
        for label, _ in settings:
            rows = pooled[label].get(name, [])
            if not rows:
                cells.append(f"{'missing':>30}")
                continue
            med, p95, cpu = (float(np.median([r[key] for r in rows]))
                             for key in ("median_ms", "p95_ms", "cpu_median_ms"))
            cells.append(f"{med:>12.1f} /{p95:>7.1f}, {cpu:>6.1f}")
        print(f"{name:<16}" + "".join(cells))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30, help="timed changes per control (default 30)")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds idle before each change (default 0.1)")
    parser.add_argument("--blas-threads", type=int, default=None, help="limit BLAS/OpenMP threads (before numpy loads)")
    parser.add_argument("--compare-threads", action="store_true", help="measure with default threads and with one")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds for --compare-threads (default 2)")
    parser.add_argument("--only", nargs="+", help="measure only these explorers")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.compare_threads:
        return compare_threads(args)
    if args.blas_threads is not None:
        if "numpy" in sys.modules:
            raise RuntimeError("--blas-threads must be applied before numpy is imported")
        for variable in BLAS_VARIABLES:
            os.environ[variable] = str(args.blas_threads)
    sys.path.insert(0, str(ROOT))  # measure this checkout's lessonlib, installed or not
    report = run(args)
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
