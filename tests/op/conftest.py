"""Builds the operator once per test run (`python -m tools.build_op`, the same build every consumer uses)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from testkit.build_once import build_once

ROOT = Path(__file__).resolve().parents[2]

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]


@pytest.fixture(scope="session")
def img2gray(tmp_path_factory):
    def build(variants: Path) -> None:
        # A separate process: the build loads the library it compiles, and a process may register a
        # torch.ops namespace only once.
        subprocess.run([sys.executable, "-m", "tools.build_op", "--out", str(variants / "img2gray")], cwd=ROOT,
                       check=True)

    variants = build_once(tmp_path_factory, "op-build", build)
    # As a consumer imports a variant directory (PYTHONPATH=build/dev in pixi.toml), for this session only.
    sys.path.insert(0, str(variants))
    try:
        yield importlib.import_module("img2gray")
    finally:
        sys.path.remove(str(variants))


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param
