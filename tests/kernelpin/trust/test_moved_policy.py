"""Issue 48, finding 2: a kernel-status.toml move carries the policy entry of the repository the user named to the
destination as a floor (Policy.moved): a signature required of either is required, a signer must be one both
allow, and the move names no publisher the policy does not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelpin.errors import KernelpinError
from kernelpin.trust.gate import Evidence, EvidenceKind, admit_publisher, decide
from kernelpin.trust.policy import GITHUB_ISSUER, Signer, SignerRule, parse_policy

CPU = "torch213-cxx11-cpu-x86_64-linux"
OTHER_ISSUER = "https://accounts.google.com"


def policy(publishers: dict, required: bool = False):
    trust = {"publishers": publishers, "require-signatures": required}
    return parse_policy({"tool": {"kernelpin": {"trust": trust}}})


def github(repository: str, workflow: str = "release.yaml", ref: str = "refs/heads/main") -> Signer:
    identity = f"https://github.com/{repository}/.github/workflows/{workflow}@{ref}"
    return Signer(GITHUB_ISSUER, identity, f"https://github.com/{repository}", "a" * 40, ref)


def verdict(named, repo_id: str, signer: Signer | None) -> str:
    decision = decide(named, repo_id, CPU, Evidence(EvidenceKind.RELEASE, signer))
    return "admitted" if decision.admit else decision.cause


def test_an_unsigned_destination_of_an_origin_that_requires_signatures_is_refused() -> None:
    named = policy({"acme/x": {"require-signatures": True}})
    assert verdict(named, "acme/evil", None) == "admitted"  # by its own name: its own entry (none)
    floored = named.moved("acme/x", "acme/evil")
    assert verdict(floored, "acme/evil", None) == (
        'no signature (metadata.json.sigstore), but [tool.kernelpin.trust.publishers."acme/x"] (for acme/x, '
        "which moved to acme/evil) requires one"
    )
    assert verdict(floored, "acme/evil", github("anyone/at-all")) == "admitted"  # no signers named: any signer
    assert verdict(floored, "acme/other", None) == "admitted"  # only the destination is floored


def test_the_global_requirement_that_held_the_origin_holds_the_destination() -> None:
    named = policy({"acme/evil": {"require-signatures": False}}, required=True)
    assert verdict(named, "acme/evil", None) == "admitted"
    assert verdict(named.moved("acme/x", "acme/evil"), "acme/evil", None).startswith(
        "no signature (metadata.json.sigstore), but [tool.kernelpin.trust] require-signatures (for acme/x"
    )


def test_an_origin_that_requires_nothing_changes_nothing() -> None:
    named = policy({"acme/evil": {"signers": [{"repository": "acme/kernels"}]}})
    assert named.moved("acme/x", "acme/evil") is named


def test_signers_of_the_origin_bind_the_destination_and_both_lists_must_allow() -> None:
    named = policy(
        {
            "acme/x": {"signers": [{"repository": "acme/kernels"}, {"repository": "acme/other"}]},
            "acme/evil": {"signers": [{"repository": "acme/kernels", "ref": "refs/heads/main"}]},
        }
    )
    floored = named.moved("acme/x", "acme/evil")
    assert verdict(floored, "acme/evil", github("acme/kernels")) == "admitted"
    assert verdict(floored, "acme/evil", github("acme/kernels", ref="refs/heads/dev")).startswith(
        "signed by https://github.com/acme/kernels/.github/workflows/release.yaml@refs/heads/dev, which "
        '[tool.kernelpin.trust.publishers."acme/x"] (it names signers) (for acme/x, which moved to acme/evil) and '
        '[tool.kernelpin.trust.publishers."acme/evil"] does not allow'
    )
    assert (
        verdict(floored, "acme/evil", github("acme/other")) != "admitted"
    )  # the origin allows it, not the destination
    only_origin = policy({"acme/x": {"signers": [{"repository": "acme/kernels"}]}}).moved("acme/x", "acme/evil")
    assert verdict(only_origin, "acme/evil", github("evil/kernels")) != "admitted"
    assert verdict(only_origin, "acme/evil", github("acme/kernels")) == "admitted"


def test_entries_that_allow_no_common_signer_are_one_clear_refusal() -> None:
    named = policy(
        {
            "acme/x": {"signers": [{"repository": "acme/kernels"}]},
            "acme/evil": {"signers": [{"identity": "me@evil", "issuer": OTHER_ISSUER}]},
        }
    )
    with pytest.raises(
        KernelpinError, match=r"^acme/x has moved to acme/evil \(its kernel-status.toml says so\), but "
    ):
        named.moved("acme/x", "acme/evil")


def test_a_floor_names_no_publisher_the_policy_does_not() -> None:
    named = policy({"acme/x": {"require-signatures": True}})
    floored = named.moved("acme/x", "acme/evil")
    assert not floored.names("acme/evil") and floored.publisher("acme/evil") is not None
    with pytest.raises(KernelpinError, match="untrusted publisher"):  # the Hub's mark is still asked for
        admit_publisher(floored, "acme/evil", lambda org: False)
    both = policy({"acme/x": {"require-signatures": True}, "acme/evil": {}}).moved("acme/x", "acme/evil")
    assert both.names("acme/evil")


VALUES = st.sampled_from(["acme/kernels", "ACME/Kernels", "acme/other", "evil/x"])
WORKFLOWS = st.lists(st.sampled_from([".github/workflows/a.yaml", ".github/workflows/b.yaml"]), max_size=2, unique=True)
REFS = st.lists(st.sampled_from(["refs/heads/main", "refs/tags/v1"]), max_size=2, unique=True)
IDENTITIES = st.sampled_from(
    [
        "https://github.com/acme/kernels/.github/workflows/a.yaml@refs/heads/main",
        "https://github.com/acme/kernels/.github/workflows/b.yaml@refs/tags/v1",
        "https://github.com/acme/other/.github/workflows/a.yaml@refs/heads/main",
        "me@acme.dev",
    ]
)


@st.composite
def rules(draw) -> SignerRule:
    issuer = draw(st.sampled_from([GITHUB_ISSUER, OTHER_ISSUER]))
    if draw(st.booleans()):
        return SignerRule(issuer, draw(VALUES), tuple(draw(WORKFLOWS)), tuple(draw(REFS)), draw(st.none() | IDENTITIES))
    return SignerRule(issuer, identity=draw(IDENTITIES))


@st.composite
def signers(draw) -> Signer:
    identity = draw(IDENTITIES)
    source = draw(st.sampled_from(["https://github.com/acme/kernels", "https://github.com/acme/other", None]))
    return Signer(draw(st.sampled_from([GITHUB_ISSUER, OTHER_ISSUER])), identity, source, None, None)


@given(rules(), rules(), signers())
def test_the_meet_of_two_rules_allows_exactly_what_both_allow(first: SignerRule, second: SignerRule, signer) -> None:
    met = first.meet(second)
    both = first.allows(signer) and second.allows(signer)
    assert (met is not None and met.allows(signer)) == both


def test_a_remembered_signer_the_policy_no_longer_allows_is_refused_in_its_own_words() -> None:
    named = policy({"acme": {"signers": [{"repository": "acme/kernels"}]}})
    decision = decide(named, "acme/x", CPU, Evidence(EvidenceKind.REMEMBERED, github("evil/kernels")))
    assert (decision.admit, decision.cause, decision.fix) == (
        False,
        (
            "resolved before as signed by https://github.com/evil/kernels/.github/workflows/release.yaml@refs/heads/"
            'main, which [tool.kernelpin.trust.publishers."acme"] does not allow (github.com/acme/kernels any '
            "workflow @ any ref)"
        ),
        "add that signer to the entry if you trust it, or lock another release",
    )
