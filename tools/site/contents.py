"""The reading copy's front page: every notebook with its sections, a search, and the exercises to download.

The search is MiniSearch (pinned in package.json) over every section's text, which is written
into a script file beside the pages: it runs from file:// without a server or a network.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from pages import DOWNLOADS, NAV_CSS, SKIP_TARGET, Section, skip_link

TITLE = "Attention, masks, and position: reading copy"
MINISEARCH_URL = "_static/minisearch/dist/umd/index.js"
SEARCH_SECTIONS_URL = "_static/search-sections.js"

SEARCH_JS = """
(function () {
  const search = new MiniSearch({fields: ['title', 'text'], storeFields: ['page', 'title', 'url'],
                                 searchOptions: {boost: {title: 2}, prefix: true, fuzzy: 0.2}});
  search.addAll(window.SITE_SECTIONS);
  const input = document.getElementById('search');
  const list = document.getElementById('search-results');
  const status = document.getElementById('search-status');
  input.addEventListener('input', function () {
    const query = input.value.trim();
    const hits = query ? search.search(query).slice(0, 10) : [];
    list.replaceChildren(...hits.map(function (hit) {
      const item = document.createElement('li');
      const link = document.createElement('a');
      link.href = hit.url;
      link.textContent = hit.page + ': ' + hit.title;
      item.append(link);
      return item;
    }));
    status.textContent = query ? hits.length + (hits.length === 1 ? ' section' : ' sections') + ' found' : '';
  });
  document.getElementById('site-search').hidden = false;
})();
"""


@dataclass(frozen=True)
class Entry:
    """One notebook of the copy: its page's stem, its title and its sections."""

    stem: str
    title: str
    sections: list[Section]


def notebook_item(entry: Entry) -> str:
    stem = html.escape(entry.stem)
    parts = "\n".join(f'        <li><a href="{stem}.html#{html.escape(s.anchor, quote=True)}">'
                      f'{html.escape(s.title)}</a></li>' for s in entry.sections)
    nested = f"\n      <ol>\n{parts}\n      </ol>\n    " if parts else ""
    return f'    <li><a href="{stem}.html">{html.escape(entry.title)}</a>{nested}</li>'


def exercises_section(downloads: list[str]) -> str:
    """How learners reach the exercises from the copy: downloads, run in the course's JupyterLab."""
    if not downloads:
        return ""
    items = "\n".join(f'    <li><a href="{DOWNLOADS}/{html.escape(name)}" download>{html.escape(name)}</a></li>'
                      for name in downloads)
    return f"""
    <h2 id="exercises">Exercises</h2>
    <p>Each exercise notebook has answer cells to fill in and check cells that say whether an answer
    is right. The checks run where the course runs: download the notebook, put it in the
    <code>exercises/</code> folder of the course, open it in JupyterLab (<code>make lab</code>, or the
    JupyterHub or Binder link your instructor gives) and run it from the top.</p>
    <ul>
{items}
    </ul>
"""


def search_sections_js(entries: list[Entry]) -> str:
    """The script file that hands every section (page, title, anchor link, text) to the search."""
    documents = [{"id": f"{e.stem}#{s.anchor}", "page": e.title, "title": s.title,
                  "url": f"{e.stem}.html#{s.anchor}", "text": s.text}
                 for e in entries for s in e.sections]
    return f"window.SITE_SECTIONS = {json.dumps(documents, ensure_ascii=False)};\n"


SEARCH_FORM = """
    <div id="site-search" role="search" hidden>
      <h2 id="search-heading">Search the lessons</h2>
      <label for="search">Words to find in any section</label>
      <input id="search" type="search" autocomplete="off">
      <p id="search-status" role="status"></p>
      <ul id="search-results" aria-labelledby="search-heading"></ul>
    </div>
"""


def index_page(entries: list[Entry], downloads: list[str]) -> str:
    """The front page: the notebooks in order, each with its sections, then the exercises."""
    items = "\n".join(notebook_item(entry) for entry in entries)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1.0">
  <title>{TITLE}</title>
  <style>body {{ font-family: sans-serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem;
    line-height: 1.5; }} a {{ color: #0b57a4; }} {NAV_CSS}</style>
</head>
<body>
  {skip_link("Skip to the contents")}
  <main id="{SKIP_TARGET}" tabindex="-1">
    <h1>{TITLE}</h1>
    <p>A static copy of the course notebooks with their stored outputs. Each explorer shows the
    state it was saved in; to move its controls, open the notebook in JupyterLab and run it.</p>
{SEARCH_FORM}
    <h2 id="notebooks">Notebooks</h2>
    <ol class="site-contents">
{items}
    </ol>
{exercises_section(downloads)}  </main>
  <script src="{MINISEARCH_URL}"></script>
  <script src="{SEARCH_SECTIONS_URL}"></script>
  <script>{SEARCH_JS}</script>
</body>
</html>
"""
