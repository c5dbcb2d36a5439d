"""Helpers the test folders share: answer sets, learner submissions, ways to run the grader, views of
its pages. Tests import them as ``helpers.<module>``; ``tests/conftest.py`` puts ``tests/`` on the path."""
