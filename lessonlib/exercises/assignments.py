"""Named assignments: exercises and written questions from several notebooks, handed out and graded together.

An exercise notebook is one natural assignment (``lessonlib grade --notebooks``). A named assignment
cuts across them: the lesson assignment takes the exercises that check the source lesson's three
goals, its three common errors, its library probe and its two questions, from four exercise
notebooks, and nothing else. Points stay the exercises' own, so an assignment is worth the sum of
its items. A grader grades an assignment's items and skips every other exercise of the notebooks it
reads (:meth:`Assignment.by_notebook`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lessonlib.exercises.registry import EXERCISES, MANUAL_QUESTIONS


@dataclass(frozen=True)
class Item:
    """One exercise or written question of an assignment, and what of the lesson it checks."""

    name: str  # a key of EXERCISES or MANUAL_QUESTIONS
    checks: str

    @property
    def notebook(self) -> str:
        return (EXERCISES[self.name] if self.name in EXERCISES else MANUAL_QUESTIONS[self.name]).notebook

    @property
    def points(self) -> float:
        return (EXERCISES[self.name] if self.name in EXERCISES else MANUAL_QUESTIONS[self.name]).points

    @property
    def written(self) -> bool:
        return self.name in MANUAL_QUESTIONS


@dataclass(frozen=True)
class Assignment:
    """A named set of exercises and written questions; points are the exercises' own."""

    name: str
    title: str
    entries: tuple[Item, ...]

    def __post_init__(self) -> None:
        names = [item.name for item in self.entries]
        unknown = [n for n in names if n not in EXERCISES and n not in MANUAL_QUESTIONS]
        if unknown:
            raise KeyError(f"assignment {self.name!r} names {', '.join(unknown)}, which no exercise or written "
                           "question of the registry is")
        if len(set(names)) != len(names):
            raise ValueError(f"assignment {self.name!r} names an exercise twice")

    @property
    def items(self) -> tuple[str, ...]:
        """Every exercise and written question, in the order the notebooks hand them out."""
        return tuple(item.name for item in self.entries)

    @property
    def exercises(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.entries if not item.written)

    @property
    def questions(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.entries if item.written)

    def points_of(self, name: str) -> float:
        return next(item.points for item in self.entries if item.name == name)

    @property
    def points(self) -> float:
        return sum(item.points for item in self.entries)

    def by_notebook(self) -> dict[str, tuple[str, ...]]:
        """exercise notebook ("02_masking.ipynb") -> the names it grades there, in file-name order.

        What a grader needs: grade these and only these, with a notebook's other exercises skipped.
        """
        notebooks = sorted({item.notebook for item in self.entries})
        return {nb: tuple(item.name for item in self.entries if item.notebook == nb) for nb in notebooks}


LESSON = Assignment(
    "lesson",
    "the lesson: its three goals, its three common errors, the library probe and its two questions",
    (
        Item("scaled_dot_product_attention", "goal 1: scores, weights and values"),
        Item("q1_context", "goal 1: the first check-your-understanding question"),
        Item("masked_softmax", "goal 2, and common error 2: exclusion before normalising, rows with no allowed key"),
        Item("causal_mask", "common error 1: a missing or inverted causal mask"),
        Item("leaks_future", "common error 1's prevention test: zero weight on the future, with unequal lengths"),
        Item("mask_polarity", "the library probe: a mask's meaning read off a tiny case"),
        Item("is_order_sensitive", "goal 3, and common error 3's prevention test: same content, different order"),
        Item("q2_attention_not_causal", "the second check-your-understanding question"),
    ),
)

ASSIGNMENTS: dict[str, Assignment] = {a.name: a for a in (LESSON,)}


def get_assignment(name: str) -> Assignment:
    """The assignment called ``name``; a KeyError lists the known ones."""
    try:
        return ASSIGNMENTS[name]
    except KeyError:
        raise KeyError(f"no assignment called {name!r}; the assignments are {', '.join(ASSIGNMENTS)}") from None
