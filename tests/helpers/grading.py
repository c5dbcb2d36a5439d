"""Running ``lessonlib grade`` as the grader's tests do, and reading what it wrote.

``run_cli`` runs it in a subprocess, as an instructor would, with the limits the hostile batch uses;
``grade_in_process`` runs it through :func:`lessonlib.cli.main` and returns what it printed.
LESSONLIB_TEST_ISOLATION forces an isolation level; REQUIRE_BUBBLEWRAP=1 (CI) turns a skip for want
of the sandbox into a failure.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lessonlib import cli

TIMEOUT = 1.5  # CPU seconds per exercise; the clock allows 2 * 1.5 + 1 = 4 s
MEMORY_MB = 512
FORCED = os.environ.get("LESSONLIB_TEST_ISOLATION")  # None: the strongest level that works
REQUIRED = os.environ.get("REQUIRE_BUBBLEWRAP") == "1"


def run_cli(submissions: list[Path], out: Path, *extra: str, attempts: int = 4) -> list[int]:
    """Run `lessonlib grade` until it finishes (a run killed by learner code is re-run)."""
    codes = []
    command = [sys.executable, "-m", "lessonlib.cli", "grade", *map(str, submissions), "--out", str(out),
               "--timeout", str(TIMEOUT), "--memory", str(MEMORY_MB), "--quiet", *extra]
    for _ in range(attempts):
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        codes.append(result.returncode)
        if result.returncode == 0:
            return codes
        assert result.returncode < 0 or result.returncode == 137, result.stderr  # only a kill may stop it
    raise AssertionError(f"lessonlib grade never finished: exit codes {codes}")


def grade_in_process(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``lessonlib grade *args`` in this process: (exit status, stdout, stderr)."""
    code = cli.main(["grade", *args, "--timeout", "2", "--memory", "512", "--workers", "2", "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load(out: Path) -> tuple[dict, list[dict[str, str]]]:
    """grades.json and the rows of grades.csv in the output folder ``out``."""
    return json.loads((out / "grades.json").read_text(encoding="utf-8")), csv_rows(out / "grades.csv")
