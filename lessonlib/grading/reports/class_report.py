"""class-report.html: what the class got wrong, per exercise, for planning the next session.

One page that renders alone (inline styles, no scripts, nothing fetched; figures are PNG data
URLs with alt text). Per exercise: the distribution of points; each named misconception with how
many learners showed it (most common first), the notebook section to reteach, and their names.
The section comes from the exercise's own :class:`DiagnosisSpec` (its ``section`` key into
``SECTIONS``), so the report follows the exercise modules. Every text from a learner is escaped.
"""

from __future__ import annotations

import base64
import html
import io
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lessonlib.exercises import EXERCISES, SECTIONS
from lessonlib.grading import records as r
from lessonlib.grading.files import atomic_write_text
from lessonlib.grading.safe_text import printable

REPORT = "class-report.html"
TOP_FIGURE = 12  # misconceptions drawn in the figure
# Where an exercise's learners landed, in the order the points figure stacks them.
OUTCOMES = ("full marks", "part marks", "no marks", "not attempted", "awaiting hand grading", "stopped or flagged",
            "not submitted")
HATCHES = ("", "//", "..", "--", "xx", "\\\\", "")
BESIDE = OUTCOMES[4:]  # counted beside the points table, not in it
STYLE = ("body{font-family:system-ui,sans-serif;color:#1a1a1a;background:#fff;max-width:60rem;margin:1rem auto;"
         "padding:0 1rem;line-height:1.45}table{border-collapse:collapse;margin:.5rem 0 1rem}"
         "th,td{border:1px solid #767676;padding:.25rem .5rem;text-align:left;vertical-align:top}"
         "th{background:#e8e8e8}caption{text-align:left;white-space:nowrap;font-weight:600;padding:.25rem 0}"
         "img{max-width:100%;height:auto}.muted{color:#4a4a4a}")


@dataclass
class Misconception:
    """One named misconception of one exercise, and the learners whose answers showed it."""

    exercise: str
    name: str
    title: str
    section: str  # where to reteach: notebook and heading
    learners: list[str] = field(default_factory=list)


@dataclass
class ExerciseSummary:
    """One exercise across the class: points, outcomes, misconceptions and flagged statuses."""

    notebook: str
    exercise: str
    max_points: float
    points: Counter = field(default_factory=Counter)  # points -> learners (graded answers only)
    outcomes: Counter = field(default_factory=Counter)  # one of OUTCOMES -> learners
    misconceptions: dict[str, Misconception] = field(default_factory=dict)
    flagged: dict[str, list[str]] = field(default_factory=dict)  # status -> learners
    unexplained: list[str] = field(default_factory=list)  # failed with no named misconception

    def ranked(self) -> list[Misconception]:
        """Most common first; ties in the order the exercise lists its diagnoses."""
        order = {s.name: i for i, s in enumerate(getattr(EXERCISES.get(self.exercise), "diagnoses", ()))}
        return sorted(self.misconceptions.values(),
                      key=lambda m: (-len(m.learners), order.get(m.name, len(order)), m.name))


def _e(text: object) -> str:
    """Text from a learner, the LMS or a gradebook, safe inside HTML (control characters shown)."""
    return html.escape(printable(text), quote=True)


def reteach_section(exercise: str, diagnosis: dict) -> str:
    """The notebook section to reteach for ``diagnosis`` of ``exercise``, from the exercise's definition."""
    spec = next((s for s in getattr(EXERCISES.get(exercise), "diagnoses", ()) if s.name == diagnosis.get("name")),
                None)
    if spec is not None and spec.section in SECTIONS:
        return SECTIONS[spec.section].pointer()
    return str(diagnosis.get("reread") or "no section recorded")


def _outcome(g: r.ExerciseGrade) -> str:
    if g.status == r.NOT_SUBMITTED:
        return "not submitted"
    if g.status in r.FLAGGED:
        return "stopped or flagged"
    if g.points is None:
        return "awaiting hand grading"
    if g.status == r.NOT_ATTEMPTED:
        return "not attempted"
    if g.points >= g.max_points > 0:
        return "full marks"
    return "part marks" if g.points > 0 else "no marks"


def summarise(results: Sequence[r.LearnerResult]) -> list[ExerciseSummary]:
    """Every exercise that any learner's results hold, in the order they first appear."""
    summaries: dict[tuple[str, str], ExerciseSummary] = {}
    for res in results:
        for g in res.exercises:
            s = summaries.setdefault((g.notebook, g.exercise), ExerciseSummary(g.notebook, g.exercise, g.max_points))
            outcome = _outcome(g)
            s.outcomes[outcome] += 1
            if outcome not in BESIDE:
                s.points[round(g.points, 2)] += 1
            if g.status in r.FLAGGED:
                s.flagged.setdefault(g.status, []).append(res.learner)
            found = g.instructor_diagnoses or g.diagnoses  # the instructor's: hidden cases count too
            for d in found:
                m = s.misconceptions.setdefault(d["name"], Misconception(
                    g.exercise, d["name"], d.get("title", d["name"]), reteach_section(g.exercise, d)))
                m.learners.append(res.learner)
            if g.status == r.FAILED and not found:
                s.unexplained.append(res.learner)
    return list(summaries.values())


def class_ranked(summaries: Sequence[ExerciseSummary]) -> list[Misconception]:
    """Every misconception of the class, shown by the most learners first (ties in exercise order)."""
    return sorted((m for s in summaries for m in s.ranked()), key=lambda m: -len(m.learners))


# --- figures ---------------------------------------------------------------------------------------


def _img(fig: object, alt: str) -> str:
    """``fig`` drawn by Agg into a PNG data URL, with its alt text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{_e(alt)}"></figure>'


def points_figure(summaries: Sequence[ExerciseSummary], learners: int) -> str:
    """Stacked bars: per exercise, how many learners landed in each of OUTCOMES."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 1.6 + 0.32 * len(summaries)), dpi=80, layout="constrained")
    ax = fig.subplots()
    colours = colormaps["viridis"]([i / (len(OUTCOMES) - 1) for i in range(len(OUTCOMES))][::-1])
    labels = [s.exercise for s in summaries][::-1]
    left = [0] * len(summaries)
    for outcome, colour, hatch in zip(OUTCOMES, colours, HATCHES):
        counts = [s.outcomes[outcome] for s in summaries][::-1]
        ax.barh(labels, counts, left=left, color=colour, hatch=hatch, edgecolor="#1a1a1a", linewidth=0.4,
                label=outcome)
        left = [a + b for a, b in zip(left, counts)]
    ax.set_xlabel(f"learners (of {learners})")
    ax.set_xlim(0, max(learners, 1))
    ax.xaxis.get_major_locator().set_params(integer=True)
    fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    best, worst = (f(summaries, key=lambda s: s.outcomes["full marks"]) for f in (max, min))
    alt = (f"Stacked horizontal bars, one per exercise, counting how many of the {learners} learners had each "
           f"outcome: {', '.join(OUTCOMES)}. Most full marks: {best.exercise} ({best.outcomes['full marks']}); "
           f"fewest: {worst.exercise} ({worst.outcomes['full marks']}). The tables below give every count.")
    return _img(fig, alt)


def misconceptions_figure(ranked: Sequence[Misconception]) -> str:
    """Bars of the most common misconceptions across the class, most common at the top."""
    from matplotlib.figure import Figure

    from lessonlib.plots import BAR_COLOUR

    shown = list(ranked[:TOP_FIGURE])
    fig = Figure(figsize=(7.5, 0.8 + 0.32 * len(shown)), dpi=80, layout="constrained")
    ax = fig.subplots()
    counts = [len(m.learners) for m in shown][::-1]
    ax.barh(range(len(shown)), counts, color=BAR_COLOUR)
    ax.set_yticks(range(len(shown)), [textwrap.shorten(f"{m.title} ({m.exercise})", 60) for m in shown][::-1])
    for y, c in enumerate(counts):
        ax.annotate(str(c), (c, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlabel("learners")
    ax.xaxis.get_major_locator().set_params(integer=True)
    alt = ("Horizontal bars of how many learners showed each misconception, most common first: "
           + "; ".join(f"{m.title} in {m.exercise}, {len(m.learners)}" for m in shown)
           + (f"; and {len(ranked) - len(shown)} more in the tables below." if len(ranked) > len(shown) else "."))
    return _img(fig, alt)


# --- the page --------------------------------------------------------------------------------------


def _names(learners: Sequence[str]) -> str:
    return ", ".join(_e(n) for n in learners)


def _table(caption: str, header: Sequence[str], rows: Sequence[str]) -> str:
    heads = "".join(f'<th scope="col">{h}</th>' for h in header)
    return f"<table><caption>{caption}</caption><thead><tr>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _exercise_html(s: ExerciseSummary) -> list[str]:
    out = [f"<h3>{_e(s.exercise)} ({s.max_points:g} point{'' if s.max_points == 1 else 's'})</h3>"]
    if s.points:
        rows = [f"<tr><td>{p:g}</td><td>{n}</td></tr>" for p, n in sorted(s.points.items(), reverse=True)]
        out.append(_table(f"Points of {_e(s.exercise)}", ("points", "learners"), rows))
    others = [f"{s.outcomes[o]} {o}" for o in BESIDE if s.outcomes[o]]
    if others:
        out.append(f"<p>Not in the points table: {_e(', '.join(others))}.</p>")
    if ranked := s.ranked():
        rows = [f'<tr><th scope="row">{_e(m.title)} <span class="muted">({_e(m.name)})</span></th>'
                f"<td>{len(m.learners)}</td><td>{_e(m.section)}</td><td>{_names(m.learners)}</td></tr>" for m in ranked]
        out.append(_table(f"Misconceptions in {_e(s.exercise)}, most common first",
                          ("misconception", "learners", "reteach", "who"), rows))
    if s.unexplained:
        out.append(f"<p>Failed with no named misconception ({len(s.unexplained)}): {_names(s.unexplained)}.</p>")
    for status, learners in sorted(s.flagged.items()):
        words = r.STATUS_WORDS.get(status, status)
        out.append(f"<p>Flagged, {_e(words)} ({len(learners)}): {_names(learners)}.</p>")
    return out


def class_report_html(results: Sequence[r.LearnerResult], *, absent: Sequence[str] = ()) -> str:
    """The whole page for ``results``; ``absent`` names roster learners with no submission."""
    summaries = summarise(results)
    every = class_ranked(summaries)
    top = every[:2]  # what the next session opens with
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>Class report</title><style>{STYLE}</style></head><body><main>",
           "<h1>Class report: what the class got wrong</h1>",
           f"<p>{len(results)} learner(s) graded"
           + (f"; {len(absent)} absent (in the roster, no submission): {_names(absent)}" if absent else "")
           + ". Names are for the instructor only: do not share this page with the class.</p>",
           "<h2>Open the next session with</h2>"]
    if top:
        items = [f"<li><strong>{_e(m.title)}</strong> in {_e(m.exercise)}: {len(m.learners)} of {len(results)} "
                 f"learner(s). Reteach {_e(m.section)}.</li>" for m in top]
        out.append("<ol>" + "".join(items) + "</ol>")
        tied = [m for m in every[2:] if len(m.learners) == len(top[-1].learners)]
        if tied:
            more = f"; and {len(tied) - 4} more (below)" if len(tied) > 4 else ""
            out.append("<p>As common as the second: " + "; ".join(
                f"{_e(m.title)} in {_e(m.exercise)} (reteach {_e(m.section)})" for m in tied[:4]) + more + ".</p>")
    else:
        out.append("<p>No learner's answer showed a named misconception.</p>")
    if summaries:
        out += ["<h2>Points per exercise</h2>", points_figure(summaries, len(results))]
    if every:
        out += ["<h2>Misconceptions across the class</h2>", misconceptions_figure(every)]
    for notebook in dict.fromkeys(s.notebook for s in summaries):
        out.append(f"<h2>{_e(notebook)}</h2>")
        for s in summaries:
            if s.notebook == notebook:
                out += _exercise_html(s)
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def write_class_report(out: Path, results: Sequence[r.LearnerResult], *, absent: Sequence[str] = ()) -> Path:
    """Write ``out/class-report.html`` atomically and return its path."""
    path = Path(out) / REPORT
    atomic_write_text(path, class_report_html(results, absent=absent))
    return path
