"""Issue 30 (performance): `sync` learns this machine's torch and CUDA from the installed torch's files instead of
importing torch (about 1.6 s), and gets the same answer as the running torch; where the files cannot tell
(ROCm's GPU name, device plugins, macOS's MPS, a torch older than 2.7) it imports torch as before."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from kernelpin import environment
from kernelpin.format.variant import CPU, Backend
from tests.kernelpin.helpers import fresh_interpreter

# torch/version.py as torch's build generates it (PyTorch's generate_torch_version.py), for the builds users have.
VERSION_PY = """\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = {version!r}
debug = False
cuda: Optional[str] = {cuda!r}
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = {hip!r}
rocm: Optional[str] = None
xpu: Optional[str] = {xpu!r}
"""


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a torch (its version.py; importing it fails the test) first on sys.path."""
    if sys.platform == "darwin":
        pytest.skip("on macOS torch is imported (MPS)")
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # restored after the test
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(version: str, cuda: str | None = None, hip: str | None = None, xpu: str | None = None) -> None:
        package = tmp_path / "torch"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("raise ImportError('torch was imported')\n")
        (package / "version.py").write_text(VERSION_PY.format(version=version, cuda=cuda, hip=hip, xpu=xpu))

    return install


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        ({"version": "2.13.0+cpu"}, ((2, 13), CPU)),  # a CPU wheel
        ({"version": "2.13.0+cu130", "cuda": "13.0"}, ((2, 13), Backend("cuda", (13, 0)))),  # a +cu wheel
        (
            {"version": "2.12.1", "cuda": "12.9"},
            ((2, 12), Backend("cuda", (12, 9))),
        ),  # PyPI's default CUDA wheel, conda's
        ({"version": "2.13.0+xpu", "xpu": "20250301"}, ((2, 13), Backend("xpu", (2025, 3)))),
        ({"version": "2.14.0a0+git1234567"}, ((2, 14), CPU)),  # a source build
    ],
)
def test_the_installed_torch_is_read_without_importing_it(installed, build, expected):
    installed(**build)
    found = environment.detect_installed()
    assert found is not None and (found.torch, found.backend) == expected
    assert found.cxx11_abi is (True if found.os == "linux" else None)
    # A capability only from a CUDA driver, for a CUDA build (the machine test below compares it with torch's on
    # a GPU machine); without a driver, as on CI, none: what torch.cuda.is_available() says there.
    assert found.gpu_capability is None or found.backend.name == "cuda"


@pytest.mark.parametrize(
    "build",
    [
        {"version": "2.13.0+rocm7.1", "hip": "7.1.25424-abc"},  # the GPU's gfx name comes from torch.cuda
        {"version": "2.6.0+cpu"},  # PyPI's builds before 2.7 were cxx98, conda's cxx11: only torch knows
        {"version": "nonsense"},
    ],
)
def test_what_the_files_cannot_tell_is_left_to_torch(installed, build):
    installed(**build)
    assert environment.detect_installed() is None


def test_a_device_plugin_torch_would_load_leaves_it_to_torch(installed, tmp_path, monkeypatch):
    installed(version="2.13.0+cpu")
    plugin = tmp_path / "torch_npu-2.13.0.dist-info"
    plugin.mkdir()
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.13.0\n")
    (plugin / "entry_points.txt").write_text("[torch.backends]\ntorch_npu = torch_npu:_autoload\n")
    assert environment.detect_installed() is None
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    assert environment.detect_installed() is not None


def test_no_torch_no_environment(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert environment.detect_installed() is None


def test_this_machine_is_seen_as_the_running_torch_sees_it_without_importing_torch():
    # Failed before: sync imported torch to learn the environment (1.6 s of a 2.3 s warm sync).
    code = "from kernelpin import environment\nprint(repr(environment.current({}, {})))"
    without, modules = fresh_interpreter(code)
    if sys.platform == "darwin":
        pytest.skip("on macOS torch is imported (MPS)")
    assert "torch" not in modules
    with_torch, modules = fresh_interpreter(
        textwrap.dedent("""
        from kernelpin import environment
        print(repr(environment.detect()))
    """)
    )
    assert "torch" in modules and without == with_torch


def test_a_running_torch_is_asked(monkeypatch):
    import torch  # noqa: F401  (imported: its answer is exact and costs nothing more)

    called = []
    monkeypatch.setattr(environment, "detect_installed", lambda: called.append(1))
    assert environment.machine_environment() == environment.detect() and not called


def test_installed_version_ignores_what_is_not_a_literal(tmp_path, installed):
    installed(version="2.13.0+cpu")
    path = Path(tmp_path / "torch" / "version.py")
    path.write_text(path.read_text() + "extra = __import__('os').system('false')\n")
    facts = environment.installed_torch_version()
    assert facts is not None and facts["__version__"] == "2.13.0+cpu" and "extra" not in facts
