"""The test suite's root: pytest puts this folder on ``sys.path`` because this file is here, so every
test, in ``tests/`` or below it, imports the shared helpers as ``helpers.<module>``."""
