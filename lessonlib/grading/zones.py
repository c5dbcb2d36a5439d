"""Time zones by name, as the grading commands take them: an IANA name (``Europe/Berlin``, ``UTC``)
or a fixed offset (``+01:00``, as a due date carries it). A ground module: the store and the LMS
files both read zone names, and neither imports the other for it."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{2}):(\d{2})$")


def zone_of(name: str | None) -> tzinfo | None:
    """The time zone ``name`` names: an IANA name such as Europe/Berlin, or UTC, or a fixed offset
    (``+01:00``, as a due date carries it); None for no name."""
    if not name:
        return None
    fixed = _OFFSET.match(name)
    if fixed:
        sign = 1 if fixed[1] == "+" else -1
        return timezone(sign * timedelta(hours=int(fixed[2]), minutes=int(fixed[3])))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"--timezone {name!r} is not a time zone name; give an IANA name such as Europe/Berlin, "
                         "America/New_York or UTC") from None


def offset_name(when: datetime) -> str:
    """The fixed offset of an aware time as ``zone_of`` reads it back ("+01:00")."""
    offset = when.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
