"""class-report.html: misconceptions counted per exercise, most common first, with where to reteach."""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path

from helpers.report_pages import Page
from helpers.submissions import WRONG_PADDING, masking, write_learner

from lessonlib import cli
from lessonlib.exercises import EXERCISES, SECTIONS
from lessonlib.grading import records as r
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.reports.class_report import (
    REPORT,
    class_ranked,
    class_report_html,
    summarise,
    write_class_report,
)
from lessonlib.grading.reports.gradebook import write_gradebook

HOSTILE_NAME = "<script>alert('x')</script> & Zoë"


def _spec(exercise: str, name: str):
    return next(s for s in EXERCISES[exercise].diagnoses if s.name == name)


def _grade(exercise: str, points: float | None, status: str = r.FAILED, *diagnoses: str) -> r.ExerciseGrade:
    ex = EXERCISES[exercise]
    found = [{"name": n, "title": _spec(exercise, n).title, "message": "", "hint": "",
              "reread": SECTIONS[_spec(exercise, n).section].pointer()} for n in diagnoses]
    return r.ExerciseGrade(ex.notebook, exercise, points, ex.points, status, diagnoses=found)


def _learner(name: str, *grades: r.ExerciseGrade) -> r.LearnerResult:
    return r.LearnerResult(name, name.replace(" ", "_"), "f", "bubblewrap", "now", list(grades))


def _manual(points: float | None, status: str = r.NEEDS_MANUAL) -> r.ExerciseGrade:
    return r.ExerciseGrade("05_interpretation.ipynb", "q2_attention_not_causal", points, 4, status, kind="manual")


def _class() -> list[r.LearnerResult]:
    """masked_softmax: zeroed_after x3, nan_for_empty_row x2, scores_times_mask x1; padding_inverted x2."""
    ms, pad = "masked_softmax", "padding_mask"
    return [
        _learner("ann", _grade(ms, 1.0, r.FAILED, "zeroed_after_softmax", "nan_for_empty_row"),
                 _grade(pad, 0.0, r.FAILED, "padding_inverted"), _manual(None)),
        _learner("ben", _grade(ms, 1.5, r.FAILED, "zeroed_after_softmax"), _grade(pad, 1.0, r.PASSED),
                 _manual(3.0, r.GRADED_BY_HAND)),
        _learner(HOSTILE_NAME, _grade(ms, 0.6, r.FAILED, "zeroed_after_softmax", "nan_for_empty_row"),
                 _grade(pad, 0.0, r.FAILED, "padding_inverted"), _manual(None)),
        _learner("dee", _grade(ms, 0.0, r.FAILED, "scores_times_mask"), _grade(pad, 1.0, r.PASSED), _manual(None)),
        _learner("eve", _grade(ms, 3.0, r.PASSED), _grade(pad, 1.0, r.PASSED), _manual(None)),
        _learner("fay", _grade(ms, 0.0, r.TIMEOUT), _grade(pad, 0.0, r.MEMORY), _manual(None)),
        _learner("gus", _grade(ms, 0.0, r.NOT_SUBMITTED), _grade(pad, 0.0, r.NOT_SUBMITTED),
                 _manual(0.0, r.NOT_SUBMITTED)),
        _learner("hal", _grade(ms, 0.5, r.FAILED)),
        _learner("ida", _grade(ms, 0.0, r.NOT_ATTEMPTED), _grade(pad, 0.0, r.NOT_ATTEMPTED)),
    ]


def _section(page: str, exercise: str) -> str:
    """The part of the page about one exercise: from its heading to the next h2 or h3."""
    start = page.index(f"<h3>{exercise} (")
    ends = [i for i in (page.find("<h3>", start + 1), page.find("<h2>", start + 1)) if i > 0]
    return page[start:min(ends, default=len(page))]


def test_misconceptions_are_counted_and_ranked_most_common_first() -> None:
    summaries = {s.exercise: s for s in summarise(_class())}
    ranked = summaries["masked_softmax"].ranked()
    assert [(m.name, len(m.learners)) for m in ranked] == [
        ("zeroed_after_softmax", 3), ("nan_for_empty_row", 2), ("scores_times_mask", 1)]
    assert ranked[0].learners == ["ann", "ben", HOSTILE_NAME]
    assert summaries["masked_softmax"].points == {1.0: 1, 1.5: 1, 0.6: 1, 0.0: 2, 3.0: 1, 0.5: 1}
    assert summaries["masked_softmax"].outcomes == {"full marks": 1, "part marks": 4, "no marks": 1,
                                                    "not attempted": 1, "stopped or flagged": 1, "not submitted": 1}
    assert summaries["masked_softmax"].unexplained == ["hal"]
    assert summaries["padding_mask"].flagged == {r.MEMORY: ["fay"]}
    assert summaries["q2_attention_not_causal"].outcomes["awaiting hand grading"] == 5
    assert [(m.name, len(m.learners)) for m in class_ranked(list(summaries.values()))] == [
        ("zeroed_after_softmax", 3), ("nan_for_empty_row", 2), ("padding_inverted", 2), ("scores_times_mask", 1)]


def test_the_page_lists_counts_sections_and_names_in_order() -> None:
    page = class_report_html(_class(), absent=["ivy absent"])
    masked = _section(page, "masked_softmax")
    titles = [_spec("masked_softmax", n).title for n in ("zeroed_after_softmax", "nan_for_empty_row",
                                                          "scores_times_mask")]
    positions = [masked.index(t) for t in titles]
    assert positions == sorted(positions)
    zeroed_row = masked[positions[0]:masked.index("</tr>", positions[0])]
    assert "<td>3</td>" in zeroed_row and "ann, ben, &lt;script&gt;" in zeroed_row
    assert SECTIONS["zeroed-after"].heading in zeroed_row and "notebooks/02_masking.ipynb" in zeroed_row
    assert SECTIONS["empty-rows"].heading in masked[positions[1]:masked.index("</tr>", positions[1])]
    assert "Failed with no named misconception (1): hal" in masked
    assert "stopped: time limit (1): fay" in masked
    assert "1 not submitted" in masked and "1 stopped or flagged" in masked
    padding = _section(page, "padding_mask")
    assert padding.startswith("<h3>padding_mask (1 point)</h3>") and "<td>0</td><td>3</td>" in padding
    assert SECTIONS["polarity"].heading in padding and "stopped: memory limit (1): fay" in padding
    assert "5 awaiting hand grading, 1 not submitted" in _section(page, "q2_attention_not_causal")
    top = page[page.index("Open the next session with"):page.index("</ol>")]
    assert top.index(titles[0]) < top.index(titles[1]) and "3 of 9 learner(s)" in top and "2 of 9 learner(s)" in top
    tied = page[page.index("</ol>"):page.index("<h2>Points per exercise")]
    assert "As common as the second: " + _spec("padding_mask", "padding_inverted").title + " in padding_mask" in tied
    assert "1 absent (in the roster, no submission): ivy absent" in page


def test_learner_names_are_escaped_and_the_page_renders_alone() -> None:
    page = class_report_html(_class())
    assert "<script" not in page.lower() and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; Zoë" in page
    parsed = Page(page)
    assert not parsed.all("link") and not parsed.all("script") and not parsed.all("iframe")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "url(" not in page and "@import" not in page
    assert [t for t, _ in parsed.tags if t in ("h1", "h2", "h3")][:2] == ["h1", "h2"]
    assert len(parsed.all("h1")) == 1 and len(parsed.all("th")) >= 4 and all(
        th.get("scope") in ("col", "row") for th in parsed.all("th"))
    images = parsed.all("img")
    assert len(images) == 2
    for image in images:
        assert image["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(image["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    points_alt, misconceptions_alt = images[0]["alt"], images[1]["alt"]
    assert "one per exercise" in points_alt and "of the 9 learners" in points_alt and "not attempted" in points_alt
    assert misconceptions_alt.startswith("Horizontal bars of how many learners showed each misconception")
    assert f"{_spec('masked_softmax', 'zeroed_after_softmax').title} in masked_softmax, 3" in misconceptions_alt


def test_a_batch_of_one_and_a_batch_of_none() -> None:
    alone = class_report_html([_learner("solo", _grade("causal_mask", 0.0, r.FAILED, "causal_upper_triangle"))])
    assert "1 learner(s) graded" in alone and SECTIONS["two-masks"].heading in alone
    assert "<td>1</td><td>" + SECTIONS["two-masks"].pointer().replace("'", "&#x27;") in alone
    empty = class_report_html([], absent=["only <b>absent</b>"])
    assert "0 learner(s) graded" in empty and "only &lt;b&gt;absent&lt;/b&gt;" in empty
    assert "No learner's answer showed a named misconception" in empty and "<img" not in empty


def test_every_gradebook_writes_the_report(tmp_path: Path) -> None:
    write_gradebook(tmp_path, _class(), Isolation("bubblewrap", "s"), Limits(cpu_seconds=2), 1)
    page = (tmp_path / REPORT).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "zeroed_after_softmax" in page
    assert write_class_report(tmp_path, []) == tmp_path / REPORT and not list(tmp_path.glob(".*tmp"))


ZEROED_AFTER = '''
def masked_softmax(scores, allowed):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) * allowed
'''


def test_a_real_batch_reports_what_its_learners_got_wrong_and_a_resumed_one_again(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    write_learner(subs / "amy", masking({"masked_softmax": ZEROED_AFTER, "padding_mask": WRONG_PADDING}))
    write_learner(subs / "bo", masking({"masked_softmax": ZEROED_AFTER}))
    command = ["grade", str(subs), "--out", str(out), "--timeout", "5", "--workers", "1", "--quiet"]
    start = time.perf_counter()
    assert cli.main(command) == 0
    print(f"graded 2 learners in {time.perf_counter() - start:.1f} s")
    page = (out / REPORT).read_text(encoding="utf-8")
    top = page[page.index("Open the next session with"):page.index("</ol>")]
    zeroed, inverted = _spec("masked_softmax", "zeroed_after_softmax"), _spec("padding_mask", "padding_inverted")
    assert top.index(zeroed.title) < top.index(inverted.title)
    assert "2 of 2 learner(s). Reteach" in top and SECTIONS["zeroed-after"].heading in top
    assert "amy, bo" in _section(page, "masked_softmax") and "amy" in _section(page, "padding_mask")
    (out / REPORT).unlink()
    assert cli.main(command) == 0  # every learner already saved: nothing is graded again
    assert (out / REPORT).read_text(encoding="utf-8") == page
