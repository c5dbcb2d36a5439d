"""What the reading copy adds to nbconvert's pages: readable colours, navigation and links that stay inside.

- Code colours come from the ``a11y-light`` theme of accessible-pygments (every token at least
  4.5:1 on its background), whose background the code cells take. Prompts use the JupyterLab
  theme's own grey at full opacity (a static page has no active cell, and nbconvert's half
  opacity gave #b0b0b0, 2.2:1); red text in an error box takes the theme's dark error red.
- Every page gets a skip link, and a navigation bar above and below the notebook: the contents
  (index) and the previous and next notebook.
- Links between notebooks point at their pages; links into the exercises become downloads of
  the exercise notebooks copied beside the pages; any other relative link is an error, so no
  link leaves the copy (and none reaches the solutions).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

CODE_STYLE = "a11y-light"  # accessible-pygments
DOWNLOADS = "exercises"  # the folder of the copy holding the exercise notebooks
SKIP_TARGET = "content"

NAV_CSS = """
.site-skip { position: absolute; left: -10000px; top: 0; padding: 0.5rem 1rem; background: #fff;
  color: #0b57a4; border: 2px solid #0b57a4; z-index: 100; }
.site-skip:focus { left: 0.5rem; top: 0.5rem; }
.site-nav { display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; padding: 0.5rem 0; margin: 0 0 1rem 0;
  border-bottom: 1px solid #c0c0c0; font-family: sans-serif; font-size: 0.95rem; }
.site-nav.site-nav-end { border-bottom: none; border-top: 1px solid #c0c0c0; margin: 1rem 0 0 0; }
.site-nav a { color: #0b57a4; }
"""


@dataclass(frozen=True)
class Section:
    """A second-level heading of a notebook: its anchor, its title and the text under it (for search)."""

    anchor: str
    title: str
    text: str = ""


def page_css() -> str:
    """The style sheet appended to every notebook page (after nbconvert's, so it wins)."""
    from pygments.formatters import HtmlFormatter
    from pygments.styles import get_style_by_name

    style = get_style_by_name(CODE_STYLE)
    return f"""
:root {{
  --jp-cell-editor-background: {style.background_color};
  --jp-cell-prompt-not-active-opacity: 1;
}}
{HtmlFormatter(style=CODE_STYLE).get_style_defs(".highlight")}
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] pre .ansi-red-fg {{ color: var(--jp-error-color0); }}
{NAV_CSS}"""


def nav_bar(entries: list[tuple[str, str]], position: int, *, end: bool = False) -> str:
    """Links to the contents and to the previous and next page of ``entries`` (stem, title)."""
    links = ['<a href="index.html">Contents</a>']
    if position > 0:
        stem, title = entries[position - 1]
        links.append(f'<a href="{html.escape(stem)}.html" rel="prev">Previous: {html.escape(title)}</a>')
    if position + 1 < len(entries):
        stem, title = entries[position + 1]
        links.append(f'<a href="{html.escape(stem)}.html" rel="next">Next: {html.escape(title)}</a>')
    label = "Course pages, end of page" if end else "Course pages"
    kind = "site-nav site-nav-end" if end else "site-nav"
    return f'<nav class="{kind}" aria-label="{label}">{" ".join(links)}</nav>'


def skip_link(label: str = "Skip to the lesson") -> str:
    return f'<a class="site-skip" href="#{SKIP_TARGET}">{html.escape(label)}</a>'


def sections(body: str) -> list[Section]:
    """The page's second-level headings, with the anchors nbconvert gave them and the text under them."""
    soup = BeautifulSoup(body, features="html.parser")
    for unread in soup.select("script, style, a.anchor-link"):
        unread.decompose()
    headings = [h for h in soup.main.find_all("h2") if h.get("id")] if soup.main else []
    found = []
    for heading, following in zip(headings, [*headings[1:], None]):
        words = []
        for element in heading.next_elements:
            if element is following:
                break
            if isinstance(element, str):
                words.extend(element.split())
        title = " ".join(heading.get_text().split())
        found.append(Section(heading["id"], title, " ".join(words)[len(title):].strip()))
    return found


def add_navigation(body: str, entries: list[tuple[str, str]], position: int) -> str:
    """The skip link, the navigation bars and the page's own style sheet, added to ``body``."""
    soup = BeautifulSoup(body, features="html.parser")
    soup.html["lang"] = soup.html.get("lang") or "en"
    style = soup.new_tag("style")
    style.string = page_css()
    soup.head.append(style)
    main = soup.main
    if main is None:
        raise ValueError("nbconvert's page has no <main> element to put the navigation around")
    main["id"] = SKIP_TARGET
    main["tabindex"] = "-1"
    main.insert_before(BeautifulSoup(skip_link() + nav_bar(entries, position), features="html.parser"))
    main.insert_after(BeautifulSoup(nav_bar(entries, position, end=True), features="html.parser"))
    return str(soup)


def keep_links_inside(body: str, source: Path, stems: set[str], downloads: set[str]) -> str:
    """Point links at pages and downloads of the copy; refuse any other relative link.

    ``source`` is the notebook the page comes from: its links are relative to its folder. A link
    to a notebook of the copy (``stems``) becomes a link to its page; a link to an exercise
    notebook the copy holds (``downloads``, file names in its exercises folder) becomes a download.
    """
    soup = BeautifulSoup(body, features="html.parser")
    for link in soup.find_all("a", href=True):
        href = link["href"]
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not parts.path:
            continue  # a web address, or an anchor in this page
        anchor = f"#{parts.fragment}" if parts.fragment else ""
        target = PurePosixPath(unquote(parts.path))
        if target.suffix == ".ipynb" and target.stem in stems and target.parent in (PurePosixPath("."),):
            link["href"] = f"{target.stem}.html{anchor}"
            continue
        resolved = (source.parent / target).resolve()
        if resolved.parent.name == DOWNLOADS and resolved.name in downloads:
            link["href"] = f"{DOWNLOADS}/{resolved.name}"
            link["download"] = resolved.name
            continue
        raise ValueError(
            f"{source.name}: the link {href!r} leads out of the reading copy; link a notebook of "
            f"{source.parent.name}/ (as NN_name.ipynb) or an exercise notebook (../{DOWNLOADS}/NN_name.ipynb)")
    return str(soup)
