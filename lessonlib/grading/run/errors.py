"""How a grading run stops: it cannot run as asked, or the instructor stopped it."""


class GradingError(RuntimeError):
    """The batch cannot run (bad arguments, no isolation, a seed that differs from DIR's)."""


class Interrupted(Exception):
    """The instructor stopped the batch; what was running is not blamed on anyone."""
