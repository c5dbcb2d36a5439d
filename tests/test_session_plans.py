"""The instructor guide's session plans fit their slots, timed from the sections they name.

tools/session_plans.py reads every ``### N minutes`` plan under "Session plans" and times each row's
sections at the in-class pace of tools/reading_times.py. Each plan must name only sections that exist,
and its rows must tile 0 to N with every row's sections fitting its minutes. The plans the course
promises cover what they say: the lesson's heart is on the lesson route, the 90-minute lesson plan is
the whole lesson route in order, the two 90-minute sessions are the unit's first half (the core paths
of 00 to 03), and the demonstration of 07 shows its whole core path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import reading_times as rt  # noqa: E402
import session_plans as sp  # noqa: E402

PLANS = {plan.title: plan for plan in sp.plans()}
HEART = "60 minutes: the lesson's heart"
LESSON = "90 minutes: the lesson route, section by section"
FIRST_HALF = ("90 minutes, first of two: the unit from 00 to the causality test",
              "90 minutes, second of two: the rest of 02, and 03")
CAPSTONE = "60 minutes: a demonstration of 07"


def _key(section: rt.Section) -> tuple[str, str]:
    return section.notebook, section.title


def _route(route: str, prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
    return [_key(s) for s in rt.route(route, ROOT).sections() if s.heading and s.notebook.startswith(prefixes)]


def test_the_promised_plans_are_there():
    for title in (HEART, LESSON, *FIRST_HALF, CAPSTONE):
        assert title in PLANS, f"the guide has no plan '### {title}'; it has {sorted(PLANS)}"


@pytest.mark.parametrize("title", list(PLANS))
def test_a_plan_fits_its_slot(title):
    plan = PLANS[title]
    problems = plan.problems()
    assert plan.rows, f"{title}: no rows"
    assert not problems, f"{title}:\n" + "\n".join(problems)


def test_the_lessons_heart_is_on_the_lesson_route():
    lesson = set(_route(rt.LESSON, ("0",)))
    named = [_key(s) for s in PLANS[HEART].sections()]
    assert set(named) <= lesson, f"off the lesson route: {sorted(set(named) - lesson)}"


def test_the_lesson_plan_is_the_lesson_route_in_order():
    named = [_key(s) for s in PLANS[LESSON].sections()]
    assert named == _route(rt.LESSON, ("0",)), "the 90-minute lesson plan names the lesson route's sections in order"


def test_the_two_sessions_are_the_units_first_half():
    named = [_key(s) for title in FIRST_HALF for s in PLANS[title].sections()]
    assert named == _route(rt.UNIT, ("00", "01", "02", "03")), (
        "the two 90-minute sessions name the unit sections of 00 to 03, each once, in order")


def test_the_demonstration_shows_the_capstones_core_path():
    named = [_key(s) for s in PLANS[CAPSTONE].sections()]
    assert named == _route(rt.UNIT, ("07",)), "the demonstration of 07 names its core sections in order"


GUIDE = """# Guide

## Session plans

### 10 minutes: a tiny plan

| minutes | what | where |
|---|---|---|
| 0-{end} | the formula | 01 "The formula, with shapes"{more} |
| {end}-10 | an exit question | `exercises/` |

### Opening the next session (10-20 minutes)

| minutes | what | where |
|---|---|---|
| 0-2 | not a plan of sections | `class-report.html` |

## Next
"""


@pytest.mark.parametrize("end, more, fits", [
    (6, "", True),  # header and section: about 4.3 minutes in class
    (3, "", False),  # the row is too short for its section
    (6, ', "The first fixture, stage by stage"', False),  # an overfilled row
])
def test_a_row_that_needs_more_than_its_minutes_does_not_fit(tmp_path, end, more, fits):
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE.format(end=end, more=more))
    (plan,) = sp.plans(guide, ROOT)
    assert (not plan.problems()) is fits, plan.problems()


def test_a_plan_that_names_a_missing_section_is_refused(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE.format(end=6, more=', "No such section"'))
    with pytest.raises(sp.PlanError, match="No such section"):
        sp.plans(guide, ROOT)
