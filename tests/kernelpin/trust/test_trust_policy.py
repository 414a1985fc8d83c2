"""The publisher policy's pure parts: the Hub's trusted-publisher gate, what the lock records of a signature,
signer continuity across upgrades, and the check `load` makes on a lock's recorded signers."""

from __future__ import annotations

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.trust.gate import Evidence, EvidenceKind, admit_publisher, enforce
from kernelpin.trust.policy import (
    GITHUB_ISSUER,
    UNSIGNED,
    LockedSignature,
    SignatureError,
    Signer,
    parse_policy,
    signer_changes,
)

RELEASE = Signer(
    GITHUB_ISSUER,
    "https://github.com/acme-corp/kernels/.github/workflows/release.yaml@refs/tags/v1.0.0",
    "https://github.com/acme-corp/kernels",
    "a" * 40,
    "refs/tags/v1.0.0",
)
NEXT_RELEASE = Signer(
    GITHUB_ISSUER,
    "https://github.com/acme-corp/kernels/.github/workflows/release.yaml@refs/tags/v1.1.0",
    "https://github.com/acme-corp/kernels",
    "b" * 40,
    "refs/tags/v1.1.0",
)
HIJACKER = Signer(
    GITHUB_ISSUER,
    "https://github.com/hijacker/kernels/.github/workflows/x.yaml@refs/heads/main",
    "https://github.com/hijacker/kernels",
    "c" * 40,
    "refs/heads/main",
)


def check_signer(policy, repo_id: str, variant: str, signer: Signer | None) -> None:
    """What `load` asks of a lock's record: the one decision (kernelpin.trust.gate)."""
    enforce(policy, repo_id, variant, Evidence(EvidenceKind.LOCK, signer))


def signed(signer: Signer) -> LockedSignature:
    return LockedSignature(signer, "0" * 64, 7, "1" * 64, 1_700_000_000)


def policy(trust: dict):
    return parse_policy({"tool": {"kernelpin": {"trust": trust}}})


def test_the_hub_gate_asks_only_for_publishers_the_policy_does_not_name() -> None:
    asked = []

    def hub(org: str) -> bool:
        asked.append(org)
        return org == "trusted"

    named = policy({"publishers": {"acme": {}}})
    admit_publisher(named, "acme/x", hub)
    admit_publisher(named, "kernels-community/x", hub)  # the built-in entry
    admit_publisher(named, "trusted/x", hub)
    assert asked == ["trusted"]
    with pytest.raises(KernelpinError) as refused:
        admit_publisher(named, "stranger/x", hub)
    assert str(refused.value) == (
        "stranger/x: untrusted publisher: the Hub does not mark stranger a trusted kernel publisher "
        "(trustedKernelPublisher) and pyproject.toml does not name it; if you trust it, add "
        '[tool.kernelpin.trust.publishers."stranger"] (or "stranger/x") to pyproject.toml'
    )
    admit_publisher(policy({"publishers": {"stranger/x": {}}}), "stranger/x", hub)


def test_a_locked_signature_round_trips_and_malformed_ones_are_refused() -> None:
    for record in (signed(RELEASE), LockedSignature(None), LockedSignature(Signer("https://x", "a@b.c"), "f" * 64)):
        assert LockedSignature.from_table(record.to_table(), "here", "fix") == record
    for bad in (
        "x",
        {"unsigned": False},
        {"issuer": "i", "identity": "x"},
        {**signed(RELEASE).to_table(), "log-index": -1},
        {**signed(RELEASE).to_table(), "bundle-sha256": "A" * 64},
        {**signed(RELEASE).to_table(), "who": "x"},
        {**signed(RELEASE).to_table(), "identity": 3},
        {"unsigned": True, "issuer": "x"},
    ):
        with pytest.raises(KernelpinError, match="^here: signature .*; fix$"):
            LockedSignature.from_table(bad, "here", "fix")


def test_signer_continuity() -> None:
    old = {"v-a": signed(RELEASE), "v-b": signed(RELEASE)}
    # The next release of the same workflow, on its own tag: the same signer.
    assert signer_changes("acme/x", old, {"v-a": signed(NEXT_RELEASE), "v-new": signed(NEXT_RELEASE)}, ()) == []
    [problem] = signer_changes("acme/x", old, {"v-a": signed(HIJACKER)}, ())
    assert problem == (
        "acme/x v-a: the new release is signed by https://github.com/hijacker/kernels/.github/workflows/x.yaml"
        "@refs/heads/main, but the locked one by https://github.com/acme-corp/kernels/.github/workflows/release.yaml: "
        "the publisher's signer changed. If you trust the new one, repeat the command with `--accept-signer "
        "acme/x=https://github.com/hijacker/kernels/.github/workflows/x.yaml`"
    )
    assert (
        signer_changes(
            "acme/x", old, {"v-a": signed(HIJACKER)}, {"https://github.com/hijacker/kernels/.github/workflows/x.yaml"}
        )
        == []
    )
    # Signed, then unsigned: refused the same way until accepted.
    [problem] = signer_changes("acme/x", old, {"v-a": LockedSignature(None)}, ())
    assert "the new release is unsigned" in problem and f"--accept-signer acme/x={UNSIGNED}`" in problem
    assert signer_changes("acme/x", old, {"v-a": LockedSignature(None)}, {UNSIGNED}) == []
    # A lock that recorded no signature (unsigned, or written before kernelpin verified) constrains nothing.
    assert signer_changes("acme/x", {"v-a": LockedSignature(None), "v-b": None}, {"v-a": signed(HIJACKER)}, ()) == []


def test_load_checks_recorded_signers_against_the_current_policy() -> None:
    trust = {
        "publishers": {
            "acme": {"signers": [{"repository": "acme-corp/kernels", "workflow": ".github/workflows/release.yaml"}]}
        }
    }
    check_signer(policy(trust), "acme/x", "v", RELEASE)
    check_signer(policy({}), "other/x", "v", None)  # unsigned, nothing requires a signature
    with pytest.raises(
        SignatureError,
        match="^acme/x v: locked as signed by https://github.com/hijacker/.*, which "
        r"\[tool.kernelpin.trust.publishers.\"acme\"\] does not allow",
    ):
        check_signer(policy(trust), "acme/x", "v", HIJACKER)
    with pytest.raises(SignatureError, match="^other/x v: locked unsigned, but .*require-signatures requires a sig"):
        check_signer(policy({"require-signatures": True}), "other/x", "v", None)
    with pytest.raises(SignatureError, match="kernelpin's built-in policy requires a signature"):
        check_signer(policy({}), "kernels-community/x", "v", None)


def test_the_documented_policy_means_what_docs_kernelpin_md_says() -> None:
    import tomllib
    from pathlib import Path

    from tests.markdown import code_blocks

    [block] = [
        b
        for b in code_blocks(Path(__file__).resolve().parents[3] / "docs" / "kernelpin.md")
        if (b.comment or "").startswith("policy:")
    ]
    documented = parse_policy({"tool": tomllib.loads(block.text)["tool"]})
    release = Signer(
        GITHUB_ISSUER,
        "https://github.com/acme/kernels/.github/workflows/release.yaml@refs/tags/v2.0.0",
        "https://github.com/acme/kernels",
    )
    check_signer(documented, "acme/other", "v", release)  # the organization's workflow, on any ref
    with pytest.raises(SignatureError):
        check_signer(documented, "acme/other", "v", None)  # the organization requires signatures
    with pytest.raises(SignatureError):
        check_signer(documented, "acme/img2gray", "v", release)  # its own entry replaces the organization's
    check_signer(documented, "acme/img2gray", "v", Signer("https://github.com/login/oauth", "release@acme.dev"))
    check_signer(
        documented,
        "acme/img2gray",
        "v",
        Signer(
            GITHUB_ISSUER,
            "https://github.com/acme/img2gray/.github/workflows/conda-packages.yml@refs/tags/v0.2.0",
            "https://github.com/acme/img2gray",
        ),
    )
    with pytest.raises(SignatureError, match="names signers"):
        check_signer(documented, "acme/img2gray", "v", None)  # an entry naming signers refuses what none signed
    community = Signer(
        GITHUB_ISSUER,
        "https://github.com/huggingface/kernels-community/.github/workflows/build-mac.yaml@refs/heads/main",
        "https://github.com/huggingface/kernels-community",
    )
    check_signer(documented, "kernels-community/x", "v", community)
    assert (
        documented.publisher("kernels-community/x").signers == parse_policy({}).publisher("kernels-community/x").signers
    )


SIGNED_TABLE = signed(RELEASE).to_table()
NEEDS = "needs issuer, identity and bundle-sha256 (64 lowercase hex digits)"
WHOLE = "log-index and integrated-time must be whole numbers"


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ("x", "must be a table"),
        ([SIGNED_TABLE], "must be a table"),
        ({"unsigned": False}, "has an unknown key 'unsigned'"),
        ({"unsigned": "true"}, "has an unknown key 'unsigned'"),
        ({**SIGNED_TABLE, "unsigned": True}, "has an unknown key 'unsigned'"),  # both signed and unsigned
        ({**SIGNED_TABLE, "who": "x"}, "has an unknown key 'who'"),
        (
            {**SIGNED_TABLE, "k" * 1000: "x"},
            f"has an unknown key {'k' * 40!r}",
        ),  # cut: the message stays one short line
        ({**SIGNED_TABLE, "ïdentity": "x"}, "has an unknown key 'ïdentity'"),
        ({**SIGNED_TABLE, "identity": 3}, "fields must be strings"),
        ({**SIGNED_TABLE, "identity": ["x"]}, "fields must be strings"),
        ({**SIGNED_TABLE, "source-ref": {"a": 1}}, "fields must be strings"),
        ({**SIGNED_TABLE, "issuer": "i" * 4096}, "fields must be strings"),  # huge: refused, not carried into messages
        ({**SIGNED_TABLE, "log-index": -1}, WHOLE),
        ({**SIGNED_TABLE, "log-index": 1 << 63}, WHOLE),
        ({**SIGNED_TABLE, "log-index": 10**400}, WHOLE),
        ({**SIGNED_TABLE, "log-index": True}, WHOLE),
        ({**SIGNED_TABLE, "log-index": 1.5}, WHOLE),
        ({**SIGNED_TABLE, "integrated-time": "1700000000"}, WHOLE),
        ({k: v for k, v in SIGNED_TABLE.items() if k != "issuer"}, NEEDS),
        ({k: v for k, v in SIGNED_TABLE.items() if k != "identity"}, NEEDS),
        ({k: v for k, v in SIGNED_TABLE.items() if k != "bundle-sha256"}, NEEDS),
        ({**SIGNED_TABLE, "issuer": ""}, NEEDS),
        ({**SIGNED_TABLE, "bundle-sha256": "A" * 64}, NEEDS),
        ({**SIGNED_TABLE, "bundle-sha256": "0X" + "a" * 62}, NEEDS),
        ({**SIGNED_TABLE, "bundle-sha256": "a" * 63}, NEEDS),
        ({**SIGNED_TABLE, "bundle-sha256": "a" * 65}, NEEDS),
        ({**SIGNED_TABLE, "bundle-sha256": "٠" * 64}, NEEDS),  # noqa: RUF001  # Arabic-Indic zeros: digits to str.isdigit, not hex
    ],
    ids=lambda value: None,
)
def test_a_hostile_lock_signature_table_is_one_error_naming_the_problem(table, problem) -> None:
    """What a hand-edited or hostile kernelpin.lock may hold where a variant's signature record is: each refused
    with its own message (the mutation run of issue 41 found 40 survivors in from_table on 9fbbe02)."""
    with pytest.raises(KernelpinError) as refused:
        LockedSignature.from_table(table, "kernelpin.lock [[kernel]] #1", "regenerate it")
    assert str(refused.value) == f"kernelpin.lock [[kernel]] #1: signature {problem}; regenerate it"


def test_a_lock_signature_table_at_its_limits_is_read() -> None:
    """The bounds are where they say: 0 and 2**63-1 are whole numbers a log can record; a 4095-character field
    (a long workflow path) is a field."""
    for fields in (
        {"log-index": 0, "integrated-time": 0},
        {"log-index": (1 << 63) - 1, "integrated-time": 1},
        {"identity": "https://github.com/a/b/" + "w" * (4095 - 24) + "@"},
    ):
        record = LockedSignature.from_table({**SIGNED_TABLE, **fields}, "here", "fix")
        assert record.to_table() == {**SIGNED_TABLE, **fields}
    assert LockedSignature.from_table({"unsigned": True}, "here", "fix") == LockedSignature(None)


def test_signer_continuity_is_per_variant_and_names_every_known_signer() -> None:
    """A variant keeps its own signer: the signer of another variant of the lock is not good enough for it (a
    signer of the CPU build cannot take over the CUDA build); a variant new to the lock may come from any of them."""
    other = Signer(
        GITHUB_ISSUER,
        "https://github.com/acme-corp/cuda/.github/workflows/cuda.yaml@refs/heads/main",
        "https://github.com/acme-corp/cuda",
    )
    old = {"cpu": signed(RELEASE), "cuda": signed(other)}
    [problem] = signer_changes("acme/x", old, {"cpu": signed(other), "cuda": signed(other)}, ())
    assert problem.startswith("acme/x cpu: the new release is signed by https://github.com/acme-corp/cuda/")
    assert signer_changes("acme/x", old, {"new": signed(other), "newer": signed(NEXT_RELEASE)}, ()) == []
    [problem] = signer_changes("acme/x", old, {"new": LockedSignature(None)}, ())
    assert problem == (
        "acme/x new: the new release is unsigned, but the locked one was signed by "
        "https://github.com/acme-corp/cuda/.github/workflows/cuda.yaml or "
        "https://github.com/acme-corp/kernels/.github/workflows/release.yaml; if you accept an unsigned release, "
        "repeat the command with `--accept-signer acme/x=unsigned`"
    )


def test_a_signer_of_another_issuer_names_it() -> None:
    """An e-mail identity means nothing without its issuer (anyone can have one at some OIDC provider)."""
    assert Signer("https://accounts.google.com", "release@acme.dev").describe() == (
        "release@acme.dev (issuer https://accounts.google.com)"
    )
    assert RELEASE.describe() == RELEASE.identity


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ({"tool": "x"}, r"^\[tool\] must be a table"),
        ({"tool": {"kernelpin": "x"}}, r"^\[tool\.kernelpin\] must be a table"),
        ({"tool": {"kernelpin": ["trust"]}}, r"^\[tool\.kernelpin\] must be a table"),
    ],
)
def test_a_tool_table_that_is_no_table_fails_closed(pyproject, message) -> None:
    """Failed before: a [tool] or [tool.kernelpin] that is no table read as no policy at all (the defaults),
    so a pyproject.toml that meant to name a policy locked under none (found by mutation: parse_policy 19)."""
    with pytest.raises(KernelpinError, match=message):
        parse_policy(pyproject)
