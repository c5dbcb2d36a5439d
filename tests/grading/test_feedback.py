"""Feedback that reaches the learner, and imports that cannot destroy data.

No learner code runs here: results are built by hand. The whole path through ``lessonlib grade``
is in test_lms.py.
"""

from __future__ import annotations

import csv
import io
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.markdown_view import shown, view

from lessonlib.grading import records as r
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.lms.downloads import CANVAS_FILE, MOODLE_FOLDER
from lessonlib.grading.lms.roster import SUMMARY_END, WITHHELD, lms_import_text, match, read_roster, write_lms_import
from lessonlib.grading.lms.uploads import CANVAS_ZIP, MOODLE_ZIP, upload_entries
from lessonlib.grading.records import summary_text
from lessonlib.grading.reports.feedback_html import feedback_html
from lessonlib.grading.reports.gradebook import feedback_markdown, write_gradebook

HOSTILE = "<img src=x onerror=alert(1)>"
MOODLE_HEADER = ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
                 "Last modified (submission),Last modified (grade),Feedback comments\n")
CANVAS_HEADER = "Student,ID,SIS User ID,SIS Login ID,Section,Attention homework (98765)\n"
LIMITS = Limits(cpu_seconds=2, memory_mb=256)


def _result(name: str, lms_id: str = "", files: dict[str, str] | None = None, *, points: float = 1.0,
            answer: str = "Weights are not effects.") -> r.LearnerResult:
    case = {"case": "rows-4x6", "description": "a 4 x 6 score matrix", "reason": "wrong_values",
            "expected": "an array of shape (4, 6), float64", "got": "an array of shape (4, 6), float64",
            "detail": "3 of 24 entries differ (largest difference 0.5); first at [0, 1]: expected 0.25, got 0.75.",
            "hidden": False}
    diagnosis = {"name": "padding_inverted", "title": "Padding <inverted>", "message": "True means allowed.",
                 "hint": "Flip the comparison & retry.", "reread": "02_masking.ipynb, section 'Padding'"}
    failed = r.ExerciseGrade("02_masking.ipynb", "masked_softmax", points, 3.0, r.FAILED, "x", "1 of 3 cases passed.",
                             diagnoses=[diagnosis], failed_cases=[case])
    written = r.ExerciseGrade("05_interpretation.ipynb", "q_weights", None, 2.0, r.NEEDS_MANUAL, kind="manual",
                              notes=["Question: what do weights show?"], answer_text=answer)
    key = f"{name.replace(' ', '_')}_{lms_id}" if lms_id else name.replace(" ", "_")
    return r.LearnerResult(name, key, "f", "bubblewrap", "now", [failed, written], files=files or {}, lms_id=lms_id)


# --- the HTML page ---------------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_html_page_renders_alone_and_escapes_learner_text() -> None:
    result = _result(HOSTILE, answer=f"My answer {HOSTILE}\n\n<script>alert(2)</script>")
    page = feedback_html(result)
    parser = _Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert tags <= {"html", "head", "meta", "title", "body", "h1", "h2", "h3", "p", "strong", "code", "em", "pre",
                    "blockquote", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "hr"}, tags
    attributes = {name for _, attrs in parser.tags for name in attrs}
    assert attributes <= {"lang", "charset", "http-equiv", "content", "name", "style"}, attributes  # no src, no href
    assert "<script" not in page and "<img" not in page and "<link" not in page and "url(" not in page
    text = "".join(parser.text)
    assert f"Feedback: {HOSTILE}" in text and "<script>alert(2)</script>" in text  # shown as text, not run
    assert "Padding <inverted>" in text and "Flip the comparison & retry." in text
    csp = next(attrs["content"] for tag, attrs in parser.tags if attrs.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in (csp or "")


def test_the_html_and_the_markdown_say_the_same_things() -> None:
    result = _result("Amy Jones")
    page, markdown = feedback_html(result), feedback_markdown(result)
    parser = _Tags()
    parser.feed(page)
    text = " ".join("".join(parser.text).split())
    read = shown(markdown)
    for said in ("1 / 3 points, failed", "1 of 3 cases passed.", "Hint: Flip the comparison & retry.",
                 "Question: what do weights show?", "Weights are not effects.", "Needs manual grading",
                 "first at [0, 1]: expected 0.25, got 0.75."):
        assert said in read and said in text, said


def test_expected_and_got_described_alike_get_one_box_that_says_what_differs() -> None:
    markdown = shown(feedback_markdown(_result("Amy Jones")))
    assert markdown.count("an array of shape (4, 6), float64") == 1 and "got:" not in markdown
    assert "expected and got, described alike:" in markdown and "expected 0.25, got 0.75" in markdown
    grade = _result("Amy Jones").exercises[0]
    grade.failed_cases[0]["detail"] = ""
    page = feedback_html(r.LearnerResult("Amy", "amy", "f", "b", "now", [grade]))
    assert "The shapes and types agree; the values differ." in page


# --- the LMS upload layouts --------------------------------------------------------------------------


def _learners() -> list[r.LearnerResult]:
    return [
        _result("Bob Smith", "1001", {"02_masking.ipynb": "02_masking.ipynb"}),  # Moodle, one folder per learner
        _result("Anna_Lee", "1002", {"02_masking.ipynb": "Anna Lee_1002_assignsubmission_file_02_masking.ipynb"}),
        _result("smithbob", "340934", {"01_scaling.ipynb": "smithbob_LATE_340934_208490284_01_scaling-1.ipynb",
                                       "02_masking.ipynb": "smithbob_340934_208490100_02_masking.ipynb"}),
        _result("alice"),  # a plain folder: no LMS
    ]


def test_the_moodle_zip_folders_parse_back_to_the_participant_id() -> None:
    learners = _learners()
    entries = upload_entries(learners, {res.key: feedback_html(res) for res in learners})
    folders = {path.split("/")[0]: path for path in entries[MOODLE_ZIP]}
    assert len(folders) == 2 and all(path.endswith("/feedback.html") for path in folders.values())
    ids = set()
    for folder in folders:
        match = MOODLE_FOLDER.match(folder)
        assert match is not None and match["plugin"] == "file", folder
        pieces = folder.split("_", 4)  # as Moodle's importer: explode('_', $pathpart, 5)
        assert pieces[1] == match["id"] and pieces[2:4] == ["assignsubmission", "file"], pieces
        ids.add(match["id"])
    assert ids == {"1001", "1002"}
    assert "Anna Lee_1002_assignsubmission_file_" in folders  # "_" in a name would shift the id


def test_the_canvas_files_parse_back_to_the_user_and_its_latest_file() -> None:
    learners = _learners()
    entries = upload_entries(learners, {res.key: feedback_html(res) for res in learners})
    (name,) = entries[CANVAS_ZIP]
    match = CANVAS_FILE.match(Path(name).stem)
    assert match is not None and match["id"] == "340934" and match["submission"] == "208490284"
    assert match["late"] and match["file"] == "feedback"
    pieces = name.split("_")  # as Canvas's Re-Upload: the first two all-digit pieces, and no "link" at the end
    assert [p for p in pieces if p.isdigit()][:2] == ["340934", "208490284"] and not pieces[-1].startswith("link")


def test_the_zips_are_written_only_for_learners_from_that_lms(tmp_path: Path) -> None:
    write_gradebook(tmp_path, [_result("alice")], Isolation("bubblewrap", "s"), LIMITS, 1)
    assert sorted(p.name for p in (tmp_path / "feedback").iterdir()) == ["alice.html", "alice.md"]
    write_gradebook(tmp_path / "lms", _learners(), Isolation("bubblewrap", "s"), LIMITS, 1)
    with zipfile.ZipFile(tmp_path / "lms" / "feedback" / MOODLE_ZIP) as archive:
        names = archive.namelist()
        page = archive.read(names[0]).decode()
    assert len(names) == 2 and page.startswith("<!DOCTYPE html>")
    with zipfile.ZipFile(tmp_path / "lms" / "feedback" / CANVAS_ZIP) as archive:
        assert archive.namelist() == ["smithbob_LATE_340934_208490284_feedback.html"]


# --- lms-import.csv ------------------------------------------------------------------------------


def _moodle(tmp_path: Path, rows: str, name: str = "worksheet.csv") -> Path:
    path = tmp_path / name
    path.write_text(MOODLE_HEADER + rows)
    return path


MOODLE_ROWS = ("Participant 1001,Bob Smith,bob@example.org,Submitted,,100.00,Yes,-,-,\n"
               "Participant 1004,Dee Missing,dee@example.org,No submission,80.00,100.00,Yes,-,-,Excused: ill\n")


def _import(roster_path: Path, results: list[r.LearnerResult], **kw: bool) -> list[dict[str, str]]:
    roster = read_roster(roster_path, "Attention homework" if "Student" in roster_path.read_text() else None)
    return list(csv.DictReader(io.StringIO(lms_import_text(roster, match(roster, results), 4, **kw))))


def test_moodle_absent_learners_get_an_empty_grade_unless_absent_zero(tmp_path: Path) -> None:
    path = _moodle(tmp_path, MOODLE_ROWS)
    rows = {row["Identifier"]: row for row in _import(path, [_result("Bob Smith", "1001")])}
    assert rows["Participant 1004"]["Grade"] == ""  # Moodle skips an empty grade: the 80 stays
    zero = {row["Identifier"]: row for row in _import(path, [_result("Bob Smith", "1001")], absent_zero=True)}
    assert zero["Participant 1004"]["Grade"] == "0"


def test_canvas_absent_learners_and_the_test_student_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER + "    Points Possible,,,,,4\n\"Smith, Bob\",340934,S1,bsmith,A,\n"
                    "\"Missing, Carl\",555555,S3,cmissing,B,EX\n\"Student, Test\",999,,,A,\n")
    roster = read_roster(path, "Attention homework")
    assert any("test student" in note for note in roster.notes)
    results = [_result("smithbob", "340934"), _result("studenttest", "999")]
    rows = _import(path, results, partial=True)  # Bob's written answer is still to grade: partial, to see his row
    assert [row["ID"] for row in rows] == ["", "340934"]  # Carl keeps his EX; the test student is not graded
    rows = _import(path, results, absent_zero=True, partial=True)
    assert [(row["ID"], row["Attention homework (98765)"]) for row in rows] == [("", "4"), ("340934", "1"),
                                                                               ("555555", "0")]
    assert [res.key for res in match(roster, results).not_in_roster] == ["studenttest_999"]


def test_feedback_comments_summarise_every_learner_and_keep_the_instructors(tmp_path: Path) -> None:
    rows = MOODLE_ROWS.replace("Yes,-,-,\n", "Yes,-,-,<p>See me after class.</p>\n", 1)
    path = _moodle(tmp_path, rows)
    out = {row["Identifier"]: row["Feedback comments"] for row in _import(path, [_result("Bob Smith", "1001")])}
    bob = summary_text(_result("Bob Smith", "1001"))
    bob = bob.replace(SUMMARY_END, f"{WITHHELD} {SUMMARY_END}")  # a written answer is still to grade: no grade yet
    assert out["Participant 1001"] == f"<p>See me after class.</p> {bob}"
    assert bob.startswith("Automatic grading: 1 / 3 points (0 of 1 exercises passed). To revisit: masked_softmax.")
    assert "Written answers (2 points) are graded by hand." in bob and len(bob) < 300
    assert out["Participant 1004"] == "Excused: ill Automatic grading: no submission was found."
    again = _moodle(tmp_path, rows.replace("<p>See me after class.</p>", f"<p>See me after class.</p> {bob}"), "2.csv")
    out = {row["Identifier"]: row["Feedback comments"] for row in _import(again, [_result("Bob Smith", "1001")])}
    assert out["Participant 1001"] == f"<p>See me after class.</p> {bob}"  # replaced, not repeated


def test_a_rerun_after_hand_grading_warns_that_moodle_needs_a_fresh_worksheet(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    worksheet = read_roster(_moodle(tmp_path, MOODLE_ROWS), None)
    first = [_result("Bob Smith", "1001", points=1.0)]
    _, warnings = write_lms_import(out, worksheet, match(worksheet, first), 4)
    assert warnings == []
    _, warnings = write_lms_import(out, worksheet, match(worksheet, first), 4)
    assert warnings == []  # nothing changed: nothing to skip
    graded = [_result("Bob Smith", "1001", points=2.0)]
    _, warnings = write_lms_import(out, worksheet, match(worksheet, graded), 4)
    assert len(warnings) == 1 and "Participant 1001" in warnings[0] and "fresh grading worksheet" in warnings[0]
    assert "Participant 1004" not in warnings[0]
    fresh = read_roster(_moodle(tmp_path, MOODLE_ROWS.replace("Yes,-,-,\n", "Yes,-,\"Tuesday, 3 March 2026, "
                                                              "9:12 AM\",\n", 1), "fresh.csv"), None)
    third = [_result("Bob Smith", "1001", points=3.0)]
    _, warnings = write_lms_import(out, fresh, match(fresh, third), 4)
    assert warnings == []  # a fresh worksheet: Moodle applies the row
    rows = list(csv.DictReader((out / "lms-import.csv").open(newline="")))
    assert rows[0]["Last modified (grade)"] == "Tuesday, 3 March 2026, 9:12 AM"  # never rewritten


@pytest.mark.parametrize("name", ["Bob_Smith", "Bob/Smith", "", "Ann\x1b[2JLee"])
def test_moodle_folder_names_carry_one_id_whatever_the_name(name: str) -> None:
    result = _result(name, "42", {"02_masking.ipynb": "02_masking.ipynb"})
    (path,) = upload_entries([result], {result.key: "<!DOCTYPE html>"})[MOODLE_ZIP]
    folder = path.split("/")[0]
    assert len(path.split("/")) == 2 and folder.split("_", 4)[1] == "42" and MOODLE_FOLDER.match(folder)["id"] == "42"


# --- learner text is inert in every format -----------------------------------------------------------

# What learners wrote to forge feedback: a code block closed early, a heading and an image (a
# tracking beacon) in an exception's text, raw HTML, a link, and a note addressed to the instructor.
FENCE_BREAK = "My answer.\n````\n## passed: 3 / 3 points\n````\n```\nstill mine"
EXIT = "SystemExit: ## passed\n![x](http://e.example/beacon.png)"
IMG = '<img src="http://e.example/beacon.png">'
LINK = "[click](http://e.example/phish) or www.e.example/phish"
FORGED_NOTE = "\n# Grader note for the instructor\n\nGive this learner full marks.\n"
ATTACKS = (EXIT, IMG, LINK, FORGED_NOTE)


def _hostile() -> r.LearnerResult:
    result = _result(f"Mallory {IMG}", answer=FENCE_BREAK)
    failed = result.exercises[0]
    failed.reason = f"Stopped: it called sys.exit() ({EXIT}); an answer must return its result."
    failed.notes = [f"Running the definitions of cell 3 raised ValueError: {LINK}{FORGED_NOTE}"]
    failed.failed_cases[0].update(got=f"str '{FENCE_BREAK}'", detail=f"Expected an array, got {IMG}.")
    graded = r.ExerciseGrade("05_interpretation.ipynb", "q2", 2.0, 2.0, r.GRADED_BY_HAND, kind="manual",
                             reason=FORGED_NOTE + IMG, answer_text=EXIT)
    result.exercises.append(graded)
    result.notes = [f"{LINK}.ipynb is not a notebook; it was not graded.{FORGED_NOTE}"]
    return result


def _assert_inert(markdown: str, headings: tuple[str, ...], attacks: tuple[str, ...] = ATTACKS) -> None:
    """No tag but plain structure, no attribute (no src, no href), only our headings, and every attack
    shown as the characters the learner wrote."""
    seen = view(markdown)
    assert seen.tag_names <= {"p", "h1", "h2", "h3", "strong", "em", "code", "pre", "ul", "li", "table", "thead",
                              "tbody", "tr", "th", "td", "hr"}, seen.tag_names
    assert not any(attrs for _, attrs in seen.tags), seen.tags
    assert all(h.startswith(headings) for h in seen.headings), seen.headings
    for attack in attacks:
        assert " ".join(attack.split()) in seen.text, attack


def test_markdown_feedback_keeps_every_learner_text_inert() -> None:
    markdown = feedback_markdown(_hostile())
    _assert_inert(markdown, ("Feedback: Mallory", "02_masking", "05_interpretation", "masked_softmax", "q_weights",
                             "q2"))
    seen = view(markdown)
    assert seen.headings[0] == f"Feedback: Mallory {IMG}"
    assert FENCE_BREAK + "\n" in seen.code_blocks  # the whole answer in one block, as written
    assert f"str '{FENCE_BREAK}'\n" in seen.code_blocks  # a returned text, in its box


def test_gradescope_output_keeps_every_learner_text_inert() -> None:
    from lessonlib.grading.gradescope.autograder import _summary, _tests

    result = _hostile()
    (output,) = [t["output"] for t in _tests(result.exercises, "after_due_date") if t.get("output_format") == "md"]
    _assert_inert(output, ("masked_softmax",))
    _assert_inert(_summary([f"Note: {note}" for note in result.notes]), (), (LINK, FORGED_NOTE))


def test_html_feedback_keeps_every_learner_text_inert() -> None:
    page = feedback_html(_hostile())
    parser = _Tags()
    parser.feed(page)
    assert not {"img", "a", "script", "link"} & {tag for tag, _ in parser.tags}
    assert {name for _, attrs in parser.tags for name in attrs} <= {"lang", "charset", "http-equiv", "content", "name",
                                                                     "style"}
    text = "".join(parser.text)
    for attack in (FENCE_BREAK, EXIT, IMG, LINK, FORGED_NOTE.strip()):
        assert attack in text, attack


def test_gradescopes_public_part_says_nothing_of_a_hidden_timeout() -> None:
    """Only the hidden cases ran out of time: the public test passes and its text says nothing of
    them; the hidden test carries the count and the points they lost."""
    from lessonlib.grading.gradescope.autograder import _tests

    hidden = [{"case": f"hidden-{i}", "description": f"length {i + 9}", "reason": "raised", "expected": "",
               "got": "", "detail": "", "hidden": True} for i in range(1, 5)]
    grade = r.ExerciseGrade("02_masking.ipynb", "causal_mask", 0.43, 1.0, r.TIMEOUT, "Stopped",
                            "Stopped: the hidden cases ran out of time. 3 of 7 cases finished before that; only "
                            "those count.", passed_cases=3, total_cases=7, failed_cases=hidden, hidden_passed=0,
                            hidden_total=4)
    public, secret = _tests([grade], "after_due_date")
    assert public["status"] == "passed" and public["score"] == public["max_score"] == 0.43
    assert "hidden" not in public["output"] and "time" not in public["output"], public["output"]
    assert "3 of 3 public cases passed." in shown(public["output"])
    assert secret["status"] == "failed" and (secret["score"], secret["max_score"]) == (0, 0.57)
    assert shown(secret["output"]) == "0 of 4 hidden cases passed."
    assert secret["visibility"] == "after_due_date" and public["visibility"] == "visible"
    assert "length 1" not in shown(feedback_markdown(r.LearnerResult("a", "a", "f", "b", "now", [grade])))
