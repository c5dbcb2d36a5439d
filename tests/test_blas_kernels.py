"""tools/blas_kernels.py, which re-runs nbval under other CPUs' kernels (`make kernels`).

The job is only worth its minutes if each run really uses the kernel it names: these tests fail
when OpenBLAS ignores OPENBLAS_CORETYPE (a NumPy built on another BLAS, say) or when the choice
of kernels would test this CPU's own kernel again.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("blas_kernels", ROOT / "tools" / "blas_kernels.py")
kernels = sys.modules["blas_kernels"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernels)

X86 = platform.machine() in ("x86_64", "AMD64")
BY_NAME = {k.name: k for k in kernels.KERNELS}
AVX512 = {"pni", "avx", "avx2", "avx512f"}


def names(chosen: list) -> list[str]:
    return [k.name for k in chosen]


def test_others_are_two_kernels_that_differ_from_this_cpu_s_own() -> None:
    assert names(kernels.choose("others", "SkylakeX", AVX512)) == ["Prescott", "Haswell"]
    assert names(kernels.choose("others", "Haswell", AVX512)) == ["Prescott", "Sandybridge"]
    assert names(kernels.choose("others", "Katmai", AVX512)) == ["Haswell", "Sandybridge"]  # Prescott's kernel
    assert names(kernels.choose("others", "Sandybridge", {"pni", "avx"})) == ["Prescott"]  # no AVX2 here
    assert names(kernels.choose("all", "Haswell", {"pni", "avx", "avx2"})) == ["Prescott", "Sandybridge",
                                                                               "Haswell", "Zen"]


def test_named_kernels_this_cpu_cannot_run_are_skipped_and_unknown_names_refused(capsys) -> None:
    assert names(kernels.choose("prescott,SkylakeX", "Haswell", {"pni", "avx", "avx2"})) == ["Prescott"]
    assert "lacks 'avx512f'" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown kernel 'Pentium'"):
        kernels.choose("Pentium", "Haswell", AVX512)


def test_an_older_family_turns_off_numpy_s_newer_loops() -> None:
    dispatch = ["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"]  # NumPy 2.4's names
    assert kernels.environment(BY_NAME["Prescott"], dispatch)["NPY_DISABLE_CPU_FEATURES"] == " ".join(dispatch)
    haswell = kernels.environment(BY_NAME["Haswell"], dispatch)
    assert haswell["NPY_DISABLE_CPU_FEATURES"] == "X86_V4 AVX512_ICL AVX512_SPR"
    older = ["SSSE3", "SSE41", "AVX", "F16C", "FMA3", "AVX2", "AVX512F", "AVX512_SKX", "AVX512_ICL"]  # NumPy 1.x
    env = kernels.environment(BY_NAME["SkylakeX"], older)
    assert env["NPY_DISABLE_CPU_FEATURES"] == "AVX512_ICL" and env["OPENBLAS_CORETYPE"] == "SkylakeX"


@pytest.mark.skipif(not X86, reason="OpenBLAS's x86-64 kernels exist only on x86-64")
def test_openblas_really_runs_the_kernel_the_variable_names() -> None:
    own = kernels.probe(dict(os.environ))
    if own["architecture"] is None:
        pytest.skip("this NumPy does not use OpenBLAS")
    chosen = kernels.choose("others", own["architecture"], kernels.cpu_flags())
    assert chosen, "this x86-64 CPU should run at least one other kernel"
    for kernel in chosen:
        env = kernels.environment(kernel, own["dispatch"])
        seen = kernels.probe(env)["architecture"]
        assert seen in kernel.reports and seen != own["architecture"], (kernel.name, seen)
