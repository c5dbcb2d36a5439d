"""Attacks through what the kernel shares, at both isolation levels: keyrings, SysV shared memory,
io_uring, the machine's shared folders, the peak memory a process can reset (a prctl whose option
has high bits set), a process started where memory is measured, the output folder of an earlier
run, the installed package behind the stand-in, and learner folders named like the grader's own
files.

One batch per level (through the command line), with a correct learner as the control. Each
attack is written to cost its author points, or to show a planted secret in its own feedback, if
the channel it tries is open; the tests check that it was not. CI runs this file as root and as an
ordinary user; ``bubblewrap`` skips where bwrap is missing (REQUIRE_BUBBLEWRAP=1 fails instead),
and ``limits`` runs as root alone (an ordinary user is refused that level). Below the batch, the
filter, Landlock and the fallback cleanup are tried directly, in forked processes.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grading_submissions import CORRECT_MASKED_SOFTMAX, correct_learner, notebook, write_learner
from test_grading_hostile import load, run_cli
from test_grading_secrets import DENSE as DENSE_MATRIX

from lessonlib.exercises import EXERCISES
from lessonlib.grading.isolation import probe, sandbox, syscalls

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

# Folders every user may write on a Debian or Ubuntu machine (and the sandbox's own /tmp and
# /dev/shm): the hidden cases of masked_softmax leave their shapes in each, and in SysV shared
# memory; causal_mask (the next exercise, a public process) raises whatever it finds there.
SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
CARRIED = "lessonlib-carried.txt"

CARRIER = CORRECT_MASKED_SOFTMAX + f'''
import ctypes, os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_FILES = [os.path.join(folder, {CARRIED!r}) for folder in {SHARED!r}]

def masked_softmax(scores, allowed):
    text = ("%s;" % (scores.shape,)).encode()
    shmid = _libc.shmget(0x4C455353, 4096, 0o1666)  # IPC_CREAT | 0666
    if shmid >= 0:
        address = _libc.shmat(shmid, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            old = ctypes.string_at(address, 4096).split(b"\\0")[0]
            ctypes.memmove(address, old + text + b"\\0", len(old + text) + 1)
    for path in _FILES:
        try:
            with open(path, "ab") as f:
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
    found += [path + " " + open(path).read() for path in _FILES if os.path.exists(path)]
    if found:
        raise SystemExit("LEAKED: " + " | ".join(found))
    return np.tri(length, dtype=bool)
'''


def _reader(paths: list[str]) -> str:
    """Correct masked_softmax, which first tries to read ``paths`` and then always says, in its own
    feedback, which it read (READ), could not open (DENIED) or did not find (MISSING)."""
    return CORRECT_MASKED_SOFTMAX + f'''
def masked_softmax(scores, allowed):
    seen = {{"READ": [], "DENIED": [], "MISSING": []}}
    for path in {paths!r}:
        try:
            with open(path, "rb") as f:
                f.read(64)
            seen["READ"].append(path)
        except FileNotFoundError:
            seen["MISSING"].append(path)
        except OSError:
            seen["DENIED"].append(path)
    raise SystemExit("OPENED " + repr(seen))
'''


DENSE = DENSE_MATRIX + '''
def tiled_attention(query, key, value, block_size):
    return _dense(query, key, value)
'''

# The same full matrix, with what the answer itself measures silenced and the peak that the kernel
# reports reset before returning: the process made dumpable again by a prctl whose option has a
# high bit set (the kernel reads an int's low 32 bits: option 4, PR_SET_DUMPABLE), so that its
# /proc/self/clear_refs is its own.
DENSE_CLEARED = DENSE_MATRIX + '''
import ctypes
import platform
import tracemalloc

tracemalloc.get_traced_memory = lambda: (0, 0)
tracemalloc.reset_peak = lambda: None
_libc = ctypes.CDLL(None, use_errno=True)
_PRCTL = {"x86_64": 157, "aarch64": 167}[platform.machine()]

def tiled_attention(query, key, value, block_size):
    out = _dense(query, key, value)
    _libc.syscall(ctypes.c_long(_PRCTL), ctypes.c_long(0x100000004), ctypes.c_long(1), ctypes.c_long(0),
                  ctypes.c_long(0), ctypes.c_long(0))
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return out
'''

# The full matrix again; a process it manages to start costs it the rest of its points.
DENSE_FORKING = DENSE_MATRIX + '''
import os

def tiled_attention(query, key, value, block_size):
    try:
        pid = os.fork()
    except OSError:
        return _dense(query, key, value)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return value[..., :1, :] * 0.0
'''

# Correct, unless io_uring can be set up: then it says so, and loses the exercise's points.
URING = CORRECT_MASKED_SOFTMAX + '''
import ctypes
import platform

_libc = ctypes.CDLL(None, use_errno=True)
_SETUP = {"x86_64": 425, "aarch64": 425}[platform.machine()]

def masked_softmax(scores, allowed):
    params = ctypes.create_string_buffer(120)
    ring = _libc.syscall(ctypes.c_long(_SETUP), ctypes.c_long(1), params)
    if ring >= 0:
        raise SystemExit("IO_URING: a ring was set up")
    return _correct(scores, allowed)
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


# No answer here loops: time enough that the whole-matrix answers' largest hidden case (0.8 s of CPU
# alone) still finishes on a loaded machine, where 1.5 s of CPU and 4 s on the clock did not.
OPTIONS = ("--workers", "2", "--seed", "20261201", "--timeout", "4")


def _only(exercise: str, answer: str) -> dict[str, Any]:
    """A learner who hands in ``exercise``'s notebook with ``answer`` and no other answer cell (the
    others are not attempted, so nothing else of theirs runs)."""
    name = EXERCISES[exercise].notebook
    others = tuple(e for e, spec in EXERCISES.items() if spec.notebook == name and e != exercise)
    return {name: notebook(name, answers={exercise: answer}, delete=others)}


@pytest.fixture(scope="module", params=LEVELS)
def graded(request: pytest.FixtureRequest) -> tuple[dict, Path, str]:
    level = request.param
    if level == "bubblewrap" and shutil.which("bwrap") is None:
        if REQUIRED:
            pytest.fail("bubblewrap is required (REQUIRE_BUBBLEWRAP=1) but bwrap is not installed")
        pytest.skip("bwrap is not installed")
    if level == "limits" and (why := sandbox.python_refused_to_nobody()):
        pytest.skip(f"level limits is not available here: {why}")
    if level == "limits" and os.geteuid() != 0:
        pytest.skip("level limits refuses an ordinary user's graded work (see test_grading_secrets.py)")
    if platform_key_missing():
        pytest.skip("this kernel has no keyrings to attack")
    # a course folder others may enter, as a course folder often is (root's pytest folders are closed to
    # nobody): what keeps learner code out of the output folder and the gradebook is their own modes
    root = Path(tempfile.mkdtemp(prefix=f"lessonlib-kernel-{level}-"))
    os.chmod(root, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    subs, out = root / "submissions", root / "gradebook"
    planted = [_plant(-3, f"{SECRET}-session".encode()), _plant(-4, f"{SECRET}-user".encode())]
    if os.geteuid() == 0:
        _plant_for_nobody(f"{SECRET}-nobody".encode())
    for folder in SHARED:
        Path(folder, CARRIED).unlink(missing_ok=True)
    correct_learner(subs / "control")
    learners = {
        "thief": {"02_masking.ipynb": notebook("02_masking.ipynb", answers={"masked_softmax": KEY_THIEF})},
        "carrier": {"02_masking.ipynb": notebook("02_masking.ipynb",
                                                 answers={"masked_softmax": CARRIER, "causal_mask": CARRIER})},
        "dense": _only("tiled_attention", DENSE),
        "cleared": _only("tiled_attention", DENSE_CLEARED),
        "forking": _only("tiled_attention", DENSE_FORKING),
        "uring": _only("masked_softmax", URING),
        "bypass": {"02_masking.ipynb": notebook("02_masking.ipynb", answers={"masked_softmax": BYPASS})},
        # folder names the grader once used for its own trial files
        "probe-limits": {"02_masking.ipynb": notebook("02_masking.ipynb")},
        "probe-secret.txt": {"02_masking.ipynb": notebook("02_masking.ipynb")},
    }
    for name, notebooks in learners.items():
        write_learner(subs / name, notebooks)
    try:
        run_cli(sorted(subs.iterdir()), out, *OPTIONS, "--isolation", level)
        # again, as after a run stopped with Ctrl-C: the learners' job folders are still there
        for name in ("probe-limits", "probe-secret.txt", "probe-bubblewrap"):
            (out / ".grading" / "work" / name / "scratch").mkdir(parents=True, exist_ok=True)
        everyone = [arg for path in sorted(subs.iterdir()) for arg in ("--regrade", path.name)]
        # and a learner who hands in late, whose code tries what the first run wrote, and the gradebook
        write_learner(subs / "reader", _only("masked_softmax", _reader(
            [str(out / "grades.json"), str(out / "feedback" / "control.md"), str(out / "marking" / "key.csv"),
             str(root / "gradebook.db")])))
        run_cli(sorted(subs.iterdir()), out, *OPTIONS, "--isolation", level, *everyone)
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
    """SysV shared memory and the machine's shared folders (/run/lock among them: once it carried
    hidden inputs at level limits as root) carry nothing from masked_softmax's hidden cases to
    causal_mask's public ones: both are full marks, no shape appears in the feedback, and nothing
    is left in any of those folders."""
    grades, out, _ = graded
    for exercise in ("masked_softmax", "causal_mask"):
        grade = grades["carrier"][exercise]
        assert grade["points"] == grade["max_points"], (exercise, grade["status"], grade["reason"])
    assert "LEAKED" not in _learner_sees(out, "carrier")
    assert not [folder for folder in SHARED if Path(folder, CARRIED).exists()]


def test_the_output_folder_and_the_gradebook_are_the_instructor_s_alone(graded) -> None:
    """Every folder and file the grader writes can be read by its owner alone; learner code graded
    in the second run, which tries grades.json (each hidden case's description), a feedback file,
    the marking key and the gradebook that the first run wrote, opens none of them."""
    grades, out, level = graded
    seen = grades["reader"]["masked_softmax"]["reason"]
    assert "OPENED" in seen and "'READ': []" in seen, seen
    if level == "limits":  # the files are there, and closed to learner code (in the sandbox they are absent)
        assert "'MISSING': []" in seen, seen
    for path in [out, *out.rglob("*"), out.parent / "gradebook.db"]:
        if not path.is_symlink():
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))


def test_a_cleared_peak_gets_the_full_matrix_score(graded) -> None:
    """``prctl(0x100000004, 1)`` then /proc/self/clear_refs, after building the n x n scores, does
    not hide them: the whole-matrix answer keeps 1.5 of 3 (it once got 3 of 3)."""
    grades, _, _ = graded
    dense, cleared = grades["dense"]["tiled_attention"], grades["cleared"]["tiled_attention"]
    assert (dense["points"], dense["max_points"]) == (1.5, 3), dense["failed_cases"]
    assert cleared["points"] == 1.5, (cleared["failed_cases"], cleared["reason"])
    assert [f["case"] for f in cleared["failed_cases"]] == ["memory"]


def test_the_measured_child_starts_no_process(graded) -> None:
    """Where peak memory is read, a fork fails at every level and as any user (root's learner code,
    nobody, once could: the process limit counted every worker's processes)."""
    grades, _, _ = graded
    forking = grades["forking"]["tiled_attention"]
    assert forking["points"] == 1.5, (forking["failed_cases"], forking["reason"])


def test_io_uring_is_refused(graded) -> None:
    grades, out, _ = graded
    uring = grades["uring"]["masked_softmax"]
    assert uring["points"] == uring["max_points"], uring["reason"]
    assert "IO_URING" not in _learner_sees(out, "uring")


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


def test_the_trial_verified_the_kernel_guard(graded) -> None:
    _, out, _ = graded
    data, _ = load(out)
    verified = data["isolation"]["verified"]
    assert verified["seccomp_filter"] is True
    for reached in ("keyrings_reachable", "sysv_ipc", "new_namespaces", "peak_memory_resettable", "io_uring"):
        assert verified[reached] is False, reached


def test_the_trial_refuses_a_level_whose_child_reaches_the_kernel() -> None:
    """A report as the trial child writes it, with each channel open in turn: the level is refused."""
    from lessonlib.grading.isolation import cgroups
    base = {"uid": 65534 if os.geteuid() == 0 else os.getuid(), "readable": {}, "writable": {}, "imports": True,
            "fork": True, "kernel": {"seccomp": "2", "user_keyring": "EPERM", "session_keyring": "EPERM",
                                     "sysv_ipc": "EPERM", "new_user_namespace": "EPERM", "clear_refs": "EACCES",
                                     "io_uring": "ENOSYS", "lessonlib": False}}
    limits, plan = sandbox.Limits(), cgroups.Plan(reason="none")
    assert probe._findings(base, "bubblewrap", limits, plan)[1] == []
    for key, value in [("seccomp", "0"), ("user_keyring", True), ("session_keyring", True), ("sysv_ipc", True),
                       ("new_user_namespace", True), ("clear_refs", True), ("io_uring", True)]:
        report = {**base, "kernel": {**base["kernel"], key: value}}
        for level in sandbox.LEVELS:
            assert probe._findings(report, level, limits, plan)[1], (key, level)
    report = {**base, "kernel": {**base["kernel"], "lessonlib": True}}
    assert probe._findings(report, "bubblewrap", limits, plan)[1]
    assert probe._findings(report, "limits", limits, plan)[1] == []


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _in_child(action: Callable[[], Any]) -> Any:
    """``action()`` run in a forked process (whatever it gives up stays there), its result back as JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.write(w, json.dumps(action()).encode())
        except BaseException as exc:  # noqa: BLE001 - said in the parent's assertion
            os.write(w, json.dumps({"error": repr(exc)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _under_filter(strict: bool, attempts: dict[str, tuple[str, tuple[int, ...]]]) -> dict[str, int]:
    """Each attempt (a system call by name, and its arguments) made in a forked child under the
    filter that ``syscalls.build`` made: 0 when the call went through, else its errno."""
    import base64

    import pyseccomp

    program = base64.b64decode(syscalls.build()["strict" if strict else "filter"])

    def attempt() -> dict[str, int]:
        buffer = ctypes.create_string_buffer(program, len(program))
        fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
        assert _libc.prctl(38, ctypes.c_ulong(1), 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
        # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        assert _libc.prctl(22, ctypes.c_ulong(2), ctypes.c_void_p(ctypes.addressof(fprog)), 0, 0) == 0
        seen = {}
        for label, (call, args) in attempts.items():
            number = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, call)
            done = _libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
            seen[label] = 0 if done >= 0 else ctypes.get_errno()
        return seen

    return _in_child(attempt)


HIGH = 1 << 32  # a bit the kernel never reads of an int argument


def test_the_filter_reads_int_arguments_on_their_low_32_bits() -> None:
    """``prctl(0x100000004, 1)`` is PR_SET_DUMPABLE to the kernel, so the filter denies it as it
    denies ``prctl(4, 1)``; the same for ioctl's and personality's commands. A high bit on top of a
    harmless value changes nothing either way (personality 0 stays allowed)."""
    for rule in (*syscalls.DENIED, *syscalls.STRICT):
        assert rule.arg is None or 0 < rule.bits <= syscalls.INT_BITS, rule
    r, _ = os.pipe()
    seen = _under_filter(False, {
        "dumpable": ("prctl", (4, 1, 0, 0, 0)),
        "dumpable, high bit": ("prctl", (HIGH | 4, 1, 0, 0, 0)),
        "TIOCSTI, high bit": ("ioctl", (r, HIGH | syscalls.TIOCSTI, 0)),
        "PER_LINUX32, high bit": ("personality", (HIGH | 0x0008,)),
        "PER_LINUX, high bit": ("personality", (HIGH | syscalls.PER_LINUX,)),
        "io_uring_setup": ("io_uring_setup", (1, 0)),
        "io_uring_enter": ("io_uring_enter", (0, 0, 0, 0, 0, 0)),
        "io_uring_register": ("io_uring_register", (0, 0, 0, 0)),
    })
    os.close(r)
    assert seen == {"dumpable": errno.EPERM, "dumpable, high bit": errno.EPERM, "TIOCSTI, high bit": errno.EPERM,
                    "PER_LINUX32, high bit": errno.EPERM, "PER_LINUX, high bit": 0,
                    "io_uring_setup": errno.ENOSYS, "io_uring_enter": errno.ENOSYS,
                    "io_uring_register": errno.ENOSYS}, seen


def test_where_memory_is_measured_learner_code_starts_no_process() -> None:
    """The strict filter (a child whose peak memory is read) refuses fork, vfork and a clone that is
    not a thread, whoever runs it: root is exempt from the process limit, not from the filter."""
    sigchld = 17
    seen = _under_filter(True, {"fork": ("fork", ()), "vfork": ("vfork", ()),
                                "clone": ("clone", (sigchld, 0, 0, 0, 0)),
                                "clone, high bit": ("clone", (HIGH | sigchld, 0, 0, 0, 0))})
    assert seen == {"fork": errno.EPERM, "vfork": errno.EPERM, "clone": errno.EPERM, "clone, high bit": errno.EPERM}


def _search_as_learner(top: Path, skip: Path) -> list[str]:
    """``writable_folders`` below ``top``, run as learner code's user (nobody, for root)."""
    from lessonlib.grading.worker import cleanup

    def search() -> tuple[list[str], bool]:
        if os.geteuid() == 0:
            uid, gid = sandbox.nobody()
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        return cleanup.writable_folders(str(skip), 30, top=str(top))

    folders, finished = _in_child(search)
    assert finished
    return folders


def test_without_landlock_every_folder_learner_code_can_write_is_found_and_cleaned() -> None:
    """On a kernel without Landlock the trial searches for every folder learner code's user can
    write (a world-writable one, and one inside it, not one it may only read, nor its scratch
    folder), and after each child the zygote removes what that user made there since the child
    started; what it owned before stays."""
    from lessonlib.grading.worker import cleanup

    top = Path(tempfile.mkdtemp(prefix="lessonlib-machine-"))  # where nobody can reach it (not root's pytest folder)
    try:
        shared, inner, closed, scratch = top / "run-lock", top / "run-lock" / "inner", top / "etc", top / "scratch"
        for folder in (shared, inner, closed, scratch):
            folder.mkdir(parents=True)
        for folder, mode in ((top, 0o555), (shared, 0o1777), (inner, 0o777), (closed, 0o555), (scratch, 0o777)):
            os.chmod(folder, mode)
        assert _search_as_learner(top, scratch) == [str(shared), str(inner)]
        (shared / "before.txt").write_text("there before the child\n")
        before = cleanup.temp_entries(os.getuid(), [str(shared), str(inner)])
        (shared / "carried.txt").write_text("a hidden input\n")
        (inner / "deep").mkdir()
        (inner / "deep" / "carried.txt").write_text("another\n")
        cleanup.remove_new_temp(os.getuid(), before, [str(shared), str(inner)])
        assert sorted(p.name for p in shared.iterdir()) == ["before.txt", "inner"]
        assert list(inner.iterdir()) == []
    finally:
        os.chmod(top, 0o755)
        shutil.rmtree(top, ignore_errors=True)


def test_landlock_confines_changes_to_the_scratch_folder_and_signals_to_its_own(tmp_path: Path) -> None:
    """A process confined as a child is: it writes beneath its scratch folder and to /dev/null, and
    nowhere else (not in a folder it owns, not in /tmp); from Landlock's version 6 it cannot signal
    its parent (the zygote, at level limits the same user as every other learner's worker)."""
    from lessonlib.grading.worker import landlock

    if landlock.abi() == 0:
        pytest.skip("this kernel has no Landlock (the zygote cleans up after each child instead)")
    scratch, own = tmp_path / "scratch", tmp_path / "own"
    scratch.mkdir()
    own.mkdir()

    def confined() -> dict[str, object]:
        assert _libc.prctl(38, ctypes.c_ulong(1), 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS, as limit() sets it
        landlock.confine(str(scratch))
        seen: dict[str, object] = {}
        for label, path in (("scratch", scratch / "a.txt"), ("own", own / "a.txt"), ("devnull", Path(os.devnull)),
                            ("tmp", Path(tempfile.gettempdir()) / f"lessonlib-landlock-{os.getpid()}")):
            try:
                path.write_text("x")
                seen[label] = True
            except OSError as exc:
                seen[label] = errno.errorcode[exc.errno or 0]
        try:
            os.kill(os.getppid(), 0)
            seen["signal parent"] = True
        except OSError as exc:
            seen["signal parent"] = errno.errorcode[exc.errno or 0]
        return seen

    seen = _in_child(confined)
    assert {k: seen.get(k) for k in ("scratch", "own", "devnull", "tmp")} == {
        "scratch": True, "own": "EACCES", "devnull": True, "tmp": "EACCES"}, seen
    assert seen["signal parent"] == ("EPERM" if landlock.abi() >= 6 else True), seen
