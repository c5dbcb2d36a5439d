"""The late policy of the course gradebook: days counted per started day, the floor, zero, none."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from lessonlib.grading import store

DUE = datetime(2026, 3, 1, 17, 0, tzinfo=timezone.utc)


def _late(total: float, policy: store.LatePolicy, submitted: datetime | None, **kw) -> store.LateAdjustment:
    return store.late_adjusted(total, 10.0, policy, due=DUE, submitted=submitted, **kw)


def test_days_are_counted_per_started_day() -> None:
    assert store.days_late(DUE, DUE) == 0
    assert store.days_late(DUE - timedelta(hours=5), DUE) == 0
    assert store.days_late(DUE + timedelta(seconds=1), DUE) == 1
    assert store.days_late(DUE + timedelta(days=1), DUE) == 1
    assert store.days_late(DUE + timedelta(days=1, seconds=1), DUE) == 2


def test_per_day_penalty_and_its_floor() -> None:
    policy = store.LatePolicy("per_day", 0.1, floor=0.5)
    on_time = _late(8.0, policy, DUE)
    assert (on_time.points, on_time.late) == (8.0, False)
    one = _late(8.0, policy, DUE + timedelta(minutes=1))
    assert (one.points, one.days_late, one.deducted) == (7.0, 1, 1.0)
    assert "1 day after the due date" in one.sentence and "8 became 7" in one.sentence
    three = _late(8.0, policy, DUE + timedelta(days=2, hours=1))
    assert (three.points, three.days_late) == (5.0, 3)
    floored = _late(8.0, policy, DUE + timedelta(days=9))
    assert floored.points == 5.0 and "below 50%" in floored.sentence  # 8 - 9 would be -1: the floor is 5
    low = _late(3.0, policy, DUE + timedelta(days=9))
    assert low.points == 3.0 and "not lowered: 3 stays" in low.sentence  # under the floor: never raised nor lowered
    no_floor = _late(3.0, store.LatePolicy("per_day", 0.25), DUE + timedelta(days=2))
    assert no_floor.points == 0.0 and no_floor.deducted == 3.0  # a score never goes below 0


def test_zero_policy_and_none_policy() -> None:
    assert _late(9.0, store.LatePolicy("zero"), DUE).points == 9.0
    late = _late(9.0, store.LatePolicy("zero"), DUE + timedelta(seconds=1))
    assert late.points == 0.0 and "gets 0" in late.sentence
    assert _late(9.0, store.LatePolicy("zero"), None, lms_late=True).points == 0.0  # late by the LMS's word
    kept = _late(9.0, store.LatePolicy("none"), DUE + timedelta(days=3))
    assert kept.points == 9.0 and kept.days_late == 3 and "not penalised" in kept.sentence
    unknown = _late(9.0, store.LatePolicy("per_day", 0.1), None, lms_late=True)
    assert unknown.points == 9.0 and "without the time" in unknown.sentence
    with pytest.raises(ValueError, match="fractions of the points possible"):
        store.LatePolicy("per_day", 10)
