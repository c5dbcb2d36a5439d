"""The instructor guide's session plans, timed from the sections they name.

A plan is a ``### N minutes...`` heading under "## Session plans" in docs/instructor-guide.md,
followed by a table whose rows read ``| A-B | what | where |``. The *where* cell names notebook
sections as a notebook number and quoted section titles (without section number or route mark):
``01 "The formula, with shapes", "The first fixture, stage by stage"; 02 "The causality test"``.
A row that names no section is an activity (an exercise in class, an exit question) and takes the
minutes it states.

Each named section is timed with tools/reading_times.py at the in-class pace
(:data:`reading_times.IN_CLASS`); the first row of a plan that uses a notebook also pays for that
notebook's header (its set-up cell runs before anything else). A row fits when its sections' minutes,
rounded to the nearest minute, are at most its span; a plan fits when its rows run from 0 to N
without gap or overlap and each row fits.

``python tools/session_plans.py`` prints every plan, row by row; tests/test_session_plans.py fails
when a plan names a section that does not exist or does not fit its slot.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reading_times as rt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "instructor-guide.md"
PLAN_HEADING = re.compile(r"^### (\d+) minutes\b.*$", re.MULTILINE)
SUBSECTION = re.compile(r"^#{2,3} ", re.MULTILINE)
ROW = re.compile(r"^\|\s*(\d+)-(\d+)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
GROUP = re.compile(r"\b(\d\d)\s+((?:\"[^\"]+\"(?:,\s*)?)+)")
TITLE = re.compile(r"\"([^\"]+)\"")


class PlanError(ValueError):
    """A plan that names a section no notebook has, or whose rows do not tile its slot."""


@dataclass(frozen=True)
class Row:
    start: int
    end: int
    what: str
    sections: tuple[rt.Section, ...]  # the sections it names, and the headers it pays for
    named: tuple[tuple[str, str], ...]  # (notebook number, title) as written

    @property
    def span(self) -> int:
        return self.end - self.start

    @property
    def minutes(self) -> float:
        """In-class minutes of its sections (0 for an activity)."""
        return sum(s.minutes(rt.IN_CLASS) for s in self.sections)

    @property
    def fits(self) -> bool:
        return round(self.minutes) <= self.span


@dataclass(frozen=True)
class Plan:
    title: str
    slot: int
    rows: tuple[Row, ...]

    @property
    def section_minutes(self) -> float:
        """In-class minutes of the sections it names."""
        return sum(row.minutes for row in self.rows)

    @property
    def activity_minutes(self) -> int:
        """Minutes of the rows that name no section (exercises in class, exit questions)."""
        return sum(row.span for row in self.rows if not row.sections)

    def problems(self) -> list[str]:
        """Why the plan does not fit its slot (empty when it does)."""
        found = []
        edge = 0
        for row in self.rows:
            if row.start != edge:
                found.append(f"row {row.start}-{row.end} starts at {row.start}, the row before ends at {edge}")
            edge = row.end
            if not row.fits:
                found.append(f"row {row.start}-{row.end} ({row.what[:60]!r}) has {row.span} min for "
                             f"{row.minutes:.1f} min of sections")
        if edge != self.slot:
            found.append(f"the rows end at {edge}, the slot at {self.slot}")
        return found

    def sections(self) -> list[rt.Section]:
        return [s for row in self.rows for s in row.sections if s.heading is not None]


def _notebook(number: str, root: Path) -> Path:
    found = sorted((root / "notebooks").glob(f"{number}_*.ipynb"))
    if not found:
        raise PlanError(f"no notebook numbered {number}")
    return found[0]


def _row(line: str, root: Path, headers_paid: set[str], cache: dict[str, list[rt.Section]]) -> Row | None:
    match = ROW.match(line)
    if match is None:
        return None
    start, end, what, where = int(match[1]), int(match[2]), match[3], match[4]
    chosen: list[rt.Section] = []
    named: list[tuple[str, str]] = []
    for number, titles in GROUP.findall(where):
        path = _notebook(number, root)
        parts = cache.setdefault(number, rt.sections(path))
        if number not in headers_paid:
            headers_paid.add(number)
            chosen.append(parts[0])
        for title in TITLE.findall(titles):
            section = next((s for s in parts if s.heading is not None and s.title == title), None)
            if section is None:
                raise PlanError(f"{path.name} has no section titled {title!r}")
            chosen.append(section)
            named.append((number, title))
    return Row(start, end, what, tuple(chosen), tuple(named))


def plans(guide: Path = GUIDE, root: Path = ROOT) -> list[Plan]:
    """Every ``### N minutes`` plan of the guide's "Session plans" section."""
    text = guide.read_text(encoding="utf-8")
    start = text.index("\n## Session plans\n")
    end = text.find("\n## ", start + 1)
    body = text[start:end if end > 0 else None]
    cache: dict[str, list[rt.Section]] = {}
    found = []
    for heading in PLAN_HEADING.finditer(body):
        following = SUBSECTION.search(body, heading.end())  # a plan runs to the next heading
        block = body[heading.end():following.start() if following else None]
        paid: set[str] = set()
        rows = [r for line in block.splitlines() if (r := _row(line, root, paid, cache)) is not None]
        found.append(Plan(heading.group(0).removeprefix("### "), int(heading.group(1)), tuple(rows)))
    return found


def main() -> int:
    pace = rt.IN_CLASS
    print(f"in-class pace: {pace.words_per_minute:g} words a minute, code at {pace.code_factor:g} of its "
          f"self-paced weight, {pace.predict:g} per Predict, {pace.explorer:g} per explorer")
    for plan in plans():
        print(f"\n{plan.title}: sections {plan.section_minutes:.1f} min and activities {plan.activity_minutes} min, "
              f"in {plan.slot} min")
        for row in plan.rows:
            kind = f"{row.minutes:5.1f} min of sections" if row.sections else "activity"
            print(f"  {row.start:>3}-{row.end:<3} {kind:22s} {row.what[:70]}")
        for problem in plan.problems():
            print(f"  DOES NOT FIT: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
