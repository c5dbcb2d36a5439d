"""`lessonlib gradescope build` and the autograder run in a folder standing in for /autograder."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers.markdown_view import shown
from helpers.submissions import CORRECT_MASKED_SOFTMAX, WRONG_PADDING, masking, notebook, write_learner

from lessonlib import cli
from lessonlib.exercises import EXERCISES, MANUAL_QUESTIONS, get_assignment
from lessonlib.grading.gradescope import autograder as gradescope
from lessonlib.grading.gradescope.autograder import GradescopeError, assignment, read_assignment
from lessonlib.grading.isolation import sandbox

MASKING = "02_masking.ipynb"


def _build_traces() -> dict[str, int]:
    """What a wheel built in the checkout leaves there (setuptools' build/lib, build/bdist.*, egg-info)."""
    root = Path(__file__).resolve().parents[2]
    found = [root / "build" / "lib", *root.glob("build/bdist.*"), *root.glob("*.egg-info")]
    return {str(p): p.stat().st_mtime_ns for p in found if p.exists()}


def test_the_zip_holds_setup_run_autograder_and_the_wheel(tmp_path: Path) -> None:
    traces = _build_traces()
    assert cli.main(["gradescope", "build", "--notebooks", MASKING, "--out", str(tmp_path / "autograder.zip")]) == 0
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        names = zf.namelist()
        wheel_name = next(n for n in names if n.endswith(".whl"))
        assert sorted(names) == sorted(["setup.sh", "run_autograder", "assignment.json", wheel_name])
        assert "/" not in wheel_name
        # the assignment: its notebooks and a secret seed, unreadable but to root once unpacked
        settings = json.loads(zf.read("assignment.json"))
        assert settings["notebooks"] == [MASKING] and isinstance(settings["seed"], int)
        assert settings["hidden_visibility"] == "after_due_date"
        assert zf.getinfo("assignment.json").external_attr >> 16 & 0o077 == 0
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111  # executable
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
        assert wheel_name in setup and "bubblewrap" in setup and "python3-venv" in setup
        assert "chmod 0700 /autograder/source" in setup and "chmod 0600 /autograder/source/assignment.json" in setup
        assert "lessonlib gradescope run --root /autograder" in run
        zf.extract(wheel_name, tmp_path)
    with zipfile.ZipFile(tmp_path / wheel_name) as wheel:
        inside = wheel.namelist()
        assert "lessonlib/grading/worker/main.py" in inside and "lessonlib/exercises/runner.py" in inside
        assert "lessonlib/exercises/answer_cells.json" in inside  # package data, from pyproject.toml
        assert any(n.startswith("lessonlib/training/checkpoints/") for n in inside)
        meta = wheel.read(next(n for n in inside if n.endswith(".dist-info/METADATA"))).decode()
        assert "Requires-Dist: numpy" in meta  # the extras (lab, test) are not installed by setup.sh
        assert not [n for n in inside if "__pycache__" in n]
    assert _build_traces() == traces  # pip wheel built a copy, not the checkout
    # the wheel installs: pip accepts it (its RECORD and metadata), without fetching anything
    check = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
                            "--quiet", str(tmp_path / wheel_name)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_each_zip_gets_its_own_secret_seed(tmp_path: Path) -> None:
    """Without --seed, two builds draw two seeds, neither derived from the notebooks' names; the zip
    is the instructor's alone; --seed is kept as given."""
    seeds = []
    for name in ("a.zip", "b.zip"):
        assert cli.main(["gradescope", "build", "--notebooks", MASKING, "--out", str(tmp_path / name)]) == 0
        assert os.stat(tmp_path / name).st_mode & 0o077 == 0
        with zipfile.ZipFile(tmp_path / name) as zf:
            seeds.append(json.loads(zf.read("assignment.json"))["seed"])
    assert seeds[0] != seeds[1]
    assert gradescope.assignment([MASKING], 5)["seed"] == 5


def test_build_names_the_valid_notebooks_when_one_is_unknown(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "autograder.zip"
    assert cli.main(["gradescope", "build", "--notebooks", "02_mask.ipynb", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "02_mask.ipynb" in error and MASKING in error and "05_interpretation.ipynb" in error
    assert not out.exists()


def _settings(root: Path, notebooks: list[str], seed: int | None = None) -> None:
    source = root / "source"
    source.mkdir(parents=True, exist_ok=True)
    seed = 20261201 if seed is None else seed
    (source / "assignment.json").write_text(json.dumps({"notebooks": notebooks, "seed": seed}))


def test_run_autograder_writes_results_json(tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    _settings(root, sorted(p.name for p in (Path(__file__).parents[2] / "solutions").glob("0*.ipynb")))
    submission = write_learner(root / "submission" / "nested", {
        "02_masking.ipynb": masking({"padding_mask": WRONG_PADDING})["02_masking.ipynb"],
        "01_scaling.ipynb": notebook("01_scaling.ipynb"),
    })
    assert submission.is_dir()
    assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "2", "--memory", "512"]) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert set(results) >= {"tests", "output"} and "score" not in results  # hidden parts: after the due date
    for t in results["tests"]:
        assert set(t) >= {"name", "score", "max_score", "output", "visibility"}
    assert tests["02_masking: causal_mask"]["score"] == tests["02_masking: causal_mask"]["max_score"] > 0
    padding = tests["02_masking: padding_mask"]
    assert padding["score"] == 0 and padding["status"] == "failed"
    assert "padding_inverted" in padding["output"] and "Hint:" in padding["output"]
    assert tests["03_position: apply_rope"]["score"] == 0 and "No 03_position.ipynb" in shown(tests[
        "03_position: apply_rope"]["output"])
    hidden = [t for t in results["tests"] if t["name"].endswith("(hidden cases)")]
    assert hidden and all(t["visibility"] == "after_due_date" for t in hidden)
    assert "02_masking: padding_mask (hidden cases)" in tests and "03_position: apply_rope (hidden cases)" not in tests
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(sum(
        e.points for e in EXERCISES.values()))  # the parts of each exercise add up to its points
    # a written question is a question of Gradescope's outline, graded there by hand: not a test
    assert not any(q in t["name"] for q in MANUAL_QUESTIONS for t in results["tests"])
    assert "graded by hand" in results["output"]


def test_two_runs_of_one_submission_give_the_same_score_for_the_assignment_only(tmp_path: Path) -> None:
    """The seed comes from source/assignment.json: no run draws its own; only the assigned notebook counts."""
    scores = []
    for run in ("first", "second"):
        root = tmp_path / run
        _settings(root, [MASKING])
        write_learner(root / "submission", masking({"masked_softmax": CORRECT_MASKED_SOFTMAX + """
def masked_softmax(scores, allowed):
    return _correct(scores, allowed) * (1 + (scores.size % 3 == 0))  # wrong on some shapes only
"""}))
        assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "2", "--memory", "512"]) == 0
        results = json.loads((root / "results" / "results.json").read_text())
        assert {t["name"].split(":")[0] for t in results["tests"]} == {"02_masking"}
        assert results["extra_data"]["notebooks"] == [MASKING]
        scores.append((results.get("score"), [t["score"] for t in results["tests"]]))
    assert scores[0] == scores[1]


def test_the_lesson_set_builds_and_runs_as_one_autograder(tmp_path: Path) -> None:
    """``gradescope build --exercise-set lesson``: assignment.json names the set; a run grades its
    exercises alone (2.3 padding_mask, wrong here, is no test), and its written question is the
    outline's."""
    lesson = get_assignment("lesson")
    zip_path = tmp_path / "autograder.zip"
    assert cli.main(["gradescope", "build", "--exercise-set", "lesson", "--seed", "11", "--out", str(zip_path)]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        settings = json.loads(zf.read("assignment.json"))
        zf.extract("assignment.json", root / "source")
    assert settings["exercise_set"] == "lesson" and settings["notebooks"] == list(lesson.by_notebook())
    write_learner(root / "submission", masking({"padding_mask": WRONG_PADDING}))
    assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "2", "--memory", "512"]) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    names = {t["name"].removesuffix(" (hidden cases)").split(": ")[1] for t in results["tests"]}
    assert names == set(lesson.exercises) and results["extra_data"]["exercise_set"] == "lesson"
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(sum(
        EXERCISES[e].points for e in lesson.exercises))
    assert "q2_attention_not_causal" in results["output"]  # graded by hand in Gradescope
    assert cli.main(["gradescope", "build", "--exercise-set", "lesson", "--notebooks", MASKING, "--out",
                     str(tmp_path / "both.zip")]) == 2 and not (tmp_path / "both.zip").exists()


def test_the_hidden_visibility_is_one_of_gradescopes(tmp_path: Path) -> None:
    with pytest.raises(GradescopeError, match="after_due_date, hidden, visible"):
        assignment([MASKING], 1, "sometimes")
    assert assignment([MASKING], 1, "hidden")["hidden_visibility"] == "hidden"
    _settings(tmp_path, [MASKING], 1)  # written before the choice existed: the default
    assert read_assignment(tmp_path / "source")["hidden_visibility"] == "after_due_date"


def test_a_missing_assignment_file_is_reported_not_guessed(tmp_path: Path) -> None:
    root = tmp_path / "autograder"
    write_learner(root / "submission", masking())
    assert cli.main(["gradescope", "run", "--root", str(root), "--timeout", "2"]) == 0
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "assignment.json is missing" in shown(results["output"])


# --- hostile learners in a stand-in /autograder, with lessonlib installed from the wheel -------------

MARKER = "lessonlib-hostile-7d41"  # in the command line of the detached process, to find it afterwards

HOSTILE = CORRECT_MASKED_SOFTMAX + """
import glob, json, os, time

ROOT = {root!r}
breaches = []
if os.getuid() == 0 or os.geteuid() == 0:
    breaches.append("runs as root")
try:
    with open(os.path.join(ROOT, "results", "results.json"), "w") as f:
        json.dump({{"score": 1000, "tests": [], "output": "forged"}}, f)
    breaches.append("wrote results.json")
except OSError:
    pass
try:
    with open(os.path.join(ROOT, "results", "forged.txt"), "w") as f:
        f.write(str(os.getuid()))
    breaches.append("wrote into results/")
except OSError:
    pass
try:
    breaches.append("read the seed: " + open(os.path.join(ROOT, "source", "assignment.json")).read()[:40])
except OSError:
    pass
for path in glob.glob(os.path.join(ROOT, "lessonlib-venv", "lib", "*", "site-packages", "lessonlib", "*.py")):
    try:
        with open(path, "a") as f:
            f.write("\\nTAMPERED = True\\n")
        breaches.append("tampered with " + path)
    except OSError:
        pass
try:  # a detached process that rewrites results.json after the grader wrote it
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            forged = os.path.join(ROOT, "results", "results.json")
            os.execv("/bin/sh", ["sh", "-c", "sleep 3; echo '{{\\"score\\": 1000}}' > " + forged
                                 + "; sleep 60; : {marker}"])
        os._exit(0)
    time.sleep(0.2)
except OSError:
    pass

def masked_softmax(scores, allowed):
    if breaches:
        raise RuntimeError("breached: " + "; ".join(breaches))
    return _correct(scores, allowed)
"""


def _standin_python() -> str:
    """The stand-in venv's Python: the system's when it is this Python's version (nobody can run it,
    as on Gradescope; a Python under /root is closed to nobody), else this one."""
    system = shutil.which("python3", path="/usr/bin")
    if system and subprocess.run([system, "-c", f"import sys; assert sys.version_info[:2] == {sys.version_info[:2]}"],
                                 capture_output=True).returncode == 0:
        return system
    return sys.executable


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A stand-in /autograder (enterable by nobody, as Gradescope's): the zip unpacked in source/, a
    venv with the wheel installed (not editable) and NumPy copied in, as setup.sh leaves them."""
    if why := sandbox.python_refused_to_nobody(_standin_python()):  # root, and no Python nobody may start
        pytest.skip(f"no Python here can stand in for Gradescope's, which every user may run: {why}")
    top = Path(tempfile.mkdtemp(prefix="lessonlib-standin-"))
    os.chmod(top, 0o755)
    root = top / "autograder"
    source = root / "source"
    source.mkdir(parents=True)
    os.chmod(root, 0o755)
    try:
        assert cli.main(["gradescope", "build", "--notebooks", MASKING, "--out", str(top / "autograder.zip")]) == 0
        with zipfile.ZipFile(top / "autograder.zip") as zf:
            zf.extractall(source)
        os.chmod(source, 0o700)
        os.chmod(source / "assignment.json", 0o600)
        venv = root / "lessonlib-venv"
        subprocess.run([_standin_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
        wheel = next(source.glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                        "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
        where = "import sysconfig; print(sysconfig.get_path('purelib'))"
        purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", where], check=True, capture_output=True,
                                      text=True).stdout.strip())
        numpy = Path(np.__file__).parent
        for folder in (numpy, numpy.with_name("numpy.libs")):  # bound into the sandbox with the venv
            if folder.is_dir():
                shutil.copytree(folder, purelib / folder.name, symlinks=True)
        # the other dependencies (imported by the grader, never in the sandbox) from the test environment
        (purelib / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        subprocess.run(["chmod", "-R", "go-w,go+rX", str(venv)], check=True)
        yield root
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _package_hashes(root: Path) -> dict[str, str]:
    package = next((root / "lessonlib-venv" / "lib").glob("*/site-packages/lessonlib"))
    return {str(p.relative_to(package)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(package.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _running(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def test_an_installed_lessonlib_builds_the_same_wheel(standin: Path, tmp_path: Path) -> None:
    """pip wheel needs sources: an installed (not editable) lessonlib gives its files and metadata."""
    run = subprocess.run([str(standin / "lessonlib-venv" / "bin" / "lessonlib"), "gradescope", "build", "--out",
                          str(tmp_path / "again.zip")], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr

    def contents(zip_path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(zip_path) as zf:
            wheel = io.BytesIO(zf.read(next(n for n in zf.namelist() if n.endswith(".whl"))))
        with zipfile.ZipFile(wheel) as whl:
            return {n: whl.read(n) for n in whl.namelist() if ".dist-info/" not in n}

    assert contents(tmp_path / "again.zip") == contents(standin.parent / "autograder.zip")


@pytest.mark.parametrize("isolation", ["auto", "limits"])
def test_hostile_learner_is_sealed_in_the_standin_root(standin: Path, isolation: str) -> None:
    """Forging results.json, a detached process that rewrites it later, tampering with the installed
    package, reading the seed, and root: none of it works. The run starts in the venv, where an
    installed lessonlib once took the venv for the course and fell back to limits, as root."""
    if isolation == "limits" and os.geteuid() != 0:
        pytest.skip("at level limits an ordinary user's learner code is that user: no boundary (the guide says so)")
    if isolation == "limits" and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")
    root = standin
    shutil.rmtree(root / "results", ignore_errors=True)
    shutil.rmtree(root / "submission", ignore_errors=True)
    write_learner(root / "submission", masking({"masked_softmax": HOSTILE.format(root=str(root), marker=MARKER)}))
    (root / "results").mkdir()  # Gradescope makes it before the run
    before = _package_hashes(root)
    venv = root / "lessonlib-venv"
    try:
        run = subprocess.run([str(venv / "bin" / "lessonlib"), "gradescope", "run", "--root", str(root),
                              "--timeout", "3", "--memory", "512", "--isolation", isolation], cwd=venv,
                             capture_output=True, text=True, timeout=300,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # the venv's own
        assert run.returncode == 0, run.stderr
        time.sleep(4)  # past the moment the detached process was to rewrite results.json
        assert _running(MARKER) == []  # nothing of the learner left running
    finally:
        for pid in _running(MARKER):
            os.kill(pid, 9)
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]
    results = json.loads((root / "results" / "results.json").read_text())
    assert "breached" not in json.dumps(results), results
    tests = {t["name"]: t for t in results["tests"]}
    assert "02_masking: masked_softmax" in tests, results["output"]
    # the grader's own: learner code saw a uid other than 0, and found nothing to break
    assert tests["02_masking: masked_softmax"]["score"] == tests["02_masking: masked_softmax"]["max_score"] > 0
    level = results["extra_data"]["isolation"]
    assert level == ("bubblewrap" if isolation == "auto" else "limits")  # the fallback is gone
    assert results["extra_data"]["runs_as"] != "root"
    assert _package_hashes(root) == before
