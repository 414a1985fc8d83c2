"""Builds the operator once per test session (tools/build_op.py, the same build every consumer uses)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]


@pytest.fixture(scope="session")
def img2gray(tmp_path_factory):
    out = tmp_path_factory.mktemp("variant") / "img2gray"
    # A separate process: the build loads the library it compiles, and a process may register a
    # torch.ops namespace only once.
    subprocess.run([sys.executable, str(ROOT / "tools" / "build_op.py"), "--out", str(out)], check=True)
    sys.path.insert(0, str(out.parent))
    try:
        yield importlib.import_module("img2gray")
    finally:
        sys.path.remove(str(out.parent))


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param
