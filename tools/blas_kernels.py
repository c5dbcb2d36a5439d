"""Run a test command under other CPUs' numerical kernels: the stored outputs must not depend on the CPU.

    python tools/blas_kernels.py [--kernels others|all|NAME,NAME] -- PYTEST_ARGS...

NumPy's wheels carry OpenBLAS with a matrix-multiply kernel for each x86-64 processor family and
choose one by the CPU they run on; ``OPENBLAS_CORETYPE`` overrides the choice. NumPy also picks
its own SIMD loops (exp, log, sums) by CPU, and ``NPY_DISABLE_CPU_FEATURES`` turns the newer ones
off. A float32 (or even float64) result then differs in its last bits from one family to the next,
and a printed number that sits on a rounding boundary reads 0.75 on one learner's machine and 0.76
on another's. For each kernel this script sets both variables as that family's CPU would have
them, checks that OpenBLAS really took the kernel (threadpoolctl names it), runs
``python -m pytest PYTEST_ARGS`` and prints a table. Exit status 1 when any run failed.

``--kernels others`` (the default) takes two families that this CPU can run and that differ from
its own kernel; ``all`` takes every family this CPU can run. On a CPU that is not x86-64, or with
a NumPy built on another BLAS, the families do not exist: the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Kernel:
    """One x86-64 processor family: its OpenBLAS kernel, the CPU flag it needs, its SIMD generation."""

    name: str  # the OPENBLAS_CORETYPE value
    needs: str  # a flag in /proc/cpuinfo without which the kernel cannot run here
    generation: int  # 0 SSE3, 1 AVX, 2 AVX2 and FMA, 3 AVX-512
    reports: tuple[str, ...]  # what OpenBLAS may call the kernel it then runs (threadpoolctl's architecture)


KERNELS = (
    Kernel("Prescott", "pni", 0, ("Prescott", "Katmai")),  # cpuinfo calls SSE3 "pni"; OpenBLAS says Katmai
    Kernel("Sandybridge", "avx", 1, ("Sandybridge",)),
    Kernel("Haswell", "avx2", 2, ("Haswell",)),
    Kernel("Zen", "avx2", 2, ("Zen", "Haswell")),  # OpenBLAS runs its Haswell kernels on Zen
    Kernel("SkylakeX", "avx512f", 3, ("SkylakeX",)),
)
OTHERS = ("Prescott", "Haswell", "Sandybridge", "Zen")  # preferred order for `others`: older first

# NumPy's names for the SIMD features it dispatches on (both the names before NumPy 2.4 and its
# x86-64-v2/v3/v4 groups), with the first generation whose CPUs have them. A name missing here
# (AVX512_ICL, AVX512_SPR, XOP, ...) is newer than every family above and is always turned off.
NUMPY_GENERATION = {
    "SSE": 0, "SSE2": 0, "SSE3": 0,
    "SSSE3": 1, "SSE41": 1, "POPCNT": 1, "SSE42": 1, "X86_V2": 1, "AVX": 1,
    "F16C": 2, "FMA3": 2, "AVX2": 2, "X86_V3": 2,
    "AVX512F": 3, "AVX512CD": 3, "AVX512_SKX": 3, "X86_V4": 3,
}

# Runs in a child with the kernel's variables set: what OpenBLAS and NumPy actually use there.
REPORT = """
import json, threadpoolctl
try:
    from numpy._core import _multiarray_umath as m
except ImportError:  # NumPy 1.x
    from numpy.core import _multiarray_umath as m
blas = [i for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
print(json.dumps({"architecture": blas[0].get("architecture") if blas else None,
                  "dispatch": list(m.__cpu_dispatch__)}))
"""


def cpu_flags() -> set[str]:
    """The flags of the first processor in /proc/cpuinfo (empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def probe(env: dict[str, str]) -> dict:
    """What OpenBLAS and NumPy report in a child process run with ``env``."""
    done = subprocess.run([sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"could not start Python with {env.get('OPENBLAS_CORETYPE')}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def environment(kernel: Kernel, dispatch: list[str]) -> dict[str, str]:
    """The environment of a run on ``kernel``'s CPU family: its BLAS kernel, no newer NumPy loops."""
    newer = [f for f in dispatch if NUMPY_GENERATION.get(f, 4) > kernel.generation]
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel.name, "NPY_DISABLE_CPU_FEATURES": " ".join(newer)}
    return env


def choose(requested: str, own: str | None, flags: set[str]) -> list[Kernel]:
    """The kernels to run: ``others``, ``all`` or a comma-separated list of names."""
    runnable = {k.name: k for k in KERNELS if k.needs in flags}
    if requested == "all":
        return list(runnable.values())
    if requested == "others":
        return [runnable[name] for name in OTHERS if name in runnable and own not in runnable[name].reports][:2]
    chosen = []
    for name in requested.split(","):
        kernel = next((k for k in KERNELS if k.name.lower() == name.strip().lower()), None)
        if kernel is None:
            raise SystemExit(f"unknown kernel {name!r}: expected others, all, or names among "
                             f"{', '.join(k.name for k in KERNELS)}")
        if kernel.name not in runnable:
            print(f"skipped {kernel.name}: this CPU lacks '{kernel.needs}', which its kernel needs")
            continue
        chosen.append(kernel)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default="others", help="others (default), all, or NAME,NAME")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: the arguments of pytest")
    args = parser.parse_args(argv)
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"OpenBLAS's x86-64 kernels do not exist on {platform.machine()}: nothing to run")
        return 0
    here = probe(dict(os.environ))  # this CPU's own kernel, and the SIMD features NumPy dispatches on
    own = here["architecture"]
    if own is None:
        print("this NumPy does not use OpenBLAS, whose kernels these runs choose: nothing to run")
        return 0
    rows, ran = [], {}
    for kernel in choose(args.kernels, own, cpu_flags()):
        env = environment(kernel, here["dispatch"])
        seen = probe(env)["architecture"]
        if seen not in kernel.reports:
            raise SystemExit(f"OPENBLAS_CORETYPE={kernel.name} was not taken: OpenBLAS reports {seen}, "
                             "so this run would test another kernel than it says")
        same = ran.setdefault((seen, env["NPY_DISABLE_CPU_FEATURES"]), kernel.name)
        if same != kernel.name:
            print(f"skipped {kernel.name}: OpenBLAS runs the same kernel ({seen}) and NumPy the same loops "
                  f"as for {same}")
            continue
        print(f"\n=== {kernel.name} (this CPU's own kernel: {own}); NumPy loops off: "
              f"{env['NPY_DISABLE_CPU_FEATURES'] or 'none'} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], env=env, cwd=ROOT, check=False).returncode
        rows.append((kernel.name, env["NPY_DISABLE_CPU_FEATURES"] or "-", code, time.perf_counter() - start))
    print(f"\n{'kernel':12} {'NumPy loops off':38} {'result':8} seconds")
    for name, off, code, seconds in rows:
        print(f"{name:12} {off:38} {'passed' if code == 0 else 'FAILED':8} {seconds:7.1f}")
    if not rows:
        print("no kernel to run on this CPU")
    return int(any(code != 0 for _, _, code, _ in rows))


if __name__ == "__main__":
    sys.exit(main())
