"""Print pip constraints that pin each of lessonlib's dependencies to the lowest version it accepts.

    python tools/lowest_versions.py > lowest.txt
    pip install -c lowest.txt "lessonlib[test,grade]"

Run it with a Python where lessonlib is installed: it reads the installed package's requirements
(``numpy>=1.26,<3`` gives ``numpy==1.26``), so the constraints follow pyproject.toml without a second
copy of the bounds. CI installs the package under these constraints and runs the unit tests: the
lower bounds are then tested, not hoped for. The package's own dependencies are pinned, and the
`grade` extra's (what an instructor's grader runs on); the `lab` and `test` extras are tools.
"""

from __future__ import annotations

import importlib.metadata
import sys

from packaging.requirements import Requirement


def lowest_pins(distribution: str = "lessonlib") -> list[str]:
    """``name==version`` for every dependency of ``distribution`` and of its ``grade`` extra."""
    pins = []
    for text in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": "grade"}):
            continue  # another extra's, or not for this platform
        lower = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if not lower:
            raise SystemExit(f"{requirement.name} has no lower bound in {distribution}'s requirements ({text}): "
                             "give it one, or the lowest version is not known")
        pins.append(f"{requirement.name}=={lower[0]}")
    return sorted(set(pins))


if __name__ == "__main__":
    print("\n".join(lowest_pins(*sys.argv[1:])))
