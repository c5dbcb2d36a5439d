"""`lessonlib gradescope build` and the autograder run in a folder standing in for /autograder."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from grading_submissions import WRONG_PADDING, masking, notebook, write_learner

from lessonlib import cli


def test_the_zip_holds_setup_run_autograder_and_the_wheel(tmp_path: Path) -> None:
    assert cli.main(["gradescope", "build", "--out", str(tmp_path / "autograder.zip")]) == 0
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        names = zf.namelist()
        wheel_name = next(n for n in names if n.endswith(".whl"))
        assert sorted(names) == sorted(["setup.sh", "run_autograder", wheel_name]) and "/" not in wheel_name
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111  # executable
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
        assert wheel_name in setup and "bubblewrap" in setup
        assert "lessonlib gradescope run --root /autograder" in run
        zf.extract(wheel_name, tmp_path)
    with zipfile.ZipFile(tmp_path / wheel_name) as wheel:
        inside = wheel.namelist()
        assert "lessonlib/grading/worker.py" in inside and "lessonlib/exercises/runner.py" in inside
        meta = wheel.read(next(n for n in inside if n.endswith(".dist-info/METADATA"))).decode()
        assert "Requires-Dist: numpy" in meta and "extra ==" not in meta
        assert not [n for n in inside if "__pycache__" in n]
    # the wheel installs: pip accepts it (its RECORD and metadata), without fetching anything
    check = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
                            "--quiet", str(tmp_path / wheel_name)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_run_autograder_writes_results_json(tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    submission = write_learner(root / "submission" / "nested", {
        "02_masking.ipynb": masking({"padding_mask": WRONG_PADDING})["02_masking.ipynb"],
        "01_scaling.ipynb": notebook("01_scaling.ipynb"),
    })
    assert submission.is_dir()
    assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "2", "--memory", "512"]) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert set(results) >= {"score", "tests", "output"}
    for t in results["tests"]:
        assert set(t) >= {"name", "score", "max_score", "output", "visibility"}
    assert tests["02_masking: causal_mask"]["score"] == tests["02_masking: causal_mask"]["max_score"] > 0
    padding = tests["02_masking: padding_mask"]
    assert padding["score"] == 0 and padding["status"] == "failed"
    assert "padding_inverted" in padding["output"] and "Hint:" in padding["output"]
    assert tests["03_position: apply_rope"]["score"] == 0 and "No 03_position.ipynb" in tests[
        "03_position: apply_rope"]["output"]
    auto = [t for t in results["tests"] if t["max_score"] > 0]
    assert results["score"] == sum(t["score"] for t in auto)
    assert any("graded by hand" in t["name"] for t in results["tests"])
