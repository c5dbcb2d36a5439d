"""similarity-report.html: near-identical answers between learners, and answers copied from the
course's own code, per exercise answer cell, side by side. Flagged for a look, never a penalty.

The comparison is copydetect's (MIT licence; Schleimer, Wilkerson and Aiken's winnowing, the
method behind MOSS). Code is first put in a canonical form (``normalise.py``: statements that do
nothing dropped, statements that do not depend on each other in one order), so padding a copy or
shuffling it hides nothing; the report shows the code as compared. It is then tokenised by
Pygments and names, strings and comments are replaced by placeholders, so renaming variables or
rewording comments does not hide a copy either; k-grams of ``NOISE`` tokens are hashed (by
:func:`kgram_hashes`, the same in every run) and winnowed with a window that guarantees any common
run of ``GUARANTEE`` tokens is found. What every learner was given (the released exercise
notebooks' code cells: signatures, docstrings, stubs) is boilerplate, removed before comparing, so
two untouched stubs are not a match. Written answers are compared as plain text (no tokenising).
copydetect's "tokens" are the characters of the filtered code, where a name counts as one.

Two learners' answers to one exercise are flagged when the copied part is at least ``THRESHOLD``
of either answer (copydetect's similarity: overlapping tokens over the tokens compared) and at
least ``MIN_COPIED`` tokens long (short answers converge honestly). An answer is flagged as from
the course when it has at least ``MIN_LINES`` statements and ``MIN_COPIED`` tokens, and at least
``THRESHOLD`` of it is found in one piece of the course's code: a code cell of a lesson or
solutions notebook, or a module of lessonlib's engine (not ``lessonlib.exercises``, whose models of
misconceptions are wrong answers on purpose: a learner who shares a misconception has not copied
it). The course's code comes from the checkout lessonlib runs from (``course.course_files``), or
the list given.

The page renders alone (inline style, no script), every answer escaped, the copied parts marked
(``<mark>``, bold and underlined as well as shaded). The grading commands call::

    from lessonlib.grading.reports import similarity
    similarity.write_similarity_report(path, learners, course=None, stubs=None,
                                       identical=similarity.identical_files(gradebook, assignment))
    # learners: the submissions.Learner list of the run (name, key, files by course notebook)

The answers are read from the run's notebooks (the gradebook keeps their hashes, not their text),
so answers are compared within one run; ``identical_files`` adds, from the gradebook, every
notebook file handed in byte for byte by two learners in any run of the assignment.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.learners import Learner
from lessonlib.grading.notebooks import assignment_courses, read_notebook
from lessonlib.grading.reports.course import CourseFile, course_files, exercise_stubs
from lessonlib.grading.reports.normalise import normalise
from lessonlib.grading.reports.page import document, esc, esc_block, table
from lessonlib.grading.run.plans import plan_notebook

if TYPE_CHECKING:
    from copydetect import CodeFingerprint

REPORT = "similarity-report.html"
NOISE, GUARANTEE = 12, 18  # copydetect's noise and guarantee thresholds, in tokens (its defaults: 25, 30)
THRESHOLD = 0.8  # of an answer found in the other
MIN_COPIED = 40  # tokens in common, for a pair of learners and for a copy of the course
MIN_LINES = 3  # statements an answer needs before it can be "from the course"
SIDE_BY_SIDE = 60  # pairs shown in full; the table lists every one
MARK = "background:#fff3a3;font-weight:700;text-decoration:underline"


@dataclass(frozen=True)
class Answer:
    """One learner's answer to one exercise (code) or written question (text)."""

    key: str
    name: str
    notebook: str
    exercise: str
    text: str
    code: bool


@dataclass(frozen=True)
class Match:
    """Two answers (or an answer and a piece of the course) that share a copied part."""

    exercise: str
    left: str  # "Ann (ann)" or the course file's label
    right: str
    left_text: str
    right_text: str
    left_share: float  # of the left text found in the right
    right_share: float
    copied: int  # tokens in common
    left_slices: tuple[tuple[int, int], ...]
    right_slices: tuple[tuple[int, int], ...]


def learner_answers(learners: Sequence[Learner]) -> list[Answer]:
    """Every answer cell and written answer of every learner, as the grader finds them."""
    courses = {c.name: c for c in assignment_courses(())}
    found = []
    for ln in learners:
        for notebook, path in sorted(ln.files.items()):
            course = courses.get(notebook)
            if course is None:
                continue
            plans, written = plan_notebook(course, read_notebook(Path(path)))
            for plan in plans:
                source = next((s.source for s in plan.program if s.label == "answer"), None)
                if source and source.strip():
                    found.append(Answer(ln.key, ln.name, notebook, plan.exercise, normalise(source), True))
            for w in written:
                if w.text:
                    found.append(Answer(ln.key, ln.name, notebook, w.question.name, w.text, False))
    return found


_KGRAM_BASE = np.uint64(1_000_003)
_MIX = (np.uint64(30), np.uint64(0xBF58476D1CE4E5B9), np.uint64(27), np.uint64(0x94D049BB133111EB), np.uint64(31))


def kgram_hashes(text: str, k: int) -> np.ndarray:
    """(len(text) - k + 1,) int64 hashes of every k-gram of ``text``, the same in every process.

    copydetect hashes k-grams with Python's ``hash()``, which is salted per process
    (PYTHONHASHSEED): winnowing would keep different fingerprints on every run, and a report on
    the same files could change from one run to the next. Here h(t[i:i+k]) = sum_j t[i+j] B^(k-1-j)
    mod 2^64 over the characters' code points, then mixed (splitmix64's finaliser) so that a
    window's minimum is not drawn to small characters.
    """
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)  # (len(text),)
    n = codes.size - k + 1
    if n <= 0:
        return np.array([], dtype=np.int64)
    h = np.zeros(n, dtype=np.uint64)  # (n,)
    s1, m1, s2, m2, s3 = _MIX
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * _KGRAM_BASE + codes[j:j + n]
        h ^= h >> s1
        h *= m1
        h ^= h >> s2
        h *= m2
        h ^= h >> s3
    return h.view(np.int64)


def _copydetect() -> ModuleType:
    """copydetect, imported when used (it imports matplotlib.pyplot), its k-grams hashed by
    :func:`kgram_hashes` (its fingerprints look the function up when they are made)."""
    import copydetect
    import copydetect.utils

    copydetect.utils.hashed_kgrams = kgram_hashes
    return copydetect


def _fingerprint(text: str, code: bool, boilerplate: np.ndarray) -> CodeFingerprint:
    return _copydetect().CodeFingerprint("answer.py" if code else "answer.txt", NOISE, GUARANTEE - NOISE + 1,
                           boilerplate=boilerplate if code else None, filter=code, language="python" if code else None,
                           fp=io.StringIO(text))


def boilerplate_hashes(stubs: Sequence[str]) -> np.ndarray:
    """The fingerprints of what every learner was given."""
    hashes: set[int] = set()
    for stub in stubs:
        hashes |= _fingerprint(normalise(stub), True, np.array([], dtype=np.int64)).hashes
    return np.array(sorted(hashes), dtype=np.int64)


def _slices(raw: np.ndarray) -> tuple[tuple[int, int], ...]:
    if len(raw) == 0 or len(raw[0]) == 0:
        return ()
    return tuple((int(a), int(b)) for a, b in zip(raw[0], raw[1]))


def _compare(exercise: str, left: tuple[str, str, CodeFingerprint], right: tuple[str, str, CodeFingerprint]
             ) -> Match | None:
    (lname, ltext, lfp), (rname, rtext, rfp) = left, right
    if not lfp.hashes & rfp.hashes:
        return None
    copied, (ls, rs), (lsl, rsl) = _copydetect().compare_files(lfp, rfp)
    return Match(exercise, lname, rname, ltext, rtext, float(ls), float(rs), int(copied), _slices(lsl), _slices(rsl))


def find_matches(answers: Sequence[Answer], course: Sequence[CourseFile], stubs: Sequence[str], *,
                 threshold: float = THRESHOLD, min_copied: int = MIN_COPIED) -> tuple[list[Match], list[Match]]:
    """(pairs of learners, copies of the course), most similar first."""
    boilerplate = boilerplate_hashes(stubs)
    prints = {id(a): _fingerprint(a.text, a.code, boilerplate) for a in answers}
    pairs = []
    by_exercise: dict[tuple[str, str], list[Answer]] = {}
    for a in answers:
        by_exercise.setdefault((a.notebook, a.exercise), []).append(a)
    for (_, exercise), group in by_exercise.items():
        for a, b in itertools.combinations(sorted(group, key=lambda x: x.key), 2):
            m = _compare(exercise, (f"{a.name} ({a.key})", a.text, prints[id(a)]),
                         (f"{b.name} ({b.key})", b.text, prints[id(b)]))
            if m and m.copied >= min_copied and max(m.left_share, m.right_share) >= threshold:
                pairs.append(m)
    course_prints = [(f.label, text, _fingerprint(text, True, boilerplate))
                     for f in course for text in [normalise(f.text)]]
    copies = []
    for a in answers:
        if not a.code or _statements(a.text) < MIN_LINES:
            continue  # a line or two: the course and the learner may write it alike honestly
        best = None
        for piece in course_prints:
            m = _compare(a.exercise, (f"{a.name} ({a.key})", a.text, prints[id(a)]), piece)
            if (m and m.left_share >= threshold and m.copied >= min_copied
                    and (best is None or m.left_share > best.left_share)):
                best = m
        if best is not None:
            copies.append(best)
    return sorted(pairs, key=_most_similar), sorted(copies, key=_most_similar)


def _statements(code: str) -> int:
    """The statements of (normalised) code, nested ones included; its lines when it does not parse."""
    import ast

    try:
        return sum(isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for node in ast.walk(ast.parse(code)))
    except (SyntaxError, ValueError, RecursionError):
        return len([line for line in code.splitlines() if line.strip()])


def _most_similar(m: Match) -> tuple[float, str, str]:
    return -max(m.left_share, m.right_share), m.exercise, m.left


# --- the page -------------------------------------------------------------------------------------


def marked(text: str, slices: Sequence[tuple[int, int]]) -> str:
    """``text`` escaped, with the copied slices in ``<mark>``."""
    spans = sorted((max(0, a), min(len(text), b)) for a, b in slices if b > a)
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, at = [], 0
    for a, b in merged:
        out += [esc_block(text[at:a]), f'<mark style="{MARK}">{esc_block(text[a:b])}</mark>']
        at = b
    out.append(esc_block(text[at:]))
    return "".join(out)


def _pair_html(m: Match) -> str:
    return (f"<section class=\"answer\"><h3>{esc(m.exercise)}: {esc(m.left)} and {esc(m.right)}</h3>"
            f"<p>{m.left_share:.0%} of the first found in the second; {m.right_share:.0%} of the second in the "
            f"first; {m.copied} tokens in common.</p><div class=\"pair\">"
            f"<div><p><strong>{esc(m.left)}</strong></p><pre>{marked(m.left_text, m.left_slices)}</pre></div>"
            f"<div><p><strong>{esc(m.right)}</strong></p><pre>{marked(m.right_text, m.right_slices)}</pre></div>"
            "</div></section>")


@dataclass(frozen=True)
class Identical:
    """One notebook file handed in byte for byte by several learners (the gradebook's hashes)."""

    assignment: str
    notebook: str
    learners: tuple[str, ...]  # "Name (key)"


def identical_files(gradebook: object, assignment: str | Sequence[str], *,
                    given: Sequence[Path] = ()) -> list[Identical]:
    """Files of ``assignment`` (or of several: the sections of one assignment) with one sha256 for two
    or more learners, whichever run graded them; files identical to one of ``given`` (the released
    notebooks: handed in untouched) are left out."""
    import hashlib

    names = [assignment] if isinstance(assignment, str) else list(assignment)
    untouched = {hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in given}
    rows = gradebook.conn.execute(  # type: ignore[attr-defined]
        "SELECT f.notebook, f.sha256, l.key, l.name, a.name AS assignment FROM submission_files f "
        "JOIN submissions s ON s.id = f.submission_id JOIN learners l ON l.id = s.learner_id "
        f"JOIN assignments a ON a.id = s.assignment_id WHERE a.name IN ({', '.join('?' * len(names))}) "
        "AND f.sha256 != '' ORDER BY f.notebook, l.key", names)
    found: dict[tuple[str, str], list[str]] = {}
    places: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row["sha256"] not in untouched:
            found.setdefault((row["notebook"], row["sha256"]), []).append(f"{row['name']} ({row['key']})")
            places.setdefault((row["notebook"], row["sha256"]), set()).add(row["assignment"])
    return [Identical(" and ".join(sorted(places[k])), k[0], tuple(who)) for k, who in sorted(found.items())
            if len(who) >= 2]


def groups(pairs: Sequence[Match]) -> list[tuple[str, list[str]]]:
    """Per exercise, the learners linked by flagged pairs (three or more), largest first."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(x: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for m in pairs:
        parent[root((m.exercise, m.left))] = root((m.exercise, m.right))
    found: dict[tuple[str, str], list[str]] = {}
    for x in list(parent):
        found.setdefault(root(x), []).append(x[1])
    linked = [(top[0], sorted(members)) for top, members in found.items() if len(members) >= 3]
    return sorted(linked, key=lambda g: (-len(g[1]), g[0]))


def similarity_report_html(pairs: Sequence[Match], copies: Sequence[Match], *, answers: int,
                           threshold: float = THRESHOLD, identical: Sequence[Identical] = ()) -> str:
    """The whole page (see the module's docstring)."""
    summary = [f'<tr><th scope="row">{esc(m.exercise)}</th><td>{esc(m.left)}</td><td>{esc(m.right)}</td>'
               f"<td>{max(m.left_share, m.right_share):.0%}</td></tr>" for m in [*pairs, *copies]]
    body = ["<h1>Similarity: answers to look at</h1>",
            '<p class="note"><strong>Flagged for a look, never a penalty by itself.</strong> A match says two '
            "texts share a long run of the same code once names, strings and comments are set aside. Short "
            "answers to one exercise can converge honestly, learners may have worked together as allowed, and "
            "code from the course may be quoted on purpose: read both sides, then talk to the learner.</p>",
            f"<p>{answers} answer(s) compared, per exercise answer cell and written question. Flagged: at least "
            f"{threshold:.0%} of an answer found in another learner's answer to the same exercise (and "
            f"{MIN_COPIED} tokens or more in common), or in one piece of the course's code (lesson and "
            f"solutions notebooks, lessonlib's engine), for answers of {MIN_LINES} statements or more. What the "
            "exercise notebooks give every learner is left out. Code is shown as it was compared: comments, "
            "docstrings and statements that do nothing removed, statements that do not depend on each other in "
            "one order. Copied parts are marked (shaded, bold and underlined). Names are for the instructor "
            "only.</p>"]
    if summary:
        body.append(table("Every flagged match, most similar first", ("exercise", "answer", "found in", "share"),
                          summary))
    if identical:
        body.append("<h2>Identical files</h2><p>The same file, byte for byte, handed in by several learners "
                    "(from the gradebook, across every grading run of the assignment):</p><ul>" + "".join(
                        f"<li>{esc(i.assignment)}, {esc(i.notebook)}: {esc('; '.join(i.learners))}</li>"
                        for i in identical) + "</ul>")
    linked = groups(pairs)
    if linked:
        body.append("<h2>Groups sharing one answer</h2><ul>" + "".join(
            f"<li>{esc(exercise)}, {len(members)} learners: {esc('; '.join(members))}</li>"
            for exercise, members in linked) + "</ul>")
    for title, found, none in ((f"Between learners ({len(pairs)})", pairs,
                                "No two learners' answers to one exercise are near-identical."),
                               (f"From the course's own code ({len(copies)})", copies,
                                "No answer was found in the course's own code.")):
        body.append(f"<h2>{title}</h2>")
        body += [_pair_html(m) for m in found[:SIDE_BY_SIDE]] or [f"<p>{none}</p>"]
        if len(found) > SIDE_BY_SIDE:
            body.append(f"<p>{len(found) - SIDE_BY_SIDE} more, shown in the table above only.</p>")
    return document("Similarity report", body)


def write_similarity_report(path: Path, learners: Sequence[Learner], *, course: Sequence[CourseFile] | None = None,
                            stubs: Sequence[str] | None = None, threshold: float = THRESHOLD,
                            identical: Sequence[Identical] = ()) -> Path:
    """Compare every learner's answers and write the page to ``path`` (a file, or a folder to hold
    similarity-report.html); returns the file's path. ``course``: the course's code (default: the
    checkout's notebooks, solutions and lessonlib); ``stubs``: what learners were given (default: the
    checkout's exercise notebooks); ``identical``: from :func:`identical_files`, listed first."""
    answers = learner_answers(learners)
    pairs, copies = find_matches(answers, course_files() if course is None else course,
                                 exercise_stubs() if stubs is None else stubs, threshold=threshold)
    path = Path(path)
    if path.is_dir():
        path = path / REPORT
    atomic_write_text(path, similarity_report_html(pairs, copies, answers=len(answers), threshold=threshold,
                                                   identical=identical))
    return path
