"""Publish built conda packages to a channel in S3, each with its CEP 27 publication attestation served as a CEP 50
sidecar, so that `pixi add img2gray` finds them and conda-sigstore can check who published them.

    python -m tools.conda.publish output --channel s3://acme-conda/img2gray \\
        --channel-url https://acme-conda.s3.amazonaws.com/img2gray [--endpoint-url URL] [--region REGION]

Packages: .conda/.tar.bz2 files, or directories searched for `<subdir>/*.conda` (a build's output/). Credentials
are boto3's usual ones (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...); the bucket must be readable by everyone
(consumers fetch over plain HTTPS). Signing is keyless Sigstore with the job's OIDC token (tools/conda/attest.py):
the release workflow runs this in the job that signs the Hub release, so both carry one identity.

Order, so that no reader ever sees repodata naming something the channel cannot serve, whatever fails midway:
package files first, then their sidecars (`<package>.sigs.<sha256>`, then the mutable `<package>.sigs`), then each
subdir's repodata.json last, in one write that succeeds only over the version read (S3 If-Match; a concurrent
publisher's update is read again and merged, never lost). A package already in the channel is skipped when its
bytes are the same and refused when they differ: a published package never changes (raise the build number).
Why S3 and not quetz: docs/releasing.md ("Why the channel is S3").
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpin.format.conda_attestation import AttestationError, channel_url, sidecar_bytes, sidecar_name
from tools.conda.attest import AttestationFailed, Signer, attest
from tools.conda.channel import index_channel
from tools.conda.s3_channel import ChannelStoreError, Conflict, S3Channel, S3Location

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
REPODATA = "repodata.json"
# How often a repodata write that lost to a concurrent publisher is read, merged and tried again.
MERGE_ATTEMPTS = 5


class PublishError(RuntimeError):
    """Publishing was refused or failed; the message names the package or object and what to do."""


@dataclass(frozen=True)
class LocalPackage:
    path: Path
    subdir: str
    record: dict[str, Any]  # its repodata record, as rattler's indexer writes it (sha256, md5, size, depends, ...)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def sha256(self) -> str:
        return str(self.record["sha256"])


@dataclass
class Report:
    published: list[str] = field(default_factory=list)  # <subdir>/<file> uploaded and named in repodata
    unchanged: list[str] = field(default_factory=list)  # already in the channel with the same bytes


def find_packages(sources: Iterable[Path]) -> list[Path]:
    """Package files given directly, or found as `<subdir>/<file>` under a given directory (a build's output/)."""
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found += sorted(p for p in source.glob("*/*") if p.is_file() and p.name.endswith(PACKAGE_SUFFIXES))
        elif source.is_file() and source.name.endswith(PACKAGE_SUFFIXES):
            found.append(source)
        else:
            raise PublishError(f"{source} is neither a conda package nor a directory of them; give output/ or a .conda")
    if not found:
        raise PublishError(f"no conda packages in {', '.join(map(str, sources))}; build them first (pixi run build)")
    names = [path.name for path in found]
    if duplicates := sorted({name for name in names if names.count(name) > 1}):
        raise PublishError(f"{', '.join(duplicates)} given twice from different places; give each package once")
    return found


def read_packages(paths: Sequence[Path]) -> list[LocalPackage]:
    """Each package with the repodata record rattler's indexer writes for it (read from the archive itself: the
    subdir the package was built for, not the directory it lies in)."""
    with tempfile.TemporaryDirectory(prefix="img2gray-publish-") as scratch:
        staging = Path(scratch) / "channel"
        for path in paths:
            # Staged under the directory it lies in: a package whose index.json names another subdir is refused below.
            destination = staging / path.parent.name / path.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, destination)  # CUDA packages are large: no copy where a link will do
            except OSError:
                shutil.copyfile(path, destination)
        index_channel(staging)
        records: dict[str, tuple[str, dict[str, Any]]] = {}
        for repodata in staging.glob(f"*/{REPODATA}"):
            document = json.loads(repodata.read_text())
            for table in ("packages", "packages.conda"):
                for name, record in document.get(table, {}).items():
                    records[name] = (repodata.parent.name, record)
    packages = []
    for path in paths:
        if path.name not in records:
            raise PublishError(
                f"rattler's indexer found no package in {path}: it must be a conda package lying in a directory "
                "named after its subdir (output/linux-64/...); rebuild it or move it there"
            )
        subdir, record = records[path.name]
        if record.get("subdir", subdir) != subdir:
            raise PublishError(
                f"{path} was built for {record.get('subdir')} but lies in {path.parent.name}/; move it or rebuild it"
            )
        packages.append(LocalPackage(path, subdir, record))
    return packages


def _table(name: str) -> str:
    return "packages.conda" if name.endswith(".conda") else "packages"


def _load_repodata(store: S3Channel, subdir: str) -> tuple[dict[str, Any], str | None]:
    """The subdir's current repodata and its ETag (None: the subdir has none yet)."""
    stored = store.read(store.location.key(subdir, REPODATA))
    if stored is None:
        return {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}, "repodata_version": 1}, None
    try:
        document = json.loads(stored.body)
    except json.JSONDecodeError as error:
        raise PublishError(
            f"{store.location}/{subdir}/{REPODATA} is not JSON ({error}); repair the channel before publishing"
        ) from error
    return document, stored.etag


def _split_known(
    packages: Sequence[LocalPackage], repodata: dict[str, Any]
) -> tuple[list[LocalPackage], list[LocalPackage]]:
    """(new, unchanged): refuses the whole publish if any package is in the channel with other bytes."""
    new, unchanged, changed = [], [], []
    for package in packages:
        known = repodata.get(_table(package.name), {}).get(package.name)
        if known is None:
            new.append(package)
        elif known.get("sha256") == package.sha256:
            unchanged.append(package)
        else:
            changed.append(f"{package.subdir}/{package.name} (channel: {known.get('sha256')}, yours: {package.sha256})")
    if changed:
        raise PublishError(
            "already published with other bytes: "
            + ", ".join(changed)
            + "; a published package never changes: raise the build number (recipe/recipe.yaml build.number) and "
            "build again"
        )
    return new, unchanged


def publish(
    sources: Sequence[Path],
    store: S3Channel,
    public_url: str,
    sign: Signer,
    *,
    log: Callable[[str], None] = print,
) -> Report:
    """Publish the packages of `sources` to `store`, served at `public_url` (the URL consumers add to their
    channels, and the targetChannel every attestation names). See the module's docstring for the order."""
    try:
        target = channel_url(public_url)
    except AttestationError as error:
        raise PublishError(str(error)) from error
    packages = read_packages(find_packages(sources))
    by_subdir: dict[str, list[LocalPackage]] = {}
    for package in packages:
        by_subdir.setdefault(package.subdir, []).append(package)

    # Everything that can refuse comes before the first write: a changed package, a failed signature.
    plans = {
        subdir: _split_known(group, _load_repodata(store, subdir)[0]) for subdir, group in sorted(by_subdir.items())
    }
    sidecars = {}
    for new, _unchanged in plans.values():
        for package in new:
            try:
                sidecars[package.name] = sidecar_bytes([attest(package.name, package.sha256, target, sign)])
            except (AttestationFailed, AttestationError) as error:
                raise PublishError(f"attesting {package.name}: {error}") from error

    report = Report()
    for subdir, (new, unchanged) in plans.items():
        report.unchanged += [f"{subdir}/{p.name}" for p in unchanged]
        for package in unchanged:
            log(f"unchanged {subdir}/{package.name} (already in the channel, same sha256)")
        # 1. The packages.
        for package in new:
            _upload_package(store, package)
            log(f"uploaded {subdir}/{package.name}")
        # 2. Their sidecars: the immutable content-addressed one, then the mutable discovery URL (CEP 50's order).
        for package in new:
            sidecar = sidecars[package.name]
            _write_once(store, store.location.key(subdir, sidecar_name(package.name, sidecar)), sidecar)
            store.write(
                store.location.key(subdir, package.name + ".sigs"),
                sidecar,
                content_type="application/json",
                cache_control="no-cache",
            )
            log(f"attested {subdir}/{package.name} (sidecar sha256 {hashlib.sha256(sidecar).hexdigest()})")
        # 3. Repodata, last, in one conditional write.
        if new:
            named = _merge_repodata(store, subdir, new, sidecars)
            report.published += [f"{subdir}/{p.name}" for p in new if p.name in named]
            report.unchanged += [f"{subdir}/{p.name}" for p in new if p.name not in named]
            log(f"indexed {subdir}/{REPODATA} ({len(named)} new)")
    _ensure_noarch(store)
    return report


def _upload_package(store: S3Channel, package: LocalPackage) -> None:
    key = store.location.key(package.subdir, package.name)
    body = package.path.read_bytes()
    if hashlib.sha256(body).hexdigest() != package.sha256:
        raise PublishError(f"{package.path} changed while being published; build it again and publish once it is done")
    _write_once(store, key, body, content_type="application/octet-stream")


def _write_once(store: S3Channel, key: str, body: bytes, content_type: str = "application/json") -> None:
    """Write an object that never changes once written: only where none exists (If-None-Match), so that two
    publishers of different bytes under one name cannot replace each other's. An object already there with these
    bytes (left by a publish that failed before its repodata write, or written by a concurrent publisher of the
    same build) is kept; with other bytes, the publish is refused."""
    try:
        store.write(key, body, content_type=content_type, if_absent=True)
    except Conflict:
        if store.etag(key) != f'"{hashlib.md5(body).hexdigest()}"':  # S3's ETag: the MD5 of what it stored
            raise PublishError(
                f"{store.location.bucket}/{key} exists with other bytes, and no repodata names it (a failed or "
                "concurrent publish of another build under the same name); delete it if it is a leftover, or raise "
                "the build number"
            ) from None


def _merge_repodata(store: S3Channel, subdir: str, new: Sequence[LocalPackage], sidecars: dict[str, bytes]) -> set[str]:
    """Add `new` to the subdir's repodata in one conditional write; the names this publish added (a concurrent
    publisher may have named some of them first, with the same bytes)."""
    key = store.location.key(subdir, REPODATA)
    for _attempt in range(MERGE_ATTEMPTS):
        repodata, etag = _load_repodata(store, subdir)
        # A concurrent publisher may have published some of the same packages meanwhile: same bytes are fine.
        fresh, same = _split_known(new, repodata)
        for package in same:
            _serve_advertised_sidecar(store, subdir, package.name, repodata[_table(package.name)][package.name])
        for package in fresh:
            record = dict(package.record)
            record["attestations_sha256"] = hashlib.sha256(sidecars[package.name]).hexdigest()
            repodata.setdefault(_table(package.name), {})[package.name] = record
        body = (json.dumps(repodata, indent=2, sort_keys=True) + "\n").encode()
        try:
            store.write(
                key,
                body,
                content_type="application/json",
                cache_control="no-cache",
                if_match=etag,
                if_absent=etag is None,
            )
            return {package.name for package in fresh}
        except Conflict:
            continue  # another publisher wrote it since we read it: read theirs and merge again
    raise PublishError(
        f"{store.location}/{subdir}/{REPODATA} kept changing under {MERGE_ATTEMPTS} attempts (other publishers); "
        "publish again: the uploaded packages are kept and not named until then"
    )


def _serve_advertised_sidecar(store: S3Channel, subdir: str, name: str, record: dict[str, Any]) -> None:
    """A concurrent publisher of the same bytes named the package first, with its own sidecar: the mutable
    `<package>.sigs`, which this publish may have written after theirs, must serve what repodata advertises
    (CEP 50). Copied from the content-addressed sidecar, hash-checked."""
    advertised = record.get("attestations_sha256")
    if not isinstance(advertised, str):
        return
    stored = store.read(store.location.key(subdir, f"{name}.sigs.{advertised}"))
    if stored is None or hashlib.sha256(stored.body).hexdigest() != advertised:
        raise PublishError(
            f"{store.location}/{subdir}/{name}.sigs.{advertised}, which repodata advertises, is missing or has other "
            "bytes; repair the channel"
        )
    store.write(
        store.location.key(subdir, f"{name}.sigs"),
        stored.body,
        content_type="application/json",
        cache_control="no-cache",
    )


def _ensure_noarch(store: S3Channel) -> None:
    """conda clients fetch noarch/repodata.json of every channel: an empty one where there is none."""
    empty = {"info": {"subdir": "noarch"}, "packages": {}, "packages.conda": {}, "repodata_version": 1}
    with contextlib.suppress(Conflict):  # it exists: leave it as it is
        store.write(
            store.location.key("noarch", REPODATA),
            (json.dumps(empty, indent=2, sort_keys=True) + "\n").encode(),
            content_type="application/json",
            if_absent=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    from tools.conda.attest import sigstore_signer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", type=Path, help="package files, or directories such as output/")
    parser.add_argument("--channel", required=True, help="where the channel lives: s3://<bucket>/<path>")
    parser.add_argument("--channel-url", required=True, help="the URL consumers add, e.g. https://<host>/<path>")
    parser.add_argument("--endpoint-url", help="an S3-compatible server's URL (R2, MinIO); default: AWS")
    parser.add_argument("--region", help="the bucket's region (default: boto3's configuration)")
    parser.add_argument(
        "--trust-config",
        type=Path,
        help="sign with the Sigstore instance this ClientTrustConfig JSON describes (default: public good)",
    )
    args = parser.parse_args(argv)
    try:
        location = S3Location.parse(args.channel)
        sign = sigstore_signer(args.trust_config, os.environ.get("SIGSTORE_IDENTITY_TOKEN"))
        store = S3Channel.connect(location, args.endpoint_url, args.region)
        report = publish(args.sources, store, args.channel_url, sign)
    except (ValueError, PublishError, AttestationFailed, ChannelStoreError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"published {len(report.published)} package(s) to {args.channel_url} "
        f"({len(report.unchanged)} already there unchanged)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
