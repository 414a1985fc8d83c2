"""`kernelpin verify-conda`: one identity, one build, two channels.

The session's real CPU stable-ABI conda package (recipe/, built offline once per run) is published to a conda
channel served over HTTP on 127.0.0.1 with its CEP 27 attestation as a CEP 50 sidecar (advertised in repodata),
signed by the test kit's Sigstore instance; installed with py-rattler (pixi's solver and installer) into a prefix;
and released, from the same package (`tools.release stage`), to a kernel repository of the test Hub, its
metadata.json signed by the same identity. A consumer project's policy names that identity, and its lock pins the
release. verify-conda then accepts it, and refuses, each saying which check failed: another signer (signature), a
modified installed library (bytes), the package built from another commit (bytes), no attestation where the policy
requires one (signature), and a hostile conda-meta (one line, neither check run). conda-sigstore's library, the
conda ecosystem's verifier, judges the same sidecars alike.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rattler import Channel, install, solve
from rattler.platform import Subdir

from kernelpin.format.conda_attestation import publication_statement, sidecar_bytes, sidecar_name
from testkit.build_once import build_once
from testkit.hub import HubServer
from testkit.releasing import ROOT, hub_env, kernelpin, release_into_mirror, stage
from testkit.sigstore_root import Identity, SigstoreRoot
from tools.conda.channel import index_channel, virtual_packages

REPO_ID = "acme/img2gray"
PUBLISHER = Identity(repository="acme/img2gray", workflow=".github/workflows/release.yaml")
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class World:
    sigstore: SigstoreRoot
    hub: HubServer
    project: Path
    env: dict[str, str]
    standins_url: str
    channels: Path  # served at `base_url`
    base_url: str
    package: Path  # the session's package
    other_commit: Path  # the same recipe built from another commit
    trusted_root: Path  # the test Sigstore instance's, which the project's policy names

    def publish(self, name: str, package: Path, signer: Identity | None = PUBLISHER) -> str:
        """A channel `name` holding `package`, its attestation by `signer` (None: none) advertised in repodata."""
        root = self.channels / name
        (root / "linux-64").mkdir(parents=True)
        shutil.copyfile(package, root / "linux-64" / package.name)
        index_channel(root)
        url = f"{self.base_url}/{name}"
        if signer is not None:
            sha256 = hashlib.sha256(package.read_bytes()).hexdigest()
            statement = publication_statement(package.name, sha256, url)
            sidecar = sidecar_bytes([self.sigstore.sign_dsse(statement.payload(), signer)])
            (root / "linux-64" / sidecar_name(package.name, sidecar)).write_bytes(sidecar)
            repodata_path = root / "linux-64" / "repodata.json"
            repodata = json.loads(repodata_path.read_text())
            repodata["packages.conda"][package.name]["attestations_sha256"] = hashlib.sha256(sidecar).hexdigest()
            repodata_path.write_text(json.dumps(repodata))
        return url

    def install(self, channel: str, prefix: Path) -> Path:
        """pixi's way: solve img2gray from the channel (and the machine stand-ins), install it into `prefix`."""
        records = asyncio.run(
            solve(
                sources=[Channel(channel), Channel(self.standins_url)],
                specs=["img2gray"],
                platforms=[Subdir("linux-64"), Subdir("noarch")],
                virtual_packages=virtual_packages(None),
            )
        )
        # A package cache of its own: the other-commit build has the same file name as the session's.
        asyncio.run(install(records, target_prefix=prefix, cache_dir=prefix.parent / "pkgs", show_progress=False))
        return prefix

    def verify(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return kernelpin(["verify-conda", *map(str, args)], self.project, self.env, check=False)


def _build_other_commit(root: Path) -> None:
    """The stable CPU package from this checkout's recipe, recording another source commit."""
    env = {
        **os.environ,
        "IMG2GRAY_SOURCE_COMMIT": OTHER_COMMIT,
        "RATTLER_CACHE_DIR": str(root / "rattler-cache"),
    }
    command = [sys.executable, "-m", "tools.conda.build", "--offline", "--variant", "cpu", "--abi", "stable"]
    subprocess.run([*command, "--output-dir", str(root / "output")], cwd=ROOT, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def world(offline_stable_build, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("verify-conda")
    [other] = (build_once(tmp_path_factory, "other-commit-stable-package", _build_other_commit) / "output").rglob(
        "*.conda"
    )
    sigstore = SigstoreRoot()
    trusted_root = sigstore.write_trusted_root(root / "trusted_root.json")

    hub = HubServer(root / "hub")
    staged = stage([offline_stable_build.package], root / "staged", REPO_ID)
    [variant] = (staged / "build").iterdir()
    sigstore.sign_variant(variant, PUBLISHER)
    release_into_mirror(hub.repo(REPO_ID, "kernel"), staged, "v0.1.0")

    project = root / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f"""[project]
name = "app"
version = "1.0"

[tool.kernels.dependencies]
"{REPO_ID}" = "^0.1"

[tool.kernelpin.trust]
trusted-root = "{trusted_root}"

[tool.kernelpin.trust.publishers.acme]
signers = [{{ repository = "acme/img2gray", workflow = ".github/workflows/release.yaml", ref = "refs/heads/main" }}]
"""
    )
    channels = root / "channels"
    channels.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(channels))
    handler.log_message = lambda *args: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with hub:
        env = hub_env(hub.endpoint, root / "hf")
        kernelpin(["lock"], project, env)
        yield World(
            sigstore,
            hub,
            project,
            env,
            offline_stable_build.standins_url,
            channels,
            f"http://127.0.0.1:{server.server_address[1]}",
            offline_stable_build.package,
            other,
            trusted_root,
        )
    server.shutdown()


def _lines(done: subprocess.CompletedProcess[str], start: str) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith(start)]


def test_the_package_from_the_channel_is_the_signed_hub_build(world, tmp_path):
    prefix = world.install(world.publish("good", world.package), tmp_path / "env")
    done = world.verify(prefix)
    assert done.returncode == 0, done.stderr
    assert f"ok: {REPO_ID} torch-stable-abi211-cpu-x86_64-linux: {world.package.name} is signed by" in done.stdout
    assert "github.com/acme/img2gray" in done.stdout and "against kernelpin.lock" in done.stdout
    # Without the lock: against the released variant's signed metadata.json on the Hub.
    done = world.verify(prefix, "--no-lock", "--repo", REPO_ID, "--json")
    assert done.returncode == 0, done.stderr
    [found] = json.loads(done.stdout)["packages"]
    assert found["compared_with"] == "release v0.1.0" and found["signature"] is None and found["bytes"] is None
    assert found["signer"]["source_repository"] == "https://github.com/acme/img2gray"
    assert found["channel"] == f"{world.base_url}/good" and found["files"] >= 6


def test_offline_with_the_lock_and_the_sidecar_file(world, tmp_path):
    """Air-gapped: the lock for the bytes, the sidecar as a file for the signature; neither the Hub nor the channel
    is contacted (offline, the channel is not fetched: the refusal says so and how to give the attestation)."""
    url = world.publish("offline", world.package)
    prefix = world.install(url, tmp_path / "env")
    sidecar = next((world.channels / "offline" / "linux-64").glob("*.sigs.*"))
    done = world.verify(prefix, "--offline", "--attestation", sidecar)
    assert done.returncode == 0, done.stderr
    assert "is signed by https://github.com/acme/img2gray/" in done.stdout
    done = world.verify(prefix, "--offline")
    assert done.returncode == 1
    [line] = _lines(done, "signature:")
    assert "offline mode is on" in line and "--attestation FILE" in line and _lines(done, "bytes:") == []


def test_library_function(world, tmp_path, monkeypatch):
    import kernelpin
    from kernelpin.hub.source import HubSource

    prefix = world.install(world.publish("library", world.package), tmp_path / "env")
    monkeypatch.setenv("HF_ENDPOINT", world.hub.endpoint)
    found = kernelpin.verify_conda(
        prefix, project=kernelpin.find_project(world.project), source=HubSource.from_env(world.env)
    )
    assert found.ok
    found.check()
    [package] = found.packages
    assert package.signer is not None and package.signer.source_repository == "https://github.com/acme/img2gray"


def test_another_signer_is_refused_as_a_signature_failure(world, tmp_path):
    intruder = Identity(repository="evil/img2gray", workflow=".github/workflows/release.yaml")
    prefix = world.install(world.publish("intruder", world.package, intruder), tmp_path / "env")
    done = world.verify(prefix)
    assert done.returncode == 1
    [line] = _lines(done, "signature:")
    assert f"{REPO_ID} torch-stable-abi211-cpu-x86_64-linux" in line
    assert "signed by https://github.com/evil/img2gray" in line and "does not allow" in line
    assert _lines(done, "bytes:") == []  # the bytes are the Hub build's
    # The same through --attestation: a sidecar file signed by the intruder, for a package from the good channel.
    good = world.install(world.publish("good-2", world.package), tmp_path / "env2")
    sidecar = next((world.channels / "intruder" / "linux-64").glob("*.sigs.*"))
    done = world.verify(good, "--attestation", sidecar)
    assert done.returncode == 1 and len(_lines(done, "signature:")) == 1 and _lines(done, "bytes:") == []


def test_the_attestation_of_another_build_is_refused_as_a_signature_failure(world, tmp_path):
    """The other-commit package's sidecar (same file name, another sha256), given for the session's package."""
    prefix = world.install(world.publish("good-3", world.package), tmp_path / "env")
    world.publish("other-commit-sidecar", world.other_commit)
    sidecar = next((world.channels / "other-commit-sidecar" / "linux-64").glob("*.sigs.*"))
    done = world.verify(prefix, "--attestation", sidecar, "--json")
    assert done.returncode == 1
    [found] = json.loads(done.stdout)["packages"]
    assert found["bytes"] is None and found["signer"] is None
    assert found["signature"].startswith(f"signature: {REPO_ID} torch-stable-abi211-cpu-x86_64-linux: ")
    assert f"{world.package.name} has sha256" in found["signature"] and "the attestation names" in found["signature"]


def test_a_modified_installed_library_is_refused_as_a_bytes_failure(world, tmp_path):
    prefix = world.install(world.publish("modified", world.package), tmp_path / "env")
    [library] = prefix.glob("lib/python*/site-packages/img2gray/*.abi3.so")
    data = bytearray(library.read_bytes())
    data[-1] ^= 1
    library.unlink()  # a hard link into the package cache: replace it, as an editor would
    library.write_bytes(bytes(data))
    done = world.verify(prefix)
    assert done.returncode == 1
    [line] = _lines(done, "bytes:")
    assert f"{library.name}: sha256" in line and "of the Hub build" in line and "reinstall it" in line
    assert _lines(done, "signature:") == []  # the package file was signed; its installed bytes are not it


def test_a_deleted_installed_file_is_a_bytes_failure_not_a_crash(world, tmp_path):
    prefix = world.install(world.publish("deleted", world.package), tmp_path / "env")
    [metadata] = prefix.glob("lib/python*/site-packages/img2gray/metadata.json")
    metadata.unlink()
    done = world.verify(prefix)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = _lines(done, "bytes:")
    assert f"{metadata} is missing" in line and "reinstall it" in line
    assert _lines(done, "signature:") == []


def test_a_package_built_from_another_commit_is_refused_as_a_bytes_failure(world, tmp_path):
    assert world.other_commit.name == world.package.name  # same recipe and variant: only the commit differs
    prefix = world.install(world.publish("other-commit", world.other_commit), tmp_path / "env")
    done = world.verify(prefix)
    assert done.returncode == 1
    [line] = _lines(done, "bytes:")
    assert "metadata.json: sha256" in line and f"built from commit {OTHER_COMMIT[:12]}" in line
    assert _lines(done, "signature:") == []  # signed by the allowed identity: a real publish, of another build


def test_no_attestation_is_refused_where_the_policy_requires_signatures(world, tmp_path):
    prefix = world.install(world.publish("unsigned", world.package, signer=None), tmp_path / "env")
    done = world.verify(prefix)
    assert done.returncode == 1
    [line] = _lines(done, "signature:")
    assert "has no CEP 27 attestation" in line and 'publishers."acme"' in line and "--attestation FILE" in line
    assert _lines(done, "bytes:") == []


@pytest.mark.parametrize("damage", ["link", "dotdot", "absolute", "huge", "garbage", "meta-link", "file-link"])
def test_a_hostile_conda_meta_is_refused_in_one_line(world, tmp_path, damage):
    prefix = world.install(world.publish(f"hostile-{damage}", world.package), tmp_path / "env")
    [record] = (prefix / "conda-meta").glob("img2gray-*.json")
    document = json.loads(record.read_text())
    outside = tmp_path / "outside"
    outside.mkdir()
    if damage == "link":
        (outside / record.name).write_text(record.read_text())
        record.unlink()
        record.symlink_to(outside / record.name)
    elif damage in ("dotdot", "absolute"):
        document["files"].append("../../etc/passwd" if damage == "dotdot" else "/etc/passwd")
        record.write_text(json.dumps(document))
    elif damage == "huge":
        document["padding"] = "x" * (9 * 1024 * 1024)
        record.write_text(json.dumps(document))
    elif damage == "garbage":
        record.write_bytes(b"\xff{not json" * 1000)
    elif damage == "meta-link":
        shutil.move(prefix / "conda-meta", outside / "conda-meta")
        (prefix / "conda-meta").symlink_to(outside / "conda-meta")
    else:  # the installed library is a link to a file outside the prefix
        [library] = prefix.glob("lib/python*/site-packages/img2gray/*.abi3.so")
        shutil.copyfile(library, outside / library.name)
        library.unlink()
        library.symlink_to(outside / library.name)
    done = world.verify(prefix)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ")
    expected = {
        "link": "is a symbolic link",
        "dotdot": "an installed path is unsafe",
        "absolute": "an installed path is unsafe",
        "huge": "bytes, over the",
        "garbage": "not JSON",
        "meta-link": "is a symbolic link",
        "file-link": "is a symbolic link",
    }[damage]
    assert expected in line, line


@pytest.mark.parametrize(
    ("published", "signer", "judged"),
    [
        ("judge-good", "publisher", "verified"),
        ("judge-intruder", "intruder", "untrusted-identity"),
        ("judge-other-build", "other-build", "invalid"),  # the other-commit build's sidecar, for this package
    ],
)
def test_conda_sigstore_agrees_with_the_signature_verdict(world, published, signer, judged):
    """conda-sigstore (the conda ecosystem's verifier, its library) judges the same package and sidecar with the
    signer the policy allows: it verifies what verify-conda's signature check admits and refuses what it refuses."""
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    from kernelpin.format.conda_attestation import parse_sidecar
    from kernelpin.trust.conda_signature import admit_conda_package
    from kernelpin.trust.policy import SignatureError, parse_policy
    from testkit import conda_host
    from testkit.sigstore_root import GITHUB_ISSUER

    conda_host.install()
    from conda_sigstore.evidence import SignerIdentity
    from conda_sigstore.transport import SidecarTransport
    from conda_sigstore.verification import SigstoreVerifier, verify_artifact

    intruder = Identity(repository="evil/img2gray", workflow=".github/workflows/release.yaml")
    built = world.other_commit if signer == "other-build" else world.package
    url = world.publish(published, built, intruder if signer == "intruder" else PUBLISHER)
    [sidecar] = (world.channels / published / "linux-64").glob("*.sigs.*")
    body = sidecar.read_bytes()
    trusted_root = TrustedRoot.from_file(str(world.trusted_root))

    verdict = verify_artifact(
        world.package,
        SidecarTransport.parse(body),
        verifier=SigstoreVerifier(verifier=Verifier(trusted_root=trusted_root)),
        channel=url,
        expected_signer=SignerIdentity(PUBLISHER.san, GITHUB_ISSUER),
    )
    assert verdict.status == judged, verdict

    policy = parse_policy(tomllib.loads((world.project / "pyproject.toml").read_text()))
    bundles = parse_sidecar(body, hashlib.sha256(body).hexdigest())
    sha256 = hashlib.sha256(world.package.read_bytes()).hexdigest()
    try:
        admitted = admit_conda_package(
            policy, REPO_ID, "v", bundles, world.package.name, sha256, url, Verifier(trusted_root=trusted_root)
        )
    except SignatureError:
        admitted = None
    assert (admitted is not None) == (judged == "verified")
