"""Issue 48, finding 1: a signed SDK variant (`sdk`, `sdk-cpython-...`: no backend in its name) is judged, not
crashed on. The gate compared the signed metadata.json's backend with the variant name's, which an SDK without
a backend does not have (AttributeError on d72b531, in `lock` and in get_kernel's choice of an SDK build)."""

from __future__ import annotations

import pytest

from kernelpin.format.metadata import BuildMetadata
from kernelpin.format.ranges import Version
from kernelpin.trust.gate import Evidence, EvidenceKind, Served, decide
from kernelpin.trust.policy import GITHUB_ISSUER, Signer, parse_policy

SIGNER = Signer(
    GITHUB_ISSUER,
    "https://github.com/acme/kernels/.github/workflows/release.yaml@refs/heads/main",
    "https://github.com/acme/kernels",
    "a" * 40,
    "refs/heads/main",
)
NO_SIGNERS = parse_policy({"tool": {"kernelpin": {"trust": {"publishers": {"acme": {"require-signatures": True}}}}}})


@pytest.mark.parametrize("variant", ["sdk", "sdk-cpython-3.12-abi3-x86_64-linux"])
@pytest.mark.parametrize("backend", ["cuda", "cpu", None])
def test_a_signed_sdk_variant_without_a_backend_is_admitted(variant: str, backend: str | None) -> None:
    metadata = BuildMetadata({}, backend, None, 1, Version.parse("1.0.0"), variant)
    decision = decide(
        NO_SIGNERS, "acme/x", variant, Evidence(EvidenceKind.RELEASE, SIGNER), metadata, Served(Version.parse("1.0.0"))
    )
    assert decision.admit, decision.cause


def test_a_signed_sdk_variant_with_a_backend_is_still_bound_to_it() -> None:
    metadata = BuildMetadata({}, "cuda", None, 1, Version.parse("1.0.0"), None)
    decision = decide(NO_SIGNERS, "acme/x", "sdk-cpu", Evidence(EvidenceKind.RELEASE, SIGNER), metadata, Served())
    assert not decision.admit
    assert decision.cause == "the signed metadata.json is a cuda build, served as the cpu variant sdk-cpu"
