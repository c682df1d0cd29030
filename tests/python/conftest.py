"""Shared fixtures: the registry under test ($OPFORGE_REGISTRY, set by ctest to the test
registry) and independent fp64 references (refs.py)."""

import os
import sys

import pytest

import numpy  # noqa: F401  (missing: ctest's SKIP_REGULAR_EXPRESSION skips test_python)

sys.path.insert(0, os.path.dirname(__file__))  # refs.py

import opforge  # noqa: E402


@pytest.fixture(scope="session")
def reg():
    if not os.environ.get("OPFORGE_REGISTRY"):
        pytest.skip("OPFORGE_REGISTRY is not set (ctest sets it to the test registry)")
    with opforge.open() as r:
        yield r


@pytest.fixture(scope="session")
def index():
    """The registry's index.json, read directly (not through the package)."""
    import json
    with open(os.path.join(os.environ["OPFORGE_REGISTRY"], "index.json")) as f:
        return json.load(f)
