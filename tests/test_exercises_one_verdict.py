"""One verdict: check() sees what the learner's notebook defines, as the grader does.

Unit tests of the cell slicing in ``lessonlib.exercises.cells``; tests/grading/test_one_verdict.py
runs learners' notebooks top to bottom and grades them, and the two verdicts agree.
"""

from __future__ import annotations

from lessonlib.exercises.cells import check_notes, slice_cells

SETUP = "import math\n\nimport numpy as np\n\nfrom lessonlib.exercises import check"


# --- slicing ---------------------------------------------------------------------------------------


def test_a_constant_computed_by_a_call_is_run_when_a_helper_reads_it():
    cells = [
        SETUP,
        "SCALE = np.sqrt(8)\nprint('an experiment')\nUNUSED = np.ones(3)",
        "def helper(x):\n    return x / SCALE",
        "def masked_softmax(scores, allowed):\n    return helper(scores)",
    ]
    cut = slice_cells(cells, 3, "masked_softmax")
    assert cut.notes == []
    assert "SCALE = np.sqrt(8)" in cut.kept[1]
    assert "print" not in cut.kept[1] and "UNUSED" not in cut.kept[1]  # not needed, not a definition
    assert cut.kept[1].count("\n") == cells[1].count("\n")  # line numbers kept for tracebacks
    assert "def helper" in cut.kept[2] and cut.kept[3] == cells[3]


def test_what_a_needed_name_depends_on_is_run_too_and_changes_to_it_as_well():
    cells = [
        "import numpy as np\nimport math as m",
        "BASE = 10 ** 4\nTABLE = []\nTABLE.append(m.log(BASE))\nnp.random.seed(0)\nplot_everything()",
        "def sinusoidal_positions(n, d):\n    return np.full((n, d), TABLE[0])",
    ]
    cut = slice_cells(cells, 2, "sinusoidal_positions")
    assert cut.notes == []
    kept = cut.kept[1]
    assert "TABLE.append(m.log(BASE))" in kept and "BASE = 10 ** 4" in kept and "TABLE = []" in kept
    assert "seed" not in kept and "plot_everything" not in kept
    assert {"TABLE", "BASE", "m", "np"} <= cut.needed


def test_cells_below_the_answer_count_as_the_notebook_runs_them_top_to_bottom():
    cells = [SETUP, "def causal_mask(n):\n    return helper(n)", "check('causal_mask', causal_mask)",
             "def helper(n):\n    return np.tri(n, dtype=bool)"]
    cut = slice_cells(cells, 1, "causal_mask")
    assert cut.notes == [] and "def helper" in cut.kept[3] and 2 not in cut.kept


def test_what_cannot_run_is_named_with_the_reason():
    cells = [
        SETUP,
        "import matplotlib.pyplot as plt\nWIDTH = plt.rcParams['figure.dpi']",
        "def padding_mask(lengths, m):\n    return causal_mask(m)[lengths] * WIDTH + display(1)",
        "def causal_mask(n):\n    return np.tri(n, dtype=bool)",
        "def causal_mask(n):  # a second try, in a scratch cell\n    return None",
    ]
    cut = slice_cells(cells, 2, "padding_mask", {"causal_mask": 3})
    notes = "\n".join(cut.notes)
    assert "`plt`" in notes and "plotting or widget library" in notes
    assert "`display`" in notes and "Jupyter provides" in notes
    assert "`causal_mask`" not in notes  # its own answer cell defines it, and that runs
    assert "a second try" not in cut.kept.get(4, "")  # another cell may not redefine an exercise
    assert "WIDTH = plt.rcParams" in cut.kept[1]  # needed, so it runs (and fails there, as reported)


def test_a_needed_statement_on_a_shared_line_is_reported():
    cells = [SETUP, "import matplotlib.pyplot as plt", "EPS = np.finfo(float).eps; plt.show()",
             "def alibi_slopes(n):\n    return 2.0 ** (-8 * np.arange(1, n + 1) / n) + 0 * EPS"]
    notes = slice_cells(cells, 3, "alibi_slopes").notes
    assert any("shares a line" in n for n in notes) and any("`EPS`" in n for n in notes)


def test_check_reads_the_kernel_history_the_same_way():
    history = ["", SETUP, "import matplotlib.pyplot as plt", "def alibi_slopes(n):\n    return plt.gca()",
               "check('alibi_slopes', alibi_slopes)"]
    notes = check_notes("alibi_slopes", history)
    assert len(notes) == 1 and "`plt`" in notes[0] and "In[2]" in notes[0]
    assert check_notes("alibi_slopes", ["", SETUP]) == []  # no answer cell: nothing to say
