"""similarity-report.html: a verbatim copy between two learners and a copy of the solution are
flagged, side by side; two honest independent answers and the stubs every learner was given are not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.report_pages import HOSTILE_ANSWER, assert_alone
from helpers.submissions import EXERCISES, notebook, write_learner

from lessonlib.exercises import ex_masking
from lessonlib.grading.learners import Learner
from lessonlib.grading.reports import similarity
from lessonlib.grading.reports.course import CourseFile, course_files, exercise_stubs

# the course these tests come from: its notebooks and exercises (lessonlib's own files are read from the
# package that is imported, which CI installs from a wheel into a course copied without lessonlib/)
ROOT = Path(__file__).resolve().parents[2]

HEADER = '''def masked_softmax(scores, allowed):
    """Softmax over the last axis with disallowed keys excluded first; empty rows all zero.

    scores (..., S); allowed boolean, broadcastable to scores, True = may be attended to.
    """
'''
LOOPS = HEADER + '''    scores = np.asarray(scores, dtype=float)
    allowed = np.broadcast_to(allowed, scores.shape)
    result = np.zeros_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        keep = allowed[index]
        if keep.any():
            row = scores[index][keep]
            weights = np.exp(row - row.max())
            result[index][keep] = weights / weights.sum()
    return result
'''
# LOOPS again, its names changed and a comment added: the same answer
LOOPS_RENAMED = HEADER + '''    s = np.asarray(scores, dtype=float)
    a = np.broadcast_to(allowed, s.shape)
    out = np.zeros_like(s)  # the answer
    for i in np.ndindex(s.shape[:-1]):
        k = a[i]
        if k.any():  # only rows that have a key
            r = s[i][k]
            w = np.exp(r - r.max())
            out[i][k] = w / w.sum()
    return out
'''
CLIPPED = HEADER + '''    ok = np.asarray(allowed, dtype=bool)
    top = np.max(np.where(ok, scores, -1e300), axis=-1, keepdims=True)
    expo = np.exp(np.clip(scores - top, -700.0, 0.0)) * ok
    denom = expo.sum(-1, keepdims=True)
    denom[denom == 0] = 1.0
    return expo / denom
'''
SOLUTION_COPY = HEADER + '''    masked = np.where(allowed, scores, -np.inf)
    row_max = masked.max(axis=-1, keepdims=True)
    row_max = np.where(np.isneginf(row_max), 0.0, row_max)
    e = np.exp(masked - row_max)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
'''
ANSWERS = {"ann": LOOPS, "ben": LOOPS_RENAMED, "cat": CLIPPED, "dan": SOLUTION_COPY,
           HOSTILE_ANSWER: "# " + HOSTILE_ANSWER + "\n" + LOOPS}


@pytest.fixture(scope="module")
def learners(tmp_path_factory: pytest.TempPathFactory) -> list[Learner]:
    root = tmp_path_factory.mktemp("submissions")
    found = []
    for n, (name, code) in enumerate(ANSWERS.items()):
        key = f"learner{n}"
        folder = write_learner(root / key, {"02_masking.ipynb": notebook(
            "02_masking.ipynb", answers={"masked_softmax": code}, source=EXERCISES)})
        found.append(Learner(name, key, {"02_masking.ipynb": folder / "02_masking.ipynb"}))
    return found


@pytest.fixture(scope="module")
def matches(learners: list[Learner]) -> tuple[list, list]:
    answers = similarity.learner_answers(learners)
    return similarity.find_matches(answers, course_files(ROOT), exercise_stubs(ROOT / "exercises"))


def _pairs(found: list) -> set[frozenset[str]]:
    return {frozenset((m.left.split(" (")[-1], m.right.split(" (")[-1])) for m in found}


def test_a_copy_between_learners_is_found_and_honest_answers_are_not(matches: tuple[list, list]) -> None:
    pairs, _ = matches
    flagged = {frozenset(k.rstrip(")") for k in p) for p in _pairs(pairs)}
    # ann, ben and the hostile name hand in the same loops (renamed, commented): every pair of them
    assert flagged == {frozenset(p) for p in (("learner0", "learner1"), ("learner0", "learner4"),
                                                ("learner1", "learner4"))}
    assert all(m.exercise == "masked_softmax" for m in pairs)  # the identical stubs of the rest: boilerplate
    [(exercise, members)] = similarity.groups(pairs)
    assert exercise == "masked_softmax" and len(members) == 3 and "ann (learner0)" in members


def test_a_copy_of_the_solution_is_found(matches: tuple[list, list]) -> None:
    _, copies = matches
    by_learner = {m.left.split(" (")[-1].rstrip(")"): m for m in copies}
    assert "learner3" in by_learner  # dan pasted the solution
    assert by_learner["learner3"].right.startswith("solutions/02_masking.ipynb")
    assert by_learner["learner3"].left_share >= similarity.THRESHOLD
    assert "learner2" not in by_learner and "learner0" not in by_learner  # honest answers


def test_the_page_renders_alone_side_by_side_and_escaped(learners: list[Learner], tmp_path: Path) -> None:
    ours = [f for f in course_files(ROOT) if not f.label.startswith("lessonlib/")]  # the notebooks: quicker
    path = similarity.write_similarity_report(tmp_path, learners, course=ours, stubs=exercise_stubs(ROOT / "exercises"))
    assert path == tmp_path / similarity.REPORT
    text = path.read_text(encoding="utf-8")
    page = assert_alone(text)
    words = page.words
    assert "Flagged for a look, never a penalty by itself." in words
    assert HOSTILE_ANSWER in words and "<script>alert" not in text  # in the name and in the code
    assert len(page.all("mark")) >= 2
    assert "weights / weights.sum()" in words and "w / w.sum()" in words  # side by side
    assert "solutions/02_masking.ipynb, cell masked-softmax-answer" in words


WRITTEN = ("Attention weights say how much of each value entered one head's mix. They do not say what that mix "
           "then did: later layers, the residual stream and the output projection all stand between them, so a "
           "large weight on a key can have no effect on the decision once the other values are the same.")
OTHER = ("A heatmap is a picture of one layer and one head for one query. To claim a cause, you would have to "
         "intervene, removing a token and measuring how the prediction moves, which the weights alone never do.")


def test_written_answers_copied_word_for_word_are_found(tmp_path: Path) -> None:
    from lessonlib.exercises import MANUAL_QUESTIONS

    question = MANUAL_QUESTIONS["q2_attention_not_causal"]
    learners = []
    for key, text in (("wa", WRITTEN), ("wb", WRITTEN.replace("Attention", "The attention")), ("wc", OTHER)):
        nb = notebook(question.notebook, source=EXERCISES)
        next(c for c in nb.cells if c.get("id") == question.cell_id).source = text
        folder = write_learner(tmp_path / key, {question.notebook: nb})
        learners.append(Learner(key.upper(), key, {question.notebook: folder / question.notebook}))
    stubs = exercise_stubs(ROOT / "exercises")
    pairs, copies = similarity.find_matches(similarity.learner_answers(learners), [], stubs)
    assert [(m.exercise, m.left, m.right) for m in pairs] == [(question.name, "WA (wa)", "WB (wb)")]
    assert copies == []


def test_marked_slices_escape_and_merge() -> None:
    shown = similarity.marked("a<b>c</textarea>", [(1, 4), (3, 6)])
    assert shown.startswith("a<mark") and "&lt;b&gt;c" in shown and "</textarea>" not in shown
    assert shown.count("<mark") == 1


def test_identical_files_from_the_gradebook_across_runs(tmp_path: Path) -> None:
    from lessonlib.grading import store

    released = EXERCISES / "02_masking.ipynb"
    copied = tmp_path / "copied.ipynb"
    copied.write_text(released.read_text(encoding="utf-8").replace("raise NotImplementedError", "return None"))
    own = tmp_path / "own.ipynb"
    own.write_text(copied.read_text(encoding="utf-8") + " ")
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade run 1") as gb:
        store.ensure_assignment(gb, "week2", ["02_masking.ipynb"], seed=2)
        for name, path in (("ann", copied), ("ben", own), ("cat", released), ("dan", released)):
            key = store.register(gb, name).key
            store.record_submission(gb, "week2", key, [store.SubmittedFile.of("02_masking.ipynb", path)])
    with store.open_gradebook(tmp_path / "gradebook.db", "lessonlib grade run 2") as gb:  # a late folder
        key = store.register(gb, "eve").key
        store.record_submission(gb, "week2", key, [store.SubmittedFile.of("02_masking.ipynb", copied)])
        found = similarity.identical_files(gb, "week2", given=[released])
    assert [(i.notebook, i.learners) for i in found] == [("02_masking.ipynb", ("ann (ann)", "eve (eve)"))]
    page = similarity.similarity_report_html([], [], answers=0, identical=found)
    assert "ann (ann); eve (eve)" in assert_alone(page).words


# LOOPS with a statement that does nothing after each one, and the two statements that do not depend
# on each other swapped: the copy the fingerprints used to miss
PADDED = HEADER + '''    pass
    scores = np.asarray(scores, dtype=float)
    0
    result = np.zeros_like(scores)
    scores
    allowed = np.broadcast_to(allowed, scores.shape)
    None
    for index in np.ndindex(scores.shape[:-1]):
        keep = allowed[index]
        pass
        if keep.any():
            row = scores[index][keep]
            row
            weights = np.exp(row - row.max())
            ...
            result[index][keep] = weights / weights.sum()
            pass
    result = result
    return result
'''
# a learner who shares a misconception the package models (lessonlib.exercises), and a one-line answer
MISCONCEPTION = HEADER + '''    s = np.where(np.broadcast_to(allowed, np.shape(scores)), scores, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    return e / e.sum()
'''
ONE_LINE = HEADER + '''    return np.exp(scores) * allowed / (np.exp(scores) * allowed).sum(-1, keepdims=True)
'''


def _answers(tmp_path: Path, answers: dict[str, str]) -> list[similarity.Answer]:
    learners = []
    for key, code in answers.items():
        folder = write_learner(tmp_path / key, {"02_masking.ipynb": notebook(
            "02_masking.ipynb", answers={"masked_softmax": code}, source=EXERCISES)})
        learners.append(Learner(key, key, {"02_masking.ipynb": folder / "02_masking.ipynb"}))
    return similarity.learner_answers(learners)


def test_statements_that_do_nothing_and_a_new_order_hide_no_copy(tmp_path: Path) -> None:
    stubs = exercise_stubs(ROOT / "exercises")
    pairs, _ = similarity.find_matches(_answers(tmp_path, {"ann": LOOPS, "pad": PADDED}), [], stubs)
    assert [(m.exercise, m.left, m.right) for m in pairs] == [("masked_softmax", "ann (ann)", "pad (pad)")]
    assert min(pairs[0].left_share, pairs[0].right_share) == 1.0  # the same code, once put in one form
    assert "pass" not in pairs[0].right_text and "    0\n" not in pairs[0].right_text  # shown as compared


def test_misconception_models_and_one_liners_are_not_copies_of_the_course(tmp_path: Path) -> None:
    course = course_files(ROOT)
    assert not any(f.label.startswith(("lessonlib/exercises/", "lessonlib/grading/")) for f in course)
    models = [CourseFile("lessonlib/exercises/ex_masking.py", Path(ex_masking.__file__).read_text(encoding="utf-8"))]
    answers = _answers(tmp_path, {"mis": MISCONCEPTION, "one": ONE_LINE})
    assert similarity.find_matches(answers, course, exercise_stubs(ROOT / "exercises"))[1] == []
    one_line_course = [CourseFile("notebooks/x.ipynb", ONE_LINE)]
    assert similarity.find_matches(answers, one_line_course, [])[1] == []  # a line or two: never "copied"
    assert similarity.find_matches(answers, models, [])[1]  # what the package would have flagged


def test_the_command_takes_the_download_zip_and_several_sections(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import zipfile

    from lessonlib import cli

    section_a = _zip_of(tmp_path / "canvas.zip", {"nguyenann_11_901_02_masking.ipynb": LOOPS})
    section_b = tmp_path / "moodle"
    write_learner(section_b / "Bo Okafor_1001_assignsubmission_file_", {"02_masking.ipynb": notebook(
        "02_masking.ipynb", answers={"masked_softmax": LOOPS_RENAMED}, source=EXERCISES)})
    assert zipfile.is_zipfile(section_a)
    assert cli.main(["similarity", str(section_a), str(section_b), "--out", str(tmp_path / "week2"),
                     "--also", str(tmp_path / "week2-moodle")]) == 0
    page = (tmp_path / "week2" / "similarity.html").read_text()
    assert "nguyenann (nguyenann_11)" in page and "Bo Okafor (Bo_Okafor_1001)" in page  # across the sections


def _zip_of(path: Path, answers: dict[str, str]) -> Path:
    import zipfile

    import nbformat

    with zipfile.ZipFile(path, "w") as zf:
        for name, code in answers.items():
            zf.writestr(name, nbformat.writes(notebook("02_masking.ipynb", answers={"masked_softmax": code},
                                                       source=EXERCISES)))
    return path


def test_fingerprints_are_the_same_in_every_process() -> None:
    """copydetect's own k-gram hash is Python's hash(), salted per process: a report on the same
    files would change from one run to the next."""
    import subprocess
    import sys

    answer = repr(MISCONCEPTION)
    script = ("from lessonlib.grading.reports import similarity as s; "
              f"print(sorted(s._fingerprint(s.normalise({answer}), True, s.np.array([], dtype=s.np.int64)).hashes))")
    runs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1 and runs != {"[]\n"}

