"""The course's checks as a Gradescope autograder.

``lessonlib gradescope build --notebooks 02_masking.ipynb --out autograder.zip`` (or
``--exercise-set lesson``) writes a zip holding, at its root, ``setup.sh`` (Gradescope runs it once,
as root, when it builds the image: Python, bubblewrap and the wheel), ``run_autograder`` (run for
every submission), the lessonlib wheel (``pip wheel`` of the course checkout) and
``assignment.json``: the assignment's notebooks (and named exercise set, if any) and the hidden
cases' seed, so that every run of a submission gets the same points. Gradescope
unpacks the zip into ``/autograder/source/``; setup.sh makes that folder root's alone.
``run_autograder`` calls ``lessonlib gradescope run --root /autograder``: the learner's notebooks
in ``/autograder/submission/`` are graded exactly as ``lessonlib grade`` grades them (isolated
workers, hidden cases; learner code never runs as root), and
``/autograder/results/results.json`` gets::

    {"score": 12.0, "output": ..., "tests": [{"name", "score", "max_score", "output", "visibility"}]}

one test per exercise for its public cases, whose output is the learner's feedback for them
(diagnoses, hints, failed public cases), and one more for its hidden cases, whose output says how
many passed and nothing else, with the visibility chosen by ``--hidden-visibility`` (stored in
assignment.json; default ``after_due_date``). The exercise's points are split between the two in
proportion to their cases. While the hidden part is not visible, results.json gives no overall
score, so Gradescope adds up the tests. Written answers are listed with no points: grade them as
manual questions in Gradescope. ``--root`` lets tests use a folder standing in for ``/autograder``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lessonlib.exercises import EXERCISES
from lessonlib.exercises.results import hidden_line
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_bytes, atomic_write_json
from lessonlib.grading.gradescope import HIDDEN_VISIBILITIES
from lessonlib.grading.gradescope.wheel import WheelError, build_wheel
from lessonlib.grading.lms.downloads import DownloadError, find_learners
from lessonlib.grading.notebooks import assignment_scope, course_notebooks
from lessonlib.grading.reports import marking
from lessonlib.grading.reports.feedback import Para, exercise_blocks, markdown_lines, spans
from lessonlib.grading.run.batch import GradeSettings, grade
from lessonlib.grading.run.errors import GradingError
from lessonlib.grading.store.assignments import new_seed

SETTINGS = "assignment.json"  # in the zip's root, so /autograder/source/assignment.json

# Gradescope's Ubuntu 22.04 (Python 3.10) and 24.04 (Python 3.12, whose system Python is
# "externally managed", PEP 668) base images: a venv of the system Python sidesteps PEP 668 and
# needs python3-venv; bubblewrap isolates learner code where the container allows namespaces.
# /autograder stays enterable (learner code, run as nobody at level limits, needs the venv);
# source/ with the seed becomes root's alone.
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 python3-venv bubblewrap util-linux
rm -rf /autograder/lessonlib-venv
python3 -m venv /autograder/lessonlib-venv
# 22.04's venv has pip 22.0: a current one reads the wheel's metadata (2.4) for sure
/autograder/lessonlib-venv/bin/python -m pip install --quiet --upgrade pip
/autograder/lessonlib-venv/bin/python -m pip install --quiet "/autograder/source/{wheel}[grade]"
chmod 0755 /autograder
chmod -R go-w,go+rX /autograder/lessonlib-venv
chmod 0700 /autograder/source
chmod 0600 /autograder/source/{settings}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the notebooks in /autograder/submission/ are graded
# into /autograder/results/results.json.
set -euo pipefail
cd /autograder
exec /autograder/lessonlib-venv/bin/lessonlib gradescope run --root /autograder
"""


class GradescopeError(RuntimeError):
    """The autograder cannot be built here, or its settings are not usable."""


# --- the zip -------------------------------------------------------------------------------------


def assignment(notebooks: Sequence[str] = (), seed: int | None = None,
               hidden_visibility: str = "after_due_date", *, exercise_set: str | None = None) -> dict[str, Any]:
    """The assignment's settings: its notebooks (all of the course's when none are named) or its
    named exercise set (``lessonlib.exercises.ASSIGNMENTS``: only its items are graded), the hidden
    cases' seed (a new secret one, from ``new_seed``, unless one is chosen), and when learners see
    how many hidden cases passed (one of HIDDEN_VISIBILITIES)."""
    try:
        scope = assignment_scope(notebooks, exercise_set)
    except ValueError as exc:
        raise GradescopeError(str(exc)) from None
    if hidden_visibility not in HIDDEN_VISIBILITIES:
        raise GradescopeError(f"the hidden cases' visibility is {hidden_visibility!r}; it is one of "
                              f"{', '.join(HIDDEN_VISIBILITIES)}")
    return {"notebooks": list(scope.notebooks), "exercise_set": exercise_set,
            "seed": new_seed() if seed is None else int(seed), "hidden_visibility": hidden_visibility}


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int) -> None:
    entry = zipfile.ZipInfo(name)
    entry.external_attr = (0o100000 | mode) << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(entry, data)


def build_autograder(out: Path, notebooks: Sequence[str] = (), seed: int | None = None,
                     hidden_visibility: str = "after_due_date", *, exercise_set: str | None = None) -> Path:
    """Write the autograder zip: setup.sh, run_autograder, the wheel and assignment.json, at its root."""
    out = Path(out)
    settings = assignment(notebooks, seed, hidden_visibility, exercise_set=exercise_set)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            wheel = build_wheel(Path(tmp))
        except WheelError as exc:
            raise GradescopeError(str(exc)) from None
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            _add(zf, "setup.sh", SETUP_SH.format(wheel=wheel.name, settings=SETTINGS).encode(), 0o755)
            _add(zf, "run_autograder", RUN_AUTOGRADER.encode(), 0o755)  # executable, as Gradescope needs
            _add(zf, SETTINGS, (json.dumps(settings, indent=1) + "\n").encode(), 0o600)
            zf.write(wheel, wheel.name)
        atomic_write_bytes(out, buffer.getvalue(), mode=0o600)  # it holds the secret seed
    return out


def read_assignment(source: Path) -> dict[str, Any]:
    """``source/assignment.json``, checked (made root's alone first, should setup.sh not have run)."""
    path = Path(source) / SETTINGS
    try:
        os.chmod(path, 0o600)
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise GradescopeError(f"{path} is missing: rebuild the zip with lessonlib gradescope build") from None
    except (OSError, ValueError) as exc:
        raise GradescopeError(f"{path} cannot be read ({exc}): rebuild the zip") from None
    notebooks = data.get("notebooks") if isinstance(data, dict) else None
    named = data.get("exercise_set") if isinstance(data, dict) else None
    if not isinstance(data.get("seed"), int) or not isinstance(notebooks, list) or not all(
            isinstance(n, str) for n in notebooks) or not isinstance(named, (str, type(None))):
        raise GradescopeError(f"{path} should hold {{\"notebooks\": [...], \"seed\": N}}: rebuild the zip")
    # a named set chooses its own notebooks (those stored beside it are what it chose at build time)
    return assignment(data["notebooks"] if named is None else (), data["seed"],
                      data.get("hidden_visibility", "after_due_date"), exercise_set=named)


# --- inside Gradescope -------------------------------------------------------------------------------


def _split(g: r.ExerciseGrade) -> tuple[float, float, float]:
    """(public points earned, public part's maximum, hidden points earned) of an exercise.

    The maximum is split by the number of cases; the public part is scored from public cases
    alone (and the requirements judged on them), so it says nothing of the hidden ones. The hidden
    part is the rest of the exercise's points: the two add up to them exactly. (A requirement judged
    on a hidden case that fails costs the whole exercise a share, which can take the total below
    the public part: then the public part shows the total and the hidden part 0.)
    """
    points, total = g.points or 0.0, max(g.total_cases, 1)
    public_total = g.total_cases - g.hidden_total
    public_max = round(g.max_points * public_total / total, 2)
    failed = {f["case"] for f in g.failed_cases if not f.get("hidden", True)}
    factor = 1.0
    for requirement in getattr(EXERCISES.get(g.exercise), "requirements", ()):
        if requirement.id in failed:
            factor *= 1.0 - requirement.weight
    public_passed = g.passed_cases - g.hidden_passed
    public = min(points, round(g.max_points * public_passed / total * factor, 2))
    return public, public_max, round(points - public, 2)


def _tests(grades: list[r.ExerciseGrade], hidden_visibility: str) -> list[dict[str, Any]]:
    tests = []
    for g in grades:
        name = f"{g.notebook.removesuffix('.ipynb')}: {g.exercise}"
        if g.kind == "manual":  # a question of the assignment's outline, graded in Gradescope: not a test
            continue
        output = "\n".join(markdown_lines(exercise_blocks(g, hidden=False))).strip()
        if not g.hidden_total:
            tests.append({"name": name, "score": g.points or 0.0, "max_score": g.max_points,
                          "status": "passed" if g.status == r.PASSED else "failed", "output": output,
                          "output_format": "md", "visibility": "visible"})
            continue
        public, public_max, hidden = _split(g)
        public_failed = any(not f.get("hidden", True) for f in g.failed_cases)
        tests.append({"name": name, "score": public, "max_score": public_max,
                      "status": "failed" if public_failed else "passed", "output": output, "output_format": "md",
                      "visibility": "visible"})
        tests.append({
            "name": f"{name} (hidden cases)", "score": hidden, "max_score": round(g.max_points - public_max, 2),
            "status": "passed" if g.hidden_passed == g.hidden_total else "failed",
            "output": "\n".join(markdown_lines([Para(spans(hidden_line(g.hidden_passed, g.hidden_total) + "."))]))
            .strip(), "output_format": "md", "visibility": hidden_visibility,
        })
    return tests


def _copy_submission(submission: Path, learner: Path) -> list[str]:
    """Copy the notebooks handed in (in any subfolder) into ``learner``; returns what was left out, and why."""
    skipped = []  # said in the output: nothing handed in is left out in silence
    for notebook in sorted(submission.rglob("*.ipynb")):
        shown = notebook.relative_to(submission)
        if ".ipynb_checkpoints" in notebook.parts:
            continue  # Jupyter's automatic copies of the notebooks themselves
        if notebook.is_symlink():
            skipped.append(f"{shown} is a symbolic link; links are not followed, so it was not graded.")
        elif not notebook.is_file():
            skipped.append(f"{shown} is not a regular file; it was not graded.")
        elif (learner / notebook.name).exists():
            skipped.append(f"{shown} has the same name as a notebook in another folder; only the first, in "
                           "sorted order, was graded.")
        else:
            shutil.copyfile(notebook, learner / notebook.name)
    return skipped


@contextmanager
def _working_in(folder: Path) -> Iterator[None]:
    """Grade from ``folder``: an installed lessonlib takes the folder it starts in for the course that
    learner code must not see (``sandbox.course_folder``), so /autograder (source, results and the
    submission) is hidden from the sandbox whatever folder Gradescope starts in."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _summary(lines: list[str]) -> str:
    """The overall output: paragraphs, each inert Markdown (file names are the learner's)."""
    return "\n".join(markdown_lines([Para(spans(line)) for line in lines])).strip()


def _failed(results_path: Path, message: str, notes: list[str]) -> Path:
    atomic_write_json(results_path, {"score": 0.0, "tests": [], "output_format": "md", "output": _summary(
        [f"The submission could not be graded: {message}"] + [f"Note: {note}" for note in notes])}, mode=0o644)
    return results_path


def run_autograder(root: Path, *, timeout: float = 10.0, memory_mb: int = 1024, isolation: str = "auto") -> Path:
    """Grade ``root/submission`` as ``root/source/assignment.json`` says and write
    ``root/results/results.json``; returns its path."""
    root = Path(root).resolve()
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    os.chmod(results, 0o755)  # the grader's alone to write
    results_path = results / "results.json"
    with tempfile.TemporaryDirectory(prefix="lessonlib-gradescope-") as tmp:
        learner = Path(tmp) / "submission"
        learner.mkdir()
        skipped = _copy_submission(root / "submission", learner)
        try:
            settings = read_assignment(root / "source")
        except GradescopeError as exc:
            return _failed(results_path, f"the autograder is misconfigured ({exc})", skipped)
        named = settings["exercise_set"]
        notebooks = tuple(settings["notebooks"])
        grading = GradeSettings(out=Path(tmp) / "gradebook", timeout=timeout, memory_mb=memory_mb, workers=1,
                                seed=settings["seed"], notebooks=() if named else notebooks, exercise_set=named,
                                isolation=isolation)
        try:
            found = find_learners([learner], course_notebooks(), unpack_to=Path(tmp) / "unpacked")
            with _working_in(root):
                batch = grade(found.learners, grading, submissions=[learner])
        except (GradingError, DownloadError) as exc:
            return _failed(results_path, str(exc), skipped)
    result = batch.results[0]
    isolation = batch.isolation
    grades = result.exercises  # the assignment's alone
    auto = [g for g in grades if g.kind != "manual"]
    score = sum(g.points or 0.0 for g in auto)
    visibility = settings["hidden_visibility"]
    tests = _tests(grades, visibility)
    hides = any(t["visibility"] != "visible" for t in tests)
    shown = sum(t["score"] for t in tests if t["visibility"] == "visible")
    output = [f"Automatic checks: {score:g} / {sum(g.max_points for g in auto):g} points." if not hides else
              f"Automatic checks, public cases: {shown:g} points; the hidden cases' points are "
              f"{'shown after the due date' if visibility == 'after_due_date' else 'not shown here'}."]
    output += [f"Note: {note}" for note in skipped + result.notes]
    output += marking.gradescope_written(grades)
    data = {
        **({} if hides else {"score": score}),  # while hidden parts are hidden, Gradescope adds up the tests
        "output": _summary(output),
        "output_format": "md",
        "tests": tests,
        "extra_data": {"isolation": isolation.level, "isolation_warning": isolation.warning,
                       "runs_as": isolation.verified.get("runs_as"), "notebooks": list(notebooks),
                       "exercise_set": named, "hidden_visibility": visibility},
    }
    atomic_write_json(results_path, data, mode=0o644)
    if isolation.warning:
        print(isolation.warning)
    print(json.dumps({"score": score, "isolation": isolation.level}))
    return results_path
