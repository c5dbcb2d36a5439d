"""Who an assignment expects: the learners of the roster it was graded with (``--roster``).

A course taught in sections grades each section's download as its own assignment with its own
roster; a learner is then expected only at the assignments whose roster lists them. An assignment
graded without a roster has no enrolments, and every learner of the course is expected at it.
"""

from __future__ import annotations

from collections.abc import Iterable

from lessonlib.grading.store.database import Gradebook, now


def enrol(gradebook: Gradebook, assignment: str, keys: Iterable[str]) -> list[str]:
    """Record the learners ``keys`` as enrolled in ``assignment`` (one history row for each one new);
    returns the keys that were not enrolled before. Enrolments are kept: a learner is never unenrolled."""
    added = []
    with gradebook.transaction() as conn:
        assignment_id = gradebook.assignment_id(assignment)
        for key in dict.fromkeys(keys):
            learner_id = gradebook.learner_id(key)
            cursor = conn.execute(
                "INSERT OR IGNORE INTO enrolments (assignment_id, learner_id, at, command) VALUES (?, ?, ?, ?)",
                (assignment_id, learner_id, now(), gradebook.command))
            if cursor.rowcount:
                gradebook.record("enrolment", assignment_id=assignment_id, learner_id=learner_id,
                                 new={"assignment": assignment, "learner": key}, reason="in the assignment's roster")
                added.append(key)
    return added


def enrolled(gradebook: Gradebook) -> dict[str, set[str]]:
    """The keys of the learners each assignment with a roster expects (assignments without one are absent)."""
    rows = gradebook.conn.execute(
        "SELECT a.name, l.key FROM enrolments e JOIN assignments a ON a.id = e.assignment_id "
        "JOIN learners l ON l.id = e.learner_id ORDER BY a.name, l.key")
    expected: dict[str, set[str]] = {}
    for name, key in rows:
        expected.setdefault(name, set()).add(key)
    return expected
