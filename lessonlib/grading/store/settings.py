"""What the course gradebook keeps once for the whole course: its time zone and the marking pages' secret.

The time zone is the one the LMS shows its local times in (zip entries, Moodle's worksheet). It is
stored the first time it matters: given with ``--timezone``, or taken from an assignment's due
date (whose offset it then is); a run that must read local times with neither is refused, since
this machine's zone may not be the LMS's. Changing it (``lessonlib timezone``) reads every stored
local time again in the new zone, each with a history row.

The marking secret numbers learners on the marking pages (``reports/marking.py``): drawn once from
the operating system's random source, kept here, never shown, so that nobody holding the roster
can work out who "Learner 3" is.
"""

from __future__ import annotations

import os
from datetime import tzinfo

from lessonlib.grading.store.assignments import reread_local_times
from lessonlib.grading.store.database import Gradebook, StoreError
from lessonlib.grading.zones import offset_name, zone_of

ZONE, SECRET = "timezone", "marking_secret"


def _meta(gradebook: Gradebook, name: str) -> str:
    row = gradebook.conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return str(row[0]) if row else ""


def time_zone(gradebook: Gradebook) -> str:
    """The course's time zone as stored ("" before it is)."""
    return _meta(gradebook, ZONE)


def set_time_zone(gradebook: Gradebook, name: str, reason: str) -> int:
    """Store ``name`` as the course's time zone (checked first), reading every stored local time again
    when it replaces another; returns how many times changed."""
    zone = zone_of(name)  # ValueError, naming what to give, for an unknown name
    old = time_zone(gradebook)
    if old == name:
        return 0
    with gradebook.transaction() as conn:
        conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (ZONE, name))
        gradebook.record("timezone", old=old or None, new=name, reason=reason)
        assert zone is not None
        return reread_local_times(gradebook, zone_of(old) if old else None, zone, name)


def due_date_zone(gradebook: Gradebook) -> str:
    """The offset of the first assignment's due date that has one ("" when none has a due date)."""
    row = gradebook.conn.execute("SELECT name, due_at FROM assignments WHERE due_at IS NOT NULL ORDER BY id").fetchone()
    if row is None:
        return ""
    from datetime import datetime

    return offset_name(datetime.fromisoformat(row["due_at"]))


def course_zone(gradebook: Gradebook, given: str | None, *, needed: bool, change: str) -> tuple[tzinfo | None, str]:
    """The zone to read this run's local times in, and its name (see the module docstring).

    ``given``: the run's ``--timezone``, stored when none is; one that differs from the stored zone
    is refused, saying to use ``change`` (the command that changes it). ``needed``: the run has local
    times to read; with no zone anywhere that is refused before any work.
    """
    stored = time_zone(gradebook)
    if given:
        if stored and stored != given:
            raise StoreError(f"the course's time zone is {stored} (stored in the gradebook), not {given}; to change "
                             f"it, which reads every stored submission time again, run: {change} {given}")
        if not stored:
            set_time_zone(gradebook, given, "given with --timezone")
        return zone_of(given), given
    if stored:
        return zone_of(stored), stored
    if not needed:
        return None, ""
    offset = due_date_zone(gradebook)
    if offset:
        set_time_zone(gradebook, offset, "taken from the due date's offset (a fixed offset: give an IANA name "
                                         "with `lessonlib timezone` where the LMS follows daylight saving time)")
        return zone_of(offset), offset
    raise StoreError("the LMS's submission times (zip entries, Moodle's worksheet) are local times, and the course "
                     "has no time zone yet: give it once with --timezone, such as --timezone Europe/Berlin (it is "
                     "stored in the course gradebook; this machine's own zone is never assumed)")


def marking_secret(gradebook: Gradebook) -> bytes:
    """The course's marking secret, drawn and stored on first use (a reader without it gets a fresh
    one for this call only)."""
    stored = _meta(gradebook, SECRET)
    if stored:
        return bytes.fromhex(stored)
    secret = os.urandom(32)
    if gradebook.lock is None:
        return secret
    with gradebook.transaction() as conn:
        conn.execute("INSERT INTO meta (name, value) VALUES (?, ?)", (SECRET, secret.hex()))
        gradebook.record("marking_secret", new="drawn", reason="numbers learners on the marking pages")
    return secret
