"""`pip install` of the package alone, into a fresh virtual environment, is enough to do the course
in a kernel someone else set up: the engine imports, a check runs on an answer and names a
misconception, an explorer computes and builds its controls, and no Jupyter server or kernel is
pulled in (JupyterLab and ipykernel are the `lab` extra), nor the grader's dependencies (the
`grade` extra): `lessonlib grade` there says what to install.

The environment is built once per session in a temporary folder from a copy of the package's
files (so the checkout gets no build/ or egg-info). pip reaches PyPI for numpy, matplotlib,
ipywidgets, tqdm and threadpoolctl and reuses its cache: a warm run takes 20-40 s. Without
a network and without those wheels cached, the install fails and so does this test, with pip's
message: it is never skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FILES = ("pyproject.toml", "README.md", "LICENSE")
SERVER_SIDE = ("jupyterlab", "ipykernel")  # the `lab` extra: must not come with a plain install
GRADER = ("pyseccomp", "copydetect")  # the `grade` extra: an instructor's, never a learner's

# Runs inside the fresh environment (python -I: neither the checkout nor PYTHONPATH is on sys.path)
# and writes what it saw as JSON to the path given as its argument.
PROBE = textwrap.dedent('''
    import importlib.metadata
    import importlib.util
    import json
    import sys

    import numpy as np

    import lessonlib
    from lessonlib.exercises import check
    from lessonlib.explorers import scaling

    report = {"lessonlib_file": lessonlib.__file__}
    report["importable"] = {name: importlib.util.find_spec(name) is not None for name in sys.argv[2].split(",")}
    report["distributions"] = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
    report["requires"] = importlib.metadata.requires("lessonlib")


    def masked_softmax(scores, allowed):
        s = np.where(allowed, scores, -np.inf)
        top = s.max(axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


    def zeroed_after_softmax(scores, allowed):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True) * allowed


    right = check("masked_softmax", masked_softmax, seed=3)  # shown as plain text: no kernel here
    wrong = check("masked_softmax", zeroed_after_softmax, quiet=True)
    report["right"] = {"status": right.status, "points": right.points, "max_points": right.max_points}
    report["wrong"] = {"status": wrong.status, "diagnoses": wrong.diagnosis_names}

    result = scaling.compute(scaling.Settings(d_k=256, scaled=False))
    report["explorer_readout"] = scaling.describe(result)
    report["explorer_widget"] = type(scaling.show()).__name__

    with open(sys.argv[1], "w") as f:
        json.dump(report, f)
''')


def run(command: list[str], *, cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_REQUIRE"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", MPLBACKEND="Agg")
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n"
                    f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}", pytrace=False)
    return done


@pytest.fixture(scope="module")
def clean_install(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fresh venv holding `pip install <package>` (no extras), and what the probe saw in it."""
    base = tmp_path_factory.mktemp("clean-install")
    source = base / "source"
    source.mkdir()
    for name in PACKAGE_FILES:
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "lessonlib", source / "lessonlib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))

    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=base, what="creating the venv")
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    # this environment's pip installs into the new one (--python), which saves bootstrapping a pip there
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    # --no-compile: byte-compiling all of numpy, matplotlib and IPython took longer than everything else
    run([*pip, "install", "--quiet", "--no-compile", str(source)], cwd=base,
        what="pip install of the package without extras")
    run([*pip, "check"], cwd=base, what="pip check (every installed requirement satisfied)")

    out = base / "probe.json"
    probe = run([str(python), "-I", "-c", PROBE, str(out), ",".join(SERVER_SIDE + GRADER)], cwd=base,
                what="the probe script in the clean environment")
    report = json.loads(out.read_text())
    report["stdout"] = probe.stdout
    cli = venv / ("Scripts/lessonlib.exe" if os.name == "nt" else "bin/lessonlib")
    report["cli_list"] = run([str(cli), "exercises", "list"], cwd=base, what="lessonlib exercises list").stdout
    verify = subprocess.run([str(cli), "exercises", "verify", "--root", str(ROOT)], cwd=base,
                            capture_output=True, text=True, timeout=120)
    report["cli_verify"] = {"returncode": verify.returncode, "stderr": verify.stderr}
    grade = subprocess.run([str(cli), "grade", str(base / "nothing"), "--out", str(base / "grades")], cwd=base,
                           capture_output=True, text=True, timeout=120)
    report["cli_grade"] = {"returncode": grade.returncode, "stderr": grade.stderr, "out": (base / "grades").exists()}
    report["venv"] = str(venv)
    return report


def test_no_jupyter_server_or_kernel_is_installed(clean_install: dict[str, Any]) -> None:
    installed = clean_install["distributions"]
    assert "lessonlib" in installed
    assert "ipywidgets" in installed and "numpy" in installed and "matplotlib" in installed
    for name in SERVER_SIDE:
        assert name not in installed, f"a plain install pulled in {name}; installed: {installed}"
        assert not clean_install["importable"][name], f"{name} is importable in the clean environment"
    plain = [r for r in clean_install["requires"] if "extra ==" not in r]
    assert not [r for r in plain if r.split("<")[0].split(">")[0].split("=")[0] in SERVER_SIDE], plain


def test_the_package_imports_from_the_environment_not_the_checkout(clean_install: dict[str, Any]) -> None:
    location = Path(clean_install["lessonlib_file"]).resolve()
    assert location.is_relative_to(Path(clean_install["venv"]).resolve()), location
    assert not location.is_relative_to(ROOT), location


def test_check_passes_a_right_answer_and_names_a_wrong_ones_misconception(clean_install: dict[str, Any]) -> None:
    from lessonlib.exercises import FAILED, PASSED

    right, wrong = clean_install["right"], clean_install["wrong"]
    assert right["status"] == PASSED and right["points"] == right["max_points"] > 0, right
    assert "masked_softmax" in clean_install["stdout"], "check() showed no report outside a kernel"
    assert wrong["status"] == FAILED and "zeroed_after_softmax" in wrong["diagnoses"], wrong


def test_an_explorer_computes_and_builds_its_controls(clean_install: dict[str, Any]) -> None:
    from lessonlib.explorers import scaling

    expected = scaling.describe(scaling.compute(scaling.Settings(d_k=256, scaled=False)))
    assert clean_install["explorer_readout"] == expected  # the same numbers as in the full environment
    assert clean_install["explorer_widget"] in {"VBox", "HBox", "Box", "GridBox"}


def test_the_command_runs_and_maintainer_commands_say_what_they_need(clean_install: dict[str, Any]) -> None:
    assert "masked_softmax" in clean_install["cli_list"]
    verify = clean_install["cli_verify"]
    assert verify["returncode"] == 1, verify
    assert "needs nbformat" in verify["stderr"] and "[lab,test]" in verify["stderr"], verify["stderr"]
    assert "Traceback" not in verify["stderr"], verify["stderr"]


def test_the_grader_is_not_installed_and_lessonlib_grade_says_how_to_add_it(clean_install: dict[str, Any]) -> None:
    installed = clean_install["distributions"]
    for name in GRADER:
        assert name not in installed and not clean_install["importable"][name], f"a plain install brought {name}"
    grade = clean_install["cli_grade"]
    assert grade["returncode"] == 1 and not grade["out"], grade
    assert 'pip install "lessonlib[grade]"' in grade["stderr"] and "Traceback" not in grade["stderr"], grade
    assert len(grade["stderr"].strip().splitlines()) == 1, grade["stderr"]
