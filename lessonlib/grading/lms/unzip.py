"""An LMS download passed as its ``.zip``: unpacked safely into the grader's own folder, or refused.

Canvas ("Download Submissions") and Moodle ("Download all submissions") hand out one zip. Its
entries are named by learners (file names) and by whoever made the zip, so nothing in it is
trusted:

- an entry whose name is absolute or climbs out (``../``, ``C:``, a backslash path) is refused,
  and so is one that is a symbolic link;
- the sizes are capped before anything is written (MAX_UNPACKED_BYTES in all, MAX_ENTRIES
  entries, and MAX_RATIO times what the entry, or the whole zip, takes compressed), and again
  while writing, since an entry's declared size may lie (a zip bomb);
- it is unpacked into a fresh folder the grader owns (inside the output folder, which learner
  code never sees), never next to the zip; each file keeps the time the zip gives it, which
  decides between two versions of a notebook that carry no resubmission number.

A zip that breaks any of these is refused as a whole, with a message naming the entry.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
import zipfile
from datetime import datetime, tzinfo
from pathlib import Path, PurePosixPath

MAX_UNPACKED_BYTES = 2 * 2**30  # a course of 150 learners hands in a few hundred MB at most
MAX_ENTRIES = 50_000
# Deflate packs a notebook's JSON some 3 to 20 times, its images hardly at all; a zip bomb packs a
# thousand times or more (1.85 MB that unpack to 1.9 GB). Below RATIO_FROM bytes the ratio is not
# judged: a small file cannot fill a disk, whatever it packs to.
MAX_RATIO = 100
RATIO_FROM = 2**20
CHUNK = 1 << 20


class DownloadError(ValueError):
    """A submission argument that cannot be graded as given (a zip refused), with what to do instead."""


def _safe_name(name: str) -> PurePosixPath | None:
    """The entry's path inside the destination, or None when it is absolute or climbs out."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or not path.parts or any(p in ("..", "") or ":" in p for p in path.parts):
        return None
    return path


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def entry_time(date_time: tuple[int, int, int, int, int, int], zone: tzinfo | None = None) -> float:
    """A zip entry's date and time (local time, no zone recorded) as a POSIX time, read in ``zone``
    (None: this machine's local time)."""
    if zone is None:
        return time.mktime((*date_time, 0, 0, -1))
    return datetime(*date_time, tzinfo=zone).timestamp()


def _ratio(unpacked: int, packed: int) -> float:
    return unpacked / max(packed, 1)


def _check_ratios(archive: Path, infos: list[zipfile.ZipInfo], declared: int) -> None:
    """Refuse an entry, or the zip as a whole (entries may share their compressed bytes), that
    unpacks to more than MAX_RATIO times what it takes in the zip."""
    for info in infos:
        ratio = _ratio(info.file_size, info.compress_size)
        if info.file_size > RATIO_FROM and ratio > MAX_RATIO:
            raise DownloadError(f"{archive}: the entry {info.filename!r} would unpack to {info.file_size:,} bytes from "
                                f"{info.compress_size:,}, {ratio:,.0f} times, more than the {MAX_RATIO} times a "
                                "notebook packs to (a zip bomb?); the zip is refused: unzip it yourself only if you "
                                "trust it, and pass the folder")
    size = archive.stat().st_size
    if declared > RATIO_FROM and _ratio(declared, size) > MAX_RATIO:
        raise DownloadError(f"{archive}: it would unpack to {declared:,} bytes from {size:,}, "
                            f"{_ratio(declared, size):,.0f} times, more than the {MAX_RATIO} times notebooks pack to "
                            "(a zip bomb?); the zip is refused: unzip it yourself only if you trust it, and pass the "
                            "folder")


def unpack(archive: Path, destination: Path, *, zone: tzinfo | None = None) -> Path:
    """Unpack ``archive`` into ``destination`` (emptied first) and return it; DownloadError if refused.

    Each file's modification time is its entry's time, read in ``zone`` (None: this machine's
    local time): a zip entry records a local date and time without a zone."""
    archive = Path(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_ENTRIES:
                raise DownloadError(f"{archive}: {len(infos):,} entries, more than the {MAX_ENTRIES:,} an LMS "
                                    "download may have; unzip it yourself and pass the folder")
            declared = sum(i.file_size for i in infos)
            if declared > MAX_UNPACKED_BYTES:
                raise DownloadError(f"{archive}: it would unpack to {declared / 2**30:.1f} GB, more than the "
                                    f"{MAX_UNPACKED_BYTES // 2**30} GB allowed; unzip it yourself and pass the folder")
            _check_ratios(archive, infos, declared)
            for info in infos:
                if _safe_name(info.filename) is None:
                    raise DownloadError(f"{archive}: the entry {info.filename!r} would be written outside the folder "
                                        "it is unpacked into; the zip is refused")
                if _is_link(info):
                    raise DownloadError(f"{archive}: the entry {info.filename!r} is a symbolic link; the zip is "
                                        "refused")
            if destination.exists():
                shutil.rmtree(destination)
            destination.mkdir(parents=True, mode=0o700)
            written = 0
            for info in infos:
                target = destination / Path(*_safe_name(info.filename).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, open(target, "wb") as sink:
                    size = 0
                    while chunk := source.read(CHUNK):
                        size += len(chunk)
                        written += len(chunk)
                        if size > info.file_size or written > MAX_UNPACKED_BYTES:
                            raise DownloadError(f"{archive}: the entry {info.filename!r} unpacks to more than it "
                                                "declares (a zip bomb?); the zip is refused")
                        sink.write(chunk)
                when = entry_time(info.date_time, zone)  # the file's own time: "the newest file" rule
                os.utime(target, (when, when))
    except DownloadError:
        shutil.rmtree(destination, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        shutil.rmtree(destination, ignore_errors=True)
        raise DownloadError(f"{archive}: not a zip the grader can unpack ({exc}); unzip it yourself and pass the "
                            "folder") from None
    return destination
