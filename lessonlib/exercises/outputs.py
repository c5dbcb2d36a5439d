"""Outputs that are not numbers or arrays: a yes/no answer, and one word from a fixed list."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lessonlib.exercises.runner import Value, text_of
from lessonlib.exercises.spec import Mismatch, describe_returned


@dataclass(frozen=True)
class BoolOutput:
    """``True`` or ``False`` (a NumPy bool counts; 0/1 and strings do not)."""

    def describe(self, expected: bool) -> str:
        return f"bool {bool(expected)}"

    def usable(self, value: Value | None) -> bool | None:
        if value is None or not isinstance(value.data, (bool, np.bool_)) or value.type_name.endswith("ndarray"):
            return None
        return bool(value.data)

    def compare(self, value: Value, expected: bool) -> Mismatch | None:
        want = self.describe(expected)
        got = self.usable(value)
        if got is None:
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected True or False, got {value.type_name}: return a bool, e.g. "
                            "bool(np.abs(a - b).max() > tol).")
        if got == bool(expected):
            return None
        return Mismatch("wrong_values", want, f"bool {got}", f"Expected {bool(expected)}, got {got}.")


@dataclass(frozen=True)
class ChoiceOutput:
    """One word out of ``choices`` (a Python ``str``)."""

    choices: tuple[str, ...]

    def describe(self, expected: str) -> str:
        return f"str {expected!r}"

    def usable(self, value: Value | None) -> str | None:
        return text_of(value)

    def compare(self, value: Value, expected: str) -> Mismatch | None:
        want = self.describe(expected)
        got = text_of(value)
        options = " or ".join(repr(c) for c in self.choices)
        if got is None:
            return Mismatch("wrong_type", want, describe_returned(value),
                            f"Expected a str, {options}, got {value.type_name}.")
        if got not in self.choices:
            return Mismatch("wrong_values", want, f"str {got!r}", f"Expected one of {options}, got {got!r}.")
        if got == expected:
            return None
        return Mismatch("wrong_values", want, f"str {got!r}", f"Expected {expected!r}, got {got!r}.")
