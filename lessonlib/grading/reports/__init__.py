"""Every file written for people: an assignment's files, feedback, the LMS uploads and the reports.

- :mod:`gradebook`: an output folder's files (grades.csv, summary.csv, grades.json, feedback,
  manual.csv, lms-import.csv, the feedback zips, the class report), from the results.
- :mod:`feedback` (Markdown, and the one description both forms come from) and
  :mod:`feedback_html` (the page that renders alone); :mod:`safe_text` escapes what learners wrote.
- :mod:`exports`: the LMS files for every learner, or only those changed since the last export.
- :mod:`class_report`: what the class got wrong in one assignment.

The instructor's reports below are each one HTML page (or folder of pages) that renders alone.

- :mod:`marking`: a marking page per written question, anonymised by default, with a key file;
  manual.csv's answer column; a written question in Gradescope's output as a manual question.
- :mod:`term`: across the course's assignments, the misconceptions that persist per learner and
  per class, the sections to reteach, and who needs help.
- :mod:`similarity`: near-identical answers between learners and answers copied from the course's
  own code, per exercise answer cell, side by side (copydetect's winnowing of code put in one
  canonical form by :mod:`normalise`).

What the grading commands call::

    marking.write_marking_pages(out, results, solutions=None, show_names=False)
    term.write_term_report(path, gradebook)
    similarity.write_similarity_report(path, learners, identical=similarity.identical_files(gradebook, assignment))

:mod:`page` holds what the pages share (the document, escaping, figures); :mod:`course` finds
the course's own material (model answers, lesson and solutions notebooks, lessonlib's code).
"""
