"""Finding learners in submitted files and folders, and the file-safe key each one gets.

A SUBMISSION is an exercise notebook or a folder per learner holding any of them (a folder of
such folders also works). The learner is named by the folder, or by the file name with the
notebook's own name removed (``alice_02_masking.ipynb`` is alice's ``02_masking.ipynb``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from lessonlib.grading.run.notebooks import CourseNotebook, read_notebook
from lessonlib.grading.run.plans import bound_names, code_cells, too_long

# --- finding learners ------------------------------------------------------------------------------


@dataclass
class Learner:
    """One learner: a display name, a file-safe key, and their notebooks by course notebook name."""

    name: str
    key: str
    files: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lms_id: str = ""  # the LMS's id (Canvas user id, Moodle participant id) when read from a download
    late: bool = False  # the LMS marked the submission late (Canvas's _LATE; Moodle's Status, see roster.py)
    instead: list[str] = field(default_factory=list)  # notebooks handed in that this assignment does not grade
    submitted_at: datetime | None = None  # when the work was handed in, when known (see lms/times.py)
    submitted_from: str = ""  # where that time comes from: moodle_worksheet, zip_entry or file_mtime


def safe_key(name: str) -> str:
    key = re.sub(r"[^A-Za-z0-9._@+-]+", "_", name).strip("._") or "learner"
    return key[:80]


def match_course(path: Path, courses: Sequence[CourseNotebook], stem: str | None = None, *,
                 exact: bool = False) -> CourseNotebook | None:
    """The course notebook ``path`` is, by its name (or ``stem``, the learner's own file name: holding
    the course notebook's name, or with ``exact`` being it), else by content."""
    named = Path(f"{stem}.ipynb") if stem else path
    return _match_by_name(named, courses, exact) or _match_by_content(path, courses)


def _match_by_name(path: Path, courses: Sequence[CourseNotebook], exact: bool = False) -> CourseNotebook | None:
    hits = [c for c in courses if (c.stem == path.stem if exact else c.stem in path.stem)]
    return max(hits, key=lambda c: len(c.stem)) if hits else None


def _match_by_content(path: Path, courses: Sequence[CourseNotebook]) -> CourseNotebook | None:
    notebook = read_notebook(path)
    if notebook.problem is not None:
        return None
    ids = {c.id for c in notebook.cells}
    defined: set[str] = set()
    for _, tree in [] if too_long(notebook) else code_cells(notebook):  # too long: by its cell ids alone
        if isinstance(tree, ast.Module):
            defined |= bound_names(tree)
    scores = [(len(ids & set(c.answer_cells.values())) + len(defined & set(c.exercises)), c) for c in courses]
    best = max(scores, key=lambda s: s[0], default=(0, None))
    return best[1] if best[0] > 0 else None


def _learner_from_file(path: Path, course: CourseNotebook | None) -> str:
    if course is None:
        return path.stem
    rest = path.stem.replace(course.stem, " ").strip(" _-.")
    return rest or path.parent.name


def add_notebook(learner: Learner, course: CourseNotebook, path: Path) -> None:
    """Give ``learner`` the notebook ``path`` for ``course``; of two, the exactly named, else the newest."""
    previous = learner.files.get(course.name)
    if previous is None:
        learner.files[course.name] = path
        return
    # two files for one notebook: the exactly named one, else the newest, is graded
    def rank(p: Path) -> tuple[bool, float]:
        return (p.name == course.name, p.stat().st_mtime)

    chosen, other = (path, previous) if rank(path) > rank(previous) else (previous, path)
    learner.files[course.name] = chosen
    learner.notes.append(f"Both {chosen.name} and {other.name} look like {course.name}; {chosen.name} was graded.")


def link_note(path: Path) -> str:
    """The note for a symbolic link met in a submission: never followed, since it could point anywhere
    the grader can read (the solutions, another learner's folder)."""
    return f"{path.name} is a symbolic link; links are not followed, so it was not graded."


def skipped_note(path: Path) -> str | None:
    """Why ``path``, found in a learner's folder, is not graded; None for a notebook file to grade."""
    if path.is_symlink():
        return link_note(path)
    if path.name.startswith("."):
        return (f"{path.name} was not graded: its name starts with a dot, which hides it"
                + (" (rename it to have it graded)." if path.suffix == ".ipynb" else "."))
    if path.is_dir() and path.suffix == ".ipynb":
        return None  # a folder named like a notebook: given to its notebook, which is flagged as unreadable
    if path.is_dir():
        return (f"{path.name}/ is a folder with no notebook in it for the grader (empty, or deeper than {MAX_DEPTH} "
                "folders).")
    if path.suffix != ".ipynb":
        return f"{path.name} is not a notebook; it was not graded."
    if not path.is_file():
        return f"{path.name} is not a regular file; it was not graded."
    return None


MAX_DEPTH = 3  # folders inside a learner's folder that are looked into
SKIPPED_FOLDERS = ("__MACOSX",)  # what a zip tool adds beside the files


def folder_entries(folder: Path, depth: int = MAX_DEPTH) -> list[Path]:
    """Every entry of a learner's folder, and of the folders in it down to ``depth`` levels, in a
    stable order. Links and hidden folders are listed, never entered (they get a note)."""
    found = []
    try:
        entries = sorted(folder.iterdir())
    except OSError:  # a folder the grader may not read: listed, so that it gets a note
        return [folder]
    for path in entries:
        real_dir = path.is_dir() and not path.is_symlink()
        named_like_a_notebook = path.suffix == ".ipynb"  # listed, so that its notebook is flagged, not "not submitted"
        if (real_dir and depth > 0 and not path.name.startswith(".") and path.name not in SKIPPED_FOLDERS
                and not named_like_a_notebook):
            inside = folder_entries(path, depth - 1)
            found += inside or [path]  # an empty folder is listed, so that it gets a note
        elif not (real_dir and path.name in SKIPPED_FOLDERS):
            found.append(path)
    return found


def has_notebooks(folder: Path) -> bool:
    """True when ``folder`` holds a notebook, directly or in a folder :func:`folder_entries` looks into."""
    return any(p.suffix == ".ipynb" for p in folder_entries(folder))


def unrecognised(learner: Learner, path: Path) -> None:
    """Note a file of the learner's that is none of the exercise notebooks (and keep a notebook's
    name, so that the exercises it may have replaced are flagged)."""
    learner.notes.append(f"{path.name} is not one of the exercise notebooks; it was not graded.")
    if path.suffix == ".ipynb":
        learner.instead.append(path.name)


def same_names(learners: Sequence[Learner]) -> None:
    """A note for learners who share a name but came from different places: they stay apart."""
    by_name: dict[str, list[Learner]] = {}
    for learner in learners:
        by_name.setdefault(learner.name.lower(), []).append(learner)
    for group in by_name.values():
        if len(group) > 1:
            for learner in group:
                learner.notes.append(f"{len(group)} submissions are named {learner.name!r}; they come from different "
                                     "folders or LMS ids and are graded as different learners (check that they are).")


def discover(paths: Sequence[Path], courses: Sequence[CourseNotebook]) -> list[Learner]:
    """Learners and their notebooks from the SUBMISSION arguments, in a stable order.

    Symbolic links are never followed, whether given on the command line, as a learner's folder or
    inside one: each is named in a note of the learner it would have belonged to. Every other
    entry of a learner's folder that is not graded is named in a note too.
    """
    learners: dict[tuple[str, str], Learner] = {}  # by where they came from and name: never merged by name alone

    def learner(where: Path, name: str) -> Learner:
        return learners.setdefault((str(where.absolute()), name), Learner(name, ""))

    def add_folder(folder: Path, name: str) -> None:
        owner = learner(folder, name)
        for path in folder_entries(folder):  # notebooks in the learner's own subfolders are found too
            why = skipped_note(path)
            course = None if why else match_course(path, courses)
            if why:
                owner.notes.append(why)
            elif course is None:
                unrecognised(owner, path)
            else:
                add_notebook(owner, course, path)

    for path in paths:
        if path.is_symlink():  # a learner folder or notebook given as a link: refused like any other
            learner(path, path.stem if path.suffix == ".ipynb" else path.name).notes.append(link_note(path))
        elif path.is_file():
            course = match_course(path, courses)
            name = _learner_from_file(path, course)
            if course is None:
                unrecognised(learner(path.parent, name), path)
            else:
                add_notebook(learner(path.parent, name), course, path)
        elif path.is_dir():
            if any(path.glob("*.ipynb")):
                add_folder(path, path.resolve().name)
            else:
                for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
                    if sub.is_symlink():  # a learner folder that is a link (to solutions/, say)
                        learner(sub, sub.name).notes.append(link_note(sub))
                    elif has_notebooks(sub):
                        add_folder(sub, sub.name)
        else:
            raise FileNotFoundError(f"{path}: no such notebook or folder")
    same_names(list(learners.values()))
    return assign_keys(list(learners.values()))


def assign_keys(learners: list[Learner]) -> list[Learner]:
    """Give every learner a unique, file-safe key (the LMS id joins the name when there is one);
    returns them sorted by key."""
    keys: set[str] = set()
    for learner in learners:
        base = safe_key(f"{learner.name}_{learner.lms_id}" if learner.lms_id else learner.name)
        key, n = base, 2
        while key.lower() in keys:
            key, n = f"{base}-{n}", n + 1
        keys.add(key.lower())
        learner.key = key
    return sorted(learners, key=lambda lr: lr.key.lower())
