"""The batch grader's tests (``lessonlib.grading``), one file per room or concern, as the package is.

They need the ``grade`` extra (pyseccomp, copydetect): without it every file here would fail on an
import, so collection stops at once with one line that says what to install. The helpers they share
(learner submissions, running ``lessonlib grade``) are ``helpers.submissions`` and ``helpers.grading``.
"""

from __future__ import annotations

import pytest

from lessonlib.cli import GRADE_INSTALL, missing_grader


def pytest_collectstart(collector: pytest.Collector) -> None:
    missing = missing_grader()
    if missing and isinstance(collector, pytest.Module):
        raise pytest.UsageError(f"the grader's tests need the grade extra ({', '.join(missing)} missing): "
                                f"{GRADE_INSTALL}, or pip install -e '.[grade]' in the checkout")
