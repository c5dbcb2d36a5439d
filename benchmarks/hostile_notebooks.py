"""The grading process's peak memory on notebooks built to exhaust it, and the gradebook's size.

Each learner hands in one notebook that stays under the 32 MB a notebook may have:

- ``objects-1``, ``objects-2``: 02_masking with a cell's metadata holding a JSON list of empty
  objects, ``[{},{},...]``, to just under 32 MB (about ten million objects when parsed);
- ``written``: 05_interpretation whose written answer is 30 MB of text;
- ``cell-id``: 02_masking whose first answer cell has an id of 30 MB.

``lessonlib grade`` runs on all of them (two workers) in a subprocess that reports its own peak
resident memory (VmHWM: getrusage's ru_maxrss would also count the parent's size at the fork);
the script prints it with the size of grades.json and of the largest file in the output folder,
and each learner's status. The numbers depend on the machine: the script reports, it does not
assert (tests/grading/test_sizes.py holds the limit).

    python benchmarks/hostile_notebooks.py
    python benchmarks/hostile_notebooks.py --keep DIR    # keep the submissions and the gradebook
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test helpers: peak memory measured as the tests measure it

from helpers.measure import MEASURED  # noqa: E402

SOLUTIONS = ROOT / "solutions"
MB = 2**20
LIMIT = 32 * MB  # lessonlib.grading.notebooks.MAX_NOTEBOOK_BYTES

def _load(name: str) -> dict:
    return json.loads((SOLUTIONS / name).read_text())


def _write(folder: Path, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def _objects_notebook() -> str:
    """02_masking with ``[{},{},...]`` in a cell's metadata, to just under the size limit."""
    nb = _load("02_masking.ipynb")
    nb["cells"][0]["metadata"]["x"] = "PLACEHOLDER"
    text = json.dumps(nb)
    room = LIMIT - len(text) - 64
    return text.replace('"PLACEHOLDER"', "[" + "{}," * (room // 3) + "{}]")


def _written_notebook() -> str:
    nb = _load("05_interpretation.ipynb")
    cell = next(c for c in nb["cells"] if "manual" in c.get("metadata", {}).get("tags", []))
    cell["source"] = "Attention weights are not effects. " * (30 * MB // 36)
    return json.dumps(nb)


def _cell_id_notebook() -> str:
    nb = _load("02_masking.ipynb")
    cell = next(c for c in nb["cells"] if "answer" in c.get("metadata", {}).get("tags", []))
    cell["id"] = "a" * (30 * MB)
    return json.dumps(nb)


def build(subs: Path) -> None:
    objects = _objects_notebook()
    _write(subs / "objects-1", "02_masking.ipynb", objects)
    _write(subs / "objects-2", "02_masking.ipynb", copy.copy(objects))
    _write(subs / "written", "05_interpretation.ipynb", _written_notebook())
    _write(subs / "cell-id", "02_masking.ipynb", _cell_id_notebook())


def measure(subs: Path, out: Path) -> dict:
    command = [sys.executable, "-c", MEASURED, "grade", *map(str, sorted(subs.iterdir())), "--out", str(out),
               "--timeout", "5", "--memory", "512", "--quiet", "--workers", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    peak = int(result.stderr.split("PEAK")[-1].split()[0]) if "PEAK" in result.stderr else -1
    files = [p for p in out.rglob("*") if p.is_file()]
    largest = max(files, key=lambda p: p.stat().st_size, default=None)
    statuses = {}
    if (out / "grades.json").is_file():
        for learner in json.loads((out / "grades.json").read_text())["learners"]:
            found = {(g["status"], g["reason"][:160]) for g in learner["exercises"]
                     if g["notebook"] in learner["files"]}
            statuses[learner["learner"]] = sorted(found)
    return {"exit": result.returncode, "peak_mb": peak / 1024,
            "grades_json_mb": (out / "grades.json").stat().st_size / MB if (out / "grades.json").exists() else None,
            "largest": (largest.relative_to(out).as_posix(), largest.stat().st_size / MB) if largest else None,
            "statuses": statuses, "stderr": result.stderr[-1500:] if result.returncode else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="build and grade in this folder, and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        build(root / "submissions")
        report = measure(root / "submissions", root / "gradebook")
    print(f"exit status {report['exit']}; peak resident memory of the grading process: {report['peak_mb']:.0f} MB")
    if report["grades_json_mb"] is not None:
        print(f"grades.json: {report['grades_json_mb']:.2f} MB; largest file: {report['largest'][0]} "
              f"({report['largest'][1]:.2f} MB)")
    for learner, found in report["statuses"].items():
        for status, reason in found:
            print(f"  {learner}: {status}: {reason}")
    if report["stderr"]:
        print(report["stderr"])


if __name__ == "__main__":
    main()
