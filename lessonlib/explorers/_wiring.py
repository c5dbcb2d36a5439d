"""The thin ipywidgets layer every explorer shares: controls, a text readout and a figure image.

The readout carries the CSS class ``lessonlib-readout`` so a browser test can read it; the
figure is re-rendered to PNG into an Image widget (no Output widget, so nothing stray is
captured in the notebook), with a text statement of what it shows beside it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from lessonlib.plots import figure_png

READOUT_CLASS = "lessonlib-readout"


def build_explorer(
    controls: dict[str, Any],
    settings_from: Callable[[dict[str, Any]], Any],
    render: Callable[[Any], tuple[str, Any, str]],
    *,
    title: str,
) -> Any:
    """Wire ``controls`` (name -> widget) to ``render(settings) -> (readout, figure, alt_text)``.

    Returns the VBox to display. Every control change recomputes once and redraws once.
    """
    import ipywidgets as widgets

    readout = widgets.HTML()
    readout.add_class(READOUT_CLASS)
    caption = widgets.HTML()
    image = widgets.Image(format="png")

    def update(_change: object = None) -> None:
        settings = settings_from({name: w.value for name, w in controls.items()})
        text, fig, alt = render(settings)
        readout.value = f"<pre style='margin:0'>{html.escape(text)}</pre>"
        image.value = figure_png(fig)
        caption.value = f"<i>Figure: {html.escape(alt)}</i>"

    for widget in controls.values():
        widget.observe(update, names="value")
    update()
    heading = widgets.HTML(f"<b>{html.escape(title)}</b>")
    return widgets.VBox([heading, *controls.values(), readout, image, caption])
