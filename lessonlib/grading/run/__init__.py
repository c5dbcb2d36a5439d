"""One grading run: notebooks read and planned, workers started, results judged.

- :mod:`batch`: ``grade``, the batch of learners, saved results and resuming after a crash.
- :mod:`jobs`: one learner's job for the worker (cases, hidden inputs, probes).
- :mod:`notebooks`: the course's notebooks; reading a learner's notebook without trusting it.
- :mod:`plans`: which learner code runs for each exercise; written answers.
- :mod:`results`: what the worker sent back, read once; :mod:`assess`: a grade per exercise from it.
- :mod:`resume`: the seed, fingerprints of saved results, and markers a grading process that died left.
- :mod:`errors`: ``GradingError`` (the run cannot go on as asked) and ``Interrupted``.
- :mod:`progress`: the progress line.
"""
