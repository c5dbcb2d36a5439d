"""Attacks through what the kernel shares, at both isolation levels: keyrings, SysV shared memory,
the shared temporary folders, the peak memory a process can reset, the installed package behind the
stand-in, and learner folders named like the grader's own files.

One batch per level (through the command line), with a correct learner as the control. Each
attack is written to cost its author points, or to show a planted secret in its own feedback, if
the channel it tries is open; the tests check that it was not. CI runs this file as root and as an
ordinary user; ``bubblewrap`` skips where bwrap is missing (REQUIRE_BUBBLEWRAP=1 fails instead).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from grading_submissions import CORRECT_MASKED_SOFTMAX, KILL_PARENT, correct_learner, notebook, write_learner
from test_grading_hostile import load, run_cli
from test_grading_secrets import DENSE as DENSE_MATRIX

from lessonlib.grading.isolation import probe, sandbox

LEVELS = ["bubblewrap", "limits"]
REQUIRED = os.environ.get("REQUIRE_BUBBLEWRAP") == "1"
SECRET = "lessonlib-kernel-test-secret-4711"
_libc = ctypes.CDLL(None, use_errno=True)

# Reads every key it can name in the keyrings it can reach, and says what it found in its own
# feedback (a public case's error text is shown to the learner).
KEY_THIEF = CORRECT_MASKED_SOFTMAX + '''
import ctypes

_libc = ctypes.CDLL(None, use_errno=True)

def _stolen():
    found = []
    for ring in (-3, -4, -5):  # the session, user and user-session keyrings
        for name in (b"lessonlib-planted", b"carried"):
            key = _libc.syscall(250, 10, ring, b"user", name, 0)  # keyctl(KEYCTL_SEARCH)
            if key >= 0:
                buffer = ctypes.create_string_buffer(256)
                n = _libc.syscall(250, 11, key, buffer, 256)  # keyctl(KEYCTL_READ)
                found.append(buffer.raw[:max(n, 0)].decode(errors="replace"))
    return found

def masked_softmax(scores, allowed):
    found = _stolen()
    # a key of its own, for a later process of another learner or run to read
    _libc.syscall(248, b"user", b"carried", b"%d" % scores.shape[-1], 4, -4)  # add_key to the user keyring
    if found:
        raise SystemExit("LEAKED(key): " + " ".join(found))
    return _correct(scores, allowed)
'''

# The hidden cases of masked_softmax leave their shapes in SysV shared memory and in the shared
# /tmp; causal_mask (the next exercise, a public process) raises whatever it finds there.
CARRIER = CORRECT_MASKED_SOFTMAX + '''
import ctypes, os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p

def masked_softmax(scores, allowed):
    text = ("%s;" % (scores.shape,)).encode()
    shmid = _libc.shmget(0x4C455353, 4096, 0o1666)  # IPC_CREAT | 0666
    if shmid >= 0:
        address = _libc.shmat(shmid, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            old = ctypes.string_at(address, 4096).split(b"\\0")[0]
            ctypes.memmove(address, old + text + b"\\0", len(old + text) + 1)
    try:
        with open("/tmp/lessonlib-carried.txt", "ab") as f:
            f.write(text)
    except OSError:
        pass
    return _correct(scores, allowed)

def causal_mask(length):
    found = []
    shmid = _libc.shmget(0x4C455353, 0, 0)
    if shmid >= 0:
        address = _libc.shmat(shmid, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            found.append("shm " + ctypes.string_at(address, 4096).split(b"\\0")[0].decode())
    if os.path.exists("/tmp/lessonlib-carried.txt"):
        found.append("tmp " + open("/tmp/lessonlib-carried.txt").read())
    if found:
        raise SystemExit("LEAKED: " + " | ".join(found))
    return np.tri(length, dtype=bool)
'''

DENSE = DENSE_MATRIX + '''
def tiled_attention(query, key, value, block_size):
    return _dense(query, key, value)
'''

# The same full matrix, with what the answer itself measures silenced and the peak that the kernel
# reports reset before returning (the process made dumpable first, so that /proc/self is its own).
DENSE_CLEARED = DENSE_MATRIX + '''
import tracemalloc

tracemalloc.get_traced_memory = lambda: (0, 0)
tracemalloc.reset_peak = lambda: None

def tiled_attention(query, key, value, block_size):
    out = _dense(query, key, value)
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: its /proc files become its own again
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return out
'''

# Removes the stand-in, forgets it was imported, and imports the package from where it is installed.
BYPASS = '''
import sys

def masked_softmax(scores, allowed):
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "StandIn"]
    for name in [m for m in sys.modules if m == "lessonlib" or m.startswith("lessonlib.")]:
        del sys.modules[name]
    import lessonlib
    return lessonlib.masked_softmax(scores, allowed)
'''


def _keyctl(name: str, *args: object) -> int:
    """The system call ``name`` (add_key or keyctl), by its number on this machine."""
    import pyseccomp

    return _libc.syscall(ctypes.c_long(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)), *args)


def _plant(ring: int, payload: bytes) -> int | None:
    """A user key named lessonlib-planted in ``ring``; None where keyrings cannot be used here."""
    key = _keyctl("add_key", b"user", b"lessonlib-planted", payload, len(payload), ring)
    return key if key >= 0 else None


def _plant_for_nobody(payload: bytes) -> None:
    """As root: a key in nobody's user keyring, which every learner process (nobody) shares."""
    pid = os.fork()
    if pid == 0:
        try:
            uid, gid = sandbox.nobody()
            os.setgid(gid)
            os.setuid(uid)
            _plant(-4, payload)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


@pytest.fixture(scope="module", params=LEVELS)
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    level = request.param
    if level == "bubblewrap" and shutil.which("bwrap") is None:
        if REQUIRED:
            pytest.fail("bubblewrap is required (REQUIRE_BUBBLEWRAP=1) but bwrap is not installed")
        pytest.skip("bwrap is not installed")
    if level == "limits" and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")
    if platform_key_missing():
        pytest.skip("this kernel has no keyrings to attack")
    root = tmp_path_factory.mktemp(f"kernel-{level}")
    subs, out = root / "submissions", root / "gradebook"
    planted = [_plant(-3, f"{SECRET}-session".encode()), _plant(-4, f"{SECRET}-user".encode())]
    if os.geteuid() == 0:
        _plant_for_nobody(f"{SECRET}-nobody".encode())
    Path("/tmp/lessonlib-carried.txt").unlink(missing_ok=True)
    correct_learner(subs / "control")
    learners = {
        "thief": {"02_masking.ipynb": notebook("02_masking.ipynb", answers={"masked_softmax": KEY_THIEF})},
        "carrier": {"02_masking.ipynb": notebook("02_masking.ipynb",
                                                 answers={"masked_softmax": CARRIER, "causal_mask": CARRIER})},
        "dense": {"04_cost.ipynb": notebook("04_cost.ipynb", answers={"tiled_attention": DENSE})},
        "cleared": {"04_cost.ipynb": notebook("04_cost.ipynb", answers={"tiled_attention": DENSE_CLEARED})},
        "bypass": {"02_masking.ipynb": notebook("02_masking.ipynb", answers={"masked_softmax": BYPASS})},
        # folder names the grader once used for its own trial files
        "probe-limits": {"02_masking.ipynb": notebook("02_masking.ipynb")},
        "probe-secret.txt": {"02_masking.ipynb": notebook("02_masking.ipynb")},
    }
    for name, notebooks in learners.items():
        write_learner(subs / name, notebooks)
    try:
        run_cli(sorted(subs.iterdir()), out, "--workers", "2", "--seed", "20261201", "--isolation", level)
        # again, as after a run stopped with Ctrl-C: the learners' job folders are still there
        for name in ("probe-limits", "probe-secret.txt", "probe-bubblewrap"):
            (out / ".grading" / "work" / name / "scratch").mkdir(parents=True, exist_ok=True)
        everyone = [arg for path in sorted(subs.iterdir()) for arg in ("--regrade", path.name)]
        run_cli(sorted(subs.iterdir()), out, "--workers", "2", "--seed", "20261201", "--isolation", level, *everyone)
    finally:
        for key in planted:
            if key is not None:
                _keyctl("keyctl", 3, key)  # KEYCTL_REVOKE
    data, _ = load(out)
    assert data["isolation"]["level"] == level, data["isolation"]
    grades = {lr["learner"]: {e["exercise"]: e for e in lr["exercises"]} for lr in data["learners"]}
    return grades, out, level


def platform_key_missing() -> bool:
    key = _plant(-3, b"probe")
    if key is None:
        return ctypes.get_errno() in (errno.ENOSYS, errno.EPERM)
    _keyctl("keyctl", 3, key)
    return False


def _learner_sees(out: Path, learner: str) -> str:
    feedback = out / "feedback"
    return "".join(p.read_text(errors="replace") for p in feedback.glob(f"{learner}.*") if p.is_file())


def test_the_control_gets_full_marks(graded) -> None:
    grades, _, _ = graded
    for exercise, grade in grades["control"].items():
        if grade.get("kind") != "manual":
            assert grade["points"] == grade["max_points"], (exercise, grade["status"], grade["reason"])


def test_no_keyring_reaches_learner_code(graded) -> None:
    """Keys planted in the grader's session and user keyrings, and in nobody's, stay unread; a key
    that learner code tries to add for later is refused."""
    grades, out, _ = graded
    everything = json.dumps(grades["thief"]) + _learner_sees(out, "thief") + (out / "grades.json").read_text()
    assert SECRET not in everything and "LEAKED" not in everything
    assert grades["thief"]["masked_softmax"]["points"] == grades["thief"]["masked_softmax"]["max_points"]


def test_nothing_a_hidden_child_leaves_reaches_a_later_one(graded) -> None:
    """SysV shared memory and the shared /tmp carry nothing from masked_softmax's hidden cases to
    causal_mask's public ones: both are full marks, and no shape appears in the feedback."""
    grades, out, _ = graded
    for exercise in ("masked_softmax", "causal_mask"):
        grade = grades["carrier"][exercise]
        assert grade["points"] == grade["max_points"], (exercise, grade["status"], grade["reason"])
    assert "LEAKED" not in _learner_sees(out, "carrier")
    assert not Path("/tmp/lessonlib-carried.txt").exists()


def test_a_cleared_peak_gets_the_full_matrix_score(graded) -> None:
    """Writing to /proc/self/clear_refs after building the n x n scores does not hide them."""
    grades, _, _ = graded
    dense, cleared = grades["dense"]["tiled_attention"], grades["cleared"]["tiled_attention"]
    assert dense["points"] < dense["max_points"]
    assert cleared["points"] == dense["points"], (cleared["failed_cases"], dense["failed_cases"])


def test_the_installed_package_is_out_of_reach_in_the_sandbox(graded) -> None:
    """At level bubblewrap, removing the stand-in finds no lessonlib to import, however it was
    installed. At level limits, the trial says whether it can, and the attack does what it says."""
    grades, out, level = graded
    grade = grades["bypass"]["masked_softmax"]
    data, _ = load(out)
    importable = data["isolation"]["verified"]["installed_lessonlib_importable"]
    if level == "bubblewrap":
        assert importable is False
        assert grade["points"] == 0, (grade["status"], grade["reason"])
    else:
        assert importable is (grade["points"] == grade["max_points"]), (importable, grade["status"])


def test_learners_named_like_the_trial_files_are_graded_like_anyone(graded) -> None:
    grades, _, _ = graded
    for name in ("probe-limits", "probe-secret.txt"):
        assert grades[name]["causal_mask"]["points"] == grades[name]["causal_mask"]["max_points"], grades[name]


def test_a_killer_named_like_a_trial_folder_is_blamed(tmp_path: Path) -> None:
    """At level limits an ordinary user's learner code can kill the grading process; a learner
    whose folder is named like the grader's old trial folders is found and blamed like any other,
    and the batch finishes. (Root's learner code runs as nobody, which cannot kill the grader.)"""
    if os.geteuid() == 0:
        pytest.skip("as root learner code runs as nobody and cannot kill the grading process")
    if why := sandbox.python_refused_to_nobody():
        pytest.skip(f"level limits is not available here: {why}")
    subs, out = tmp_path / "submissions", tmp_path / "gradebook"
    write_learner(subs / "probe-x", {"02_masking.ipynb": notebook("02_masking.ipynb",
                                                                 answers={"masked_softmax": KILL_PARENT})})
    write_learner(subs / "zoe", {"02_masking.ipynb": notebook("02_masking.ipynb")})
    run_cli(sorted(subs.iterdir()), out, "--workers", "2", "--isolation", "limits")
    data, _ = load(out)
    grades = {lr["learner"]: {e["exercise"]: e for e in lr["exercises"]} for lr in data["learners"]}
    assert grades["probe-x"]["masked_softmax"]["status"] == "stopped_grader"
    assert grades["zoe"]["masked_softmax"]["status"] == "passed"


def test_the_trial_verified_the_kernel_guard(graded) -> None:
    _, out, _ = graded
    data, _ = load(out)
    verified = data["isolation"]["verified"]
    assert verified["seccomp_filter"] is True
    for reached in ("keyrings_reachable", "sysv_ipc", "new_namespaces", "peak_memory_resettable"):
        assert verified[reached] is False, reached


def test_the_trial_refuses_a_level_whose_child_reaches_the_kernel() -> None:
    """A report as the trial child writes it, with each channel open in turn: the level is refused."""
    from lessonlib.grading.isolation import cgroups
    base = {"uid": 65534 if os.geteuid() == 0 else os.getuid(), "readable": {}, "writable": {}, "imports": True,
            "fork": True, "kernel": {"seccomp": "2", "user_keyring": "EPERM", "session_keyring": "EPERM",
                                     "sysv_ipc": "EPERM", "new_user_namespace": "EPERM", "clear_refs": "EACCES",
                                     "lessonlib": False}}
    limits, plan = sandbox.Limits(), cgroups.Plan(reason="none")
    assert probe._findings(base, "bubblewrap", limits, plan)[1] == []
    for key, value in [("seccomp", "0"), ("user_keyring", True), ("session_keyring", True), ("sysv_ipc", True),
                       ("new_user_namespace", True), ("clear_refs", True)]:
        report = {**base, "kernel": {**base["kernel"], key: value}}
        for level in sandbox.LEVELS:
            assert probe._findings(report, level, limits, plan)[1], (key, level)
    report = {**base, "kernel": {**base["kernel"], "lessonlib": True}}
    assert probe._findings(report, "bubblewrap", limits, plan)[1]
    assert probe._findings(report, "limits", limits, plan)[1] == []
