"""What comes from and goes to the LMS: downloads, rosters, imports and uploads.

- :mod:`submissions`: learners found in submitted files and folders, and their keys.
- :mod:`downloads`: Canvas and Moodle downloads (zips unpacked by :mod:`unzip`).
- :mod:`roster`: rosters and ``lms-import.csv``; :mod:`localized`: Moodle's headers in its languages.
- :mod:`uploads`: the feedback zips to upload.
- :mod:`times`: each learner's submission time and its source (worksheet, zip entry, file time).
"""
