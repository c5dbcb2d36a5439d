"""Build the static reading copy: every notebook as an HTML page, an index, and the browser files.

    python tools/site/build.py --out site notebooks

The pages keep the outputs stored in the notebooks, figures included, and the explorers' saved
widget state (``metadata.widgets``), which the widget renderer draws when a page opens. The
renderer (@jupyter-widgets/html-manager's ``dist/embed-amd.js``), its loader (requirejs) and
MathJax are copied beside the pages, so reading needs no network. They come from the npm
registry at build time, at the exact versions and integrity hashes in ``package.json`` beside
this file; the tarballs are cached in ``build/site-npm``.

Every page links to the contents and to the previous and next notebook; the contents list and search
every section; the exercise notebooks are copied beside the pages as downloads (pages.py,
contents.py). tests/browser checks the copy against WCAG 2.1 AA with axe-core.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # pages.py and contents.py beside this script

from contents import Entry, index_page, search_sections_js  # noqa: E402
from pages import DOWNLOADS, add_navigation, keep_links_inside, sections  # noqa: E402

ROOT = HERE.parent.parent
STATIC = "_static"  # folder beside the pages holding the browser files
WIDGET_RENDERER_URL = f"{STATIC}/html-manager/embed-amd.js"
REQUIRE_JS_URL = f"{STATIC}/require.js"
MATHJAX_URL = f"{STATIC}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
SEARCH_INDEX = f"{STATIC}/search-sections.js"

# Inside each npm tarball (paths after the leading "package/"): which files the pages need.
MATHJAX_KEEP = (
    "MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js", "extensions/", "jax/input/TeX/",
    "jax/output/CommonHTML/", "jax/element/", "fonts/HTML-CSS/TeX/woff/", "LICENSE",
)
MATHJAX_SKIP = ("extensions/a11y/",)


@dataclass(frozen=True)
class Asset:
    """One pinned npm package: name, exact version and the registry's sha512 integrity string."""

    name: str
    version: str
    integrity: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball_name(self) -> str:
        # npm pack's file name: scope without "@", "/" replaced by "-"
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"


def pinned_assets(manifest: Path = HERE / "package.json") -> dict[str, Asset]:
    """Read the exact versions and integrity hashes from the committed package.json."""
    data = json.loads(manifest.read_text())
    assets = {}
    for name, version in data["dependencies"].items():
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            raise ValueError(f"{manifest}: {name} must be pinned to an exact version, got {version!r}")
        assets[name] = Asset(name, version, data["integrity"][name])
    return assets


def sha512_integrity(path: Path) -> str:
    """The npm-style integrity string of a file: 'sha512-' + base64 of its SHA-512 digest."""
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(asset: Asset, cache: Path) -> Path:
    """The asset's tarball from the cache, or fetched with ``npm pack``; refuses a wrong hash."""
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / asset.tarball_name
    if not tarball.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed once to fetch the site's browser files (apt-get install npm)")
        subprocess.run([npm, "pack", "--silent", asset.spec, "--pack-destination", str(cache)],
                       check=True, stdout=subprocess.DEVNULL)
    found = sha512_integrity(tarball)
    if found != asset.integrity:
        tarball.unlink()
        raise RuntimeError(f"{asset.spec}: integrity {found} does not match the pinned {asset.integrity}")
    return tarball


def extract(tarball: Path, dest: Path, keep: tuple[str, ...], skip: tuple[str, ...] = ()) -> int:
    """Copy the tarball's files whose path (after 'package/') starts with one of ``keep``."""
    count = 0
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            inner = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if not member.isfile() or not inner.startswith(keep) or inner.startswith(skip):
                continue
            target = dest / inner
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.extractfile(member) as source:
                target.write_bytes(source.read())
            count += 1
    return count


def install_static(out: Path, cache: Path) -> None:
    """Put the widget renderer, requirejs and MathJax under ``out/_static``."""
    assets = pinned_assets()
    static = out / STATIC
    if static.exists():
        shutil.rmtree(static)
    manager = fetch(assets["@jupyter-widgets/html-manager"], cache)
    extract(manager, static / "html-manager-package", keep=("dist/", "LICENSE"))
    (static / "html-manager-package" / "dist").rename(static / "html-manager")
    for unused in [*(static / "html-manager").glob("*.map"), static / "html-manager" / "embed.js"]:
        unused.unlink()  # source maps, and the bundle for pages without requirejs
    shutil.rmtree(static / "html-manager-package")
    extract(fetch(assets["requirejs"], cache), static, keep=("require.js",))
    extract(fetch(assets["mathjax"], cache), static / "mathjax", keep=MATHJAX_KEEP, skip=MATHJAX_SKIP)
    extract(fetch(assets["minisearch"], cache), static / "minisearch", keep=("dist/umd/index.js", "LICENSE.txt"))


def notebook_title(nb: nbformat.NotebookNode, fallback: str) -> str:
    """The first markdown heading of the notebook, or ``fallback``."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return fallback


def describe_figures(body: str) -> str:
    """Give each stored figure the "Figure: ..." statement its cell printed as alt text.

    The notebooks print one such line per figure (tests/test_accessibility.py checks it); a
    figure without one keeps nbconvert's placeholder.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(body, features="html.parser")
    for cell in soup.select("div.jp-CodeCell"):
        statements = [line.strip() for pre in cell.select("div.jp-RenderedText pre")
                      for line in pre.get_text().splitlines() if line.startswith("Figure")]
        for image, statement in zip(cell.select("div.jp-RenderedImage img"), statements):
            image["alt"] = statement
    return str(soup)


def export_body(path: Path) -> tuple[str, str]:
    """nbconvert's page for the notebook at ``path``, with its figures described; and its title."""
    from nbconvert import HTMLExporter

    nb = nbformat.read(path, as_version=4)
    quiet = logging.getLogger("site_build.nbconvert")
    quiet.setLevel(logging.ERROR)  # its "alternative text is missing" warning: describe_figures supplies it
    exporter = HTMLExporter(
        log=quiet,
        template_name="lab",
        widget_renderer_url=WIDGET_RENDERER_URL,
        require_js_url=REQUIRE_JS_URL,
        mathjax_url=MATHJAX_URL,
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": path.stem}})
    return describe_figures(body), notebook_title(nb, path.stem)


def copy_exercises(notebook_dirs: list[Path], out: Path) -> list[str]:
    """Copy the exercise notebooks beside the notebook folders into ``out/exercises``; their names."""
    target = out / DOWNLOADS
    if target.exists():
        shutil.rmtree(target)
    names = []
    for folder in dict.fromkeys(Path(d).resolve().parent / DOWNLOADS for d in notebook_dirs):
        for notebook in sorted(folder.glob("*.ipynb")):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(notebook, target / notebook.name)
            names.append(notebook.name)
    return names


def build(notebook_dirs: list[Path], out: Path, cache: Path) -> list[Path]:
    """Export every notebook under ``notebook_dirs`` into ``out`` with an index; return the pages."""
    paths = [p for d in notebook_dirs for p in sorted(Path(d).glob("*.ipynb"))]
    if not paths:
        raise FileNotFoundError(f"no notebooks found in {', '.join(map(str, notebook_dirs))}")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.html"):
        stale.unlink()
    install_static(out, cache)
    downloads = copy_exercises(notebook_dirs, out)
    stems = {p.stem for p in paths}
    bodies = [export_body(p) for p in paths]
    order = [(p.stem, title) for p, (_, title) in zip(paths, bodies)]
    entries = []
    for position, (path, (body, title)) in enumerate(zip(paths, bodies)):
        body = add_navigation(keep_links_inside(body, path, stems, set(downloads)), order, position)
        (out / f"{path.stem}.html").write_text(body, encoding="utf-8")
        entries.append(Entry(path.stem, title, sections(body)))
    (out / SEARCH_INDEX).write_text(search_sections_js(entries), encoding="utf-8")
    (out / "index.html").write_text(index_page(entries, downloads), encoding="utf-8")
    return [out / "index.html", *(out / f"{p.stem}.html" for p in paths)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebook_dirs", nargs="+", type=Path, help="folders of notebooks to copy")
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="output folder (default: site)")
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "site-npm",
                        help="where the npm tarballs are kept between builds")
    args = parser.parse_args(argv)
    pages = build(args.notebook_dirs, args.out, args.cache)
    print(f"wrote {len(pages)} pages to {args.out}: open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
