"""LMS bulk downloads: who handed in which notebook, read from Canvas and Moodle names.

Canvas (Assignments, "Download Submissions") gives one folder of files named::

    name[_LATE]_userid_submissionid_originalname[-N].ipynb
    smithbob_LATE_340934_208490284_01_scaling-1.ipynb

``-N`` is Canvas's mark on the N-th resubmission of a file with the same name. Moodle ("Download
all submissions") gives one folder per learner, ``Full Name_participantid_assignsubmission_file_/
original.ipynb`` (or, with folders turned off, files named ``Full Name_participantid_assignsubmission_
file_original.ipynb``); a file handed in again under the same name becomes ``original (1).ipynb``.
Notebooks in the folders of a learner's folder are found too.

One rule for both LMSs picks the notebook graded when a learner handed in several for one
exercise notebook: the highest resubmission number (Canvas's ``-N``, Moodle's `` (N)``), else the
newest file. The feedback names every file and the one graded.

The download's ``.zip`` itself may be given: it is unpacked into the grader's folder (``unzip.py``)
when the caller says where, else refused with a message saying to unzip it.

Learners are keyed on the LMS id (the Canvas user id, the Moodle participant id), never on the
name, so one learner's files stay together whatever they are called. Moodle's flat names are split
on the participant id suffix from the right (a full name may itself hold ``_1002_assignsubmission_
file``), and the learner's own file name must then be a course notebook's name exactly (or be
recognised by its content); a name that splits more than one way could belong to two participants,
so it is listed as not attributed, never given to either. A file that follows neither
naming cannot be attributed: it is listed (:class:`Unattributed`), never dropped or merged into
someone. Folders that are not LMS downloads are read as before (:func:`submissions.discover`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path

from lessonlib.grading.lms.submissions import (
    Learner,
    add_notebook,
    assign_keys,
    discover,
    folder_entries,
    link_note,
    match_course,
    same_names,
    skipped_note,
    unrecognised,
)
from lessonlib.grading.lms.times import stamp_file_times
from lessonlib.grading.lms.unzip import DownloadError, unpack
from lessonlib.grading.run.notebooks import CourseNotebook

CANVAS_FILE = re.compile(r"^(?P<name>[^_]+)(?P<late>_LATE)?_(?P<id>\d+)_(?P<submission>\d+)_(?P<file>.+)$")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$")
MOODLE_SUFFIX = re.compile(r"_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_")  # between the name and the file
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.+)$")
RESUBMISSION = re.compile(r"^(?P<base>.+?)(?:-(?P<n>\d+)| \((?P<copy>\d+)\))$")  # Canvas -N, Moodle " (N)"
RULE = "the highest resubmission number, else the newest file"


@dataclass(frozen=True)
class Unattributed:
    """A file in an LMS download that names no learner."""

    path: Path
    reason: str


@dataclass
class Found:
    """Every learner found in the SUBMISSION arguments, and the files no learner could be given."""

    learners: list[Learner]
    unattributed: list[Unattributed] = field(default_factory=list)
    layouts: dict[str, str] = field(default_factory=dict)  # SUBMISSION folder -> canvas | moodle


@dataclass(frozen=True)
class MoodleName:
    """One way to read a Moodle flat file name: the participant's full name, id and own file name."""

    name: str
    id: str
    file: str


def moodle_file_names(file_name: str) -> list[MoodleName]:
    """Every way ``file_name`` splits into ``Full Name_id_assignsubmission_plugin_file``, the split on
    the rightmost suffix first. One way: the file is that participant's. Several: it could be
    either's (a full name, or a learner's own file name, holding such a suffix)."""
    found = []
    for start in range(1, len(file_name)):  # every place a suffix starts, overlapping ones included
        match = MOODLE_SUFFIX.match(file_name, start)
        if match and match.end() < len(file_name):
            found.append(MoodleName(file_name[:start], match["id"], file_name[match.end():]))
    return found[::-1]


def check_submissions(paths: Sequence[Path]) -> None:
    """Refuse, before any work, a SUBMISSION that is not a notebook, a zip or a folder (a readme, a PDF),
    one that does not exist, and a folder named like a notebook (a notebook saved as a folder):
    DownloadError, naming it."""
    for path in map(Path, paths):
        if path.is_symlink():
            continue  # refused with a note for the learner it would have been (submissions.discover)
        if not path.exists():
            raise DownloadError(f"{path}: no such notebook, zip or folder")
        if path.is_dir() and path.suffix.lower() == ".ipynb":
            raise DownloadError(f"{path} is a folder named like a notebook, not a notebook file: give the .ipynb "
                                "file itself, or the learner's folder that holds it")
        if path.is_file() and path.suffix.lower() not in (".ipynb", ".zip"):
            raise DownloadError(f"{path} is not a notebook (.ipynb), the LMS's download (.zip) or a folder; give "
                                "learners' notebooks, a folder per learner, a folder of such folders, or the zip")


def _visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _hidden_notebooks(folder: Path) -> list[Unattributed]:
    """Notebooks of an LMS download whose names start with a dot: no LMS names a file so, so they
    name no learner; listed rather than skipped in silence."""
    return [Unattributed(p, "a hidden file (its name starts with a dot), not named as the LMS names submissions")
            for p in sorted(folder.glob(".*.ipynb"))]


def layout(folder: Path) -> str | None:
    """"canvas" or "moodle" when ``folder`` is that LMS's bulk download, else None (links are not looked into)."""
    entries = [p for p in _visible(folder) if not p.is_symlink()]
    if any(p.is_file() and p.suffix == ".ipynb" and CANVAS_FILE.match(p.stem) for p in entries):
        return "canvas"
    if any(p.is_dir() and MOODLE_FOLDER.match(p.name) for p in entries) or any(
            p.is_file() and MOODLE_FILE.match(p.name) for p in entries):
        return "moodle"
    return None


@dataclass
class _Version:
    path: Path
    original: str  # the learner's own file name, without the resubmission mark
    number: int  # 0 for the first submission, N for "-N" or " (N)"

    def rank(self) -> tuple[int, float, str]:
        """The order of :data:`RULE`: resubmission number, then file time (then name, to be stable)."""
        try:
            mtime = self.path.lstat().st_mtime
        except OSError:
            mtime = 0.0
        return self.number, mtime, self.path.name


@dataclass
class _Entry:
    learner: Learner
    versions: dict[str, list[_Version]] = field(default_factory=dict)  # course notebook -> versions


def _version(stem: str, courses: Sequence[CourseNotebook]) -> tuple[str, int]:
    """(original stem, resubmission number): "01_scaling-2" is the second resubmission of 01_scaling,
    unless a course notebook is really called "...-2"."""
    match = RESUBMISSION.match(stem)
    if match is None or any(c.stem == stem for c in courses):
        return stem, 0
    return match["base"], int(match["n"] or match["copy"])


def _attribute(entries: dict[str, _Entry], lms_id: str, name: str, path: Path, original: str,
               courses: Sequence[CourseNotebook], *, late: bool = False, exact: bool = False) -> None:
    entry = entries.setdefault(lms_id, _Entry(Learner(name, "", lms_id=lms_id)))
    learner = entry.learner
    learner.late = learner.late or late
    why = skipped_note(path)
    if why:  # a link, a hidden file, a folder, not a notebook, not a regular file
        learner.notes.append(why)
        return
    stem, number = _version(Path(original).stem, courses)
    course = match_course(path, courses, stem, exact=exact)
    if course is None:
        unrecognised(learner, path)
        return
    entry.versions.setdefault(course.name, []).append(_Version(path, f"{stem}.ipynb", number))


def _settle(entry: _Entry, courses: Sequence[CourseNotebook]) -> Learner:
    """Pick one notebook per exercise notebook by :data:`RULE` and say so in the learner's notes."""
    learner = entry.learner
    by_name = {c.name: c for c in courses}
    for course_name, versions in entry.versions.items():
        ordered = sorted(versions, key=_Version.rank)
        chosen = ordered[-1]
        if len(versions) > 1:
            names = ", ".join(v.path.name for v in ordered)
            learner.notes.append(f"{course_name} was submitted {len(versions)} times ({names}); the latest, "
                                 f"{chosen.path.name}, was graded ({RULE}).")
        add_notebook(learner, by_name[course_name], chosen.path)
    if learner.late:
        learner.notes.append("The LMS marks this submission late.")
    return learner


def _read_canvas(folder: Path, courses: Sequence[CourseNotebook], entries: dict[str, _Entry],
                 unattributed: list[Unattributed]) -> None:
    unattributed += _hidden_notebooks(folder)
    for path in _visible(folder):
        match = CANVAS_FILE.match(path.stem) if path.is_file() or path.is_symlink() else None
        if match is None:
            what = "a folder" if path.is_dir() else "a file"
            unattributed.append(Unattributed(path, f"{what} not named as Canvas names submissions "
                                                   "(name[_LATE]_userid_submissionid_file)"))
            continue
        _attribute(entries, f"canvas:{match['id']}", match["name"], path, match["file"] + path.suffix, courses,
                   late=bool(match["late"]))


def _read_moodle(folder: Path, courses: Sequence[CourseNotebook], entries: dict[str, _Entry],
                 unattributed: list[Unattributed]) -> None:
    unattributed += _hidden_notebooks(folder)
    for path in _visible(folder):
        if path.is_symlink():  # a learner's folder or file as a link: the learner it names gets a note
            match = MOODLE_FOLDER.match(path.name) or MOODLE_FILE.match(path.name)
            if match is None:
                unattributed.append(Unattributed(path, "a symbolic link (links are not followed)"))
            else:
                key = f"moodle:{match['id']}"
                entries.setdefault(key, _Entry(Learner(match["name"], "", lms_id=key))).learner.notes.append(
                    link_note(path))
            continue
        if path.is_dir():
            match = MOODLE_FOLDER.match(path.name)
            files = sorted(path.iterdir()) if match else _visible(path)  # a learner's hidden files get a note
            if match is None:
                unattributed += [Unattributed(f, "in a folder not named as Moodle names submissions "
                                                 "(Full Name_id_assignsubmission_file_)") for f in files]
                if not files:
                    unattributed.append(Unattributed(path, "an empty folder not named as Moodle names submissions"))
                continue
            key = f"moodle:{match['id']}"
            entries.setdefault(key, _Entry(Learner(match["name"], "", lms_id=key)))
            for file in files:  # links and hidden entries go to _attribute, which notes them for the learner
                inside = folder_entries(file) if file.is_dir() and not file.is_symlink() else [file]
                for found in inside:  # a learner's own folders are looked into
                    _attribute(entries, key, match["name"], found, found.name, courses)
            continue
        readings = moodle_file_names(path.name)
        if not readings:
            unattributed.append(Unattributed(path, "a file not named as Moodle names submissions "
                                                   "(Full Name_id_assignsubmission_file_original)"))
            continue
        if len({r.id for r in readings}) > 1:
            who = " or ".join(f"participant {r.id} ({r.name!r}, file {r.file!r})" for r in readings)
            unattributed.append(Unattributed(path, f"its name could belong to {who}: given to neither; check "
                                                   "Moodle's participants and grade the file by hand"))
            continue
        reading = readings[0]
        _attribute(entries, f"moodle:{reading.id}", reading.name, path, reading.file, courses, exact=True)


def _unzipped(paths: Sequence[Path], unpack_to: Path | None, zone: tzinfo | None,
              unpacked: list[Path]) -> list[Path]:
    """The SUBMISSION arguments with every ``.zip`` replaced by the folder it is unpacked into (also
    added to ``unpacked``); the entries' times are read in ``zone``."""
    result = []
    for n, path in enumerate(paths):
        if not (path.suffix.lower() == ".zip" and path.is_file() and not path.is_symlink()):
            result.append(path)
            continue
        if unpack_to is None:
            raise DownloadError(f"{path} is a zip file: unzip it first (unzip {path.name} -d {path.stem}) and pass "
                                "the folder")
        folder = unpack(path, Path(unpack_to) / f"{n}-{path.stem}", zone=zone)
        unpacked.append(folder)
        result.append(folder)
    return result


def find_learners(paths: Sequence[Path], courses: Sequence[CourseNotebook], *,
                  unpack_to: Path | None = None, zone: tzinfo | None = None) -> Found:
    """Learners from the SUBMISSION arguments: LMS downloads by id, other folders and files as before.

    A SUBMISSION that is none of these is refused first (``check_submissions``). A ``.zip`` among
    them is unpacked into a fresh folder under ``unpack_to`` (refused without one: DownloadError,
    whose message says what to do). Each learner gets a submission time: the zip
    entries' (read in ``zone``, None: local time) or the files' modification time (see ``times``).
    """
    check_submissions(paths)
    unpacked: list[Path] = []
    paths = _unzipped(paths, unpack_to, zone, unpacked)
    entries: dict[str, _Entry] = {}
    unattributed: list[Unattributed] = []
    layouts: dict[str, str] = {}
    plain: list[Path] = []
    expanded: list[Path] = []
    for path in paths:  # a folder holding an LMS download (and perhaps learner folders): look inside
        folder = path.is_dir() and not path.is_symlink()
        subs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")) if folder else []
        real = [s for s in subs if not s.is_symlink()]
        if real and layout(path) is None and not any(path.glob("*.ipynb")) and any(layout(s) for s in real):
            expanded += subs  # a link among them is refused, with a note, by discover
        else:
            expanded.append(path)
    for path in expanded:
        kind = layout(path) if path.is_dir() and not path.is_symlink() else None
        if kind == "canvas":
            _read_canvas(path, courses, entries, unattributed)
        elif kind == "moodle":
            _read_moodle(path, courses, entries, unattributed)
        else:
            plain.append(path)
            continue
        layouts[str(path)] = kind
    learners = discover(plain, courses) if plain else []
    settled = [_settle(entry, courses) for entry in entries.values()]
    same_names(settled)
    learners += settled
    for learner in learners:
        learner.lms_id = learner.lms_id.split(":", 1)[-1]
    stamp_file_times(learners, unpacked)
    return Found(assign_keys(learners), unattributed, layouts)
