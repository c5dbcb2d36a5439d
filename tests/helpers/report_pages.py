"""Checks shared by the report tests: a page renders alone, and what text it shows."""

from __future__ import annotations

from html.parser import HTMLParser

HOSTILE_ANSWER = "</textarea><script>alert('x')</script> <img src=x onerror=alert(1)> & done"


class Page(HTMLParser):
    """The tags, attributes and text of a page, to check what it holds without regexes on markup."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def all(self, tag: str) -> list[dict]:
        return [attrs for t, attrs in self.tags if t == tag]

    @property
    def words(self) -> str:
        return "".join(self.text)


def assert_alone(text: str) -> Page:
    """The page runs nothing and fetches nothing: no script, no link, no frame, images as data URLs."""
    page = Page(text)
    tags = {t for t, _ in page.tags}
    assert not tags & {"script", "link", "iframe", "object", "embed", "base", "form", "textarea"}, tags
    for tag, attrs in page.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for key in ("src", "href", "action", "srcset"):
            value = attrs.get(key)
            assert value is None or value.startswith("data:image/png;base64,"), (tag, key, value)
        if tag == "img":
            assert attrs.get("alt"), "every figure has alt text"
    assert "url(" not in text and "@import" not in text
    return page
