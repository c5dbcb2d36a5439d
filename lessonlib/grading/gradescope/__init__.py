"""Gradescope: :mod:`autograder` packs the course's checks as an autograder (with the wheel
:mod:`wheel` builds) and runs them on Gradescope's side."""

# Gradescope's visibilities for the hidden part of each exercise (the public part is always visible).
HIDDEN_VISIBILITIES = ("after_due_date", "hidden", "visible")
