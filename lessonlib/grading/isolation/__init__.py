"""Running learner code apart from the grader: levels and limits, workers, the trial.

- :mod:`sandbox`: the isolation levels, :class:`~sandbox.Limits`, the bubblewrap command line.
- :mod:`workers`: the job file, memory per exercise, starting and stopping a worker, its records.
- :mod:`trial`: the trial worker and the level a run uses (``choose_isolation``).
- :mod:`cgroups`: a control group per worker; :mod:`syscalls`: the seccomp filter.
- :mod:`wire`: the format of what the worker sends back, loaded by path by the worker too.

The worker itself (``grading/worker/``) imports nothing of this package nor of ``lessonlib``.
"""
