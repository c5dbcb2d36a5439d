"""Interactive explorers, one per lesson goal.

Each module holds a frozen ``Settings`` dataclass, a pure ``compute(settings) -> Result``
(numbers and arrays only), ``describe(result) -> str`` (the readout shown under the controls),
``draw(result, fig, axes)``, and a thin ``show()`` that wires ipywidgets controls to them.
"""
