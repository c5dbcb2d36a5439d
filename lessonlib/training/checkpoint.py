"""Checkpoint files of the training models: a JSON header and the parameters in one ``.npz``.

The header names the format (the model's class), its version and the configuration the model is
rebuilt from; each parameter is stored as ``param:<name>``. Reading checks all three and every
shape, so a file of another model or configuration is refused with what differs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np


class CheckpointError(ValueError):
    """A file is not a checkpoint of this format, or belongs to another configuration."""


Model = TypeVar("Model")


def save(path: str | Path, fmt: str, version: int, config: Mapping[str, object],
         params: Mapping[str, np.ndarray]) -> None:
    """Write ``config`` and ``params`` to ``path`` under the format name ``fmt`` and ``version``."""
    header = json.dumps({"format": fmt, "version": version, "config": dict(config)}, sort_keys=True)
    arrays = {f"param:{name}": value for name, value in params.items()}
    with open(path, "wb") as f:  # a file object keeps numpy from appending ".npz" to the name
        np.savez_compressed(f, header=np.array(header), **arrays)


def load(path: str | Path, fmt: str, version: int, build: Callable[..., Model],
         expected: Mapping[str, object]) -> tuple[Model, dict[str, np.ndarray]]:
    """The model ``build(**config)`` of the file's configuration and the file's parameters, checked.

    ``expected`` config values (e.g. position="rope") must match the file's; the stored parameters
    must be exactly the model's, each of the model's shape. The caller casts them to its dtype.
    """
    path = Path(path)
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path.name} is not a readable .npz checkpoint: {err}") from None
    with data:
        header = _header(path, data, fmt, version)
        config = header["config"]
        for key, value in expected.items():
            if key not in config:
                raise CheckpointError(f"{key!r} is not a configuration field; fields: {', '.join(config)}")
            if config[key] != value:
                raise CheckpointError(f"{path.name} is a checkpoint of another configuration: {key}="
                                      f"{config[key]!r} in the file, {value!r} expected")
        model = build(**config)
        stored = {name[len("param:"):]: data[name] for name in data.files if name.startswith("param:")}
    wanted: dict[str, np.ndarray] = model.params  # type: ignore[attr-defined]
    if set(stored) != set(wanted):
        raise CheckpointError(f"{path.name} holds parameters {sorted(stored)} but a model with its configuration "
                              f"has {sorted(wanted)}")
    for name, value in stored.items():
        if value.shape != wanted[name].shape:
            raise CheckpointError(f"{path.name}: parameter {name} has shape {value.shape}, the configuration "
                                  f"{config} needs {wanted[name].shape}")
    return model, stored


def _header(path: Path, data: np.lib.npyio.NpzFile, fmt: str, version: int) -> dict:
    """The file's header, refused unless it is JSON naming ``fmt`` at ``version``."""
    if "header" not in data.files:
        raise CheckpointError(f"{path.name} is not a {fmt} checkpoint: it has no header entry "
                              f"(entries: {', '.join(data.files[:5])})")
    try:
        header = json.loads(str(data["header"]))
    except json.JSONDecodeError:
        raise CheckpointError(f"{path.name} has a header that is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != fmt:
        found = header.get("format") if isinstance(header, dict) else header
        raise CheckpointError(f"{path.name} is a {found!r} file, not a {fmt} checkpoint")
    if header.get("version") != version:
        raise CheckpointError(f"{path.name} has format version {header.get('version')!r}; this lessonlib "
                              f"reads version {version} (regenerate it with `make train`)")
    return header
