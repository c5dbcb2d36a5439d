"""A Playwright page that may load file:// URLs only, for opening the reading copy offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab_driver import VIEWPORT


class OfflinePage:
    """A page that may load file:// URLs only; every other request is aborted and recorded."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.blocked: list[str] = []
        self.failed: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("requestfailed", self._failed)

    def _route(self, route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def _failed(self, request: Any) -> None:
        if request.url.startswith("file://"):
            self.failed.append(f"{request.url}: {request.failure}")

    def open(self, path: Path) -> Any:
        self.page.goto(path.as_uri())
        return self.page
