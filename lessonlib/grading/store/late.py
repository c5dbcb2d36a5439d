"""Late work: an assignment's late policy applied to a total, with the sentence that explains it.

Policies (``assignments.late_policy``):

- ``none``: lateness is recorded and said, never deducted.
- ``zero``: any work submitted after the due date gets 0.
- ``per_day``: ``penalty_per_day`` (a fraction of the assignment's points possible) is deducted for
  every started day after the due date, and no deduction takes the score below ``late_floor`` (a
  fraction of the points possible, not of the learner's score), unless it was below it already
  (the floor never raises a score); every sentence names what the fractions are of::

      days     = ceil((submitted - due) / 1 day)            (0 when on time)
      deducted = min(penalty_per_day * days * max_points, total - min(total, late_floor * max_points))
      adjusted = total - deducted

The due date is the learner's extension when there is one, else the assignment's. When the
submission time is unknown but the LMS marks the work late, ``zero`` still applies (late is late)
and ``per_day`` deducts nothing, saying why: the number of days is not known. A learner with an
extension whose submission time is unknown is not penalised: the LMS's late flag was measured
against the assignment's due date, not the extended one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

POLICIES = ("none", "zero", "per_day")
DAY = timedelta(days=1)


@dataclass(frozen=True)
class LatePolicy:
    """How an assignment treats late work."""

    kind: str = "none"
    penalty_per_day: float = 0.0  # a fraction of the points possible, per started day
    floor: float = 0.0  # a fraction of the points possible: no deduction goes below it

    def __post_init__(self) -> None:
        if self.kind not in POLICIES:
            raise ValueError(f"late policy {self.kind!r} is not one of {', '.join(POLICIES)}")
        if not 0 <= self.penalty_per_day <= 1 or not 0 <= self.floor <= 1:
            raise ValueError(f"the penalty per day ({self.penalty_per_day}) and the floor ({self.floor}) are "
                             "fractions of the points possible, from 0 to 1 (0.1 is 10 %)")

    def describe(self) -> str:
        if self.kind == "zero":
            return "work submitted after the due date gets 0"
        if self.kind == "per_day":
            floor = (f"; no deduction takes a score below {self.floor:.0%} of the assignment's points possible"
                     if self.floor else "")
            return (f"{self.penalty_per_day:.0%} of the assignment's points possible is deducted per started day "
                    f"late{floor}")
        return "late work is not penalised"


@dataclass(frozen=True)
class LateAdjustment:
    """The late policy applied to one learner's total."""

    points: float  # the adjusted total
    raw_points: float
    deducted: float
    days_late: int | None  # None: late by the LMS's word, at an unknown time
    due_at: datetime | None  # the due date that applied (the extension's, if any)
    sentence: str  # for feedback and the summary

    @property
    def late(self) -> bool:
        return self.days_late is None or self.days_late > 0


def days_late(submitted: datetime, due: datetime) -> int:
    """Started days after the due date: 1 second late is 1 day, 24 hours and 1 second are 2."""
    if submitted <= due:
        return 0
    return math.ceil((submitted - due) / DAY)


def _pts(x: float) -> str:
    return f"{round(x, 2):g}"


def late_adjusted(total: float, max_points: float, policy: LatePolicy, *, due: datetime | None,
                  submitted: datetime | None, extension: datetime | None = None,
                  lms_late: bool = False, source: str = "") -> LateAdjustment:
    """The late-adjusted total and a sentence saying how it was computed (see the module docstring);
    ``source`` names where the submission time comes from ("the zip entry of the LMS download")."""
    due_at = extension or due
    said = (["the due date of the learner's extension"] if extension else []) + (
        [f"time from {source}: {submitted.isoformat(timespec='minutes')}"] if source and submitted else [])
    moved = f" ({'; '.join(said)})" if said else ""

    def result(points: float, days: int | None, sentence: str) -> LateAdjustment:
        return LateAdjustment(round(points, 4), total, round(total - points, 4), days, due_at, sentence)

    if submitted is not None and due_at is not None:
        days: int | None = days_late(submitted, due_at)
    elif lms_late and extension is not None:  # the LMS's flag is against the assignment's due date
        return result(total, 0, f"The LMS marks this submission late, but against the assignment's due date: with "
                                f"an extension to {extension.isoformat(timespec='minutes')} and the submission "
                                "time not known, nothing is deducted.")
    elif lms_late:
        days = None
    else:
        return result(total, 0, "")  # no due date or no time, and the LMS does not say it is late
    if days == 0:
        return result(total, 0, f"Submitted on time{moved}." if due_at else "")
    when = (f"{days} day{'s' if days != 1 else ''} after the due date{moved}" if days is not None
            else "late according to the LMS (the submission time is not known)")
    if policy.kind == "none":
        return result(total, days, f"Submitted {when}; late work is not penalised.")
    if policy.kind == "zero":
        return result(0.0, days, f"Submitted {when}; late work gets 0, so {_pts(total)} of {_pts(max_points)} "
                                 "points became 0.")
    if days is None:
        return result(total, None, f"Submitted {when}; without the time, no per-day deduction was made.")
    penalty = policy.penalty_per_day * days * max_points
    floor = min(total, policy.floor * max_points)
    adjusted = max(total - penalty, floor)
    sentence = (f"Submitted {when}; the late policy deducts {policy.penalty_per_day:.0%} of the "
                f"{_pts(max_points)} points possible per started day late, {_pts(penalty)} points in all")
    floor_words = (f"{policy.floor:.0%} of the points possible ({_pts(policy.floor * max_points)} of "
                   f"{_pts(max_points)} points)")
    if policy.floor and total <= policy.floor * max_points:
        sentence += f", but a score at or below {floor_words} is not lowered: {_pts(total)} stays"
    elif adjusted > total - penalty:
        sentence += f", but no deduction takes a score below {floor_words}: {_pts(total)} became {_pts(adjusted)}"
    else:
        sentence += f", so {_pts(total)} became {_pts(adjusted)}"
    return result(adjusted, days, sentence + ".")
