"""Cross-checks against real libraries: they need the `crosscheck` extra (torch, JAX, flax, keras, transformers).

Without the extra each test skips with a message saying how to install it; with
REQUIRE_CROSSCHECK=1 in the environment (CI) a missing library fails the test instead.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE = os.environ.get("REQUIRE_CROSSCHECK") == "1"


def import_library(name: str) -> ModuleType:
    """Import ``name``, or skip (fail under REQUIRE_CROSSCHECK=1) saying why and how to fix it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        reason = str(exc)
    message = (
        f"{name} is not installed ({reason}); the cross-checks need the 'crosscheck' extra: "
        "run `make crosscheck`, or `pip install -e '.[crosscheck]'` then `pytest tests/crosscheck`"
    )
    if REQUIRE:
        pytest.fail(f"REQUIRE_CROSSCHECK=1 and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def torch() -> ModuleType:
    torch = import_library("torch")
    torch.set_num_threads(1)  # tiny tensors; the machine's cores are shared
    return torch


@pytest.fixture(scope="session")
def jax() -> ModuleType:
    return import_library("jax")


@pytest.fixture(scope="session")
def flax() -> ModuleType:
    return import_library("flax")


@pytest.fixture(scope="session")
def keras() -> ModuleType:
    os.environ.setdefault("KERAS_BACKEND", "jax")  # read when keras is first imported
    keras = import_library("keras")
    if keras.backend.backend() != "jax":
        pytest.fail(f"keras runs on the {keras.backend.backend()!r} backend; the cross-check measures it on "
                    "'jax' (unset KERAS_BACKEND or set it to jax)", pytrace=False)
    return keras


@pytest.fixture(scope="session")
def transformers() -> ModuleType:
    import_library("torch").set_num_threads(1)
    return import_library("transformers")
