"""The grader benchmark hands in a wrong answer for every exercise, and each one fails its check.

``benchmarks/grader.py`` draws, per learner and exercise, a correct, a wrong or an untouched answer;
an exercise missing from its ``WRONG`` table would stop the benchmark, and a "wrong" answer that
passed would make its verdicts disagree for the wrong reason.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from lessonlib.exercises import EXERCISES, FAILED, check

ROOT = Path(__file__).resolve().parents[1]


def _benchmark_wrong() -> dict[str, str]:
    spec = importlib.util.spec_from_file_location("grader_benchmark", ROOT / "benchmarks" / "grader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG


WRONG = _benchmark_wrong()


def test_the_benchmark_has_a_wrong_answer_for_every_exercise():
    assert set(WRONG) == set(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_each_benchmark_wrong_answer_fails(name):
    namespace = {"np": np, "math": math}
    exec(WRONG[name], namespace)  # the answer cell's source, as the benchmark writes it into a notebook
    result = check(name, namespace[name], quiet=True)
    assert result.status == FAILED and result.points < result.max_points, result.report_text()
