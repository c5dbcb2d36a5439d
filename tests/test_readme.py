"""What the README says a newcomer gets is what the project holds.

- It opens with the learner's two steps (clone, `make lab`) and keeps the maintainer's detail
  (tests, Chromium, bubblewrap) for later sections.
- It counts the notebooks there are, states each route's time as tools/reading_times.py computes
  it, and lists as what `pip install` brings exactly pyproject.toml's dependencies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
sys.path.insert(0, str(ROOT / "tools"))
import course_tables as ct  # noqa: E402


def _sections() -> list[tuple[str, str]]:
    parts = re.split(r"^## (.+)$", README, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def test_it_opens_with_the_learners_two_steps():
    title, text = _sections()[0]
    assert "git clone https://" in text and "make lab" in text, f"the README's first section, {title!r}"
    for detail in ("make test", "Chromium", "bubblewrap", "nbval"):
        assert detail not in text, f"the README's first section, {title!r}, should leave {detail!r} for later"


def test_it_says_how_to_stop_a_server_started_in_the_background():
    first = _sections()[0][1]
    assert "Ctrl+C" in first and "jupyter server stop" in first


def test_it_counts_the_notebooks():
    said = re.search(r"\b(\w+) notebooks with explorers", README)
    count = len(list((ROOT / "notebooks").glob("*.ipynb")))
    assert said and said[1] == ct.in_words(count), f"the README should count {count} notebooks"


@pytest.mark.parametrize("route", ["lesson", "unit", "everything"])
def test_it_states_each_routes_time(route):
    name = "everything" if route == "everything" else f"the {route}"
    stated = f"**{name}** ({ct.route_times(ROOT)[route]})"
    assert stated in " ".join(README.split()), f"the README should say {stated}"


def test_it_lists_what_pip_install_brings():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {re.match(r"[A-Za-z0-9_.\-]+", d)[0].lower() for d in project["dependencies"]}
    said = re.search(r"brings exactly these packages and what they depend on: ([^.]+)\.", " ".join(README.split()))
    assert said, "the README should say which packages `pip install` brings"
    listed = {name.strip().lower() for name in re.split(r",| and ", said[1]) if name.strip()}
    assert listed == declared, f"the README lists {sorted(listed)}; pyproject.toml declares {sorted(declared)}"
