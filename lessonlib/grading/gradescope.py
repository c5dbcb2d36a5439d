"""The course's checks as a Gradescope autograder.

``lessonlib gradescope build --out autograder.zip`` writes a zip holding, at its root,
``setup.sh`` (Gradescope runs it once, as root, when it builds the image: Python, bubblewrap and
the wheel), ``run_autograder`` (run for every submission) and the lessonlib wheel itself, built
from the installed package (no network, no build tools). ``run_autograder`` calls
``lessonlib gradescope run --root /autograder``: the learner's notebooks in
``/autograder/submission/`` are graded exactly as ``lessonlib grade`` grades them (isolated
workers, hidden cases), and ``/autograder/results/results.json`` gets::

    {"score": 12.0, "output": ..., "tests": [{"name", "score", "max_score", "output", "visibility"}]}

one test per exercise, whose output is the learner's feedback for it (diagnoses, hints, failed
public cases; hidden cases named, never shown). Written answers are listed with no points: grade
them as manual questions in Gradescope. ``--root`` lets tests use a folder standing in for
``/autograder``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import lessonlib
from lessonlib.grading import records as r
from lessonlib.grading.batch import GradeSettings, GradingError, grade
from lessonlib.grading.files import atomic_write_bytes, atomic_write_json
from lessonlib.grading.gradebook import exercise_markdown

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv bubblewrap
python3 -m venv /autograder/lessonlib-venv
/autograder/lessonlib-venv/bin/python -m pip install --quiet /autograder/source/{wheel}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the notebooks in /autograder/submission/ are graded
# into /autograder/results/results.json.
set -euo pipefail
exec /autograder/lessonlib-venv/bin/lessonlib gradescope run --root /autograder
"""


class GradescopeError(RuntimeError):
    """The autograder cannot be built here."""


# --- the wheel ---------------------------------------------------------------------------------


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def build_wheel(dest: Path) -> Path:
    """A pure-Python wheel of the installed lessonlib (package files and metadata), written to ``dest``."""
    try:
        meta = importlib.metadata.metadata("lessonlib")
    except importlib.metadata.PackageNotFoundError:
        raise GradescopeError("lessonlib is not installed (pip install -e . in the course folder)") from None
    name, version = meta["Name"], meta["Version"]
    package = Path(lessonlib.__file__).parent
    files: dict[str, bytes] = {}
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            files[f"lessonlib/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    requires = [req for req in meta.get_all("Requires-Dist") or [] if "extra ==" not in req]
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
        + [f"Requires-Python: {meta['Requires-Python']}\n"] * bool(meta["Requires-Python"])
        + [f"Requires-Dist: {req}\n" for req in requires]
    ).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: lessonlib gradescope\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    files[f"{info}/entry_points.txt"] = b"[console_scripts]\nlessonlib = lessonlib.cli:main\n"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    writer.writerows(_record_line(n, d) for n, d in files.items())
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    wheel = Path(dest) / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in files.items():
            zf.writestr(n, d)
    return wheel


def build_autograder(out: Path) -> Path:
    """Write the autograder zip: setup.sh, run_autograder and the wheel, all at its root."""
    out = Path(out)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, text in (("setup.sh", SETUP_SH.format(wheel=wheel.name)), ("run_autograder", RUN_AUTOGRADER)):
                entry = zipfile.ZipInfo(name)
                entry.external_attr = 0o100755 << 16  # executable, as Gradescope needs
                entry.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(entry, text)
            zf.write(wheel, wheel.name)
        atomic_write_bytes(out, buffer.getvalue())
    return out


# --- inside Gradescope -------------------------------------------------------------------------------


def _tests(result: r.LearnerResult) -> list[dict[str, Any]]:
    tests = []
    for g in result.exercises:
        name = f"{g.notebook.removesuffix('.ipynb')}: {g.exercise}"
        if g.kind == "manual":
            tests.append({"name": f"{name} (written answer, graded by hand)", "score": 0, "max_score": 0,
                          "output": "This written answer is graded by hand; it has no automatic points.",
                          "visibility": "visible"})
            continue
        tests.append({
            "name": name, "score": g.points or 0.0, "max_score": g.max_points,
            "status": "passed" if g.status == r.PASSED else "failed",
            "output": "\n".join(exercise_markdown(g)).strip(), "output_format": "md", "visibility": "visible",
        })
    return tests


def run_autograder(root: Path, *, timeout: float = 10.0, memory_mb: int = 1024) -> Path:
    """Grade ``root/submission`` and write ``root/results/results.json``; returns its path."""
    root = Path(root)
    results_path = root / "results" / "results.json"
    with tempfile.TemporaryDirectory(prefix="lessonlib-gradescope-") as tmp:
        learner = Path(tmp) / "submission"
        learner.mkdir()
        skipped = []  # said in the output: nothing handed in is left out in silence
        for notebook in sorted((root / "submission").rglob("*.ipynb")):
            shown = notebook.relative_to(root / "submission")
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
        settings = GradeSettings(out=Path(tmp) / "gradebook", timeout=timeout, memory_mb=memory_mb, workers=1)
        try:
            batch = grade([learner], settings)
        except GradingError as exc:
            atomic_write_json(results_path, {"score": 0.0, "tests": [], "output": "\n\n".join(
                [f"The submission could not be graded: {exc}"] + [f"Note: {note}" for note in skipped])})
            return results_path
    result = batch.results[0]
    isolation = batch.isolation
    output = [f"Automatic checks: {result.auto_points:g} / {result.auto_max_points:g} points."]
    output += [f"Note: {note}" for note in skipped + result.notes]
    data = {
        "score": result.auto_points,
        "output": "\n\n".join(output),
        "tests": _tests(result),
        "extra_data": {"isolation": isolation.level, "isolation_warning": isolation.warning},
    }
    atomic_write_json(results_path, data)
    if isolation.warning:
        print(isolation.warning)
    print(json.dumps({"score": data["score"], "isolation": isolation.level}))
    return results_path
