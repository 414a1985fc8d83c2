"""Fixtures of the conda channel tests: a real S3 server (moto) on 127.0.0.1 holding channels, the test kit's
Sigstore instance signing as the release workflow does, and conda-sigstore's own verification as the judge."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit import conda_host
from testkit.releasing import release_identity
from testkit.s3_server import S3Server
from testkit.sigstore_root import Identity, SigstoreRoot
from tools.conda.publish import Report, publish
from tools.conda.s3_channel import S3Channel, S3Location

VERSION = "0.1.0"  # build.toml's version: the release the packages belong to
RELEASE_SIGNER = release_identity(VERSION)


@pytest.fixture(scope="module")
def sigstore_instance(tmp_path_factory: pytest.TempPathFactory) -> tuple[SigstoreRoot, Path]:
    """The test kit's Sigstore instance (the one the Hub release tests sign with) and its trusted_root.json."""
    root = SigstoreRoot()
    return root, root.write_trusted_root(tmp_path_factory.mktemp("sigstore") / "trusted_root.json")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


_buckets = itertools.count()


@dataclass
class ChannelUnderTest:
    """One channel in its own public bucket: where publish writes (store) and what consumers add (url)."""

    s3: S3Server
    store: S3Channel
    url: str
    root: SigstoreRoot

    def publish(
        self, sources: Sequence[Path], identity: Identity = RELEASE_SIGNER, endpoint: str | None = None
    ) -> Report:
        """tools.conda.publish's library call, signing as `identity` with the test kit's instance; `endpoint`
        publishes through another S3 front (FailingFront) to the same bucket."""
        store = self.store if endpoint is None else S3Channel(self.s3.client(endpoint), self.store.location)
        return publish(sources, store, self.url, functools.partial(self.root.sign_dsse, identity=identity), log=print)

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"{self.url}/{path}", timeout=30) as answer:
            return answer.read()

    def repodata(self, subdir: str = "linux-64") -> dict[str, Any]:
        return json.loads(self.get(f"{subdir}/repodata.json"))

    def download(self, subdir: str, name: str, into: Path) -> Path:
        """A consumer's download of one package, as the channel serves it."""
        into.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(self.get(f"{subdir}/{name}"))
        return into / name


@pytest.fixture
def channel(s3: S3Server, sigstore_instance: tuple[SigstoreRoot, Path]) -> ChannelUnderTest:
    bucket = f"conda-{next(_buckets)}"
    s3.create_public_bucket(bucket)
    location = S3Location(bucket, "img2gray")
    return ChannelUnderTest(
        s3, S3Channel(s3.client(), location), s3.public_url(bucket, "img2gray"), sigstore_instance[0]
    )


def served_consistently(channel: ChannelUnderTest, subdir: str = "linux-64") -> list[str]:
    """What a reader of the channel could miss right now: for every package repodata names, its bytes (sha256 as
    named) and, where advertised, its CEP 50 sidecar (sha256 as advertised). Returns the names checked."""
    try:
        repodata = channel.repodata(subdir)
    except urllib.error.HTTPError as error:
        if error.code in (403, 404):  # no repodata yet: the channel names nothing
            return []
        raise
    names = []
    for name, record in {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}.items():
        assert hashlib.sha256(channel.get(f"{subdir}/{name}")).hexdigest() == record["sha256"], name
        if "attestations_sha256" in record:
            sidecar = channel.get(f"{subdir}/{name}.sigs.{record['attestations_sha256']}")
            assert hashlib.sha256(sidecar).hexdigest() == record["attestations_sha256"], name
        names.append(name)
    return names


@dataclass(frozen=True)
class Verdict:
    status: str  # conda-sigstore's VerificationStatus value: "verified", "invalid", "untrusted-identity", ...
    failures: tuple[str, ...]  # its failure codes


def conda_sigstore_verdict(
    channel_url: str,
    package: Path,
    signer: Identity,
    trusted_root: Path,
    subdir: str = "linux-64",
    sidecar_of: str | None = None,
) -> Verdict:
    """conda-sigstore 0.1.5's verification of `package` (a downloaded file) as its CLI does it for a channel
    package: the CEP 50 sidecar repodata advertises for that file name (or `attestations_sha256`), fetched
    through its transport and hash-checked, then its Sigstore verification (given the test kit's trusted root
    through its `verifier` hook, as tests/kernelpin's signature tests hand sigstore the kit's root) with the
    expected signer and channel. `sidecar_of`: take the sidecar the channel serves for that other package."""
    conda_host.install()
    from conda_sigstore.evidence import SignerIdentity
    from conda_sigstore.transport import SidecarTransport
    from conda_sigstore.verification import SigstoreVerifier, verify_artifact
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    def fetch(url: str, limit: int) -> bytes:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.read(limit + 1)

    served = sidecar_of or package.name
    with urllib.request.urlopen(f"{channel_url}/{subdir}/repodata.json", timeout=30) as answer:
        record = json.loads(answer.read())["packages.conda"][served]
    sidecar = SidecarTransport(fetcher=fetch).load_repodata(
        f"{channel_url}/{subdir}/{served}", record["attestations_sha256"]
    )
    verifier = SigstoreVerifier(verifier=Verifier(trusted_root=TrustedRoot.from_file(str(trusted_root))))
    result = verify_artifact(
        package,
        sidecar,
        verifier=verifier,
        channel=channel_url,
        expected_signer=SignerIdentity(signer.san, signer.issuer),
    )
    return Verdict(result.status.value, tuple(failure.code for failure in result.failures))
