"""The one decision on trust: may this variant of this release of this repository run (or be locked)?

Every path asks it, with what that path knows (its evidence): `lock` and `get_kernel` online with the signer of
the bundle they just verified (or its absence) and the signed metadata.json; a relock, `sync`, `verify
--signatures`, `load` and `get_kernel` offline with what the lock (or get_kernel's remembered resolution)
recorded, or that nothing was recorded; `has_kernel` as `get_kernel` does; LOCAL_KERNELS with a build on disk
that nothing signed; `verify-conda` with the signer of a conda package's CEP 27 attestation (or its absence). A path with no evidence passes NO_RECORD; none skips the call. Pure: no I/O, no sigstore
(the cryptography is kernelpin.trust.signature's: it hands over the signer of a bundle that verified).

The publisher gate of `kernels` (the Hub's trusted mark, or the caller's `trust_remote_code`) is here too:
`admit_publisher`.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Literal, Never, assert_never

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import SIGNATURE
from kernelpin.format.lockfile import LockedCapabilityBuild
from kernelpin.format.metadata import BuildMetadata
from kernelpin.format.ranges import Version
from kernelpin.format.signer import LockedSignature, Signer
from kernelpin.format.variant import Variant
from kernelpin.records import record
from kernelpin.trust.policy import TABLE, Policy, SignatureError


class EvidenceKind(Enum):
    """Where a path's evidence of a signature comes from. Every branch of the gate matches on it exhaustively
    (mypy reports a kind a branch does not handle)."""

    RELEASE = "release"  # the release's own files: its bundle verified now (or by this user's receipt), or none there
    LOCK = "lock"  # what kernelpin.lock records (`lock` verified it)
    REMEMBERED = (
        "remembered"  # what get_kernel recorded when it resolved the release before (kernelpin.store.resolutions)
    )
    NO_RECORD = "no record"  # a lock entry without its signature record: nothing says what was checked
    LOCAL = "local"  # a build on disk named by LOCAL_KERNELS: nothing signed it, the user named it
    CONDA = "conda"  # a conda package of the release: its CEP 27 attestation verified now, or none served


# The kinds that can carry a signer: evidence of a release's signature, read now or recorded.
_Signed = Literal[EvidenceKind.RELEASE, EvidenceKind.LOCK, EvidenceKind.REMEMBERED, EvidenceKind.CONDA]
# The kinds a policy that requires signatures refuses without a signer (LOCAL is admitted before any policy).
_Checked = Literal[
    EvidenceKind.RELEASE, EvidenceKind.LOCK, EvidenceKind.REMEMBERED, EvidenceKind.NO_RECORD, EvidenceKind.CONDA
]


@record
class Evidence:
    """What a path knows of one variant's signature: the signer (None: unsigned, or not known) and its kind."""

    kind: EvidenceKind
    signer: Signer | None = None

    def __post_init__(self) -> None:
        # A record that is missing, or a build nothing signed, has no signer: one would be checked as a LOCK's.
        if self.signer is not None and self.kind in (EvidenceKind.NO_RECORD, EvidenceKind.LOCAL):
            raise ValueError(f"evidence of kind {self.kind.value!r} has no signer")

    @classmethod
    def recorded(
        cls, record: LockedSignature | None, kind: Literal[EvidenceKind.LOCK, EvidenceKind.REMEMBERED]
    ) -> Evidence:
        """What a lock (or a remembered resolution, `kind`) says of a variant: NO_RECORD when it has no record."""
        return cls(EvidenceKind.NO_RECORD) if record is None else cls(kind, record.signer)


@record
class Served:
    """What signed bytes are served as: the release's version (its tag; None without one) and the major version
    the requirement asked for (the branch vN; None for a range or a revision)."""

    version: Version | None = None
    major: int | None = None


@record
class Decision:
    """Admit or refuse; a refusal's cause and fix, an admission's notice (None: nothing to tell)."""

    admit: bool
    cause: str = ""
    fix: str = ""
    notice: str | None = None


def decide(
    policy: Policy,
    repo_id: str,
    variant: str,
    evidence: Evidence,
    metadata: BuildMetadata | None = None,
    served: Served | None = None,
) -> Decision:
    """The policy's verdict on one variant: a signer it allows (whose signed metadata.json says it is what it is
    served as), or no signature where none is required (neither `require-signatures` nor named signers)."""
    kind = evidence.kind
    match kind:
        case EvidenceKind.LOCAL:
            return Decision(True, notice="a local build (LOCAL_KERNELS): not signed, not checked against the policy")
        case EvidenceKind.NO_RECORD:
            return _unsigned(policy, repo_id, kind, notice=None)
        case EvidenceKind.RELEASE | EvidenceKind.LOCK | EvidenceKind.REMEMBERED | EvidenceKind.CONDA:
            if evidence.signer is None:
                return _unsigned(policy, repo_id, kind, notice="unsigned")
            return _signed(policy, repo_id, variant, kind, evidence.signer, metadata, served or Served())
        case _:
            return _no_rule_for(kind)


def _no_rule_for(kind: Never) -> Decision:
    """A kind no branch of `decide` handles. Its parameter is Never, as `typing.assert_never`'s is, so mypy reports
    the call until a branch handles the kind; at run time the variant is refused in words of its own (a trust
    decision fails closed, with the one-line error every refusal has, not an AssertionError)."""
    return Decision(
        False,
        f"the trust gate has no rule for evidence of kind {getattr(kind, 'value', kind)!r}",
        "report this to kernelpin's maintainers: a kind of evidence was added without its rule",
    )


def _unsigned(policy: Policy, repo_id: str, kind: _Checked, notice: str | None) -> Decision:
    """No signer: admitted (with `notice`) where the policy requires none, refused in the words of `kind`."""
    required, where = policy.requires_signature(repo_id)
    if not required:
        return Decision(True, notice=notice)
    match kind:
        case EvidenceKind.RELEASE:
            return Decision(
                False,
                f"no signature ({SIGNATURE}), but {where} requires one",
                "ask the publisher to sign the release, or pin a signed one",
            )
        case EvidenceKind.LOCK:
            return Decision(
                False,
                f"locked unsigned, but {where} requires a signature",
                "ask the publisher for a signed release and run `kernelpin lock --upgrade`",
            )
        case EvidenceKind.REMEMBERED:
            return Decision(
                False,
                f"resolved unsigned before (get_kernel remembers it), but {where} requires a signature",
                "call get_kernel online for a signed release, or ask the publisher to sign it",
            )
        case EvidenceKind.NO_RECORD:
            return Decision(
                False,
                f"the lock records no signature check of this variant, but {where} requires a signature",
                f"run `kernelpin lock --upgrade-package {repo_id}` to verify and record it",
            )
        case EvidenceKind.CONDA:
            return Decision(
                False,
                f"the conda package has no CEP 27 attestation, but {where} requires a signature",
                "install it from a channel that serves its attestation (a CEP 50 .sigs sidecar), or give the "
                "attestation with --attestation FILE",
            )
        case _:
            assert_never(kind)


def _signed(
    policy: Policy,
    repo_id: str,
    variant: str,
    kind: _Signed,
    signer: Signer,
    metadata: BuildMetadata | None,
    served: Served,
) -> Decision:
    """A signer the policy's entry allows (any, where it names none), whose signed metadata.json says the build
    is what it is served as."""
    entry = policy.publisher(repo_id)
    if entry is not None and entry.signers and not entry.allows(signer):
        issuers = {rule.issuer for rule in entry.signers}
        what = (
            f"signed through issuer {signer.issuer}, not {' or '.join(sorted(issuers))}"
            if signer.issuer not in issuers
            else f"signed by {signer.describe()}"
        )
        rules = "; ".join(rule.describe() for rule in entry.signers)
        match kind:
            case EvidenceKind.RELEASE | EvidenceKind.CONDA:
                return Decision(
                    False,
                    f"{what}, which {entry.where} does not allow ({rules})",
                    "do not use this release unless you trust that signer: then add it to the policy's signers",
                )
            case EvidenceKind.LOCK:
                return Decision(
                    False,
                    f"locked as {what}, which {entry.where} does not allow ({rules})",
                    "add that signer to the entry if you trust it, or lock another release",
                )
            case EvidenceKind.REMEMBERED:
                return Decision(
                    False,
                    f"resolved before as {what}, which {entry.where} does not allow ({rules})",
                    "add that signer to the entry if you trust it, or lock another release",
                )
            case _:
                assert_never(kind)
    if metadata is not None:
        mismatch = _served_as_other(metadata, variant, served)
        if mismatch is not None:
            return Decision(
                False,
                f"the signed metadata.json {mismatch}",
                "do not use this release (signed bytes served as another release or build); tell the publisher",
            )
    return Decision(True)


def _served_as_other(metadata: BuildMetadata, variant: str, served: Served) -> str | None:
    """How a signed metadata.json contradicts where it is served, or None: its variant name, its backend, its
    version against the tag and the requirement's major."""
    if metadata.variant is not None and metadata.variant != variant:
        return f"is variant {metadata.variant[:80]}'s, served as {variant}"
    try:
        parsed = Variant.parse(variant)
    except ValueError:
        parsed = None
    expected = parsed.recorded_backend if parsed is not None else None
    if expected is not None and metadata.backend is not None and metadata.backend != expected:
        return f"is a {metadata.backend} build, served as the {expected} variant {variant}"
    version = served.version
    if version is not None and metadata.semver is not None and not metadata.semver.same_precedence(version):
        return f"is version {metadata.semver}, served as {version}"
    if version is not None and metadata.major is not None and metadata.major != version.major:
        return f"is major version {metadata.major}, served as {version}"
    if served.major is not None and metadata.major is not None and metadata.major != served.major:
        return f"is major version {metadata.major}, served as the branch v{served.major}"
    return None


def enforce(
    policy: Policy,
    repo_id: str,
    variant: str,
    evidence: Evidence,
    metadata: BuildMetadata | None = None,
    served: Served | None = None,
) -> Decision:
    """`decide`, with a refusal raised as SignatureError (one line: repository, variant, cause, fix)."""
    decision = decide(policy, repo_id, variant, evidence, metadata, served)
    if not decision.admit:
        raise SignatureError(repo_id, variant, decision.cause, decision.fix)
    return decision


def admit_publisher(
    policy: Policy,
    repo_id: str,
    hub_trusts: Callable[[str], bool],
    caller_trusts: bool | None = None,
    endpoint: str = "the Hub",
) -> bool:
    """The gate `kernels` has: a repository of a publisher the policy does not name needs the caller's trust
    (`trust_remote_code`, get_kernel's; None for `lock`, which has none) or the Hub's trusted mark on its
    organization (`hub_trusts`, asked only then; offline, what get_kernel recorded of the mark). Returns whether
    the mark is what let it through; raises KernelpinError for a publisher nothing trusts."""
    if caller_trusts or policy.names(repo_id):
        return False
    org = repo_id.split("/", 1)[0]
    if hub_trusts(org):
        return True
    if caller_trusts is None:
        raise KernelpinError(
            f"{repo_id}: untrusted publisher: the Hub does not mark {org} a trusted kernel "
            f"publisher (trustedKernelPublisher) and pyproject.toml does not name it; if you "
            f'trust it, add [{TABLE}.publishers."{org}"] (or "{repo_id}") to pyproject.toml'
        )
    raise KernelpinError(
        f"{repo_id}: {org} is not a trusted kernel publisher on {endpoint}; if you trust it, "
        f"pass trust_remote_code=True (or trust_remote_code=[{repo_id!r}])"
    )


def capability_build_mismatch(metadata: BuildMetadata, build: LockedCapabilityBuild) -> str | None:
    """How a per-capability build the lock records differs from what the variant's signed metadata.json lists
    under its name (None: it is that build): files of another capability's build, or of no build of this release
    (another release's, or altered)."""
    listed = metadata.capability_builds.get(build.name)
    if listed is None:
        return f"the signed metadata.json lists no per-capability build {build.name}"
    archs, digests = listed
    locked = {f.path: f.sha256 for f in build.files}
    if locked == digests and tuple(archs) == tuple(build.archs):
        return None
    for path, sha256 in sorted(locked.items()):
        if digests.get(path) == sha256:
            continue
        others = sorted(name for name, (_, files) in metadata.capability_builds.items() if files.get(path) == sha256)
        if others:
            return f"its {path} is the {others[0]} build's, not {build.name}'s (another capability's build)"
        return f"its {path} is in no build of this release's signed metadata.json (another release's, or altered)"
    return f"it does not list the files and archs the signed metadata.json lists for {build.name}"


def enforce_capability_build(repo_id: str, variant: str, metadata: BuildMetadata, build: LockedCapabilityBuild) -> None:
    """Refuse (SignatureError) a per-capability build that is not what the signed metadata.json lists."""
    mismatch = capability_build_mismatch(metadata, build)
    if mismatch is not None:
        raise SignatureError(
            repo_id,
            f"{variant} {build.name}",
            f"the locked per-capability build does not match the signed metadata.json: {mismatch}",
            f"regenerate the lock with `kernelpin lock --upgrade-package {repo_id}` and review the change",
        )
