"""The one base of the gradebook's errors, so a command can report any of them in one ``except``."""


class GradebookError(Exception):
    """Something about the course gradebook that the person running the command must act on; the
    message says what was wrong and what to do."""


class DamagedGradebook(GradebookError):
    """The gradebook file is empty, truncated, corrupt, missing beside its backups, or its history's
    chain is broken: it is refused, and the message names the backup to restore."""
