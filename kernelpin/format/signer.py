"""Who signed a release, and what kernelpin.lock records of a variant's signature: plain records of the lock's
format (kernelpin.format.lockfile reads and writes them); which signers are allowed is kernelpin.trust.policy's."""

from __future__ import annotations

from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.records import record

__untrusted_input__ = ("LockedSignature.from_table",)  # parsers of input kernelpin does not control (kernelpin.errors)

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


@record
class Signer:
    """Who signed, as the certificate says (Fulcio copies these from the signer's OIDC token)."""

    issuer: str  # the OIDC issuer, e.g. GitHub Actions' token.actions.githubusercontent.com
    identity: str  # the certificate's subject: a workflow URI `https://github.com/o/r/<path>@<ref>`, or an e-mail
    source_repository: str | None = None  # https://github.com/<owner>/<repo> the workflow ran for
    source_commit: str | None = None  # the commit it ran on
    source_ref: str | None = None  # the ref it ran on, e.g. refs/heads/main

    def describe(self) -> str:
        return self.identity if self.issuer == GITHUB_ISSUER else f"{self.identity} (issuer {self.issuer})"

    @property
    def continuity(self) -> str:
        """What must stay the same from one release to the next: the identity, without the ref a GitHub
        workflow ran on (a release workflow runs on each release's own tag)."""
        if self.identity.startswith("https://github.com/") and "@" in self.identity:
            return self.identity.rpartition("@")[0]
        return self.identity


@record
class LockedSignature:
    """What the lock records of a variant's signature, as `lock` verified it: the signer (None: the release is
    unsigned), the bundle's sha256 and the transparency-log entry."""

    signer: Signer | None
    bundle_sha256: str | None = None
    log_index: int | None = None
    log_id: str | None = None
    integrated_time: int | None = None

    def to_table(self) -> dict[str, str | int | bool]:
        if self.signer is None:
            return {"unsigned": True}
        table: dict[str, str | int | bool] = {"issuer": self.signer.issuer, "identity": self.signer.identity}
        for key, value in (
            ("source-repository", self.signer.source_repository),
            ("source-commit", self.signer.source_commit),
            ("source-ref", self.signer.source_ref),
            ("bundle-sha256", self.bundle_sha256),
            ("log-id", self.log_id),
            ("log-index", self.log_index),
            ("integrated-time", self.integrated_time),
        ):
            if value is not None:
                table[key] = value
        return table

    @classmethod
    def from_table(cls, table: Any, where: str, fix: str) -> LockedSignature:
        """Read what `to_table` wrote; a malformed entry is an error naming it and the fix."""

        def fail(problem: str) -> KernelpinError:
            return KernelpinError(f"{where}: signature {problem}; {fix}")

        if not isinstance(table, dict):
            raise fail("must be a table")
        if table.get("unsigned") is True and len(table) == 1:
            return cls(None)
        strings = {
            key: table.get(key)
            for key in (
                "issuer",
                "identity",
                "source-repository",
                "source-commit",
                "source-ref",
                "bundle-sha256",
                "log-id",
            )
        }
        numbers = {key: table.get(key) for key in ("log-index", "integrated-time")}
        unknown = sorted(set(table) - strings.keys() - numbers.keys())
        if unknown:
            raise fail(f"has an unknown key {unknown[0][:40]!r}")
        if not all(value is None or (isinstance(value, str) and len(value) < 4096) for value in strings.values()):
            raise fail("fields must be strings")
        if not all(
            value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63)
            for value in numbers.values()
        ):
            raise fail("log-index and integrated-time must be whole numbers")
        bundle = strings["bundle-sha256"]
        if not strings["issuer"] or not strings["identity"] or bundle is None or not _is_sha256(bundle):
            raise fail("needs issuer, identity and bundle-sha256 (64 lowercase hex digits)")
        signer = Signer(
            strings["issuer"],
            strings["identity"],
            strings["source-repository"],
            strings["source-commit"],
            strings["source-ref"],
        )
        return cls(signer, bundle, numbers["log-index"], strings["log-id"], numbers["integrated-time"])


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
