"""Generated worst cases for the grader's planning: helper cells of ``n`` statements each, in a known
shape, and the answer to ``masked_softmax`` that reads them. ``tests/grading/test_inputs.py`` checks
that planning them is linear and bounded; ``benchmarks/planning.py`` times it.

Each shape maps ``n`` to ``(helper cells' sources, the answer cell's source)``.
"""

from __future__ import annotations


def answer_cell(expression: str) -> str:
    """An answer to ``masked_softmax`` that returns ``expression``."""
    return f"def masked_softmax(scores, allowed):\n    return {expression}"


def same_name(n: int) -> tuple[list[str], str]:
    """One name bound ``n`` times: only the last binding is needed."""
    return ["\n".join(["x = 1"] * n)], answer_cell("x")


def independent(n: int) -> tuple[list[str], str]:
    """``n`` names, the answer reads the last."""
    return ["\n".join(f"v{i} = {i}" for i in range(n))], answer_cell(f"v{n - 1}")


def chain(n: int) -> tuple[list[str], str]:
    """Each line reads the one before: every statement is needed."""
    lines = ["c0 = g(1)"] + [f"c{i} = g(c{i - 1})" for i in range(1, n)]  # two operators a line: under the cap
    return ["def g(x):\n    return x", "\n".join(lines)], answer_cell(f"c{n - 1}")


def many_cells(n: int) -> tuple[list[str], str]:
    """``n`` one-line cells."""
    return [f"k{i} = np.sqrt({i})" for i in range(n)], answer_cell(f"k{n - 1}")


def fan_in(n: int) -> tuple[list[str], str]:
    """A helper that reads half the names, and a list the other half of the lines change."""
    half = n // 2
    values = "\n".join(f"f{i} = np.sqrt({i})" for i in range(half))
    helper = "def helper():\n    return (" + ", ".join(f"f{i}" for i in range(half)) + ",)"
    changes = "T = []\n" + "\n".join(f"T.append({i})" for i in range(n - half))
    return [values, helper, changes], answer_cell("helper() + tuple(T)")
