"""The publisher policy: which publishers kernelpin locks kernels from, and which Sigstore identities may sign
their releases. Read from `[tool.kernelpin.trust]` in pyproject.toml; pure (no I/O, no sigstore import), so
`load()` checks a lock's recorded signers against it on every call for the price of a few string compares.

    [tool.kernelpin.trust]
    require-signatures = false                 # true: every kernel must be signed
    trusted-root = "sigstore/trusted_root.json"  # another Sigstore instance (default: the public-good one)

    [tool.kernelpin.trust.publishers.acme]      # an organization, trusted whatever the Hub says
    require-signatures = true
    signers = [{ repository = "acme/kernels", workflow = ".github/workflows/release.yaml", ref = "refs/heads/main" }]

    [tool.kernelpin.trust.publishers."acme/one"]  # one repository: replaces its organization's entry
    signers = [{ issuer = "https://accounts.google.com", identity = "release@acme.dev" }]

kernels-community has a built-in entry, what `kernels verify-signature` accepts: signed by its GitHub
workflows, and required to be. An entry in pyproject.toml under that name replaces it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import field
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.signer import GITHUB_ISSUER, LockedSignature, Signer
from kernelpin.records import record

__untrusted_input__ = ("parse_policy",)  # parsers of input kernelpin does not control (kernelpin.errors)

TABLE = "tool.kernelpin.trust"
UNSIGNED = "unsigned"  # what `--accept-signer REPO=unsigned` accepts: a release that is no longer signed


def normalised(repo_id: str) -> str:
    """A repository id as the Hub compares it: `Kernels-Community/activation` is kernels-community/activation."""
    return repo_id.lower()


def signer_changes(
    repo_id: str,
    old: Mapping[str, LockedSignature | None],
    new: Mapping[str, LockedSignature],
    accepted: Collection[str],
) -> list[str]:
    """Signer continuity across a re-lock, for each variant of the new release: one refusal per variant whose
    signer is not the one the lock recorded (for that variant, or for any variant when it is new), or that is
    no longer signed. `accepted` holds the new identities (`Signer.continuity`, or UNSIGNED) the user named with
    `--accept-signer REPO=...` (of `lock`, `add` or `sync`, whichever re-locked). A lock that recorded no signer
    constrains nothing (unsigned -> signed is fine)."""
    known = {
        variant: signature.signer
        for variant, signature in old.items()
        if signature is not None and signature.signer is not None
    }
    if not known:
        return []
    everyone = {signer.continuity for signer in known.values()}
    problems = []
    for variant, signature in sorted(new.items()):
        before = known.get(variant)
        allowed = {before.continuity} if before is not None else everyone
        was = " or ".join(sorted(allowed))
        if signature.signer is None:
            if UNSIGNED not in accepted:
                problems.append(
                    f"{repo_id} {variant}: the new release is unsigned, but the locked one was signed by "
                    f"{was}; if you accept an unsigned release, repeat the command with "
                    f"`--accept-signer {repo_id}={UNSIGNED}`"
                )
        elif signature.signer.continuity not in allowed and signature.signer.continuity not in accepted:
            problems.append(
                f"{repo_id} {variant}: the new release is signed by {signature.signer.describe()}, but the "
                f"locked one by {was}: the publisher's signer changed. If you trust the new one, repeat "
                f"the command with `--accept-signer {repo_id}={signature.signer.continuity}`"
            )
    return problems


_NOTHING = object()  # what two different required values have in common


def _meet_one(mine: str | None, theirs: str | None, key: Callable[[str], str] = str) -> str | object | None:
    """One required value (None: any) that both allow: either when the other is None, else both when equal."""
    if mine is None or theirs is None:
        return theirs if mine is None else mine
    return mine if key(mine) == key(theirs) else _NOTHING


def _meet_all(mine: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values (empty: any) both allow; None when both name some and none in common."""
    if not mine or not theirs:
        return mine or theirs
    common = tuple(value for value in mine if value in theirs)
    return common or None


@record
class SignerRule:
    """One identity allowed to sign: a GitHub workflow (repository, optionally its workflow files and refs), or
    any issuer's exact `identity`."""

    issuer: str = GITHUB_ISSUER
    repository: str | None = None  # GitHub owner/name
    workflows: tuple[str, ...] = ()  # .github/workflows/<file>; empty: any workflow of `repository`
    refs: tuple[str, ...] = ()  # refs/heads/main, refs/tags/v1.0.0; empty: any ref
    identity: str | None = None  # the exact certificate subject (e-mail or URI)

    def allows(self, signer: Signer) -> bool:
        if signer.issuer != self.issuer or (self.identity is not None and signer.identity != self.identity):
            return False
        if self.repository is None:
            return True
        # GitHub compares owner/name without case; the workflow path and the ref are compared exactly.
        base = f"https://github.com/{self.repository}/".lower()
        if (signer.source_repository or "").lower() + "/" != base or signer.identity[: len(base)].lower() != base:
            return False
        # `<workflow path>@<ref>`: a workflow path has no `@`, a ref may (a branch `feature@refs/heads/main`), so
        # the identity splits at its first `@`, and the ref must be one whole ref.
        workflow, at, ref = signer.identity[len(base) :].partition("@")
        if not at or not ref.startswith("refs/"):
            return False
        if self.workflows and workflow not in self.workflows:
            return False
        return not self.refs or ref in self.refs

    def meet(self, other: SignerRule) -> SignerRule | None:
        """The rule that allows exactly the signers both `self` and `other` allow; None when no signer can be
        allowed by both (another issuer, identity or repository, or no workflow or ref in common)."""
        if self.issuer != other.issuer:
            return None
        identity = _meet_one(self.identity, other.identity)
        repository = _meet_one(self.repository, other.repository, key=str.lower)
        workflows, refs = _meet_all(self.workflows, other.workflows), _meet_all(self.refs, other.refs)
        if identity is _NOTHING or repository is _NOTHING or workflows is None or refs is None:
            return None
        return SignerRule(self.issuer, repository, workflows, refs, identity)  # type: ignore[arg-type]

    def describe(self) -> str:
        if self.repository is None:
            return f"{self.identity} (issuer {self.issuer})"
        workflows = "|".join(self.workflows) or "any workflow"
        refs = "|".join(self.refs) or "any ref"
        return f"github.com/{self.repository} {workflows} @ {refs}"


@record
class Publisher:
    """What pyproject.toml (or the built-in default) says about one organization or repository."""

    name: str  # "org" or "org/repo"
    signers: tuple[SignerRule, ...] = ()  # empty: any identity may sign; continuity then holds it to the first
    require_signatures: bool | None = None  # None: the policy's global setting
    builtin: bool = False
    # The floor a kernel-status.toml move carries from the repository the user named to its destination
    # (Policy.moved): how refusals name the entries it comes from, and whether it names the destination's
    # publisher (only when the policy itself does: a move admits no publisher).
    named_as: str | None = None
    admits: bool = True

    def allows(self, signer: Signer) -> bool:
        return not self.signers or any(rule.allows(signer) for rule in self.signers)

    @property
    def where(self) -> str:
        if self.named_as is not None:
            return self.named_as
        return "kernelpin's built-in policy" if self.builtin else f'[{TABLE}.publishers."{self.name}"]'


KERNELS_COMMUNITY = Publisher(
    name="kernels-community",
    signers=(
        SignerRule(
            repository="huggingface/kernels-community",
            workflows=tuple(
                f".github/workflows/{name}.yaml" for name in ("build", "build-mac", "build-windows", "sign-old-builds")
            ),
            refs=("refs/heads/main",),
        ),
        SignerRule(  # its Rust kernels, as kernels 0.19's DEFAULT_POLICY has them (kernels/_internals/verify.py)
            repository="huggingface/kernels-community-rs",
            workflows=(".github/workflows/build.yaml",),
            refs=("refs/heads/main",),
        ),
    ),
    require_signatures=True,
    builtin=True,
)


@record
class Policy:
    """[tool.kernelpin.trust] as read: the publishers it names (kernels-community's built-in entry unless replaced),
    whether every kernel must be signed, and the Sigstore trust root."""

    publishers: Mapping[str, Publisher] = field(default_factory=lambda: {KERNELS_COMMUNITY.name: KERNELS_COMMUNITY})
    require_signatures: bool = False
    trusted_root: str | None = None  # a trusted_root.json path, relative to the project; None: public-good Sigstore

    def publisher(self, repo_id: str) -> Publisher | None:
        """The entry for a repository, else for its organization; None when the policy does not name it. Names
        are compared as the Hub compares them, without case (entries are kept lower-case)."""
        key = normalised(repo_id)
        return self.publishers.get(key) or self.publishers.get(key.split("/", 1)[0])

    def requires_signature(self, repo_id: str) -> tuple[bool, str]:
        """Whether `repo_id` must be signed, and the setting that says so: its entry's `require-signatures`,
        else its entry's `signers` (naming who signs refuses what none of them signed), else the global one."""
        entry = self.publisher(repo_id)
        if entry is not None and entry.require_signatures is not None:
            return entry.require_signatures, entry.where
        if entry is not None and entry.signers:
            return True, f"{entry.where} (it names signers)"
        return self.require_signatures, f"[{TABLE}] require-signatures"

    def names(self, repo_id: str) -> bool:
        """Whether the policy names the repository's publisher (so it is trusted whatever the Hub says)."""
        entry = self.publisher(repo_id)
        return entry is not None and entry.admits

    def moved(self, origin: str, destination: str) -> Policy:
        """The policy that `destination` is loaded under in place of `origin` (its kernel-status.toml says it
        moved; the file is not signed): a signature required of either is required, and a signer must be one
        both entries allow. A move never loosens what the policy asks of the repository the user named."""
        required, where = self.requires_signature(origin)
        if not required:  # an entry that names signers requires signatures: nothing to carry over
            return self
        own, theirs = self.publisher(destination), self.publisher(origin)
        floor, signers = theirs.signers if theirs is not None else (), own.signers if own is not None else ()
        if floor and signers:
            met = tuple(dict.fromkeys(rule for a in floor for b in signers if (rule := a.meet(b)) is not None))
            if not met:
                raise KernelpinError(
                    f"{origin} has moved to {destination} (its kernel-status.toml says so), but no signer is "
                    f"allowed both by {where} and by {own.where}; load the repository you mean by its own name, "  # type: ignore[union-attr]
                    "or name signers both entries allow"
                )
            signers = met
        named_as = f"{where} (for {origin}, which moved to {destination})"
        if own is not None and own.signers:
            named_as += f" and {own.where}"
        entry = Publisher(
            normalised(destination), signers or floor, True, named_as=named_as, admits=own is not None and own.admits
        )
        return dataclasses.replace(self, publishers={**self.publishers, normalised(destination): entry})


class PolicyError(KernelpinError):
    """[tool.kernelpin.trust] is malformed; the message names the key and shows the form."""


class SignatureError(KernelpinError):
    """A release's signature does not satisfy the policy: one line naming the repository, the variant, the cause
    and the fix."""

    def __init__(self, repo_id: str, variant: str, cause: str, fix: str) -> None:
        super().__init__(f"{repo_id} {variant}: {cause}; {fix}")
        self.repo_id, self.variant, self.cause, self.fix = repo_id, variant, cause, fix


_EXAMPLE = (
    f'[{TABLE}.publishers.acme]\nsigners = [{{ repository = "acme/kernels", '
    'workflow = ".github/workflows/release.yaml", ref = "refs/heads/main" }]'
)


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(item, str) and item for item in items):
        raise PolicyError(f"{where}: {key} must be a string or a list of strings; for example\n{_EXAMPLE}")
    return tuple(items)


def _rule(table: Any, where: str) -> SignerRule:
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: a signer is a table; for example\n{_EXAMPLE}")
    unknown = sorted(set(table) - {"issuer", "repository", "workflow", "ref", "identity"})
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (a signer has issuer, repository, workflow, ref, identity)"
        )
    issuer = _strings(table.get("issuer", GITHUB_ISSUER), "issuer", where)
    if len(issuer) != 1:
        raise PolicyError(f"{where}: issuer is one URL")
    repository = table.get("repository")
    identity = table.get("identity")
    if repository is None and identity is None:
        raise PolicyError(
            f'{where}: a signer names a GitHub repository (`repository = "owner/name"`) or an '
            f'exact identity (`identity = "release@acme.dev"`, with its `issuer`)'
        )
    if repository is not None and (
        not isinstance(repository, str) or repository.count("/") != 1 or repository.startswith("https:")
    ):
        raise PolicyError(f'{where}: repository is a GitHub owner/name, such as "acme/kernels"')
    if identity is not None and not isinstance(identity, str):
        raise PolicyError(f"{where}: identity is a string (the certificate's e-mail or URI)")
    if repository is None and ("workflow" in table or "ref" in table):
        raise PolicyError(f"{where}: workflow and ref need the repository they belong to")
    workflows = _strings(table["workflow"], "workflow", where) if "workflow" in table else ()
    refs = _strings(table["ref"], "ref", where) if "ref" in table else ()
    return SignerRule(issuer[0], repository, workflows, refs, identity)


def _publisher(name: str, table: Any, where: str) -> Publisher:
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: must be a table; for example\n{_EXAMPLE}")
    unknown = sorted(set(table) - {"signers", "require-signatures"})
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r} (a publisher has signers, require-signatures)")
    parts = name.split("/")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise PolicyError(f'{where}: a publisher is an organization ("acme") or a repository ("acme/img2gray")')
    signers = table.get("signers", [])
    if not isinstance(signers, list):
        raise PolicyError(f"{where}: signers must be a list of tables; for example\n{_EXAMPLE}")
    required = table.get("require-signatures")
    if required is not None and not isinstance(required, bool):
        raise PolicyError(f"{where}: require-signatures must be true or false")
    if required is False and signers:
        raise PolicyError(
            f"{where}: names signers and require-signatures = false, but an entry that names its "
            "signers refuses what none of them signed; drop require-signatures (or the signers)"
        )
    return Publisher(
        name, tuple(_rule(rule, f"{where} signer #{index + 1}") for index, rule in enumerate(signers)), required
    )


def parse_policy(pyproject: Mapping[str, Any]) -> Policy:
    """The policy of a parsed pyproject.toml (its `[tool.kernelpin.trust]`; the defaults when absent)."""
    # A [tool] or [tool.kernelpin] that is no table is refused, not read as "no policy": that would fail open.
    tool = pyproject.get("tool", {})
    if not isinstance(tool, dict):
        raise PolicyError("[tool] must be a table (pyproject.toml's tools each have a table below it)")
    kernelpin = tool.get("kernelpin", {})
    if not isinstance(kernelpin, dict):
        raise PolicyError("[tool.kernelpin] must be a table; the publisher policy is its [tool.kernelpin.trust]")
    table = kernelpin.get("trust")
    if table is None:
        return Policy()
    where = f"[{TABLE}]"
    if not isinstance(table, dict):
        raise PolicyError(f"{where} must be a table")
    unknown = sorted(set(table) - {"publishers", "require-signatures", "trusted-root"})
    if unknown:
        raise PolicyError(f"{where}: unknown key {unknown[0]!r} (it has publishers, require-signatures, trusted-root)")
    required = table.get("require-signatures", False)
    if not isinstance(required, bool):
        raise PolicyError(f"{where}: require-signatures must be true or false")
    root = table.get("trusted-root")
    if root is not None and (not isinstance(root, str) or not root):
        raise PolicyError(f"{where}: trusted-root is the path of a Sigstore trusted_root.json")
    publishers = table.get("publishers", {})
    if not isinstance(publishers, dict):
        raise PolicyError(
            f"{where}: publishers must be a table of organizations and repositories; for example\n{_EXAMPLE}"
        )
    entries = {KERNELS_COMMUNITY.name: KERNELS_COMMUNITY}
    named: dict[str, str] = {}
    for name, value in publishers.items():
        key = normalised(name)
        if key in named:
            raise PolicyError(
                f'[{TABLE}.publishers]: "{named[key]}" and "{name}" are one publisher (the Hub '
                "compares names without case); keep one entry"
            )
        named[key] = name
        entries[key] = _publisher(key, value, f'[{TABLE}.publishers."{name}"]')
    return Policy(entries, required, root)
