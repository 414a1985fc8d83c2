"""What `pixi add img2gray` does, with py-rattler (pixi's solver and installer) against the built channel."""

from __future__ import annotations

import functools
import http.server
import json
import re
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.conda.support import OP_CHECK, PYTORCH_MINORS, OfflineBuild, conda_forge_records, write_channel
from tools.conda.build import abi_of, cuda_version_of, render_variants, variant_config
from tools.conda.channel import NoCandidateError, install_environment, solve_environment


@pytest.fixture(scope="module")
def solver_channels(offline_build: OfflineBuild, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """[img2gray channel, conda-forge stand-in records].

    The img2gray channel holds the records of the real CPU build plus the CUDA 13.0 variant of the same
    pytorch minor as the project's matrix renders it (build string, build number, run requirements; no
    archive, since nvcc cannot build it on this machine). It serves solving only.
    """
    root = tmp_path_factory.mktemp("solver")
    built = json.loads((offline_build.channel_dir / "linux-64" / "repodata.json").read_text())
    torch_minor = offline_build.machine.torch_minor
    [cuda_variant] = [
        v
        for v in render_variants(variant_config())
        if str(v.variant["pytorch"]) == torch_minor and cuda_version_of(v) == "13.0" and abi_of(v) == "exact"
    ]
    recipe = cuda_variant.recipe
    cuda_record = {
        "name": recipe.package.name,
        "version": str(recipe.package.version),
        "build": recipe.build.string,
        "build_number": recipe.build.number,
        "depends": recipe.requirements.to_dict()["run"],
        "subdir": "linux-64",
        "noarch": "python",
        "license": "Apache-2.0",
    }
    img2gray_records = {
        **built["packages.conda"],
        f"img2gray-{cuda_record['version']}-{recipe.build.string}.conda": cuda_record,
    }
    return [
        write_channel(root / "img2gray", img2gray_records),
        write_channel(root / "conda-forge", conda_forge_records()),
    ]


def _picked(records: list, name: str) -> str:
    [record] = [r for r in records if r.name.normalized == name]
    return str(record.build)


def test_with_a_gpu_the_cuda_build_is_selected(solver_channels: list[str], offline_build: OfflineBuild) -> None:
    records = solve_environment(solver_channels, ["img2gray"], cuda="13.0")
    torch_tag = offline_build.machine.torch_minor.replace(".", "")

    assert _picked(records, "img2gray").startswith(f"cuda130_torch{torch_tag}_")
    assert _picked(records, "pytorch").startswith("cuda130_")


def test_without_a_gpu_the_cpu_build_is_selected(solver_channels: list[str], offline_build: OfflineBuild) -> None:
    records = solve_environment(solver_channels, ["img2gray"], cuda=None)
    torch_tag = offline_build.machine.torch_minor.replace(".", "")

    assert _picked(records, "img2gray") == offline_build.package.name.split("-")[-1].removesuffix(".conda")
    assert _picked(records, "img2gray").startswith(f"cpu_torch{torch_tag}_")
    assert _picked(records, "pytorch").startswith("cpu_")


def test_a_pytorch_minor_without_a_build_explains_no_candidate(
    solver_channels: list[str], offline_build: OfflineBuild
) -> None:
    unbuilt = next(minor for minor in PYTORCH_MINORS if minor != offline_build.machine.torch_minor)

    with pytest.raises(NoCandidateError) as raised:
        solve_environment(solver_channels, ["img2gray", f"pytorch {unbuilt}.*"], cuda=None)

    message = str(raised.value)
    assert message.startswith(f"no candidate satisfies img2gray, pytorch {unbuilt}.*")
    assert (
        f"img2gray 0.1.0 {_picked(solve_environment(solver_channels, ['img2gray'], cuda=None), 'img2gray')}" in message
    )
    assert f"pytorch {offline_build.machine.torch_minor}.* cpu*" in message  # what the builds need instead
    assert "img2gray" in message.split("Solver explanation:")[1]


def test_installed_into_a_fresh_prefix_the_operator_runs_and_matches_its_digests(
    offline_build: OfflineBuild, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    records = install_environment(
        [offline_build.channel_url, offline_build.standins_url], ["img2gray"], prefix, cuda=None
    )
    result = subprocess.run([prefix / "bin" / "python", "-c", OP_CHECK], capture_output=True, text=True)

    assert {r.name.normalized for r in records} == {"img2gray", "pytorch", "python"}
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(prefix)  # imported from the prefix, not from the repo


@pytest.fixture
def http_channel(offline_build: OfflineBuild) -> Iterator[str]:
    """The built channel served over HTTP from 127.0.0.1 (stdlib http.server), as a team serves output/."""
    handler = functools.partial(QuietHandler, directory=str(offline_build.channel_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            thread.join()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves what a channel server running under its own account could read: files readable by others."""

    requests: ClassVar[list[tuple[str, int]]] = []  # every request of the test, across handler instances

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_file() and not path.stat().st_mode & stat.S_IROTH:
            self.send_error(403, f"{path.name} is not readable by the server's account")
            return None
        return super().send_head()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        QuietHandler.requests.append((self.path, int(code)))


def test_pixi_add_from_a_channel_served_over_http(
    offline_build: OfflineBuild, http_channel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pixi add img2gray` with the channel's URL: py-rattler fetches repodata and the package over HTTP, solves
    and installs, and the operator runs from the prefix. Failed before: the package was written 0600, so a server
    under another account answered 403 for it."""
    prefix = tmp_path / "env"
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "cache"))  # a fresh machine: nothing cached yet
    records = install_environment([http_channel, offline_build.standins_url], ["img2gray"], prefix, cuda=None)
    [img2gray] = [record for record in records if record.name.normalized == "img2gray"]
    assert img2gray.url.startswith(http_channel) and img2gray.url.endswith(offline_build.package.name)
    assert (f"/linux-64/{offline_build.package.name}", 200) in QuietHandler.requests
    result = subprocess.run(
        [prefix / "bin" / "python", "-c", "import torch, img2gray; print(img2gray.metadata()['variant'])"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "cpu" in result.stdout


def _matrix_records() -> dict[str, dict[str, object]]:
    """The project's matrix for linux-64 as repodata records (no archives): each rendered variant's build string,
    number and run requirements, plus the `cuda-version` range conda-forge's nvcc adds to CUDA packages."""
    records = {}
    for variant in render_variants(variant_config()):
        recipe, cuda = variant.recipe, cuda_version_of(variant)
        depends = list(recipe.requirements.to_dict()["run"])
        if cuda:
            depends.append(f"cuda-version >={cuda},<{int(cuda.split('.')[0]) + 1}.0a0")
        records[f"{recipe.package.name}-{recipe.package.version}-{recipe.build.string}.conda"] = {
            "name": recipe.package.name,
            "version": str(recipe.package.version),
            "build": recipe.build.string,
            "build_number": recipe.build.number,
            "depends": depends,
            "subdir": "linux-64",
            "noarch": "python",
            "license": "Apache-2.0",
        }
    return records


@pytest.fixture(scope="module")
def matrix_channels(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("matrix")
    return [
        write_channel(root / "img2gray", _matrix_records()),
        write_channel(root / "conda-forge", conda_forge_records()),
    ]


def _pixi_add(channels: list[str], pytorch: str | None, cuda: str | None, spec: str = "img2gray") -> tuple[str, str]:
    """(img2gray build, pytorch version + build) that `pixi add SPEC` resolves in an environment of `pytorch`."""
    records = solve_environment(channels, [spec, *([f"pytorch {pytorch}.*"] if pytorch else [])], cuda=cuda)
    [torch] = [r for r in records if r.name.normalized == "pytorch"]
    return _picked(records, "img2gray"), f"{torch.version} {torch.build}"


# The img2gray flavours a driver may get (CUDA 13: the cu130 or the cu132 package, both serve cuda-version 13.2),
# and the pytorch build it comes with.
FLAVOURS = {
    None: ("cpu", "cpu"),
    "12.0": ("cuda129", "cuda129"),
    "12.9": ("cuda129", "cuda129"),
    "13.0": ("cuda13[02]", "cuda130"),
}


@pytest.mark.parametrize("cuda", [None, "12.0", "12.9", "13.0"])
def test_pixi_add_takes_the_stable_package_for_every_pytorch_from_2_11(
    matrix_channels: list[str], cuda: str | None
) -> None:
    """What `pixi add img2gray` takes next to each pytorch 2.11-2.15, without a GPU, with a CUDA 12 driver (12.0 or 12.9:
    the cu129 package with conda-forge's cuda129 pytorch, both asking only for a CUDA 12 driver) and with a CUDA 13 driver: the stable-ABI package of the flavour, also where
    an exact one fits (docs/packaging.md says why); pytorch 2.10 gets none. Failed before: pytorch 2.14 and 2.15 had
    no img2gray at all."""
    flavour, torch_flavour = FLAVOURS[cuda]
    picks = {minor: _pixi_add(matrix_channels, minor, cuda) for minor in PYTORCH_MINORS[1:]}
    print(f"\npixi add img2gray ({'no GPU' if cuda is None else '__cuda ' + cuda}):")
    for minor, (img2gray, torch) in picks.items():
        print(f"  pytorch {minor}: img2gray {img2gray} (pytorch {torch})")

    for minor, (img2gray, torch) in picks.items():
        assert re.fullmatch(rf"{flavour}_stableabi211_h[0-9a-f]{{7}}_{300 if cuda else 100}", img2gray), (
            minor,
            img2gray,
        )
        assert torch.startswith(f"{minor}.0 {torch_flavour}_")
    with pytest.raises(NoCandidateError, match="pytorch >=2.11,<3"):
        _pixi_add(matrix_channels, "2.10", cuda)


def test_pixi_add_does_not_hold_pytorch_back_and_an_exact_build_is_one_request_away(matrix_channels: list[str]) -> None:
    """Unpinned, pytorch resolves to the newest release (an exact-first rule would hold it at 2.13, the newest
    exact pin); asking for the exact build by its build string gets it."""
    assert _pixi_add(matrix_channels, None, None)[1].startswith("2.15.0 cpu_")
    assert _pixi_add(matrix_channels, None, "13.0")[1].startswith("2.15.0 cuda130_")
    img2gray, torch = _pixi_add(matrix_channels, "2.13", "13.0", "img2gray * cuda130_torch213*")
    assert img2gray.startswith("cuda130_torch213_") and torch.startswith("2.13.0 cuda130_")
    img2gray, torch = _pixi_add(matrix_channels, "2.12", "12.9", "img2gray * cuda129_torch212*")
    assert img2gray.startswith("cuda129_torch212_") and torch.startswith("2.12.0 cuda129_")
