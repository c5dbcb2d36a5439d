"""What a learner's feedback says, written once as blocks, and those blocks as Markdown.

``feedback/KEY.md`` (:func:`to_markdown`), ``feedback/KEY.html`` (:mod:`feedback_html`) and the
Gradescope output render the same blocks, so they never say different things. A block is a
heading, a paragraph of styled spans, a quotation of someone's own words (a written answer, an
instructor's comment), a box holding a value (expected, got), a bulleted list, a table or a rule.

Of hidden cases a learner is told how many passed ("3 of 4 hidden cases passed") and nothing else:
no id, description, input, order or per-case status, and no diagnosis resting on them. When the
expected and returned values are described alike (``an array of shape (4, 6), float64`` twice),
one box says so and the detail names the entries that differ. :func:`summary_text` is the short
plain-text summary for Moodle's "Feedback comments" column.

In Markdown every text is inert, whoever wrote it: inline text is escaped and one line, a quotation
or a value is a code block that nothing in it can close (:mod:`safe_text` does both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lessonlib.exercises.results import HIDDEN_ONLY, hidden_line
from lessonlib.grading import records as r
from lessonlib.grading.reports.safe_text import markdown_block, markdown_code, markdown_inline

MAX_CASES = 4  # failed cases shown per exercise
SUMMARY_MARK = "Automatic grading:"  # how the Feedback comments summary begins (and is found again)


@dataclass(frozen=True)
class Span:
    """A run of text: plain, ``strong``, ``code`` or ``em``."""

    text: str
    style: str = ""


Spans = tuple[Span, ...]


def spans(*parts: str | Span) -> Spans:
    return tuple(p if isinstance(p, Span) else Span(p) for p in parts)


@dataclass(frozen=True)
class Heading:
    level: int
    text: Spans


@dataclass(frozen=True)
class Para:
    text: Spans


@dataclass(frozen=True)
class Quote:
    """Someone's own words (a written answer, a comment), shown as written."""

    text: str


@dataclass(frozen=True)
class Box:
    """A value shown verbatim under a label (expected, got)."""

    label: str
    text: str


@dataclass(frozen=True)
class Item:
    text: Spans
    children: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Bullets:
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Rule:
    pass


Block = Heading | Para | Quote | Box | Bullets | Table | Rule


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


# --- what the feedback says ---------------------------------------------------------------------


def _questions(g: r.ExerciseGrade) -> list[Block]:
    return [Para(spans(note)) for note in g.notes if note.startswith("Question:")]


def _written_blocks(g: r.ExerciseGrade) -> list[Block]:
    """A written answer: graded by hand, or waiting for a person."""
    if g.status == r.GRADED_BY_HAND:
        title = f"{g.exercise} (written answer): {_num(g.points)} / {_num(g.max_points)} points, graded by hand"
        blocks: list[Block] = [Heading(3, spans(title)), *_questions(g)]
        if g.answer_text:
            blocks += [Para(spans("Your answer:")), Quote(g.answer_text)]
        if g.diagnosis:
            blocks.append(Para(spans(f"Rubric: {g.diagnosis}")))
        if g.reason:
            blocks += [Para(spans("Your instructor's comment:")), Quote(g.reason)]
        return blocks
    words = r.STATUS_WORDS.get(g.status, g.status)
    blocks = [Heading(3, spans(f"{g.exercise} (written answer, {_num(g.max_points)} points): {words}")), *_questions(g)]
    if g.answer_text:
        blocks += [Para(spans("Your answer:")), Quote(g.answer_text),
                   Para(spans(Span("Needs manual grading", "strong"),
                              f" ({_num(g.max_points)} points): your instructor reads this answer."))]
    elif g.reason:
        blocks.append(Para(spans(g.reason)))
    return blocks


def _alike(f: dict) -> list[Block]:
    """One box when expected and got read the same: what differs is in the detail, or said plainly."""
    why = f.get("detail") or ("The shapes and types agree; the values differ." if f["reason"] == "wrong_values"
                              else f"They differ: {f['reason'].replace('_', ' ')}.")
    return [Box("expected and got, described alike:", f["expected"]), Para(spans(why))]


def _case_item(f: dict) -> Item:
    if f["expected"] == f["got"]:
        children = _alike(f)
    else:
        children = [Box("expected:", f["expected"]), Box("got:", f["got"])]
        if f.get("detail"):
            children.append(Para(spans(f["detail"])))
    return Item(spans(Span(f["case"], "code"), f": {f['description']}"), tuple(children))


def exercise_blocks(g: r.ExerciseGrade, *, hidden: bool = True) -> list[Block]:
    """The feedback of one exercise or written answer.

    ``hidden`` False: its public part alone (Gradescope's public test), saying nothing of hidden
    cases, not even the exercise's points, which count them.
    """
    if g.kind == "manual":
        return _written_blocks(g)
    shown = [f for f in g.failed_cases if not f.get("hidden", True)]  # a hidden case: counted, never listed
    words = r.STATUS_WORDS.get(g.status, g.status)
    reason = g.reason
    if hidden or not g.hidden_total:
        title = f"{g.exercise}: {_num(g.points)} / {_num(g.max_points)} points, {words}"
    elif shown:
        title = f"{g.exercise}, public cases: {'failed' if g.status in (r.PASSED, r.FAILED) else words}"
    else:  # every public case passed: whatever else the status says is about the hidden ones
        title = f"{g.exercise}, public cases: passed"
        public = g.total_cases - g.hidden_total
        reason = f"{g.passed_cases - g.hidden_passed} of {public} public cases passed."
    blocks: list[Block] = [Heading(3, spans(title))]
    if reason:
        blocks.append(Para(spans(reason)))
    if g.hidden_total and hidden:
        blocks.append(Para(spans(hidden_line(g.hidden_passed, g.hidden_total) + ".")))
        if g.status == r.FAILED and not shown:
            blocks.append(Para(spans(HIDDEN_ONLY)))
    if g.diagnoses:
        items = tuple(Item(spans(Span(d["title"], "strong"), " (", Span(d["name"], "code"), f"): {d['message']}"),
                           (Bullets((Item(spans(f"Hint: {d['hint']}")), Item(spans(f"Reread: {d['reread']}")))),))
                      for d in g.diagnoses)
        blocks += [Para(spans(Span("What your answer shows", "strong"))), Bullets(items)]
    if shown:
        items = tuple(_case_item(f) for f in shown[:MAX_CASES])
        if len(shown) > MAX_CASES:
            items += (Item(spans(f"... and {len(shown) - MAX_CASES} more")),)
        blocks += [Para(spans(Span("Cases that failed", "strong"))), Bullets(items)]
    blocks += [Para(spans(f"Note: {note}")) for note in g.notes]
    return blocks


def overrides_sentence(result: r.LearnerResult) -> str:
    """Which scores the instructor set, and why ("" when none): a total is never called automatic
    without saying so."""
    set_by_hand = [g for g in result.exercises if g.override_reason]
    if not set_by_hand:
        return ""
    return "Set by your instructor: " + "; ".join(f"{g.exercise} {_num(g.points)} of {_num(g.max_points)} "
                                                  f"({g.override_reason})" for g in set_by_hand) + "."


def feedback_blocks(result: r.LearnerResult) -> list[Block]:
    """The whole feedback of one learner: totals, a table of exercises, then each exercise."""
    manual = [g for g in result.exercises if g.kind == "manual"]
    total = spans("Automatic checks: ", Span(f"{_num(result.auto_points)} / {_num(result.auto_max_points)} points",
                                             "strong"), ".")
    if overrides_sentence(result):
        total += spans(" " + overrides_sentence(result))
    if result.manual_pending:
        total += spans(f" Written answers ({_num(result.manual_pending)} points) are graded by hand.")
    elif any(g.status == r.GRADED_BY_HAND for g in manual):
        total += spans(" Total with the written answers: ",
                       Span(f"{_num(result.points)} / {_num(result.max_points)} points", "strong"), ".")
    rows = tuple((g.notebook.removesuffix(".ipynb"), g.exercise,
                  "to be graded" if g.points is None else f"{_num(g.points)} / {_num(g.max_points)}",
                  r.STATUS_WORDS.get(g.status, g.status)) for g in result.exercises)
    blocks: list[Block] = [Heading(1, spans(f"Feedback: {result.learner}")), Para(total),
                           Table(("notebook", "exercise", "points", "result"), rows)]
    if result.late_note:
        blocks.append(Para(spans("Late: ", Span(result.late_note, "strong"),
                                 f" Total after the late policy: {_num(result.points)} / {_num(result.max_points)}.")))
    blocks += [Para(spans(f"Note: {note}")) for note in result.notes]
    for notebook in dict.fromkeys(g.notebook for g in result.exercises):
        blocks.append(Heading(2, spans(notebook)))
        for g in result.exercises:
            if g.notebook == notebook:
                blocks += exercise_blocks(g)
    if manual:
        blocks += [Rule(), Para(spans(Span('Written answers marked "needs manual grading" have no points yet.',
                                           "em")))]
    return blocks


def summary_text(result: r.LearnerResult | None, *, most: int = 3) -> str:
    """A few plain sentences for an LMS comment box: points, what to revisit, what is still to grade."""
    if result is None:
        return f"{SUMMARY_MARK} no submission was found."
    auto = [g for g in result.exercises if g.kind == "auto"]
    passed = sum(g.status == r.PASSED for g in auto)
    text = (f"{SUMMARY_MARK} {_num(result.auto_points)} / {_num(result.auto_max_points)} points "
            f"({passed} of {len(auto)} exercises passed).")
    if overrides_sentence(result):
        text += " " + overrides_sentence(result)
    revisit = [g.exercise for g in auto if g.status != r.PASSED]
    if revisit:
        more = f" and {len(revisit) - most} more" if len(revisit) > most else ""
        text += f" To revisit: {', '.join(revisit[:most])}{more}."
    if result.manual_pending:
        text += f" Written answers ({_num(result.manual_pending)} points) are graded by hand."
    elif any(g.status == r.GRADED_BY_HAND for g in result.exercises):
        text += f" Total with the written answers: {_num(result.points)} / {_num(result.max_points)} points."
    return text + " Your feedback file has the details."


# --- Markdown -------------------------------------------------------------------------------------


def _inline(text: Spans) -> str:
    out = []
    for s in text:
        if s.style == "code":
            out.append(markdown_code(s.text))
        elif s.style in ("strong", "em"):
            mark = "**" if s.style == "strong" else "_"
            out.append(f"{mark}{markdown_inline(s.text)}{mark}" if s.text else "")
        else:
            out.append(markdown_inline(s.text))
    return "".join(out)


def _indent(lines: Sequence[str]) -> list[str]:
    return ["  " + line if line else "" for line in lines]


def _item_lines(item: Item) -> list[str]:
    lines = ["- " + _inline(item.text)]
    for child in item.children:
        lines += ([] if isinstance(child, Bullets) else [""]) + _indent(_block_lines(child))
    return lines + ([""] if any(not isinstance(c, Bullets) for c in item.children) else [])


def _block_lines(block: Block) -> list[str]:
    if isinstance(block, Heading):
        return ["#" * block.level + " " + _inline(block.text)]
    if isinstance(block, Para):
        return [_inline(block.text)]
    if isinstance(block, Quote):
        return markdown_block(block.text)
    if isinstance(block, Box):
        return [markdown_inline(block.label), "", *markdown_block(block.text)]
    if isinstance(block, Bullets):
        lines = [line for item in block.items for line in _item_lines(item)]
        return lines[:-1] if lines and not lines[-1] else lines
    if isinstance(block, Table):
        return ["| " + " | ".join(map(markdown_inline, block.header)) + " |", "|" + "---|" * len(block.header),
                *("| " + " | ".join(map(markdown_inline, row)) + " |" for row in block.rows)]
    return ["---"]


def markdown_lines(blocks: Sequence[Block]) -> list[str]:
    """Blocks as Markdown lines, a blank line after each block; no text in them is Markdown syntax."""
    return [line for block in blocks for line in [*_block_lines(block), ""]]


def to_markdown(blocks: Sequence[Block]) -> str:
    return "\n".join(markdown_lines(blocks)).rstrip() + "\n"
