"""The thin ipywidgets layer every explorer shares: controls, a text readout and a figure image.

The readout carries the CSS class ``lessonlib-readout`` so a browser test can read it; the
figure is re-rendered to PNG into an ``<img>`` inside an HTML widget (no Output widget, so
nothing stray is captured in the notebook), with a text statement of what it shows as its alt
text and as a caption beside it. (ipywidgets' Image widget has no alt attribute.)
"""

from __future__ import annotations

import base64
import dataclasses
import html
from collections.abc import Callable
from typing import Any

from lessonlib.plots import figure_png

READOUT_CLASS = "lessonlib-readout"


def figure_img(png: bytes, statement: str) -> str:
    """An ``<img>`` element showing ``png`` inline, with ``statement`` as its alt text."""
    source = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{source}" alt="{html.escape(statement, quote=True)}">'


def build_explorer(
    controls: dict[str, Any],
    settings: Any,
    *,
    compute: Callable[[Any], Any],
    describe: Callable[[Any], str],
    draw: Callable[[Any], Any],
    alt_text: Callable[[Any], str],
    title: str,
) -> Any:
    """Wire ``controls`` (field name -> widget) to an explorer's pure functions.

    ``settings`` is the explorer's starting Settings (a frozen dataclass); each control is named
    after the field it sets. On every change: the settings with the controls' values
    (dataclasses.replace), result = compute(those settings); the
    readout shows describe(result), the image draw(result) (a Figure or a PartialRedraw) and the
    caption alt_text(result). Returns the VBox to display; one change computes and draws once.
    """
    import ipywidgets as widgets

    readout = widgets.HTML()
    readout.add_class(READOUT_CLASS)
    caption = widgets.HTML()
    image = widgets.HTML()

    def update(_change: object = None) -> None:
        chosen = dataclasses.replace(settings, **{name: w.value for name, w in controls.items()})
        result = compute(chosen)
        readout.value = f"<pre style='margin:0'>{html.escape(describe(result))}</pre>"
        statement = f"Figure: {alt_text(result)}"
        image.value = figure_img(figure_png(draw(result)), statement)
        caption.value = f"<i>{html.escape(statement)}</i>"

    for widget in controls.values():
        widget.observe(update, names="value")
    update()
    heading = widgets.HTML(f"<b>{html.escape(title)}</b>")
    return widgets.VBox([heading, *controls.values(), readout, image, caption])
