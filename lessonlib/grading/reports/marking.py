"""Hand grading a person can do: one marking page per written question, manual.csv's answer column,
and a written question in Gradescope's results as a manual question.

``marking/QUESTION.html`` shows every learner's written answer to one question beside the question,
its rubric (each criterion with what earns each score) and the model answer from the solutions
notebook. Learners are anonymised by default: "Learner 1" to "Learner N", numbered in the order of
an HMAC of their keys under the course's marking secret (kept in the course gradebook, never shown:
without it, the roster alone cannot undo the numbering; the same learner has the same number on
every page, and on every run while the class is the same). ``marking/key.csv`` maps the numbers to
the learner keys and names of manual.csv; the pages never hold a name or a key. With
``show_names=True`` the pages show names and keys instead, and no key file is written.

The grading commands call (nothing here reads or writes the gradebook)::

    from lessonlib.grading.reports import marking
    marking.write_marking_pages(out, results, solutions=None, show_names=False, secret=SECRET)  # -> the paths

``manual.py`` gains the answer text with one change in ``write_manual``::

    writer.writerow(MANUAL_COLUMNS + (marking.ANSWER_COLUMN,))
    writer.writerows(csv_row(row) for row in marking.with_answers(manual_rows(results, marks), results))

(``read_manual`` reads columns by name, so the extra column needs nothing on the way back.)

Gradescope: a written question is a manual question of the Gradescope assignment (a question of
the outline, graded there by a person), not a test. ``gradescope._tests`` should skip
``kind == "manual"`` grades (``if g.kind == "manual": continue``), and ``run_autograder`` adds
``marking.gradescope_written(grades)`` to its overall output lines.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lessonlib.exercises import MANUAL_QUESTIONS, SECTIONS, ManualQuestion
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.reports.course import model_answer
from lessonlib.grading.reports.page import document, esc, esc_block, table
from lessonlib.grading.reports.safe_text import csv_row

MARKING_FOLDER = "marking"
KEY_FILE = "key.csv"
ANSWER_COLUMN = "answer"
SHOWN = (r.NEEDS_MANUAL, r.GRADED_BY_HAND)  # a written answer there is to read


@dataclass(frozen=True)
class Answer:
    """One learner's written answer to one question, as the marking page shows it."""

    label: str  # "Learner 3", or the learner's name with show_names
    text: str | None
    status: str
    points: float | None
    max_points: float
    rubric: str = ""  # the rubric line given with a hand grade
    comment: str = ""
    review: str = ""  # why an earlier hand grade was withdrawn (the answer changed)


def learner_numbers(keys: Sequence[str], secret: bytes) -> dict[str, int]:
    """key -> 1..N, in the order of HMAC-SHA256(secret, key): stable for a set of keys and a secret,
    and without the secret no better than a random order."""
    ordered = sorted(set(keys), key=lambda k: (hmac.new(secret, k.encode("utf-8"), hashlib.sha256).hexdigest(), k))
    return {key: n for n, key in enumerate(ordered, start=1)}


def _label(result: r.LearnerResult, numbers: dict[str, int], show_names: bool) -> str:
    return f"{result.learner} ({result.key})" if show_names else f"Learner {numbers[result.key]}"


def question_answers(results: Sequence[r.LearnerResult], question: str, *, secret: bytes,
                     show_names: bool = False) -> list[Answer]:
    """Every learner's answer to ``question``, by number (or by name with show_names)."""
    numbers = learner_numbers([res.key for res in results], secret)
    found = []
    for res in results:
        for g in res.exercises:
            if g.kind == "manual" and g.exercise == question:
                rubric, comment = (g.diagnosis, g.reason) if g.status == r.GRADED_BY_HAND else ("", "")
                order = (res.learner.lower(), res.key) if show_names else (numbers[res.key], "")
                found.append((order, Answer(_label(res, numbers, show_names), g.answer_text, str(g.status),
                                            g.points, g.max_points, rubric, comment, g.review)))
    return [a for _, a in sorted(found, key=lambda pair: pair[0])]


def _rubric_html(question: ManualQuestion) -> list[str]:
    if not question.rubric:
        return ["<p>No rubric is recorded for this question.</p>"]
    rows = []
    for n, item in enumerate(question.rubric, start=1):
        anchors = "".join(f"<li><strong>{k}</strong>: {esc(a)}</li>" for k, a in enumerate(item.anchors))
        rows.append(f'<tr><th scope="row">{n}. {esc(item.criterion)}</th><td>0 to {item.points}</td>'
                    f'<td><ul>{anchors}</ul></td></tr>')
    return [table(f"Rubric ({question.points:g} points)", ("criterion", "points", "what earns each score"), rows)]


def _answer_html(a: Answer) -> str:
    if a.status == r.GRADED_BY_HAND:
        given = f"Graded by hand: {a.points:g} of {a.max_points:g}" + (f"; rubric: {esc(a.rubric)}" if a.rubric else "")
        given += f". Comment: {esc(a.comment)}" if a.comment else "."
    else:
        given = f"Not graded yet (0 to {a.max_points:g} points)." + (f" Note: {esc(a.review)}." if a.review else "")
    return (f'<section class="answer"><h3>{esc(a.label)}</h3><p class="muted">{given}</p>'
            f"<pre>{esc_block(a.text or '')}</pre></section>")


def marking_page_html(question: ManualQuestion, answers: Sequence[Answer], model: str | None, *,
                      show_names: bool = False) -> str:
    """The marking page of one written question (see the module's docstring)."""
    shown = [a for a in answers if a.status in SHOWN and a.text]
    others: dict[str, list[str]] = {}
    for a in answers:
        if a not in shown:
            others.setdefault(r.STATUS_WORDS.get(a.status, a.status), []).append(a.label)
    pending = sum(a.status == r.NEEDS_MANUAL for a in shown)
    section = SECTIONS[question.section].pointer() if question.section in SECTIONS else question.section
    who = ("Learners are shown by name: keep this page to the people grading."
           if show_names else
           "Learners are anonymised: numbers, not names. The key file beside this page (key.csv) maps the "
           "numbers to the learner keys of manual.csv; open it only after marking.")
    body = [f"<h1>Marking: {esc(question.name)}</h1>",
            f"<p>{esc(question.notebook)}; {question.points:g} points. Where the topic is taught: {esc(section)}.</p>",
            f'<p class="note">{esc(who)} Enter points, a rubric line and a comment in manual.csv; '
            "the grader reads them back.</p>",
            "<h2>The question</h2>", f"<p>{esc(question.question)}</p>",
            "<h2>Rubric</h2>", *_rubric_html(question),
            "<h2>Model answer</h2>",
            f"<pre>{esc_block(model)}</pre>" if model else
            "<p>The model answer is not available here (no solutions notebook was found).</p>",
            f"<h2>Answers ({len(shown)}; {pending} not graded yet)</h2>"]
    body += [_answer_html(a) for a in shown] or ["<p>No learner has written an answer to this question.</p>"]
    if others:
        body.append("<h2>No answer to read</h2><ul>" + "".join(
            f"<li>{esc(words)} ({len(labels)}): {esc(', '.join(labels))}</li>" for words, labels in others.items())
                    + "</ul>")
    return document(f"Marking: {question.name}", body)


def key_csv(results: Sequence[r.LearnerResult], secret: bytes) -> str:
    """The key file: ``number,learner,name`` (learner is the key used in manual.csv)."""
    numbers = learner_numbers([res.key for res in results], secret)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(("number", "learner", "name"))
    names = {res.key: res.learner for res in results}
    writer.writerows(csv_row((f"Learner {n}", key, names[key])) for key, n in sorted(numbers.items(),
                                                                                      key=lambda kv: kv[1]))
    return buffer.getvalue()


def write_marking_pages(out: Path, results: Sequence[r.LearnerResult], *, solutions: Path | None = None,
                        show_names: bool = False, secret: bytes | None = None) -> list[Path]:
    """Write ``out/marking/QUESTION.html`` for every written question the results hold, and (anonymised)
    ``out/marking/key.csv``; returns the paths written. ``solutions``: the folder of the solutions
    notebooks (default: the course checkout's, when lessonlib runs from one). ``secret``: the course's
    marking secret (None: one drawn for this call, so the numbers hold for this call's pages alone)."""
    secret = secret if secret is not None else os.urandom(32)
    folder = Path(out) / MARKING_FOLDER
    names = list(dict.fromkeys(g.exercise for res in results for g in res.exercises if g.kind == "manual"))
    written = []
    for name in names:
        question = MANUAL_QUESTIONS.get(name)
        if question is None:
            continue  # a written question this version of the course no longer has
        page = marking_page_html(question, question_answers(results, name, secret=secret, show_names=show_names),
                                 model_answer(question, solutions), show_names=show_names)
        path = folder / f"{name}.html"
        atomic_write_text(path, page)
        written.append(path)
    if written and not show_names:
        atomic_write_text(folder / KEY_FILE, key_csv(results, secret), mode=0o600)
        written.append(folder / KEY_FILE)
    return written


# --- manual.csv and Gradescope -----------------------------------------------------------------------


def with_answers(rows: Sequence[Sequence[str]], results: Sequence[r.LearnerResult]) -> list[list[str]]:
    """manual.csv's rows (learner key first, exercise fifth, as ``manual.MANUAL_COLUMNS``) with the
    written answer's text appended (the ``answer`` column; empty when there is none)."""
    texts = {(res.key, g.exercise): g.answer_text or "" for res in results for g in res.exercises
             if g.kind == "manual"}
    return [[*row, texts.get((row[0], row[4]), "")] for row in rows]


def gradescope_written(grades: Sequence[r.ExerciseGrade]) -> list[str]:
    """Lines for Gradescope's overall output naming each written question, graded by hand in Gradescope.

    A written question is not a test of results.json (a 0/0 test reads as a check that passed or
    failed): it is a manual question of the Gradescope assignment, scored there by a person.
    """
    lines = []
    for g in grades:
        if g.kind != "manual":
            continue
        state = "an answer was found" if g.answer_text else "no answer was found"
        lines.append(f"Written question {g.exercise} ({g.notebook.removesuffix('.ipynb')}, {g.max_points:g} points): "
                     f"graded by hand in Gradescope, not by the autograder; {state}. Its points are not in "
                     "this score.")
    return lines
