"""axe-core in a Playwright page: WCAG 2.1 AA violations, the serious and critical ones by rule.

axe-core is pinned in tests/browser/package.json (exact version and integrity hash). Its tarball
is fetched once with ``npm pack`` into build/site-npm, as the reading copy's browser files are,
and ``axe.min.js`` is read from it and injected into the page: no request leaves the machine.
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NPM_CACHE = ROOT / "build" / "site-npm"
MANIFEST = Path(__file__).resolve().parent / "package.json"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = ("serious", "critical")

RUN_AXE_JS = """async ([include, tags]) => {
  const context = include ? {include: Array.from(document.querySelectorAll(include))} : document;
  const result = await axe.run(context, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary})),
  }));
}"""


def site_builder() -> ModuleType:
    """tools/site/build.py as a module (it is a script, not part of the package)."""
    if "site_build" in sys.modules:
        return sys.modules["site_build"]
    spec = importlib.util.spec_from_file_location("site_build", ROOT / "tools" / "site" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def axe_tarball_cached() -> bool:
    asset = site_builder().pinned_assets(MANIFEST)["axe-core"]
    return (NPM_CACHE / asset.tarball_name).exists()


@cache
def axe_source() -> str:
    """The pinned ``axe.min.js``, from the integrity-checked tarball (fetched with npm once)."""
    builder = site_builder()
    tarball = builder.fetch(builder.pinned_assets(MANIFEST)["axe-core"], NPM_CACHE)
    with tarfile.open(tarball) as archive, archive.extractfile("package/axe.min.js") as source:
        return source.read().decode("utf-8")


def violations(page: Any, include: str | None = None) -> list[dict[str, Any]]:
    """axe's WCAG 2.1 A and AA violations in ``page``, or only inside the elements matching ``include``."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(content=axe_source())
    return page.evaluate(RUN_AXE_JS, [include, WCAG_21_AA])


def blocking(found: list[dict[str, Any]]) -> Counter[str]:
    """Serious and critical violations: rule id -> number of offending elements."""
    return Counter({v["id"]: len(v["nodes"]) for v in found if v["impact"] in BLOCKING})


def explain(found: list[dict[str, Any]], *, per_rule: int = 3) -> str:
    """A short report of the serious and critical violations: rule, help text, a few elements."""
    lines = []
    for v in found:
        if v["impact"] not in BLOCKING:
            continue
        lines.append(f"{v['id']} ({v['impact']}, {len(v['nodes'])} elements): {v['help']}")
        for node in v["nodes"][:per_rule]:
            summary = " ".join(node["summary"].split())[:300]
            lines.append(f"    {node['target']}: {summary}")
    return "\n".join(lines)
