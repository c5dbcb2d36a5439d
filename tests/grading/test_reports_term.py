"""term-report.html: misconceptions that persist across assignments, per learner and per class;
sections to reteach; who needs help. Built from the course gradebook."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.report_pages import assert_alone

from lessonlib.exercises import EXERCISES, SECTIONS
from lessonlib.grading import records as r
from lessonlib.grading import store
from lessonlib.grading.reports import term

HOSTILE = "<script>alert('x')</script> Zoë"


def _diagnosed(exercise: str, points: float, *names: str, status: str = r.FAILED) -> r.ExerciseGrade:
    ex = EXERCISES[exercise]
    specs = {s.name: s for s in ex.diagnoses}
    found = [{"name": n, "title": specs[n].title, "message": "", "hint": "", "reread": ""} for n in names]
    return r.ExerciseGrade(ex.notebook, exercise, points, ex.points, status, diagnoses=found,
                           instructor_diagnoses=found)


def _full(exercise: str) -> r.ExerciseGrade:
    return _diagnosed(exercise, EXERCISES[exercise].points, status=r.PASSED)


WEEK2 = {  # masked_softmax, causal_mask
    "ann": [_diagnosed("masked_softmax", 1.0, "zeroed_after_softmax"), _full("causal_mask")],
    "ben": [_diagnosed("masked_softmax", 1.0, "zeroed_after_softmax"), _full("causal_mask")],
    # twice the same kind (mask polarity) in one assignment: not persistence
    "cat": [_diagnosed("masked_softmax", 0.0, "inverted_polarity"), _diagnosed("causal_mask", 0.0, "causal_inverted")],
    "dan": [_diagnosed("masked_softmax", 0.0, status=r.NOT_ATTEMPTED),
            _diagnosed("causal_mask", 0.0, status=r.CRASHED)],
    HOSTILE: [_full("masked_softmax"), _full("causal_mask")],
}
WEEK5 = {  # exclusion_effects
    "ann": [_diagnosed("exclusion_effects", 0.5, "exclusion_not_renormalised")],
    "ben": [_full("exclusion_effects")],
    "cat": [_full("exclusion_effects")],
    "dan": [_diagnosed("exclusion_effects", 0.0, status=r.NOT_ATTEMPTED)],
}


@pytest.fixture
def gb(tmp_path: Path) -> store.Gradebook:
    gradebook = store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade test")
    store.ensure_assignment(gradebook, "week2", ["02_masking.ipynb"], seed=2)
    store.ensure_assignment(gradebook, "week5", ["05_interpretation.ipynb"], seed=5)
    keys = {name: store.register(gradebook, name).key for name in WEEK2}
    for assignment, graded in (("week2", WEEK2), ("week5", WEEK5)):
        for name, grades in graded.items():
            store.record_result(gradebook, assignment, r.LearnerResult(
                name, keys[name], f"fp-{name}-{assignment}", "bubblewrap", "2026-03-02T10:00:00+00:00",
                exercises=[r.ExerciseGrade.from_dict(g.to_dict()) for g in grades]))
    store.register(gradebook, "fay")  # in the course, nothing handed in
    yield gradebook
    gradebook.close()


def test_a_misconception_in_two_assignments_persists_and_one_seen_once_does_not(gb: store.Gradebook) -> None:
    summary = term.term_report_from(gb)
    by_key = {ln.key: ln for ln in summary.learners}
    assert list(by_key["ann"].persistent()) == ["zeroed-after"]  # week 2 and week 5, two exercises, one section
    assert [s.assignment for s in by_key["ann"].persistent()["zeroed-after"]] == ["week2", "week5"]
    assert by_key["ben"].persistent() == {}  # zeroed after the softmax once, then fixed
    assert by_key["cat"].persistent() == {}  # the same kind twice, in one assignment
    assert set(by_key["cat"].seen) == {"polarity"}
    kinds = {k.kind: k for k in summary.kinds}
    assert kinds["zeroed-after"].persistent == ["ann"] and sorted(kinds["zeroed-after"].learners) == ["ann", "ben"]
    assert kinds["polarity"].persistent == [] and kinds["polarity"].learners == ["cat"]
    assert summary.kinds[0].kind == "zeroed-after"  # reteach first: it persists


def test_who_needs_help_gives_reasons_in_words(gb: store.Gradebook) -> None:
    summary = term.term_report_from(gb)
    why = {ln.key: summary.help_reasons(ln) for ln in summary.learners}
    assert any("persistent misconception" in w and "zeroing probabilities after the softmax" in w for w in why["ann"])
    assert any(w.startswith("term total 0%") for w in why["dan"])
    assert any("week2: causal_mask (crashed)" in w for w in why["dan"])
    hostile = next(ln.key for ln in summary.learners if ln.name == HOSTILE)
    assert why[hostile] == ["no submission to week5"]
    assert why["ben"] == []
    assert why["fay"] == ["no submission to week2, week5"]


def test_the_page_renders_alone_and_escapes_names(gb: store.Gradebook, tmp_path: Path) -> None:
    path = term.write_term_report(tmp_path, gb)
    assert path == tmp_path / term.REPORT
    text = path.read_text(encoding="utf-8")
    page = assert_alone(text)
    words = page.words
    assert HOSTILE in words and "<script>alert" not in text
    assert SECTIONS["zeroed-after"].heading in words
    assert "Probabilities zeroed after the softmax; Excluded after the softmax, without renormalising" in words
    assert "persists" in words and "2 or more different assignments" in words
    images = page.all("img")
    assert len(images) == 1 and "persisting" in images[0]["alt"]


def test_a_learner_is_missing_only_the_assignments_whose_roster_lists_them(gb: store.Gradebook) -> None:
    """Two sections: week5 graded with a roster of ann, ben, cat, dan and fay, week2 without one. The
    hostile-named learner is not in week5's roster (another section): week5 is not theirs to miss;
    fay is in it and handed nothing in anywhere; week2, graded without a roster, expects everyone."""
    store.enrol(gb, "week5", ["ann", "ben", "cat", "dan", "fay"])
    summary = term.term_report_from(gb)
    by_key = {ln.key: ln for ln in summary.learners}
    hostile = next(ln for ln in summary.learners if ln.name == HOSTILE)
    assert not summary.expects("week5", hostile) and summary.expects("week2", hostile)
    assert summary.missed(hostile) == []
    assert not any("no submission" in why for why in summary.help_reasons(hostile))
    assert summary.missed(by_key["fay"]) == ["week2", "week5"]
    assert "no submission to week2, week5" in summary.help_reasons(by_key["fay"])
    page = term.term_report_html(summary)
    assert ("2 assignment(s), 1 graded with a roster (1 distinct roster(s) of learners): a learner is expected "
            "only at assignments whose roster lists them; the 1 graded without a roster expect every learner.") in page
    assert page.count("not expected") == 1  # the hostile-named learner's week5 cell


def test_without_rosters_every_learner_is_expected_everywhere(gb: store.Gradebook) -> None:
    summary = term.term_report_from(gb)
    assert summary.enrolled == {}
    assert "none graded with a roster: every learner is expected at every assignment" in term.term_report_html(summary)
