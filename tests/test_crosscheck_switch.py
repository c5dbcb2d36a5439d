"""The cross-checks skip with a message when torch and JAX are missing, and fail under REQUIRE_CROSSCHECK=1.

The libraries are hidden from a child pytest by an import hook, so this runs whether or not
they are installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDE_AND_RUN = """
import sys, pytest

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "jax", "jaxlib"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, Hide())
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "-p", "no:nbval",
                      "tests/crosscheck/test_fixtures.py"]))
"""


def _run_without_libraries(require: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REQUIRE_CROSSCHECK"}
    if require is not None:
        env["REQUIRE_CROSSCHECK"] = require
    return subprocess.run([sys.executable, "-c", HIDE_AND_RUN], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_missing_libraries_skip_with_a_message():
    run = _run_without_libraries(None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "8 skipped" in run.stdout
    assert "the cross-checks need the 'crosscheck' extra: run `make crosscheck`" in run.stdout


def test_missing_libraries_fail_when_required():
    run = _run_without_libraries("1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "8 error" in run.stdout
    assert "REQUIRE_CROSSCHECK=1 and torch is not installed" in run.stdout
    assert "REQUIRE_CROSSCHECK=1 and jax is not installed" in run.stdout
