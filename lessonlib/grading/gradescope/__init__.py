"""Gradescope: :mod:`autograder` packs the course's checks as an autograder (with the wheel
:mod:`wheel` builds) and runs them on Gradescope's side."""
