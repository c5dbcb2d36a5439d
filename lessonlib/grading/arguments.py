"""Numbers, times and names on the grading commands' lines, checked as they are parsed: a bad one is a
one-line error naming the option and what it takes (``nan``, a negative or a zero where a positive
number is needed never reach the gradebook)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from datetime import datetime


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0 (seconds, points)."""
    value = _number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return value


def points(text: str) -> float:
    """A finite number of points, 0 or more."""
    value = _number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: points are 0 or more")
    return value


def fraction(text: str) -> float:
    """A finite fraction from 0 to 1 (0.1 is 10 %)."""
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction from 0 to 1 (0.1 is 10 %)")
    return value


def whole_number(least: int) -> Callable[[str], int]:
    """A whole number of at least ``least``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r}: give at least {least}")
        return value
    return parse


def when(text: str) -> datetime:
    """An ISO 8601 date and time with its offset (``2026-03-14T23:59+01:00``)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date and time, such as "
                                         "2026-03-14T23:59+01:00") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add one, such as +00:00 or +01:00")
    return value
