"""The operator as this checkout builds it (the session's `checkout_build`, tests/conftest.py), imported."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]


@pytest.fixture(scope="session")
def img2gray(checkout_build: Path):
    # As a consumer imports a variant directory (PYTHONPATH=build/dev in pixi.toml), for this session only.
    sys.path.insert(0, str(checkout_build.parent))
    try:
        yield importlib.import_module("img2gray")
    finally:
        sys.path.remove(str(checkout_build.parent))


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param
