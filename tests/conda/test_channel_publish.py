"""`python -m tools.conda.publish` against a real S3 server (moto) on 127.0.0.1, with the real packages of the offline
builds: each published package carries a CEP 27 attestation served as a CEP 50 sidecar, and conda-sigstore's own
verification (not ours) accepts it for the release signer and refuses tampering, another package's sidecar, another
signer and another Sigstore instance. Publishing is all or nothing for readers, whatever fails midway."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
import time
import zipfile
from pathlib import Path

import pytest

from testkit.releasing import RELEASE_WORKFLOW, REPO_ID
from testkit.s3_server import Front
from testkit.sigstore_root import Identity, SigstoreRoot
from tests.conda.conftest import (
    RELEASE_SIGNER,
    ChannelUnderTest,
    Verdict,
    conda_sigstore_verdict,
    served_consistently,
)
from tests.conda.support import OfflineBuild
from tests.kernelpin.faulty_hub import SilentServer
from tools.conda.publish import PublishError, main, publish
from tools.conda.s3_channel import ChannelStoreError, S3Channel, S3Location

SUBDIR = "linux-64"


def test_each_published_package_verifies_with_conda_sigstore_and_tampering_does_not(
    channel: ChannelUnderTest,
    offline_stable_build: OfflineBuild,
    offline_build: OfflineBuild,
    sigstore_instance: tuple[SigstoreRoot, Path],
    tmp_path: Path,
) -> None:
    stable, exact = offline_stable_build.package, offline_build.package
    report = channel.publish([stable, exact])
    assert sorted(report.published) == sorted(f"{SUBDIR}/{p.name}" for p in (stable, exact))
    assert sorted(served_consistently(channel)) == sorted([stable.name, exact.name])
    repodata = channel.repodata()
    _, trusted_root = sigstore_instance
    for package in (stable, exact):
        record = repodata["packages.conda"][package.name]
        assert record["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
        # CEP 50: the mutable discovery URL serves the same bytes as the content-addressed one.
        immutable = channel.get(f"{SUBDIR}/{package.name}.sigs.{record['attestations_sha256']}")
        assert channel.get(f"{SUBDIR}/{package.name}.sigs") == immutable
        downloaded = channel.download(SUBDIR, package.name, tmp_path / "downloads")
        assert conda_sigstore_verdict(channel.url, downloaded, RELEASE_SIGNER, trusted_root) == Verdict("verified", ())

    downloaded = tmp_path / "downloads" / stable.name
    tampered = tmp_path / "tampered" / stable.name
    tampered.parent.mkdir()
    body = bytearray(downloaded.read_bytes())
    body[len(body) // 2] ^= 0x01
    tampered.write_bytes(bytes(body))
    verdict = conda_sigstore_verdict(channel.url, tampered, RELEASE_SIGNER, trusted_root)
    assert verdict.status == "invalid" and "invalid-cep27" in verdict.failures, verdict

    verdict = conda_sigstore_verdict(channel.url, downloaded, RELEASE_SIGNER, trusted_root, sidecar_of=exact.name)
    assert verdict.status == "invalid" and "invalid-cep27" in verdict.failures, verdict

    fork = Identity(repository="mallory/img2gray", workflow=RELEASE_WORKFLOW, ref="refs/tags/v0.1.0")
    verdict = conda_sigstore_verdict(channel.url, downloaded, fork, trusted_root)
    assert verdict.status == "untrusted-identity", verdict
    other_branch = Identity(repository=REPO_ID, workflow=RELEASE_WORKFLOW, ref="refs/heads/main")
    assert conda_sigstore_verdict(channel.url, downloaded, other_branch, trusted_root).status == "untrusted-identity"

    other_instance = SigstoreRoot().write_trusted_root(tmp_path / "other_root.json")
    verdict = conda_sigstore_verdict(channel.url, downloaded, RELEASE_SIGNER, other_instance)
    assert verdict.status == "invalid" and verdict.failures == ("invalid-bundle",), verdict


def _rebuilt_with_other_bytes(package: Path, into: Path) -> Path:
    """The same package file name with other bytes: a valid .conda (a zip) whose archive comment differs."""
    into.mkdir(parents=True, exist_ok=True)
    copy = into / package.name
    shutil.copyfile(package, copy)
    with zipfile.ZipFile(copy, "a") as archive:
        archive.comment = b"rebuilt"
    assert hashlib.sha256(copy.read_bytes()).digest() != hashlib.sha256(package.read_bytes()).digest()
    return copy


def test_republishing_skips_the_same_bytes_and_refuses_other_bytes(
    channel: ChannelUnderTest, offline_stable_build: OfflineBuild, tmp_path: Path
) -> None:
    package = offline_stable_build.package
    channel.publish([package])
    before = channel.get(f"{SUBDIR}/repodata.json")

    again = channel.publish([offline_stable_build.channel_dir])  # the whole output/ directory, as the task gives it
    assert again.published == [] and again.unchanged == [f"{SUBDIR}/{package.name}"]
    assert channel.get(f"{SUBDIR}/repodata.json") == before

    changed = _rebuilt_with_other_bytes(package, tmp_path / "rebuilt" / SUBDIR)
    with pytest.raises(
        PublishError, match=f"already published with other bytes: {SUBDIR}/{package.name}.*build number"
    ):
        channel.publish([changed])
    assert channel.get(f"{SUBDIR}/repodata.json") == before
    assert channel.get(f"{SUBDIR}/{package.name}") == package.read_bytes()


FAILURE_POINTS = {
    "the package upload": lambda method, path: method == "PUT" and path.endswith(".conda"),
    "the immutable sidecar": lambda method, path: method == "PUT" and ".conda.sigs." in path,
    "the mutable sidecar": lambda method, path: method == "PUT" and path.endswith(".conda.sigs"),
    "the repodata write": lambda method, path: method == "PUT" and path.endswith(f"/{SUBDIR}/repodata.json"),
}


def test_an_unnamed_object_with_other_bytes_is_never_replaced(
    channel: ChannelUnderTest, offline_stable_build: OfflineBuild, tmp_path: Path
) -> None:
    """An object under the package's name that no repodata names (a failed or a concurrent publish of another build
    under the same name): publishing this build is refused, rather than replacing bytes another publisher may be
    about to name in repodata."""
    package = offline_stable_build.package
    other = _rebuilt_with_other_bytes(package, tmp_path / "other" / SUBDIR).read_bytes()
    key = channel.store.location.key(SUBDIR, package.name)
    channel.store.write(key, other, content_type="application/octet-stream")
    with pytest.raises(PublishError, match=f"{package.name} exists with other bytes, and no repodata names it"):
        channel.publish([package])
    assert channel.get(f"{SUBDIR}/{package.name}") == other
    assert served_consistently(channel) == []


@pytest.mark.parametrize("failing", sorted(FAILURE_POINTS))
def test_a_publish_failing_midway_never_names_what_the_channel_cannot_serve(
    failing: str,
    channel: ChannelUnderTest,
    offline_stable_build: OfflineBuild,
    offline_build: OfflineBuild,
    sigstore_instance: tuple[SigstoreRoot, Path],
    tmp_path: Path,
) -> None:
    stable, exact = offline_stable_build.package, offline_build.package
    channel.publish([exact])
    fails = FAILURE_POINTS[failing]
    with (
        Front(channel.s3.endpoint, lambda method, path: 500 if fails(method, path) else None) as front,
        pytest.raises((PublishError, ChannelStoreError)),
    ):
        channel.publish([stable], endpoint=front)
    assert served_consistently(channel) == [exact.name]  # the earlier release, untouched; nothing half-published

    channel.publish([stable])  # the retry, once the server is well again
    assert sorted(served_consistently(channel)) == sorted([stable.name, exact.name])
    downloaded = channel.download(SUBDIR, stable.name, tmp_path)
    assert conda_sigstore_verdict(channel.url, downloaded, RELEASE_SIGNER, sigstore_instance[1]).status == "verified"


def test_a_concurrent_publisher_is_merged_not_lost(
    channel: ChannelUnderTest, offline_stable_build: OfflineBuild, offline_build: OfflineBuild
) -> None:
    """Publisher A reads repodata; publisher B publishes in full; A's repodata write (If-Match on what it read)
    loses, and A reads B's repodata again and adds its own package to it."""
    stable, exact = offline_stable_build.package, offline_build.package
    other_done = threading.Event()

    def intercept(method: str, path: str) -> int | None:
        if method == "PUT" and path.endswith(f"/{SUBDIR}/repodata.json") and not other_done.is_set():
            other_done.set()
            channel.publish([exact])  # B, directly against the server, between A's read and A's write
        return None

    with Front(channel.s3.endpoint, intercept) as front:
        report = channel.publish([stable], endpoint=front)
    assert other_done.is_set()
    assert report.published == [f"{SUBDIR}/{stable.name}"]
    assert sorted(served_consistently(channel)) == sorted([stable.name, exact.name])


def test_a_concurrent_publisher_of_the_same_build_leaves_one_sidecar_served(
    channel: ChannelUnderTest, offline_stable_build: OfflineBuild
) -> None:
    """A and B publish the same package at once (a re-run release job): B names it first with its own sidecar, then
    A's mutable `<package>.sigs` lands. The mutable URL must still serve the sidecar repodata advertises (CEP 50)."""
    package = offline_stable_build.package
    other_done = threading.Event()

    def intercept(method: str, path: str) -> int | None:
        if method == "PUT" and path.endswith(f"/{package.name}.sigs") and not other_done.is_set():
            other_done.set()
            channel.publish([package])  # B, in full, just before A's mutable sidecar write
        return None

    with Front(channel.s3.endpoint, intercept) as front:
        report = channel.publish([package], endpoint=front)
    assert other_done.is_set()
    assert report.published == [] and report.unchanged == [f"{SUBDIR}/{package.name}"]  # B named it first
    advertised = channel.repodata()["packages.conda"][package.name]["attestations_sha256"]
    assert hashlib.sha256(channel.get(f"{SUBDIR}/{package.name}.sigs")).hexdigest() == advertised
    assert served_consistently(channel) == [package.name]


def test_hostile_input_is_refused_before_anything_is_written(
    channel: ChannelUnderTest, offline_stable_build: OfflineBuild, sigstore_instance, tmp_path: Path
) -> None:
    package = offline_stable_build.package
    root, _ = sigstore_instance

    def refused(match: str, sources: list[Path], url: str = channel.url, sign=None) -> None:
        sign = sign or functools.partial(root.sign_dsse, identity=RELEASE_SIGNER)
        with pytest.raises(PublishError, match=match):
            publish(sources, channel.store, url, sign, log=print)
        assert channel.store.read(channel.store.location.key(SUBDIR, package.name)) is None

    refused("carries a credential", [package], url=channel.url.replace("http://", "http://me:secret@"))
    refused("ends in a slash", [package], url=channel.url + "/")
    (tmp_path / "notes.txt").write_text("x")
    refused("neither a conda package nor a directory", [tmp_path / "notes.txt"])
    (tmp_path / "empty").mkdir()
    refused("no conda packages in", [tmp_path / "empty"])
    misplaced = tmp_path / "osx-arm64" / package.name
    misplaced.parent.mkdir()
    shutil.copyfile(package, misplaced)
    refused("built for linux-64 but lies in osx-arm64/", [misplaced])
    refused("given twice", [package, offline_stable_build.channel_dir])
    # A signer whose bundle says something else than the statement it was given: nothing is served.
    refused(
        "carries another statement",
        [package],
        sign=lambda payload: root.sign_dsse(payload.replace(b"img2gray", b"img3gray")),
    )

    channel.store.write(channel.store.location.key(SUBDIR, "repodata.json"), b"<html>", content_type="text/html")
    refused("repodata.json is not JSON.*repair the channel", [package])


def test_a_silent_server_fails_the_publish_in_bounded_time(
    offline_stable_build: OfflineBuild, sigstore_instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts the connection and never answers: the publish stops with the object it was reading."""
    for name, value in (("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")):
        monkeypatch.setenv(name, value)
    root, _ = sigstore_instance
    with SilentServer() as endpoint:
        store = S3Channel.connect(S3Location("conda", "img2gray"), endpoint, "us-east-1", timeout=1)
        started = time.monotonic()
        with pytest.raises(ChannelStoreError, match="reading s3://conda/img2gray/linux-64/repodata.json: .*timeout"):
            publish([offline_stable_build.package], store, "https://x/img2gray", functools.partial(root.sign_dsse))
    assert time.monotonic() - started < 30


def test_s3_locations_are_checked() -> None:
    assert S3Location.parse("s3://acme-conda/img2gray/") == S3Location("acme-conda", "img2gray")
    assert S3Location.parse("s3://acme-conda").key("noarch", "repodata.json") == "noarch/repodata.json"
    for bad in ("https://acme-conda/img2gray", "s3:///img2gray", "s3://b/a/../c", "s3://b/a//c"):
        with pytest.raises(ValueError):
            S3Location.parse(bad)


def test_the_command_refuses_without_an_oidc_token(
    offline_stable_build: OfflineBuild, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside a release job (no GitHub OIDC token, no SIGSTORE_IDENTITY_TOKEN) nothing can be signed, so nothing
    is published: one line says why and how."""
    for name in ("SIGSTORE_IDENTITY_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    status = main(
        [str(offline_stable_build.channel_dir), "--channel", "s3://acme-conda/img2gray", "--channel-url", "https://x/y"]
    )
    assert status == 1
    assert "no OIDC token for signing" in capsys.readouterr().err
    assert main([str(offline_stable_build.channel_dir), "--channel", "acme", "--channel-url", "https://x/y"]) == 1
    assert "is not an S3 URL" in capsys.readouterr().err


def test_repodata_keeps_what_the_indexer_wrote(channel: ChannelUnderTest, offline_stable_build: OfflineBuild) -> None:
    """The published record is rattler's indexer's record plus attestations_sha256: what the build's own channel
    (output/, indexed by rattler) says of the package, nothing dropped."""
    package = offline_stable_build.package
    channel.publish([package])
    local = json.loads((offline_stable_build.channel_dir / SUBDIR / "repodata.json").read_text())
    published = channel.repodata()["packages.conda"][package.name]
    expected = {k: v for k, v in local["packages.conda"][package.name].items() if k != "indexed_timestamp"}
    assert {k: v for k, v in published.items() if k not in ("indexed_timestamp", "attestations_sha256")} == expected
