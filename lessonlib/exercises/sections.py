"""Where to read again: every notebook section a diagnosis points to, in one table.

A diagnosis names a key of :data:`SECTIONS`; a test checks that each heading exists in its
notebook (when the notebook exists), so renaming a heading shows up here at once. Headings are
written without the section number and the route mark ("## 3. The first fixture, ... [lesson · unit ·
everything]" is "The first fixture, ..."), so renumbering the sections of a notebook, or moving one
onto another route, does not break a pointer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """A heading in one of the lesson notebooks (path from the repository root)."""

    notebook: str
    heading: str

    def pointer(self) -> str:
        """The text a report shows: notebook file and section heading."""
        return f"{self.notebook}, section '{self.heading}'"


SCALING = "notebooks/01_scaling.ipynb"
MASKING = "notebooks/02_masking.ipynb"
POSITION = "notebooks/03_position.ipynb"
COST = "notebooks/04_cost.ipynb"
INTERPRETATION = "notebooks/05_interpretation.ipynb"
TRAINING = "notebooks/06_training.ipynb"
CAPSTONE = "notebooks/07_capstone.ipynb"

SECTIONS: dict[str, Section] = {
    "convex": Section(SCALING, "The output is a convex combination of the values"),
    "fixture": Section(SCALING, "The first fixture, stage by stage"),
    "scaling": Section(SCALING, "Why divide by the square root of d_k, measured"),
    "shift-invariance": Section(SCALING, "Adding a constant to every score"),
    "two-masks": Section(MASKING, "Two reasons to exclude a key"),
    "second-fixture": Section(MASKING, "The second fixture: a disallowed key is removed before normalising"),
    "zeroed-after": Section(MASKING, "The wrong order: zeroing probabilities after the softmax"),
    "renormalised-after": Section(MASKING, "Renormalising afterwards is not a fix"),
    "empty-rows": Section(MASKING, "Rows with no allowed key, and our policy"),
    "fills": Section(MASKING, "Fills: `-inf` or a large finite number, and what the dtype makes of them"),
    "causality-test": Section(MASKING, "The causality test"),
    "alignment": Section(MASKING, "Causal alignment when query and key lengths differ"),
    "padding-axis": Section(MASKING, "A padding mask broadcast over the wrong axis"),
    "times-mask": Section(MASKING, "Multiplying scores by a 0/1 mask is not masking"),
    "polarity": Section(MASKING, "Mask conventions in real libraries"),
    "probe": Section(MASKING, "Probing a library with a tiny case"),
    "permutation": Section(POSITION, "Without position, order is invisible"),
    "sinusoidal": Section(POSITION, "Absolute sinusoidal positions"),
    "t5-buckets": Section(POSITION, "Relative-position bias (T5-style buckets)"),
    "multi-head": Section(SCALING, "Multi-head attention: the same operation in several learned subspaces"),
    "alibi": Section(POSITION, "ALiBi: a fixed linear penalty on distance"),
    "rope": Section(POSITION, "RoPE: rotate the queries and keys"),
    "score-bytes": Section(COST, "Count the bytes first"),
    "tiled": Section(COST, "The same output without the n x n array: tiled attention"),
    "interpretation": Section(INTERPRETATION, "What one weight is"),
    "exclusion": Section(INTERPRETATION, "Excluding a key: the exclusion effect"),
    "no-effect": Section(INTERPRETATION, "The largest weight on a value the others supply"),
    "position-enters": Section(POSITION, "Three places where position can enter"),
    "training-task": Section(TRAINING, "The model and the task"),
    "training-causal": Section(TRAINING, "A causal mask alone"),
    "capstone-length": Section(CAPSTONE, "Longer than training"),
    "capstone-cache": Section(CAPSTONE, "The cost of writing: a key/value cache"),
}
