"""The grading worker: runs one learner's answers and sends back plain-data results.

Started by the grading process (see ``sandbox.launch``), never imported by it:

    python -I -B worker/main.py [--lifeline FD] RUNNER WIRE            grade the job read from stdin
    python -I -B worker/main.py --probe [--lifeline FD] RUNNER WIRE    the trial: run no learner code

FD is the worker's end of its lifeline, a socket whose other end only the grading process holds.
The worker waits on it for "go" (with its control group's out-of-memory counters and the
descriptors of the groups its measured children join, when there is one) before it does
anything, and when it breaks (the grading process ended, even by kill -9) the worker kills
everything it started and exits.

It imports the standard library and NumPy only, and loads two files by path before any learner
code runs: ``exercises/runner.py`` (call an answer on one case, reduce what came back to plain
data) and ``grading/isolation/wire.py`` (the format of what goes back). It never imports ``lessonlib``:
learner code that does gets a stand-in whose functions refuse to run and are recorded.

The job comes on stdin: first its secret part (probe descriptions and hidden cases, a JSON frame
and its ``.npy`` frames), read by the keeper alone; then the job (a JSON frame, then the public
inputs as ``.npy`` frames). The results go to stdout as records (``wire.record``): ``started``
before a task's first child starts, ``result`` (both children's frames and how each ended)
after. The worker needs no view of the job folder, so inside the bubblewrap sandbox there is
none; learner code has neither descriptor.

One module per process role:

    zygote.py    the first process: forks the keeper and the children, watches each child, kills
                 what it leaves, reads its peak memory, writes the records (its state: ``Zygote``)
    keeper.py    the one process that holds probes and hidden inputs, and answers children
    child.py     the process that runs learner code, under rlimits, a fresh keyring, Landlock and
                 the seccomp filter; and the trial child
    protocol.py  what they share: prctl, loading files by path, frames and messages
    standin.py   the stand-in lessonlib, the print sink and the returned-value bound
    landlock.py  where a child may change files (its scratch folder) and whom it may signal
    cleanup.py   files a child leaves behind, removed before the next one; where it could leave them

Namespaces, hidden files and the user (nobody, for root) are bubblewrap's work, not this package's.
"""
