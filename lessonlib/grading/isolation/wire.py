"""What crosses between the grading process and the worker: JSON and ``.npy`` bytes, bounded.

Both ways the unit is a *frame*: ``b"J"`` + 8-byte length + UTF-8 JSON, or ``b"N"`` + 8-byte
length + the bytes of one ``.npy`` file. Going in, a case's inputs are numbers in JSON and arrays
in ``.npy`` frames (one file of frames per job). Coming back, the worker writes records (a JSON
header, then a task's frames) to ``worker.out``, which the grading process reads once, frame by
frame, each size checked first, ``allow_pickle=False``: nothing from the worker is unpickled.

This module imports only the standard library and NumPy: the worker loads it by file path, so
it must never import anything from ``lessonlib``.
"""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any, BinaryIO

import numpy as np

JSON_FRAME = b"J"
NPY_FRAME = b"N"
_HEADER = struct.Struct(">cQ")  # kind, payload length
HEADER_SIZE = _HEADER.size

MAX_JSON_FRAME = 1 << 20  # one JSON frame: a case's outcome, the cells' report
MAX_TEXT = 2000  # error messages and type names are cut to this many characters
MAX_ITEMS = 64  # items of a returned tuple or list described one by one (the rest are dropped)
_NUMERIC_KINDS = "biufc"


class WireError(ValueError):
    """Data from the worker that does not follow the format (treated as a broken result)."""


# --- frames ------------------------------------------------------------------------------------


def json_frame(obj: Any) -> bytes:
    payload = json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    return _HEADER.pack(JSON_FRAME, len(payload)) + payload


def npy_frame(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return _HEADER.pack(NPY_FRAME, buffer.tell()) + buffer.getvalue()


def record(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """One record of the worker's output: a JSON frame (with ``size``), then ``size`` raw bytes."""
    return json_frame({**header, "size": len(payload)}) + payload


def unpack_header(header: bytes) -> tuple[str, int]:
    """("json" or "npy", payload length) of a frame's header; WireError for anything else."""
    if len(header) != _HEADER.size:
        raise WireError("a frame header cut short")
    kind, length = _HEADER.unpack(header)
    if kind not in (JSON_FRAME, NPY_FRAME):
        raise WireError("a frame of unknown kind")
    return ("json" if kind == JSON_FRAME else "npy"), length


# --- reading what the worker wrote ---------------------------------------------------------------


def load_json(data: bytes, limit: int = MAX_JSON_FRAME) -> Any:
    """Parse one JSON frame, refusing oversized or unparseable data."""
    if len(data) > limit:
        raise WireError(f"a JSON frame of {len(data)} bytes (limit {limit})")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise WireError(f"unreadable JSON from the worker ({type(exc).__name__})") from None


def load_npy(data: bytes, limit: int) -> np.ndarray:
    """An array from ``.npy`` bytes: numbers or booleans only, at most ``limit`` bytes, no pickles."""
    if len(data) > limit + 4096:
        raise WireError(f"an array file of {len(data)} bytes (limit {limit})")
    buffer = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buffer)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buffer)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buffer)
        else:
            raise WireError(f"unknown .npy version {version}")
    except WireError:
        raise
    except Exception as exc:
        raise WireError(f"unreadable .npy header ({type(exc).__name__}: {exc})") from None
    if dtype.hasobject or dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None:
        raise WireError(f"an array of dtype {dtype}: only numbers and booleans may come back")
    count = math.prod(shape)
    if count * dtype.itemsize > limit or count * dtype.itemsize != len(data) - buffer.tell():
        raise WireError(f"an array of shape {shape} and dtype {dtype} that does not match its {len(data)} bytes")
    buffer.seek(0)
    try:
        return np.load(buffer, allow_pickle=False)
    except Exception as exc:
        raise WireError(f"unreadable .npy data ({type(exc).__name__}: {exc})") from None


def read_frames(f: BinaryIO, size: int, *, array_limit: int,
                json_limit: int = MAX_JSON_FRAME) -> tuple[list[Any], str | None]:
    """The frames in the next ``size`` bytes of ``f``, parsed one at a time (dicts and arrays), each
    frame's length checked before it is read; and what was wrong with the rest (None: nothing).

    The frames before a problem are kept; ``f`` is left just after the ``size`` bytes.
    """
    end = f.tell() + size
    frames: list[Any] = []
    try:
        while f.tell() < end:
            if end - f.tell() < HEADER_SIZE:
                raise WireError("the stream was cut off mid-frame")
            kind, length = unpack_header(f.read(HEADER_SIZE))
            room = min(json_limit if kind == "json" else array_limit + 4096, end - f.tell())
            if length > room:
                raise WireError(f"a frame of {length} bytes where {room} may follow (too large, or cut off)")
            data = f.read(length)
            frames.append(load_json(data, json_limit) if kind == "json" else load_npy(data, array_limit))
    except WireError as exc:
        f.seek(end)
        return frames, str(exc)
    return frames, None


# --- case inputs (grading process -> worker) -----------------------------------------------------


def encode_args(args: tuple[Any, ...], arrays: list[bytes]) -> list[dict[str, Any]]:
    """Describe a case's inputs as JSON; each array becomes an ``.npy`` frame appended to ``arrays``."""
    described = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            arrays.append(npy_frame(arg))
            described.append({"array": len(arrays) - 1})
        else:
            described.append(_scalar(arg))
    return described


def decode_args(described: list[dict[str, Any]], arrays: list[Any]) -> tuple[Any, ...]:
    """The inverse of :func:`encode_args`, given the parsed frames of the inputs file."""
    return tuple(arrays[int(d["array"])] if "array" in d else _unscalar(d) for d in described)


def encode_number(x: Any) -> dict[str, Any]:
    """A bool, int, float or complex (Python or NumPy) as JSON; floats as repr (inf and nan survive).

    An int too large for JSON readers' limits (more than 256 bits) goes as a float (inf beyond).
    """
    if isinstance(x, (bool, np.bool_)):
        return {"bool": bool(x)}
    if isinstance(x, (int, np.integer)):
        n = int(x)
        return {"int": n} if n.bit_length() <= 256 else {"float": repr(_big_float(n))}
    if isinstance(x, (float, np.floating)):
        return {"float": repr(float(x))}
    if isinstance(x, (complex, np.complexfloating)):
        return {"complex": [repr(float(x.real)), repr(float(x.imag))]}
    raise TypeError(f"{type(x).__name__} is not a number")


def decode_number(d: dict[str, Any]) -> Any:
    """The inverse of :func:`encode_number`, refusing anything not in its exact form."""
    if "bool" in d and isinstance(d["bool"], bool):
        return d["bool"]
    if "int" in d and isinstance(d["int"], int) and not isinstance(d["int"], bool):
        return d["int"]
    try:
        if "float" in d and isinstance(d["float"], str) and len(d["float"]) < 40:
            return float(d["float"])
        if "complex" in d and isinstance(d["complex"], list) and len(d["complex"]) == 2:
            return complex(float(str(d["complex"][0])[:40]), float(str(d["complex"][1])[:40]))
    except ValueError:
        pass
    raise WireError(f"a number in an unknown form ({sorted(d)})")


def _big_float(n: int) -> float:
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _scalar(x: Any) -> dict[str, Any]:
    if x is None:
        return {"none": True}
    if isinstance(x, str):
        return {"str": x}
    try:
        return encode_number(x)
    except TypeError:
        raise TypeError(f"a case input of type {type(x).__name__} cannot be sent to the worker") from None


def _unscalar(d: dict[str, Any]) -> Any:
    if "none" in d:
        return None
    if "str" in d:
        return str(d["str"])
    return decode_number(d)


# --- outcomes (worker -> grading process) --------------------------------------------------------


def _cut(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " ..."


def encode_value(value: Any, arrays: list[np.ndarray]) -> dict[str, Any]:
    """A runner ``Value`` as JSON; its arrays are appended to ``arrays`` and referenced by index."""
    data = value.data
    if isinstance(data, np.ndarray):
        arrays.append(data)
        encoded: dict[str, Any] | None = {"array": len(arrays) - 1}
    elif data is None:
        encoded = None
    elif isinstance(data, (bool, int, float, complex)):
        encoded = encode_number(data)
    else:
        encoded = None
    items = None
    if value.items is not None:
        items = [encode_value(item, arrays) for item in value.items[:MAX_ITEMS]]
    return {"type": _cut(value.type_name), "data": encoded, "items": items,
            "n_items": None if value.items is None else len(value.items)}


def encode_outcome(outcome: Any, arrays: list[np.ndarray]) -> dict[str, Any]:
    """A runner ``Outcome`` as JSON (arrays appended to ``arrays``)."""
    return {
        "status": outcome.status,
        "value": None if outcome.value is None else encode_value(outcome.value, arrays),
        "error": None if outcome.error is None else _cut(outcome.error),
        "error_types": list(outcome.error_types), "errno": outcome.errno,
        "peak_bytes": outcome.peak_bytes,
    }


def decode_value(d: Any, arrays: list[np.ndarray], value_type: type, depth: int = 0) -> Any:
    """Rebuild a ``Value`` (of class ``value_type``) from :func:`encode_value`'s JSON."""
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        raise WireError("a returned value in an unknown form")
    data = d.get("data")
    if data is None:
        decoded = None
    elif not isinstance(data, dict):
        raise WireError("a returned value in an unknown form")
    elif "array" in data:
        index = data["array"]
        if not isinstance(index, int) or not 0 <= index < len(arrays):
            raise WireError("a returned value refers to a missing array")
        decoded = arrays[index]
    else:
        decoded = decode_number(data)
    items = d.get("items")
    if items is not None:
        if depth >= 1 or not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise WireError("a returned value nested too deeply")
        items = tuple(decode_value(item, arrays, value_type, depth + 1) for item in items)
    return value_type(_cut(d["type"]), decoded, items)


def decode_outcome(d: Any, arrays: list[np.ndarray], outcome_type: type, value_type: type) -> Any:
    """Rebuild an ``Outcome`` from :func:`encode_outcome`'s JSON."""
    if not isinstance(d, dict) or d.get("status") not in ("returned", "not_implemented", "raised"):
        raise WireError("an outcome in an unknown form")
    value = d.get("value")
    error = d.get("error")
    peak = d.get("peak_bytes")
    if peak is not None and (not isinstance(peak, int) or isinstance(peak, bool) or not 0 <= peak < 2**53):
        raise WireError("an outcome with an unreadable memory peak")
    types, errno = error_fields(d)
    return outcome_type(
        d["status"],
        None if value is None else decode_value(value, arrays, value_type),
        None if error is None else _cut(error),
        peak, types, errno,
    )


def error_fields(d: dict[str, Any]) -> tuple[tuple[str, ...], int | None]:
    """An exception's classes (``error_types``, most specific first) and ``errno`` as the worker
    reported them; anything not in that form is dropped (learner code can write these frames)."""
    types, errno = d.get("error_types"), d.get("errno")
    names = tuple(t[:200] for t in types[:16] if isinstance(t, str)) if isinstance(types, list) else ()
    return names, errno if type(errno) is int and abs(errno) < 2**31 else None
