"""term-report.html: across the course's assignments, which misconceptions persist, what to reteach,
and who needs help.

A misconception's *kind* is the notebook section its diagnosis sends the learner to reread: the
``section`` key of the exercise's :class:`DiagnosisSpec` (``SECTIONS``). Diagnoses of different
exercises that share a section are one kind: "Probabilities zeroed after the softmax" in
``masked_softmax`` and "Excluded after the softmax, without renormalising" in
``exclusion_effects`` both send the learner to "The wrong order: zeroing probabilities after the
softmax". A misconception **persists** for a learner when the same kind is diagnosed in their
answers to two or more different assignments (``PERSISTS_AFTER``); twice in one assignment (two
exercises of one week) is not persistence. For the class, a kind persists in as many learners as
it persists for. Diagnoses are the instructor's (every case, hidden ones included), as in the
class report.

Who needs help: a learner whose term total is below ``low`` of the points of the assignments
they handed in (default half), who missed an assignment that expects them, in whom a misconception persists, or
whose notebooks got a flagged status (stopped, crashed, answer missing, ...). Each reason is
said in words.

Sections: an assignment graded with a roster (``--roster``) expects only the learners its roster
lists (the store's enrolments); one graded without a roster expects every learner. A course taught
in two sections on two LMSs grades each week as two assignments, each with its section's roster, so
a learner of one section is never said to have missed the other section's work.

The page renders alone (inline style, no script, figures as PNG data URLs with alt text, hatching
and words rather than colour); every name and title is escaped. It names learners: it is for the
instructor. The grading commands call::

    from lessonlib.grading.reports import term
    term.write_term_report(path, gradebook)   # the store's Gradebook, open; -> path
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.exercises import EXERCISES, SECTIONS
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.reports.page import document, esc, figure, table

REPORT = "term-report.html"
PERSISTS_AFTER = 2  # assignments in which the same kind is diagnosed
LOW = 0.5  # of the points possible in the assignments handed in
TOP_FIGURE = 12


def misconception_kind(exercise: str, diagnosis: Mapping[str, object]) -> str:
    """The kind of a diagnosis: its section key (else the section it names, else its own name)."""
    name = diagnosis.get("name")
    spec = next((s for s in getattr(EXERCISES.get(exercise), "diagnoses", ()) if s.name == name), None)
    if spec is not None:
        return spec.section
    return str(diagnosis.get("reread") or name or "unnamed")


def kind_title(kind: str) -> str:
    """Where a kind is taught, for the page."""
    return SECTIONS[kind].pointer() if kind in SECTIONS else kind


@dataclass(frozen=True)
class Seen:
    """One diagnosis in one learner's answer."""

    assignment: str
    exercise: str
    name: str
    title: str


@dataclass
class Learner:
    """One learner across the term."""

    key: str
    name: str
    totals: dict[str, tuple[float, float]] = field(default_factory=dict)  # assignment -> (points, max)
    seen: dict[str, list[Seen]] = field(default_factory=dict)  # kind -> diagnoses, in assignment order
    flagged: list[str] = field(default_factory=list)  # "week2: masked_softmax (crashed)"
    pending: float = 0.0

    def persistent(self, after: int = PERSISTS_AFTER) -> dict[str, list[Seen]]:
        """The kinds diagnosed in ``after`` or more different assignments."""
        return {k: s for k, s in self.seen.items() if len({x.assignment for x in s}) >= after}

    @property
    def fraction(self) -> float | None:
        possible = sum(m for _, m in self.totals.values())
        return sum(p for p, _ in self.totals.values()) / possible if possible else None


@dataclass
class Kind:
    """One kind of misconception across the class."""

    kind: str
    learners: list[str] = field(default_factory=list)  # keys of learners who showed it
    persistent: list[str] = field(default_factory=list)  # keys of learners in whom it persists
    assignments: set[str] = field(default_factory=set)
    titles: dict[str, None] = field(default_factory=dict)  # diagnosis titles, in order seen


@dataclass
class TermSummary:
    assignments: list[str]
    learners: list[Learner]
    kinds: list[Kind]  # to reteach first: most persistent learners, then most learners
    enrolled: Mapping[str, set[str]] = field(default_factory=dict)  # assignment with a roster -> its keys

    def expects(self, assignment: str, learner: Learner) -> bool:
        """Whether ``assignment`` expects ``learner``: its roster lists them, or it was graded without one."""
        return assignment not in self.enrolled or learner.key in self.enrolled[assignment]

    def missed(self, learner: Learner) -> list[str]:
        """The assignments that expect ``learner`` and have no submission of theirs."""
        return [a for a in self.assignments if a not in learner.totals and self.expects(a, learner)]

    def help_reasons(self, learner: Learner, low: float = LOW) -> list[str]:
        """Why ``learner`` needs help, in words (empty: no reason found)."""
        reasons = []
        fraction = learner.fraction
        if fraction is not None and fraction < low:
            reasons.append(f"term total {fraction:.0%} of the points of the assignments handed in")
        missed = self.missed(learner)
        if missed:
            reasons.append(f"no submission to {', '.join(missed)}")
        for kind, seen in learner.persistent().items():
            places = "; ".join(f"{s.assignment} ({s.exercise}: {s.title})" for s in seen)
            reasons.append(f"persistent misconception, {kind_title(kind)}: {places}")
        if learner.flagged:
            reasons.append(f"flagged: {', '.join(learner.flagged)}")
        return reasons


def term_summary(totals: Sequence[object], results: Mapping[str, Sequence[r.LearnerResult]], *,
                 everyone: Mapping[str, str] | None = None,
                 enrolled: Mapping[str, set[str]] | None = None) -> TermSummary:
    """From ``store.term_results`` (rows with key, name, assignment, points, max_points, pending) and
    each assignment's ``store.learner_results``, in the order of ``results``; ``everyone`` (key -> name)
    adds the learners of the course who handed in nothing yet; ``enrolled`` (``store.enrolled``: an
    assignment graded with a roster -> the keys it lists) says whom those assignments expect."""
    learners: dict[str, Learner] = {key: Learner(key, name) for key, name in (everyone or {}).items()}
    for row in totals:
        ln = learners.setdefault(row.key, Learner(row.key, row.name))
        ln.totals[row.assignment] = (row.points, row.max_points)
        ln.pending += row.pending
    kinds: dict[str, Kind] = {}
    for assignment, graded in results.items():
        for res in graded:
            ln = learners.setdefault(res.key, Learner(res.key, res.learner))
            for g in res.exercises:
                if g.status in r.FLAGGED:
                    ln.flagged.append(f"{assignment}: {g.exercise} ({r.STATUS_WORDS.get(g.status, g.status)})")
                for d in g.instructor_diagnoses or g.diagnoses:
                    kind = misconception_kind(g.exercise, d)
                    title = str(d.get("title") or d.get("name"))
                    ln.seen.setdefault(kind, []).append(Seen(assignment, g.exercise, str(d.get("name")), title))
                    k = kinds.setdefault(kind, Kind(kind))
                    k.assignments.add(assignment)
                    k.titles[title] = None
                    if res.key not in k.learners:
                        k.learners.append(res.key)
    for ln in learners.values():
        for kind in ln.persistent():
            kinds[kind].persistent.append(ln.key)
    ranked = sorted(kinds.values(), key=lambda k: (-len(k.persistent), -len(k.learners), k.kind))
    ordered = sorted(learners.values(), key=lambda ln: (ln.name.lower(), ln.key))
    return TermSummary(list(results), ordered, ranked, dict(enrolled or {}))


# --- the page -------------------------------------------------------------------------------------


def kinds_figure(kinds: Sequence[Kind]) -> str:
    """Bars per kind: learners in whom it persists (hatched) and learners who showed it once."""
    from matplotlib.figure import Figure

    from lessonlib.plots import BAR_COLOUR

    shown = list(kinds[:TOP_FIGURE])
    fig = Figure(figsize=(7.5, 1.2 + 0.34 * len(shown)), dpi=80, layout="constrained")
    ax = fig.subplots()
    persist = [len(k.persistent) for k in shown][::-1]
    once = [len(k.learners) - len(k.persistent) for k in shown][::-1]
    ys = range(len(shown))
    ax.barh(ys, persist, color="#ffffff", edgecolor="#1a1a1a", hatch="//", label="persists (2+ assignments)")
    ax.barh(ys, once, left=persist, color=BAR_COLOUR, edgecolor="#1a1a1a", label="seen in one assignment")
    ax.set_yticks(list(ys), [textwrap.shorten(SECTIONS[k.kind].heading if k.kind in SECTIONS else k.kind, 55)
                             for k in shown][::-1])
    ax.set_xlabel("learners")
    ax.xaxis.get_major_locator().set_params(integer=True)
    fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    alt = ("Stacked horizontal bars, one per section to reteach, counting learners in whom the misconception "
           "persisted (hatched) and learners who showed it in one assignment only (plain): "
           + "; ".join(f"{kind_title(k.kind)}, {len(k.persistent)} persisting and "
                       f"{len(k.learners) - len(k.persistent)} once" for k in shown) + ".")
    return figure(fig, alt)


def _names(keys: Sequence[str], names: Mapping[str, str]) -> str:
    return esc(", ".join(names.get(k, k) for k in keys)) or "none"


def expected_note(summary: TermSummary) -> str:
    """The header's sentence on whom each assignment expects (the sections its rosters make)."""
    rostered = [a for a in summary.assignments if a in summary.enrolled]
    count = f"{len(summary.assignments)} assignment(s)"
    if not rostered:
        return f"{count}, none graded with a roster: every learner is expected at every assignment."
    sections = len({frozenset(summary.enrolled[a]) for a in rostered})
    rest = len(summary.assignments) - len(rostered)
    return (f"{count}, {len(rostered)} graded with a roster ({sections} distinct roster(s) of learners): "
            "a learner is expected only at assignments whose roster lists them"
            + (f"; the {rest} graded without a roster expect every learner." if rest else "."))


def _cell(summary: TermSummary, learner: Learner, assignment: str) -> str:
    """One learner's entry for one assignment: the total, "no submission", or "not expected"."""
    if assignment in learner.totals:
        points, possible = learner.totals[assignment]
        return f"{points:g} / {possible:g}"
    return "no submission" if summary.expects(assignment, learner) else '<span class="muted">not expected</span>'


def term_report_html(summary: TermSummary, *, low: float = LOW) -> str:
    """The whole page (see the module's docstring)."""
    names = {ln.key: ln.name for ln in summary.learners}
    persisting = [k for k in summary.kinds if k.persistent]
    body = ["<h1>Term report: what persists, what to reteach, who needs help</h1>",
            f"<p>{len(summary.learners)} learner(s) across {len(summary.assignments)} assignment(s): "
            f"{esc(', '.join(summary.assignments)) or 'none'}. Names are for the instructor only.</p>",
            f'<p class="note">{esc(expected_note(summary))}</p>',
            f'<p class="note">A misconception <strong>persists</strong> when the same kind of misconception is '
            f"diagnosed in a learner's answers to {PERSISTS_AFTER} or more different assignments. Its kind is "
            "the notebook section the diagnosis sends the learner to, so two exercises' diagnoses that send "
            "learners to one section are one kind (zeroing probabilities after the softmax in one week, "
            "excluding a key without renormalising in another).</p>",
            "<h2>Persistent misconceptions in the class</h2>"]
    if persisting:
        rows = [f'<tr><th scope="row">{esc(kind_title(k.kind))}</th><td>{len(k.persistent)}</td>'
                f"<td>{len(k.learners)}</td><td>{esc('; '.join(k.titles))}</td>"
                f"<td>{_names(k.persistent, names)}</td></tr>" for k in persisting]
        body.append(table("Kinds that persist in at least one learner, most learners first",
                          ("reteach", "persists in", "seen in", "as diagnosed", "who"), rows))
    else:
        body.append(f"<p>No misconception was diagnosed in {PERSISTS_AFTER} or more assignments of one learner.</p>")
    body.append("<h2>Sections to reteach</h2>")
    if summary.kinds:
        body.append(kinds_figure(summary.kinds))
        rows = [f'<tr><th scope="row">{esc(kind_title(k.kind))}</th><td>{len(k.persistent)}</td>'
                f"<td>{len(k.learners)}</td><td>{esc(', '.join(sorted(k.assignments)))}</td></tr>"
                for k in summary.kinds]
        body.append(table("Every section a diagnosis pointed to, persistent first",
                          ("section", "learners in whom it persists", "learners who showed it", "assignments"),
                          rows))
    else:
        body.append("<p>No learner's answer showed a named misconception this term.</p>")
    body.append("<h2>Who needs help</h2>")
    helped = [(ln, summary.help_reasons(ln, low)) for ln in summary.learners]
    helped = sorted([(ln, why) for ln, why in helped if why], key=lambda pair: (-len(pair[1]), pair[0].name.lower()))
    if helped:
        rows = [f'<tr><th scope="row">{esc(ln.name)} <span class="muted">({esc(ln.key)})</span></th>'
                f"<td><ul>{''.join(f'<li>{esc(w)}</li>' for w in why)}</ul></td></tr>" for ln, why in helped]
        body.append(table(f"Learners with a reason to look (low total: below {low:.0%})", ("learner", "why"), rows))
    else:
        body.append("<p>No learner has a low total, a persistent misconception or a flagged notebook.</p>")
    body.append("<h2>Every learner</h2>")
    header = ("learner", *[esc(a) for a in summary.assignments], "persistent misconceptions")
    rows = []
    for ln in summary.learners:
        cells = "".join(f"<td>{_cell(summary, ln, a)}</td>" for a in summary.assignments)
        kinds = "; ".join(kind_title(k) for k in ln.persistent()) or "none"
        rows.append(f'<tr><th scope="row">{esc(ln.name)} <span class="muted">({esc(ln.key)})</span></th>{cells}'
                    f"<td>{esc(kinds)}</td></tr>")
    body.append(table("Totals per assignment, after the late policy", header, rows))
    return document("Term report", body)


def term_report_from(gradebook: object) -> TermSummary:
    """The summary of every assignment of an open course gradebook (``store.Gradebook``)."""
    from lessonlib.grading import store

    names = [row[0] for row in gradebook.conn.execute("SELECT name FROM assignments ORDER BY name")]
    return term_summary(store.term_results(gradebook), {a: store.learner_results(gradebook, a) for a in names},
                        everyone={ln.key: ln.name for ln in store.all_learners(gradebook)},
                        enrolled=store.enrolled(gradebook))


def write_term_report(path: Path, gradebook: object, *, low: float = LOW) -> Path:
    """Write the term report of the course gradebook to ``path`` (a file, or a folder to hold
    term-report.html) atomically; returns the file's path."""
    path = Path(path)
    if path.is_dir():
        path = path / REPORT
    atomic_write_text(path, term_report_html(term_report_from(gradebook), low=low))
    return path
