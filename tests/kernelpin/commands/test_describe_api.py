"""`kernelpin describe-api` (issue 45): a kernel's public functions and layers from its Python sources, read with
`ast` from the build this machine would load; no binary fetched, nothing imported or run. Judged against the
installed `kernels` describe-api (0.18+), which reads a symbols.json kernel-builder writes beside the build."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points, version

import pytest
from packaging.version import Version

from kernelpin.hub.source import HubSource
from testkit.fake_kernel import CPU_213, kernel_files, write_variant
from testkit.releasing import hub_env

KERNELS = Version(version("kernels"))
INIT = b'''\
"""A kernel whose import would leave a mark: describe-api must never run it."""
import os
from pathlib import Path

Path(os.environ.get("DESCRIBE_API_MARK", "/nonexistent/mark")).write_text("imported")

from ._ops import ops
from .functional import gray, scale as rescale
from . import layers

__all__ = ["gray", "rescale", "ops", "layers", "VERSION"]
VERSION = "1"
'''
FUNCTIONAL = b'''\
import torch


def gray(x: torch.Tensor, *, dim: int = -3) -> torch.Tensor:
    """RGB to grayscale."""
    return x.mean(dim)


async def scale(x, factor=2.0):
    return x * factor


def _private():
    pass
'''
LAYERS = b'''\
from torch import nn

from ._layers_impl import Fused


class Gray(nn.Module):
    """Mid-gray."""

    has_backward = False
    can_torch_compile: bool = True

    def forward(self, x):
        return x


class _Hidden(nn.Module):
    pass
'''
LAYERS_IMPL = b"from torch import nn\n\n\nclass Fused(nn.Module):\n    has_backward = True\n"
OPS = b"ops = object()\n"
SYMBOLS = {
    "schema_version": 1,
    "functions": [{"name": "gray"}, {"name": "rescale"}],
    "layers": [
        {"name": "Fused", "attributes": {"has_backward": True, "can_torch_compile": None}},
        {"name": "Gray", "attributes": {"has_backward": False, "can_torch_compile": True}},
    ],
}
SOURCES = {
    "__init__.py": INIT,
    "functional.py": FUNCTIONAL,
    "layers.py": LAYERS,
    "_layers_impl.py": LAYERS_IMPL,
    "_ops.py": OPS,
    "_kernel.abi3.so": b"\x7fELF" + bytes(200_000),
    "symbols.json": json.dumps(SYMBOLS).encode(),
}


@pytest.fixture
def api_kernel(new_repo) -> str:
    repo_id, repo = new_repo("api", repo_type="kernel")
    repo.write(kernel_files("1.0.0", variants=(CPU_213, "torch212-cxx11-cpu-x86_64-linux"), extra=SOURCES), clear=True)
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    repo.branch("v1")
    return repo_id


def _names(document: dict) -> tuple[list[str], dict[str, dict]]:
    return (
        sorted(f["name"] for f in document["functions"]),
        {layer["name"]: layer["attributes"] for layer in document["layers"]},
    )


def test_functions_and_layers_from_the_sources_with_nothing_but_sources_read(
    hub, hf_env, cli, api_kernel, tmp_path, monkeypatch
):
    mark = tmp_path / "mark"
    monkeypatch.setenv("DESCRIBE_API_MARK", str(mark))
    read: list[str] = []
    stream = HubSource.stream
    monkeypatch.setattr(
        HubSource,
        "stream",
        lambda self, repo, kind, commit, path, *a, **k: (
            read.append(path),
            stream(self, repo, kind, commit, path, *a, **k),
        )[1],
    )
    status, out, err = cli("describe-api", api_kernel, "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["variant"] == CPU_213 and document["revision"] == "v1"
    assert _names(document) == _names(SYMBOLS)
    [gray, rescale] = document["functions"]
    assert gray["signature"] == "gray(x: torch.Tensor, *, dim: int=-3) -> torch.Tensor"
    assert (gray["module"], gray["summary"]) == ("functional", "RGB to grayscale.")
    assert rescale["signature"] == "async rescale(x, factor=2.0)"
    assert document["others"] == ["ops", "VERSION"] and document["problems"] == []
    assert not mark.exists()  # __init__.py would have written it, had it run
    # Only metadata.json and the modules the API reaches were fetched: no binary, no unrelated file.
    assert sorted(path.rsplit("/", 1)[1] for path in read) == [
        "__init__.py",
        "_layers_impl.py",
        "_ops.py",
        "functional.py",
        "layers.py",
        "metadata.json",
    ], read
    assert not list(hf_env.rglob("*.so"))
    status, out, _ = cli("describe-api", api_kernel)
    assert status == 0 and out.splitlines()[:4] == [
        f"Repository: {api_kernel}",
        "Revision: v1",  # as kernels shows it
        f"Variant: {CPU_213}",
        f"Commit: {json.loads(cli('describe-api', api_kernel, '--json')[1])['commit']}",
    ]
    assert "  gray(x: torch.Tensor, *, dim: int=-3) -> torch.Tensor  # RGB to grayscale." in out
    assert "  Gray  has_backward=False  can_torch_compile=True" in out
    assert "  Fused  has_backward=True  can_torch_compile=unknown" in out


def _kernels(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    [script] = [ep for ep in entry_points(group="console_scripts") if ep.name == "kernels"]
    code = (
        f"import sys; from {script.module} import {script.attr} as main; sys.argv = ['kernels', *sys.argv[1:]]; main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_same_api_as_kernels_reads_from_symbols_json(hub, hf_env, cli, api_kernel, tmp_path):
    _status, out, _ = cli("describe-api", api_kernel, "--json")
    ours = json.loads(out)
    if Version("0.18") > KERNELS:  # kernels 0.17.2 has no describe-api: the build's own symbols.json is the judge
        assert _names(ours) == _names(SYMBOLS)
        return
    judged = _kernels(
        ["describe-api", api_kernel, "--json"], hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    )
    assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
    theirs = json.loads(judged.stdout)
    assert _names(ours) == _names(theirs) and ours["variant"] == theirs["variant"], KERNELS
    assert set(theirs) - {"revision"} <= set(ours)


def test_a_build_without_symbols_json_is_described_too(hub, hf_env, cli, new_repo):
    repo_id, repo = new_repo("no-symbols", repo_type="kernel")
    extra = {name: data for name, data in SOURCES.items() if name != "symbols.json"}
    repo.write(kernel_files("1.0.0", variants=(CPU_213,), extra=extra), clear=True)
    repo.commit("release")
    repo.branch("v1")
    status, out, err = cli("describe-api", repo_id, "--json")
    assert status == 0, err
    assert _names(json.loads(out)) == _names(SYMBOLS)  # `kernels describe-api`: "No symbols.json found ..."


def test_a_source_that_is_not_what_metadata_json_records_is_refused(hub, hf_env, cli, new_repo):
    repo_id, repo = new_repo("altered", repo_type="kernel")
    files = kernel_files("1.0.0", variants=(CPU_213,), extra=SOURCES)
    files[f"build/{CPU_213}/functional.py"] += b"\nimport evil\n"  # after the digest was computed
    repo.write(files, clear=True)
    repo.commit("release")
    repo.branch("v1")
    status, _, err = cli("describe-api", repo_id)
    assert status == 1 and "functional.py does not match the sha256 its metadata.json records" in err


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"__init__.py": b"from .a import f\n", "a.py": b"from .b import f\n", "b.py": b"from .a import f\n"}, None),
        ({"__init__.py": b"from .broken import f\n", "broken.py": b"def f(:\n"}, "broken.py: not readable Python"),
        ({"__init__.py": b"from ...outside import f\n"}, None),
        ({"__init__.py": b"x = " + b"(" * 200_000 + b")" * 200_000}, "__init__.py: not readable Python"),
        ({"__init__.py": b"#" * (2 << 20)}, "__init__.py: 2097152 bytes, over 1048576: not read"),
        ({"__init__.py": "def ünïcode_ñame(α: 'β') -> 'γ':\n    '''Ω.'''\n".encode()}, None),  # noqa: RUF001  # non-ASCII names on purpose
    ],
)
def test_hostile_sources_end_in_a_problem_never_a_crash_or_a_loop(tmp_path, hf_env, cli, files, problem):
    variant = write_variant(tmp_path / "build" / CPU_213, "1.0.0", CPU_213, extra=files)
    status, out, err = cli("describe-api", str(tmp_path), "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["variant"] == CPU_213 and variant.is_dir()
    if problem:
        assert any(found.startswith(problem) for found in document["problems"]), document["problems"]
    if "ünïcode_ñame" in files["__init__.py"].decode():
        assert document["functions"][0]["signature"] == "ünïcode_ñame(α: 'β') -> 'γ'"  # noqa: RUF001  # as above
