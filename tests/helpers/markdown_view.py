"""Markdown as a reader sees it: rendered by mistune (a CommonMark parser that nbconvert brings),
with GitHub's tables, strikethrough and bare-URL autolinks, and raw HTML let through, as the most
permissive viewers do. Tests read the feedback through this, not its escaped source."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

import mistune

_RENDER = mistune.create_markdown(escape=False, plugins=["table", "strikethrough", "url"])
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


@dataclass
class View:
    """What a rendered Markdown document holds: its tags (with attributes), headings and text."""

    html: str
    tags: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    code_blocks: list[str] = field(default_factory=list)
    text: str = ""

    @property
    def tag_names(self) -> set[str]:
        return {tag for tag, _ in self.tags}


class _Reader(HTMLParser):
    def __init__(self, view: View) -> None:
        super().__init__(convert_charrefs=True)
        self.view = view
        self.open: list[str] = []
        self.parts: list[str] = []
        self.heading: list[str] | None = None
        self.block: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.view.tags.append((tag, dict(attrs)))
        if tag in HEADINGS:
            self.heading = []
        if tag == "pre":
            self.block = []

    def handle_endtag(self, tag: str) -> None:
        if tag in HEADINGS and self.heading is not None:
            self.view.headings.append(" ".join("".join(self.heading).split()))
            self.heading = None
        if tag == "pre" and self.block is not None:
            self.view.code_blocks.append("".join(self.block))
            self.block = None

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        for collecting in (self.heading, self.block):
            if collecting is not None:
                collecting.append(data)


def view(markdown: str) -> View:
    """``markdown`` rendered and read back."""
    seen = View(_RENDER(markdown))
    reader = _Reader(seen)
    reader.feed(seen.html)
    reader.close()
    seen.text = " ".join("".join(reader.parts).split())
    return seen


def shown(markdown: str) -> str:
    """The text a reader of ``markdown`` sees, whitespace runs as one space."""
    return view(markdown).text
