"""One release, two channels, one signer: the stable-ABI package of the offline build is staged as the Hub release
(its variant taken from the package) and signed by the release workflow's identity, and the same package is
published to the S3 conda channel, attested by the same identity. Each side is checked by its own ecosystem's
verifier (kernelpin's Hub signature check with a `[tool.kernelpin.trust]` policy naming the workflow; conda-sigstore
for the channel), and the library a `pixi add` user gets is the Hub variant's, byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rattler.package_streaming import extract

from kernelpin.trust.policy import parse_policy
from kernelpin.trust.signature import verifier, verify_variant
from testkit.releasing import RELEASE_WORKFLOW, REPO_ID, release_identity, stage
from testkit.sigstore_root import SigstoreRoot
from tests.conda.conftest import (  # noqa: F401 (fixtures: the S3 server, the Sigstore instance, a channel)
    ChannelUnderTest,
    channel,
    conda_sigstore_verdict,
    s3,
    sigstore_instance,
)
from tests.conda.support import OfflineBuild
from tools.builder.config import BuildConfig


def test_one_build_signed_once_in_both_channels(
    offline_stable_build: OfflineBuild,
    channel: ChannelUnderTest,
    sigstore_instance: tuple[SigstoreRoot, Path],
    tmp_path: Path,
) -> None:
    version = BuildConfig.load().version
    signer = release_identity(version)
    root, trusted_root = sigstore_instance

    # The Hub side: staged from output/ as the release job does, each variant signed by the job's identity.
    release = stage([offline_stable_build.channel_dir], tmp_path / "release", REPO_ID)
    [variant] = sorted((release / "build").iterdir())
    assert variant.name.startswith("torch-stable-abi211-cpu-")
    root.sign_variant(variant, signer)
    policy = parse_policy(
        {
            "tool": {
                "kernelpin": {
                    "trust": {
                        "trusted-root": str(trusted_root),
                        "publishers": {
                            REPO_ID: {
                                "require-signatures": True,
                                "signers": [{"repository": REPO_ID, "workflow": RELEASE_WORKFLOW}],
                            }
                        },
                    }
                }
            }
        }
    )
    hub_verified = verify_variant(variant, REPO_ID, policy, verifier(policy, tmp_path))  # trusted-root: absolute
    assert hub_verified is not None and hub_verified.signer.identity == signer.san

    # The conda side: the same package published with the same signer, judged by conda-sigstore.
    package = offline_stable_build.package
    channel.publish([package], identity=signer)
    downloaded = channel.download("linux-64", package.name, tmp_path / "downloads")
    assert conda_sigstore_verdict(channel.url, downloaded, signer, trusted_root).status == "verified"

    # One build: every file of the Hub variant is in the installed conda package, byte for byte (the library too).
    unpacked = tmp_path / "unpacked"
    extract(downloaded, unpacked)
    [installed] = list(unpacked.glob("**/site-packages/img2gray"))
    digests = json.loads((variant / "metadata.json").read_text())["digest"]["files"]
    libraries = [name for name in digests if name.endswith(".so")]
    assert libraries
    for name in libraries:
        assert (
            hashlib.sha256((installed / name).read_bytes()).digest()
            == hashlib.sha256((variant / name).read_bytes()).digest()
        ), name
