"""`pixi add img2gray` from the published channel: py-rattler (pixi's solver, installer and Sigstore verifier) given
the channel's URL on the S3 server, next to a pytorch of each minor from 2.11 to 2.15, takes the stable-ABI package,
checks its CEP 50 attestation names the release signer, installs it, and the operator runs.

Only one torch is installed on this machine (2.13, CPU): the pytorch 2.11, 2.12, 2.14 and 2.15 the solver sees are
stand-ins of that torch labelled with the other versions (tools/conda/standins.py), so what runs is always the same
torch; what each case shows is the selection and the install from the channel. The GPU runs test the real ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rattler import install
from rattler.exceptions import AttestationError
from rattler.sigstore import Issuer, Publisher, TrustedRoot, VerificationPolicy, verify_attestation

from testkit.releasing import RELEASE_WORKFLOW, REPO_ID
from testkit.s3_server import S3Server
from testkit.sigstore_root import Identity, SigstoreRoot
from tests.conda.conftest import RELEASE_SIGNER
from tests.conda.support import OP_CHECK, OfflineBuild
from tools.conda.channel import solve_environment
from tools.conda.publish import publish
from tools.conda.s3_channel import S3Channel, S3Location
from tools.conda.standins import build_standin_channel

STABLE_MINORS = ("2.11", "2.12", "2.13", "2.14", "2.15")


@pytest.fixture(scope="module")
def channel_url(
    s3: S3Server, sigstore_instance: tuple[SigstoreRoot, Path], offline_stable_build: OfflineBuild
) -> Iterator[str]:
    """The channel as the release leaves it: the stable CPU package published and attested by the release signer."""
    root, _ = sigstore_instance
    s3.create_public_bucket("consumers")
    store = S3Channel(s3.client(), S3Location("consumers", "img2gray"))
    url = s3.public_url("consumers", "img2gray")
    publish([offline_stable_build.package], store, url, functools.partial(root.sign_dsse, identity=RELEASE_SIGNER))
    return url


@pytest.fixture(scope="module")
def pytorch_standins(offline_stable_build: OfflineBuild, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A channel holding one pytorch stand-in per minor (this machine's torch, labelled 2.11.0 ... 2.15.0)."""
    root = tmp_path_factory.mktemp("pytorch-standins")
    machine = offline_stable_build.machine
    return {
        minor: build_standin_channel(
            dataclasses.replace(machine, torch_version=f"{minor}.0"), root / minor, names={"pytorch"}
        )
        for minor in STABLE_MINORS
    }


def release_policy(signer: Identity = RELEASE_SIGNER) -> VerificationPolicy:
    return VerificationPolicy.require(Publisher(identity=signer.san, issuer=Issuer(signer.issuer)))


@pytest.mark.parametrize("minor", STABLE_MINORS)
def test_pixi_style_install_from_the_channel_takes_the_stable_package_and_the_op_runs(
    minor: str,
    channel_url: str,
    pytorch_standins: dict[str, str],
    offline_stable_build: OfflineBuild,
    sigstore_instance: tuple[SigstoreRoot, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "cache"))  # a fresh machine: nothing cached yet
    channels = [channel_url, pytorch_standins[minor], offline_stable_build.standins_url]
    records = solve_environment(channels, ["img2gray", f"pytorch {minor}.*"], cuda=None)
    [img2gray] = [record for record in records if record.name.normalized == "img2gray"]
    [pytorch] = [record for record in records if record.name.normalized == "pytorch"]
    assert img2gray.url == f"{channel_url}/linux-64/{offline_stable_build.package.name}"
    assert str(img2gray.build).startswith("cpu_stableabi211_")
    assert str(pytorch.version) == f"{minor}.0"

    # What pixi's engine checks before it installs: the record's CEP 50 sidecar, its CEP 27 statement, the signer.
    outcome = asyncio.run(
        verify_attestation(img2gray, release_policy(), trusted_root=TrustedRoot.from_path(sigstore_instance[1]))
    )
    assert outcome.is_verified and outcome.attestation is not None
    assert outcome.attestation.identity == RELEASE_SIGNER.san
    assert outcome.attestation.target_channel == channel_url

    prefix = tmp_path / "env"
    asyncio.run(install(records, target_prefix=prefix, show_progress=False))
    result = subprocess.run([prefix / "bin" / "python", "-c", OP_CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(prefix)


def test_pixi_engine_refuses_another_signer_and_another_sigstore_instance(
    channel_url: str,
    pytorch_standins: dict[str, str],
    offline_stable_build: OfflineBuild,
    sigstore_instance: tuple[SigstoreRoot, Path],
    tmp_path: Path,
) -> None:
    records = solve_environment(
        [channel_url, pytorch_standins["2.13"], offline_stable_build.standins_url], ["img2gray"], cuda=None
    )
    [img2gray] = [record for record in records if record.name.normalized == "img2gray"]
    trusted = TrustedRoot.from_path(sigstore_instance[1])
    fork = Identity(repository="mallory/img2gray", workflow=RELEASE_WORKFLOW, ref="refs/tags/v0.1.0")
    with pytest.raises(AttestationError, match="no attestation for img2gray"):
        asyncio.run(verify_attestation(img2gray, release_policy(fork), trusted_root=trusted))
    nightly = Identity(repository=REPO_ID, workflow=".github/workflows/nightly.yml", ref="refs/heads/main")
    with pytest.raises(AttestationError):
        asyncio.run(verify_attestation(img2gray, release_policy(nightly), trusted_root=trusted))
    other = TrustedRoot.from_path(SigstoreRoot().write_trusted_root(tmp_path / "other_root.json"))
    with pytest.raises(AttestationError):
        asyncio.run(verify_attestation(img2gray, release_policy(), trusted_root=other))
