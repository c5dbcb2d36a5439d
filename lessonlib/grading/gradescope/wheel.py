"""The lessonlib wheel, built by ``pip wheel`` (for the Gradescope autograder, see ``gradescope.py``).

pip builds from sources: the course checkout's when lessonlib runs from one, else the installed
package's files with a ``pyproject.toml`` written from its metadata. Either way from a copy, so the
checkout stays untouched.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lessonlib
from lessonlib.grading.isolation.sandbox import project_root


class WheelError(RuntimeError):
    """The wheel cannot be built here."""


SOURCE_FILES = ("pyproject.toml", "README.md", "LICENSE")  # what the build backend reads besides lessonlib/


GRADE_EXTRA = re.compile(r"""\s*(?:\band\s+)?\bextra\s*==\s*["']grade["']""")


def _grade_extra(requirement: str) -> str | None:
    """``requirement`` without its ``extra == "grade"`` marker, when it is the grade extra's, else None."""
    name, _, marker = requirement.partition(";")
    if not GRADE_EXTRA.search(marker):
        return None
    rest = GRADE_EXTRA.sub("", marker).strip().removeprefix("and").strip()
    return f"{name.strip()}; {rest}" if rest else name.strip()


def _pyproject_of_installed() -> str:
    """A pyproject.toml for the installed lessonlib, from its metadata: name, version, Python,
    dependencies and the ``grade`` extra (the autograder's), commands, and every file of the package."""
    dist = importlib.metadata.distribution("lessonlib")
    meta = dist.metadata
    listed = meta.get_all("Requires-Dist") or []
    requires = [req for req in listed if "extra ==" not in req]
    grade = [extra for req in listed if (extra := _grade_extra(req)) is not None]
    scripts = "".join(f"{json.dumps(ep.name)} = {json.dumps(ep.value)}\n" for ep in dist.entry_points
                      if ep.group == "console_scripts")
    return (f'[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = {json.dumps(meta["Name"])}\nversion = {json.dumps(meta["Version"])}\n'
            f'requires-python = {json.dumps(meta["Requires-Python"] or ">=3.10")}\n'
            f'dependencies = {json.dumps(requires)}\n\n[project.optional-dependencies]\n'
            f'grade = {json.dumps(grade)}\n\n[project.scripts]\n{scripts}\n'
            f'[tool.setuptools.packages.find]\ninclude = ["lessonlib*"]\n\n'
            f'[tool.setuptools.package-data]\n"*" = ["**/*"]\n')


def _source_tree(copy: Path) -> Path:
    """A copy of lessonlib's sources to build: the checkout's, or the installed package with a
    pyproject.toml written from its metadata. A copy keeps the checkout untouched (setuptools
    writes build/ beside its sources, and a stale build/ could carry deleted modules)."""
    package = Path(lessonlib.__file__).parent
    shutil.copytree(package, copy / "lessonlib", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    checkout = project_root()
    if checkout is None:
        (copy / "pyproject.toml").write_text(_pyproject_of_installed())
    else:
        for name in SOURCE_FILES:
            shutil.copy2(checkout / name, copy / name)
    return copy


def build_wheel(dest: Path) -> Path:
    """The lessonlib wheel, built by ``pip wheel`` into ``dest`` (pip takes the build backend,
    setuptools, from the package index or its cache)."""
    try:
        source = _source_tree(Path(dest) / "source")
    except importlib.metadata.PackageNotFoundError:
        raise WheelError("lessonlib is not installed (pip install -e . in the course folder)") from None
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dest),
                           str(source)], capture_output=True, text=True)
    wheels = sorted(Path(dest).glob("lessonlib-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise WheelError(f"pip wheel of lessonlib failed (status {done.returncode}): "
                              f"{done.stderr.strip()[-800:]}")
    return wheels[0]
