"""The one decision on trust (kernelpin.trust.gate) and the matching it rests on (kernelpin.trust.policy): pure,
fast, one test per finding of issue 41 that the decision itself settles. Each failed on 9c8fb3a (where the
decision was spread over the paths)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import pytest

from kernelpin import records
from kernelpin.errors import KernelpinError
from kernelpin.format.metadata import BuildMetadata
from kernelpin.format.ranges import Version
from kernelpin.hub.throttle import retry_after_seconds, wait_before_retry
from kernelpin.trust import gate
from kernelpin.trust.gate import (
    Decision,
    Evidence,
    EvidenceKind,
    Served,
    admit_publisher,
    decide,
    enforce,
)
from kernelpin.trust.policy import (
    GITHUB_ISSUER,
    KERNELS_COMMUNITY,
    LockedSignature,
    PolicyError,
    SignatureError,
    Signer,
    SignerRule,
    parse_policy,
)

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"


def policy(trust: dict):
    return parse_policy({"tool": {"kernelpin": {"trust": trust}}})


def github(
    repository: str,
    workflow: str = ".github/workflows/release.yaml",
    ref: str = "refs/heads/main",
    source: str | None = None,
) -> Signer:
    return Signer(
        GITHUB_ISSUER,
        f"https://github.com/{repository}/{workflow}@{ref}",
        f"https://github.com/{source or repository}",
        "a" * 40,
        ref,
    )


ACME = {
    "publishers": {
        "acme": {
            "signers": [
                {"repository": "acme/kernels", "workflow": ".github/workflows/release.yaml", "ref": "refs/heads/main"}
            ]
        }
    }
}


def test_a_lock_without_its_signature_record_is_refused_where_a_signature_is_required() -> None:
    """Finding 1: a variant whose signature record was dropped from the lock is not trusted by default; where
    nothing requires a signature there is nothing to refuse."""
    required = policy({"require-signatures": True})
    decision = decide(required, "acme/x", CPU, Evidence.recorded(None, EvidenceKind.LOCK))
    assert decision == Decision(
        False,
        "the lock records no signature check of this variant, but "
        "[tool.kernelpin.trust] require-signatures requires a signature",
        "run `kernelpin lock --upgrade-package acme/x` to verify and record it",
    )
    assert Evidence.recorded(None, EvidenceKind.LOCK) == Evidence(EvidenceKind.NO_RECORD)
    assert decide(policy({}), "acme/x", CPU, Evidence(EvidenceKind.NO_RECORD)) == Decision(True)
    assert decide(policy({}), "kernels-community/x", CPU, Evidence(EvidenceKind.NO_RECORD)).admit is False


def test_named_signers_refuse_what_none_of_them_signed() -> None:
    """Finding 2: an entry naming signers, without require-signatures, refuses an unsigned release or lock
    (9c8fb3a let it through everywhere); an explicit `require-signatures = false` beside signers is refused."""
    named = policy(ACME)
    for source in (EvidenceKind.RELEASE, EvidenceKind.LOCK, EvidenceKind.REMEMBERED, EvidenceKind.NO_RECORD):
        decision = decide(named, "acme/x", CPU, Evidence(source))
        assert not decision.admit and '[tool.kernelpin.trust.publishers."acme"] (it names signers)' in decision.cause
    assert decide(named, "acme/x", CPU, Evidence(EvidenceKind.LOCK, github("acme/kernels"))).admit
    assert named.requires_signature("other/x") == (False, "[tool.kernelpin.trust] require-signatures")
    with pytest.raises(PolicyError, match="names signers and require-signatures = false"):
        policy({"publishers": {"acme": {**ACME["publishers"]["acme"], "require-signatures": False}}})
    assert policy({"publishers": {"acme": {"require-signatures": False}}}).requires_signature("acme/x")[0] is False


def test_a_ref_rule_matches_the_whole_ref() -> None:
    """Finding 3: a branch named `feature@refs/heads/main` is not refs/heads/main (9c8fb3a split the identity at
    its last `@`)."""
    rule = SignerRule(repository="acme/kernels", refs=("refs/heads/main",))
    assert rule.allows(github("acme/kernels"))
    assert not rule.allows(github("acme/kernels", ref="refs/heads/feature@refs/heads/main"))
    with_workflow = SignerRule(
        repository="acme/kernels", workflows=(".github/workflows/release.yaml",), refs=("refs/heads/main",)
    )
    assert not with_workflow.allows(github("acme/kernels", ref="refs/heads/feature@refs/heads/main"))
    assert not with_workflow.allows(github("acme/kernels", workflow=".github/workflows/other.yaml"))
    assert not with_workflow.allows(github("acme/kernels", ref="refs/heads/mainline"))
    anywhere = SignerRule(repository="acme/kernels")
    assert anywhere.allows(github("acme/kernels", ref="refs/tags/v1.0.0"))
    assert not anywhere.allows(
        Signer(
            GITHUB_ISSUER, "https://github.com/acme/kernels/.github/workflows/x.yaml", "https://github.com/acme/kernels"
        )
    )  # no ref at all
    assert not anywhere.allows(
        Signer(GITHUB_ISSUER, "https://github.com/acme/kernels/x.yaml@main", "https://github.com/acme/kernels")
    )  # not a ref
    assert not anywhere.allows(github("acme/kernels-evil", source="acme/kernels"))  # identity of another repository
    assert not anywhere.allows(github("acme/kernels", source="acme/other"))  # run for another repository
    assert not anywhere.allows(
        Signer("https://other.issuer", github("acme/kernels").identity, "https://github.com/acme/kernels")
    )
    by_identity = SignerRule(issuer="https://accounts.google.com", identity="release@acme.dev")
    assert by_identity.allows(Signer("https://accounts.google.com", "release@acme.dev"))
    assert not by_identity.allows(Signer("https://accounts.google.com", "other@acme.dev"))
    assert not by_identity.allows(Signer(GITHUB_ISSUER, "release@acme.dev"))


def test_letter_case_does_not_escape_the_policy() -> None:
    """Finding 4: `Kernels-Community/activation` is kernels-community/activation on the Hub, and so for the policy
    (9c8fb3a found no entry and locked it unsigned with a warning)."""
    default = policy({})
    assert default.publisher("Kernels-Community/activation") is KERNELS_COMMUNITY
    assert not decide(default, "Kernels-Community/activation", CPU, Evidence(EvidenceKind.RELEASE)).admit
    mixed = policy({"publishers": {"Acme": {"require-signatures": True}}})
    assert mixed.publisher("ACME/x").name == "acme"
    assert not decide(mixed, "aCmE/x", CPU, Evidence(EvidenceKind.LOCK)).admit
    with pytest.raises(PolicyError, match='"acme" and "ACME" are one publisher'):
        policy({"publishers": {"acme": {}, "ACME": {}}})
    # The rule's repository and the certificate's, as GitHub compares them.
    assert SignerRule(repository="ACME/Kernels").allows(github("acme/kernels"))
    assert SignerRule(repository="acme/kernels").allows(github("Acme/Kernels"))
    asked = []
    assert admit_publisher(policy({"publishers": {"acme": {}}}), "ACME/x", asked.append) is False
    assert asked == []


def metadata(
    version: str = "1.0.0", backend: str | None = "cpu", variant: str | None = CPU, major: int | None = None
) -> BuildMetadata:
    semver = Version.parse(version) if version else None
    return BuildMetadata(
        {}, backend, None, major if major is not None else (semver.major if semver else None), semver, variant
    )


def test_signed_metadata_is_bound_to_where_it_is_served() -> None:
    """Finding 5: a signed 1.0.0 served as v2.0.0 (a rollback), a CUDA build served as the CPU variant, another
    variant's metadata, a major that is not the branch's: refused (9c8fb3a never compared them)."""
    named, signer = policy(ACME), github("acme/kernels")
    tag_1_0_0 = Served(Version.parse("1.0.0"))

    def served_as(meta: BuildMetadata, variant: str = CPU, served: Served = tag_1_0_0) -> str:
        decision = decide(named, "acme/x", variant, Evidence(EvidenceKind.RELEASE, signer), meta, served)
        return decision.cause if not decision.admit else "admitted"

    assert served_as(metadata()) == "admitted"
    assert served_as(metadata(), served=Served(Version.parse("1.0.0+build"))) == "admitted"
    assert served_as(metadata(), served=Served()) == "admitted"  # an untagged commit: nothing to compare
    assert served_as(metadata(), served=Served(Version.parse("2.0.0"))) == (
        "the signed metadata.json is version 1.0.0, served as 2.0.0"
    )
    assert served_as(metadata(), served=Served(Version.parse("1.0.1"))) == (
        "the signed metadata.json is version 1.0.0, served as 1.0.1"
    )
    assert served_as(metadata(version="", major=1), served=Served(Version.parse("2.0.0"))) == (
        "the signed metadata.json is major version 1, served as 2.0.0"
    )
    assert served_as(metadata(version="", major=2), served=Served(Version.parse("2.5.0"))) == "admitted"
    assert served_as(metadata(), served=Served(None, 2)) == (
        "the signed metadata.json is major version 1, served as the branch v2"
    )
    assert served_as(metadata(), served=Served(None, 1)) == "admitted"
    assert served_as(metadata(backend="cuda", variant=None)) == (
        f"the signed metadata.json is a cuda build, served as the cpu variant {CPU}"
    )
    assert served_as(metadata(variant=CUDA)) == f"the signed metadata.json is variant {CUDA}'s, served as {CPU}"
    assert served_as(metadata(backend="cann", variant=None), "torch-npu") == "admitted"
    assert served_as(metadata(backend="cuda", variant=None), "torch-universal") == "admitted"
    assert served_as(metadata(backend="cuda", variant=None), "not-a-variant-name") == "admitted"
    assert served_as(metadata(backend=None, variant=None), CUDA) == "admitted"
    # An SDK for no one backend records any (issue 52: the gate raised AttributeError on its backend None).
    assert served_as(metadata(backend="cuda", variant=None), "sdk") == "admitted"
    assert served_as(metadata(backend="cuda", variant=None), "sdk-cpu") == (
        "the signed metadata.json is a cuda build, served as the cpu variant sdk-cpu"
    )
    with pytest.raises(
        SignatureError,
        match=r"^acme/x torch-cpu: the signed metadata.json is a cuda build, served "
        r"as the cpu variant torch-cpu; do not use this release \(signed bytes served as another "
        r"release or build\); tell the publisher$",
    ):
        enforce(
            named, "acme/x", "torch-cpu", Evidence(EvidenceKind.RELEASE, signer), metadata(backend="cuda", variant=None)
        )


def test_retry_after_in_unicode_digits_is_no_wait_asked_for() -> None:
    """Finding 6: `Retry-After: ²` is not a number of seconds (`"²".isdigit()` is true; int() refused it with a
    ValueError on every answer, a 200 included)."""
    for text in ("²", "١٢", "𝟗"):  # noqa: RUF001  # digits to str.isdigit, not to int(): on purpose
        assert retry_after_seconds(text, 0.0) is None
        assert wait_before_retry(200, text, 0, 100.0, 0.0, "u") is None
        assert wait_before_retry(429, text, 0, 100.0, 0.0, "u") == 1.0
    assert retry_after_seconds(" 7 ", 0.0) == 7.0


def test_each_source_and_refusal_says_what_it_is() -> None:
    """The causes and fixes are the path's own: a lockless call never hears of a lock (issue 41, as a new user)."""
    required = policy({"require-signatures": True})
    where = "[tool.kernelpin.trust] require-signatures"
    assert decide(required, "acme/x", CPU, Evidence(EvidenceKind.RELEASE)) == Decision(
        False,
        f"no signature (metadata.json.sigstore), but {where} requires one",
        "ask the publisher to sign the release, or pin a signed one",
    )
    assert decide(required, "acme/x", CPU, Evidence(EvidenceKind.LOCK)) == Decision(
        False,
        f"locked unsigned, but {where} requires a signature",
        "ask the publisher for a signed release and run `kernelpin lock --upgrade`",
    )
    remembered = decide(required, "acme/x", CPU, Evidence(EvidenceKind.REMEMBERED))
    assert remembered == Decision(
        False,
        f"resolved unsigned before (get_kernel remembers it), but {where} requires a signature",
        "call get_kernel online for a signed release, or ask the publisher to sign it",
    )
    assert decide(policy({}), "acme/x", CPU, Evidence(EvidenceKind.LOCK)) == Decision(True, notice="unsigned")
    local = decide(required, "acme/x", CPU, Evidence(EvidenceKind.LOCAL))
    assert local.admit and local.notice == "a local build (LOCAL_KERNELS): not signed, not checked against the policy"
    named, hijacker = policy(ACME), github("hijacker/kernels")
    rules = "github.com/acme/kernels .github/workflows/release.yaml @ refs/heads/main"
    entry = '[tool.kernelpin.trust.publishers."acme"]'
    assert decide(named, "acme/x", CPU, Evidence(EvidenceKind.RELEASE, hijacker)) == Decision(
        False,
        f"signed by {hijacker.identity}, which {entry} does not allow ({rules})",
        "do not use this release unless you trust that signer: then add it to the policy's signers",
    )
    assert decide(named, "acme/x", CPU, Evidence(EvidenceKind.LOCK, hijacker)) == Decision(
        False,
        f"locked as signed by {hijacker.identity}, which {entry} does not allow ({rules})",
        "add that signer to the entry if you trust it, or lock another release",
    )
    assert decide(named, "acme/x", CPU, Evidence(EvidenceKind.REMEMBERED, hijacker)).cause.startswith(
        "resolved before as signed"
    )
    other_issuer = Signer("https://accounts.google.com", "x@y.z")
    assert decide(named, "acme/x", CPU, Evidence(EvidenceKind.RELEASE, other_issuer)).cause.startswith(
        f"signed through issuer https://accounts.google.com, not {GITHUB_ISSUER}, which {entry}"
    )
    # A publisher with no signers accepts any valid signature; one the policy does not name too.
    assert decide(
        policy({"publishers": {"acme": {}}}), "acme/x", CPU, Evidence(EvidenceKind.LOCK, hijacker)
    ) == Decision(True)
    assert decide(policy({}), "stranger/x", CPU, Evidence(EvidenceKind.LOCK, hijacker)) == Decision(True)
    assert Evidence.recorded(LockedSignature(hijacker, "0" * 64), EvidenceKind.REMEMBERED) == Evidence(
        EvidenceKind.REMEMBERED, hijacker
    )
    assert Evidence.recorded(LockedSignature(None), EvidenceKind.LOCK) == Evidence(EvidenceKind.LOCK)
    with pytest.raises(SignatureError, match="^acme/x v: locked unsigned"):
        enforce(required, "acme/x", "v", Evidence(EvidenceKind.LOCK))
    assert enforce(policy({}), "acme/x", "v", Evidence(EvidenceKind.LOCK)) == Decision(True, notice="unsigned")


def test_a_kind_of_evidence_without_a_rule_is_refused_in_words_of_its_own(monkeypatch) -> None:
    """Issue 52: a kind added to EvidenceKind without its branch in the gate is refused, naming the kind (the
    string if-chains gave it another kind's words: an unknown kind without a signer got the missing-record
    refusal, or an admission where nothing required a signature)."""
    extended = Enum("EvidenceKind", [(kind.name, kind.value) for kind in EvidenceKind] + [("MIRROR", "mirror")])
    monkeypatch.setattr(gate, "EvidenceKind", extended)
    refusal = Decision(
        False,
        "the trust gate has no rule for evidence of kind 'mirror'",
        "report this to kernelpin's maintainers: a kind of evidence was added without its rule",
    )
    for trust in ({}, {"require-signatures": True}, ACME):
        for signer in (None, github("acme/kernels")):
            assert decide(policy(trust), "acme/x", CPU, Evidence(extended.MIRROR, signer)) == refusal
    with pytest.raises(SignatureError, match="^acme/x v: the trust gate has no rule for evidence of kind 'mirror'"):
        enforce(policy({}), "acme/x", "v", Evidence(extended.MIRROR))
    # The kinds the gate knows still take their own branches.
    assert decide(policy({}), "acme/x", CPU, Evidence(extended.LOCK)) == Decision(True, notice="unsigned")


def test_mypy_reports_a_kind_of_evidence_the_gate_does_not_handle(tmp_path: Path) -> None:
    """Issue 52: the gate's matches are exhaustive, so a kind added without its branch fails the type check
    (.ci/run's mypy) before it can reach a user; the gate as it is checks clean."""
    mypy_api = pytest.importorskip("mypy.api", reason="mypy (requirements/dev.txt) is not installed")
    source = Path(gate.__file__).read_text(encoding="utf-8")
    known = '    LOCAL = "local"'
    assert source.count(known) == 1
    extended = tmp_path / "gate_with_a_new_kind.py"
    extended.write_text(source.replace(known, f'{known}\n    MIRROR = "mirror"'), encoding="utf-8")
    root = Path(gate.__file__).resolve().parents[2]  # kernelpin/trust/gate.py -> the repository
    # The project's configuration, on the files named only (the gate, its extended copy and kernelpin.records, which
    # makes Evidence a dataclass to mypy): quick.
    options = ["--config-file", str(root / "pyproject.toml"), "--follow-imports=skip"]
    report, errors, status = mypy_api.run(
        [*options, "--cache-dir", str(tmp_path / "cache"), str(extended), gate.__file__, records.__file__]
    )
    assert status == 1, report + errors
    found = [line for line in report.splitlines() if ": error: " in line]
    assert len(found) == 1 and found[0].startswith(str(extended)), report
    assert 'Argument 1 to "_no_rule_for" has incompatible type "Literal[EvidenceKind.MIRROR]"' in found[0], report


def test_evidence_of_no_record_or_a_local_build_has_no_signer() -> None:
    """A signer on NO_RECORD or LOCAL evidence contradicts its kind (before issue 52 a NO_RECORD signer was judged
    in a lock's or a remembered resolution's words)."""
    for kind in (EvidenceKind.NO_RECORD, EvidenceKind.LOCAL):
        with pytest.raises(ValueError, match=f"evidence of kind '{kind.value}' has no signer"):
            Evidence(kind, github("acme/kernels"))


def test_the_publisher_gate_for_lock_and_for_get_kernel() -> None:
    """Finding 7's half in the decision: the caller's trust, the policy, else the Hub's mark (offline: as recorded)."""
    asked: list[str] = []

    def hub(org: str) -> bool:
        asked.append(org)
        return org == "marked"

    default = policy({})
    assert admit_publisher(default, "marked/x", hub) is True
    assert admit_publisher(default, "stranger/x", hub, caller_trusts=True) is False
    assert admit_publisher(default, "kernels-community/x", hub, caller_trusts=False) is False
    assert asked == ["marked"]
    with pytest.raises(KernelpinError, match=r"^stranger/x: untrusted publisher: the Hub does not mark stranger"):
        admit_publisher(default, "stranger/x", hub)
    with pytest.raises(
        KernelpinError,
        match=r"^stranger/x: stranger is not a trusted kernel publisher on "
        r"http://h; if you trust it, pass trust_remote_code=True \(or trust_remote_code=\['stranger/x'\]\)$",
    ):
        admit_publisher(default, "stranger/x", hub, caller_trusts=False, endpoint="http://h")


def test_kernels_community_rs_signs_for_kernels_community() -> None:
    """kernels 0.19's DEFAULT_POLICY accepts huggingface/kernels-community-rs's build workflow on main
    (kernels/_internals/verify.py:61-81); the built-in kernels-community entry does too, and nothing else of it."""
    default = policy({})
    rs = github("huggingface/kernels-community-rs", ".github/workflows/build.yaml")
    assert decide(default, "kernels-community/activation", CPU, Evidence(EvidenceKind.RELEASE, rs)).admit
    for other in (
        github("huggingface/kernels-community-rs", ".github/workflows/build-mac.yaml"),
        github("huggingface/kernels-community-rs", ".github/workflows/build.yaml", "refs/heads/dev"),
        github("huggingface/kernels-community-rs", ".github/workflows/build.yaml", source="huggingface/other"),
    ):
        assert not decide(default, "kernels-community/activation", CPU, Evidence(EvidenceKind.RELEASE, other)).admit
    for workflow in ("build", "build-mac", "build-windows", "sign-old-builds"):
        assert decide(
            default,
            "kernels-community/x",
            CPU,
            Evidence(
                EvidenceKind.RELEASE, github("huggingface/kernels-community", f".github/workflows/{workflow}.yaml")
            ),
        ).admit


@pytest.mark.parametrize(
    ("trust", "message"),
    [
        ("x", "[tool.kernelpin.trust] must be a table"),
        ({"who": 1}, "[tool.kernelpin.trust]: unknown key 'who' (it has publishers, require-signatures, trusted-root)"),
        ({"require-signatures": "yes"}, "[tool.kernelpin.trust]: require-signatures must be true or false"),
        ({"trusted-root": ""}, "[tool.kernelpin.trust]: trusted-root is the path of a Sigstore trusted_root.json"),
        ({"trusted-root": 3}, "[tool.kernelpin.trust]: trusted-root is the path of a Sigstore trusted_root.json"),
        (
            {"publishers": []},
            (
                "[tool.kernelpin.trust]: publishers must be a table of organizations and repositories; "
                "for example\n[tool.kernelpin.trust.publishers.acme]"
            ),
        ),
        ({"publishers": {"a": 1}}, '[tool.kernelpin.trust.publishers."a"]: must be a table; for example'),
        (
            {"publishers": {"a": {"x": 1}}},
            "[tool.kernelpin.trust.publishers.\"a\"]: unknown key 'x' (a publisher has signers, require-signatures)",
        ),
        (
            {"publishers": {"a/b/c": {}}},
            (
                '[tool.kernelpin.trust.publishers."a/b/c"]: a publisher is an organization '
                '("acme") or a repository ("acme/img2gray")'
            ),
        ),
        ({"publishers": {"a/": {}}}, '[tool.kernelpin.trust.publishers."a/"]: a publisher is an organization'),
        (
            {"publishers": {"a": {"signers": {}}}},
            '[tool.kernelpin.trust.publishers."a"]: signers must be a list of tables; for example',
        ),
        (
            {"publishers": {"a": {"require-signatures": 1}}},
            '[tool.kernelpin.trust.publishers."a"]: require-signatures must be true or false',
        ),
        (
            {"publishers": {"a": {"signers": ["x"]}}},
            '[tool.kernelpin.trust.publishers."a"] signer #1: a signer is a table; for example',
        ),
        (
            {"publishers": {"a": {"signers": [{"who": 1}]}}},
            (
                '[tool.kernelpin.trust.publishers."a"] signer #1: unknown '
                "key 'who' (a signer has issuer, repository, workflow, ref, "
                "identity)"
            ),
        ),
        ({"publishers": {"a": {"signers": [{"issuer": ["a", "b"], "identity": "x"}]}}}, "signer #1: issuer is one URL"),
        (
            {"publishers": {"a": {"signers": [{"issuer": []}]}}},
            "signer #1: issuer must be a string or a list of strings",
        ),
        (
            {"publishers": {"a": {"signers": [{"ref": "refs/heads/main"}]}}},
            'signer #1: a signer names a GitHub repository (`repository = "owner/name"`) or an exact identity',
        ),
        (
            {"publishers": {"a": {"signers": [{"repository": "a"}]}}},
            'signer #1: repository is a GitHub owner/name, such as "acme/kernels"',
        ),
        (
            {"publishers": {"a": {"signers": [{"repository": "https://github.com/a"}]}}},
            "signer #1: repository is a GitHub owner",
        ),
        (
            {"publishers": {"a": {"signers": [{"repository": "https:/acme"}]}}},
            "signer #1: repository is a GitHub owner",
        ),
        (
            {"publishers": {"a": {"require-signatures": False, "signers": [{"repository": "a/b"}]}}},
            (
                '[tool.kernelpin.trust.publishers."a"]: names signers and require-signatures = false, but an entry that names '
                "its signers refuses what none of them signed; drop require-signatures (or the signers)"
            ),
        ),
        (
            {"publishers": {"Acme": {}, "acme": {}}},
            (
                '[tool.kernelpin.trust.publishers]: "Acme" and "acme" are one publisher '
                "(the Hub compares names without case); keep one entry"
            ),
        ),
        ({"publishers": {"a": {"signers": [{"repository": 3}]}}}, "signer #1: repository is a GitHub owner"),
        (
            {"publishers": {"a": {"signers": [{"identity": 3}]}}},
            "signer #1: identity is a string (the certificate's e-mail or URI)",
        ),
        (
            {"publishers": {"a": {"signers": [{"identity": "x", "workflow": "w"}]}}},
            "signer #1: workflow and ref need the repository they belong to",
        ),
        (
            {"publishers": {"a": {"signers": [{"identity": "x", "ref": "r"}]}}},
            "signer #1: workflow and ref need the repository",
        ),
        (
            {"publishers": {"a": {"signers": [{"repository": "a/b", "workflow": ["w", ""]}]}}},
            "signer #1: workflow must be a string or a list of strings; for example",
        ),
        ({"publishers": {"a": {"signers": [{"repository": "a/b", "ref": 3}]}}}, "signer #1: ref must be a string or"),
    ],
)
def test_a_malformed_policy_is_one_error_naming_the_key(trust, message) -> None:
    """Signer-rule and publisher parsing fail closed, each with its own message (the mutation run of issue 41 found
    28 survivors in signer-rule parsing on 9fbbe02: messages and conditions no test held)."""
    with pytest.raises(PolicyError) as refused:
        parse_policy({"tool": {"kernelpin": {"trust": trust}}})
    text = str(refused.value)
    assert text.startswith(message if message.startswith("[") else '[tool.kernelpin.trust.publishers."a"] ' + message)


def test_a_well_formed_policy_means_what_it_says() -> None:
    parsed = policy(
        {
            "require-signatures": True,
            "trusted-root": "root.json",
            "publishers": {
                "a/B": {
                    "signers": [
                        {"repository": "a/b", "workflow": "w.yaml", "ref": ["refs/heads/main", "refs/tags/v1"]},
                        {"issuer": "https://i", "identity": "me@x"},
                    ]
                }
            },
        }
    )
    assert (parsed.require_signatures, parsed.trusted_root) == (True, "root.json")
    entry = parsed.publisher("A/b")
    assert entry.name == "a/b" and entry.require_signatures is None and not entry.builtin
    assert entry.signers == (
        SignerRule(GITHUB_ISSUER, "a/b", ("w.yaml",), ("refs/heads/main", "refs/tags/v1")),
        SignerRule("https://i", None, (), (), "me@x"),
    )
    assert [rule.describe() for rule in entry.signers] == [
        "github.com/a/b w.yaml @ refs/heads/main|refs/tags/v1",
        "me@x (issuer https://i)",
    ]
    assert SignerRule(repository="a/b").describe() == "github.com/a/b any workflow @ any ref"
    assert entry.where == '[tool.kernelpin.trust.publishers."a/b"]' and KERNELS_COMMUNITY.where == (
        "kernelpin's built-in policy"
    )
    assert parse_policy({}) == parse_policy({"tool": {"kernelpin": {}}}) == policy({})
    assert parsed.publisher("a/other") is None and parsed.publisher("kernels-community/x") is KERNELS_COMMUNITY


def test_refusals_name_every_rule_and_issuer_and_enforce_binds_what_is_served() -> None:
    """What a refused user reads lists each allowed signer (and issuer) apart; enforce passes on where the bytes
    are served (a signed 1.0.0 served as 1.0.1 is refused through it as through decide)."""
    two = policy(
        {
            "publishers": {
                "acme": {
                    "signers": [
                        {"repository": "acme/kernels", "workflow": ["a.yaml", "b.yaml"]},
                        {"issuer": "https://accounts.google.com", "identity": "release@acme.dev"},
                    ]
                }
            }
        }
    )
    decision = decide(two, "acme/x", CPU, Evidence(EvidenceKind.RELEASE, github("hijacker/kernels")))
    assert decision.admit is False and decision.cause == (
        "signed by https://github.com/hijacker/kernels/.github/workflows/release.yaml@refs/heads/main, which "
        '[tool.kernelpin.trust.publishers."acme"] does not allow (github.com/acme/kernels a.yaml|'
        "b.yaml @ any ref; release@acme.dev (issuer https://accounts.google.com))"
    )
    gitlab = Signer("https://gitlab.com", "https://gitlab.com/acme/kernels//.gitlab-ci.yml@refs/heads/main")
    assert decide(two, "acme/x", CPU, Evidence(EvidenceKind.LOCK, gitlab)).cause.startswith(
        "locked as signed through issuer https://gitlab.com, not https://accounts.google.com or "
        "https://token.actions.githubusercontent.com, which"
    )
    named, signer = policy(ACME), github("acme/kernels")
    with pytest.raises(SignatureError, match="the signed metadata.json is version 1.0.0, served as 1.0.1"):
        enforce(
            named, "acme/x", CPU, Evidence(EvidenceKind.RELEASE, signer), metadata(), Served(Version.parse("1.0.1"))
        )
    decision = decide(named, "acme/x", CPU, Evidence(EvidenceKind.RELEASE, signer), metadata(variant="v" * 500))
    assert (
        decision.admit is False
        and decision.cause == f"the signed metadata.json is variant {'v' * 80}'s, served as {CPU}"
    )


def test_a_repository_id_of_more_parts_falls_to_its_organization() -> None:
    """An id such as acme/one/x (no Hub id has two slashes: a hostile one) is its organization's, never taken for
    the repository entry acme/one, nor its organization for acme/one at the Hub's gate."""
    parsed = policy({"publishers": {"acme": {}, "acme/one": {"require-signatures": True}}})
    assert parsed.publisher("acme/one/x").name == "acme" and parsed.publisher("acme/one").name == "acme/one"
    asked: list[str] = []
    assert admit_publisher(policy({}), "marked/one/x", lambda org: asked.append(org) or org == "marked") is True
    assert asked == ["marked"]
    with pytest.raises(KernelpinError, match=r"^stranger/x: stranger is not a trusted kernel publisher on the Hub; "):
        admit_publisher(policy({}), "stranger/x", lambda org: False, caller_trusts=False)
