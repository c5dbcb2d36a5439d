"""The grader's application: one function per command, the only room that drives all the others.

``lessonlib.cli`` parses a grading command's line and calls one of these with what it parsed;
nothing else of the grader opens the course gradebook for a command, finds learners for it or
decides which files it writes::

    grade.grade(args)              lessonlib grade: learners found (lms), graded (run), saved (store),
                                   every file written from the gradebook (reports)
    commands.override(args), ...   an instructor's decisions, the LMS export, history, restore, the
                                   term and similarity reports, Gradescope's build and run
    course                         an output folder and its gradebook: which assignment, the lock,
                                   results saved as they arrive, manual.csv's marks recorded
    importer                       an output folder of the file-based grader brought into the gradebook

The rooms below form layers, and no import runs back up (``tests/grading/test_layers.py``)::

    app                                 this room
    gradescope                          Gradescope's build and run
    reports                             files written for people
    run, lms                            one grading run; files from and to the LMS
    store, isolation, worker            the gradebook; keeping learner code apart
    ground                              records, learners, notebooks, safe_text, files, zones, arguments
"""
