"""The feedback laid out as the LMSs take it back: one zip for Moodle, one for Canvas.

Only learners who came from that LMS's bulk download get a place in its zip (a plain learner
folder names no LMS id). Each zip holds the learner's ``feedback/KEY.html`` page.

- ``feedback/moodle-feedback-files.zip``: Moodle's "Upload multiple feedback files in a zip"
  (View all submissions, Grading action). One folder per participant, named as Moodle's download
  names it: ``Full Name_<participant id>_assignsubmission_file_/feedback.html``. Moodle's
  importer (mod/assign/feedback/file/importziplib.php) splits a path part on ``_`` into at most 5
  pieces and reads the second as the participant id, the third and fourth as the plugin; it takes
  both ``..._file`` (downloads since Moodle 4.1) and ``..._file_`` (earlier ones, whose importers
  need the trailing ``_``), so the trailing form works on both. Moodle's download replaces ``_``
  in a full name by a space, and so does this zip, since one more ``_`` would shift the id.
- ``feedback/canvas-reupload.zip``: Canvas's "Re-Upload Submissions" (assignment page). Files
  named as Canvas's download names them, ``name[_LATE]_<user id>_<attachment id>_feedback.html``.
  Canvas (Assignment#infer_comment_context_from_filename) takes the first two all-digit pieces as
  the user id and the id of a file of that learner's submission, and ignores a file whose ids do
  not match one; the prefix is therefore copied from the learner's latest downloaded file (the
  highest attachment id, the one most likely in the current submission). Canvas attaches each
  file to a comment "See attached file" under the name of that submitted file.

Each zip is written whole or not at all (atomically); its entries carry a fixed date, so the
same feedback gives the same bytes.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_bytes
from lessonlib.grading.lms.downloads import CANVAS_FILE, MOODLE_FILE

MOODLE_ZIP = "moodle-feedback-files.zip"
CANVAS_ZIP = "canvas-reupload.zip"
MOODLE_PLUGIN = "assignsubmission_file"
FEEDBACK_FILE = "feedback.html"
ZIP_DATE = (2020, 1, 1, 0, 0, 0)
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|_]+")


def canvas_prefix(result: r.LearnerResult) -> str | None:
    """``name[_LATE]_userid_attachmentid`` of the learner's latest downloaded Canvas file, or None."""
    found = [m for m in (CANVAS_FILE.match(Path(name).stem) for name in result.files.values())
             if m is not None and m["id"] == result.lms_id]
    if not result.lms_id or not found:
        return None
    latest = max(found, key=lambda m: int(m["submission"]))
    return f"{latest['name']}{latest['late'] or ''}_{latest['id']}_{latest['submission']}"


def origin(result: r.LearnerResult, roster_kind: str | None = None) -> str | None:
    """"canvas" or "moodle" for a learner from that LMS's download, else None.

    A Canvas learner's files carry their user id (:data:`lms.CANVAS_FILE`); a Moodle learner's
    files do not (they sit in a participant's folder) unless Moodle's flat layout named them. A
    learner with an LMS id whose files show neither is taken to come from the roster's LMS.
    """
    if not result.lms_id:
        return None
    if canvas_prefix(result) is not None:
        return "canvas"
    names = [Path(name).name for name in result.files.values()]
    if any((m := MOODLE_FILE.match(n)) and m["id"] == result.lms_id for n in names):
        return "moodle"
    if roster_kind == "canvas" or any(CANVAS_FILE.match(Path(n).stem) for n in names):
        return None
    return "moodle"


def moodle_folder(result: r.LearnerResult) -> str:
    """The participant's folder as Moodle's download names it (``Full Name_1001_assignsubmission_file_``)."""
    name = " ".join(_UNSAFE.sub(" ", result.learner).split()) or "Participant"
    return f"{name}_{result.lms_id}_{MOODLE_PLUGIN}_"


def _zip(entries: Mapping[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in sorted(entries.items()):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, text.encode("utf-8"))
    return buffer.getvalue()


def upload_entries(results: Sequence[r.LearnerResult], pages: Mapping[str, str],
                   roster_kind: str | None = None) -> dict[str, dict[str, str]]:
    """The zips' contents: {zip name: {path in the zip: HTML}}; ``pages`` maps a learner's key to its page."""
    moodle: dict[str, str] = {}
    canvas: dict[str, str] = {}
    for res in results:
        kind = origin(res, roster_kind)
        if kind == "moodle":
            moodle[f"{moodle_folder(res)}/{FEEDBACK_FILE}"] = pages[res.key]
        elif kind == "canvas":
            canvas[f"{canvas_prefix(res)}_{FEEDBACK_FILE}"] = pages[res.key]
    return {name: entries for name, entries in ((MOODLE_ZIP, moodle), (CANVAS_ZIP, canvas)) if entries}


def write_uploads(folder: Path, results: Sequence[r.LearnerResult], pages: Mapping[str, str],
                  roster_kind: str | None = None) -> list[Path]:
    """Write each LMS's zip into ``folder`` (only for an LMS some learner came from); returns their paths."""
    written = []
    for name, entries in upload_entries(results, pages, roster_kind).items():
        atomic_write_bytes(Path(folder) / name, _zip(entries))
        written.append(Path(folder) / name)
    return written
