"""Interactive explorers, one per lesson goal.

Each module holds a frozen ``Settings`` dataclass, a pure ``compute(settings) -> Result``
(numbers and arrays only), ``describe(result) -> str`` (the readout shown under the controls),
``alt_text(result) -> str`` (what the figure shows, in words), a figure class whose ``draw(result)``
redraws only what changed, and a thin ``show()`` that hands all of them, with ipywidgets controls
named after the Settings fields, to :func:`lessonlib.explorers._wiring.build_explorer`.
"""
