"""A learner as the grader finds them: a display name, a file-safe key, their notebooks, and what the
LMS said of them. A ground module: finding learners (``lms``), storing them (``store``), grading
them (``run``) and writing their files (``reports``) all pass this type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


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
