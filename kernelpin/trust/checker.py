"""The release checker `lock`, `sync`, `verify` and `get_kernel` share: the publisher policy with its Sigstore
trust root, verifying bundles (kernelpin.trust.signature) in a second process where it can
(kernelpin.trust.worker), and not again where this user's receipts vouch for them (kernelpin.trust.receipts)."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Self

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import METADATA
from kernelpin.format.layout import SIGNATURE as BUNDLE
from kernelpin.format.signer import LockedSignature, Signer
from kernelpin.hub.limits import Limits
from kernelpin.trust.gate import Evidence, EvidenceKind, enforce
from kernelpin.trust.policy import Policy, SignatureError
from kernelpin.trust.receipts import SignatureReceipts

if TYPE_CHECKING:
    from sigstore.verify import Verifier

    from kernelpin.trust.signature import Verified
    from kernelpin.trust.worker import SignatureWorker


class ReleaseChecker:
    """The policy and its trust root, as `lock` and `sync` use them from several threads; the sigstore
    verifier is made on first use (importing sigstore costs about 0.4 s of CPU, a lock of unsigned kernels never
    pays it). With `worker`, a lock's verifications run in a second process (kernelpin.trust.worker), started
    by `warm_up`; close the checker (or use it as a context manager) when the command is done. With `receipts`,
    a bundle this user verified before over the same metadata.json under the same trust root is not verified
    again (kernelpin.trust.receipts): its recorded signer is put to the current policy."""

    def __init__(
        self,
        policy: Policy,
        project_root: Path,
        refresh: bool = False,
        refresh_timeout: float = Limits.http_timeout,
        worker: bool = False,
        receipts: SignatureReceipts | None = None,
    ) -> None:
        self.policy, self.project_root, self.refresh = policy, project_root, refresh
        self.refresh_timeout = refresh_timeout
        self.receipts = receipts
        self._verifier: Verifier | None = None
        self._verifier_root: str | None = None  # trust_root_id of the root the verifier loaded (None: unsure)
        self._recalled: dict[tuple[bytes, bytes], Verified] = {}  # receipts found, by (metadata, bundle)
        self._making = threading.Lock()
        self._warmed = False
        self._wants_worker = worker
        self._worker: SignatureWorker | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the signature worker, if one was started (and wait for it to exit)."""
        if self._worker is not None:
            self._worker.close()

    @property
    def verifier(self) -> Verifier:
        from kernelpin.trust import signature  # where a bundle is verified: get_kernel at a known commit verifies none

        with self._making:
            if self._verifier is None and self._receipt_root is None:  # no receipts: the root's id is not read
                self._verifier = signature.verifier(self.policy, self.project_root, self.refresh, self.refresh_timeout)
            elif self._verifier is None:
                self._verifier, self._verifier_root = signature.verifier_and_root(
                    self.policy, self.project_root, self.refresh, self.refresh_timeout
                )
            return self._verifier

    @functools.cached_property
    def _receipt_root(self) -> str | None:
        """The trust root receipts are recalled and kept under; None: none are (no receipts, or no root id)."""
        from kernelpin.trust import signature

        if self.receipts is None or self.receipts.files.directory is None:
            return None
        return signature.trust_root_id(self.policy, self.project_root)

    @functools.cached_property
    def _may_recall(self) -> bool:
        """Whether receipts may spare verifying: they are kept, and this user has some."""
        return self.receipts is not None and self._receipt_root is not None and self.receipts.any()

    def _recall(self, metadata: bytes, bundle: bytes) -> Verified | None:
        """This user's receipt of `bundle` over `metadata` under the trust root (None: none to believe), read once
        per command where found: expect_bundles and the verification after it ask for the same one."""
        root = self._receipt_root
        if root is None or self.receipts is None:
            return None
        found = self._recalled.get((metadata, bundle))
        if found is None:
            found = self.receipts.recall(root, metadata, bundle)
            if found is not None:
                self._recalled[(metadata, bundle)] = found
        return found

    def expect_signatures(self) -> None:
        """A release about to be read is signed, or likely to be: warm_up now, so that sigstore's import overlaps
        its downloads; unless receipts may spare verifying it (expect_bundles then decides, once it is read)."""
        if not self._may_recall:
            self.warm_up()

    def expect_bundles(self, fetched: Mapping[str, Mapping[str, bytes]]) -> None:
        """The small files of a release's variants were read (variant -> path in it -> bytes): warm_up unless a
        receipt vouches for every bundle among them."""
        if self._warmed:
            return
        if any(
            BUNDLE in files and self._recall(files.get(METADATA, b""), files[BUNDLE]) is None
            for files in fetched.values()
        ):
            self.warm_up()

    def warm_up(self) -> None:
        """Get ready to verify in the background (once): `lock` calls it when a listing shows a bundle, so that
        sigstore's import overlaps the downloads of the metadata to verify. With `worker`, by starting the
        signature worker (it refreshes nothing: a refresh is the parent's, made before); else, or when it cannot
        start, by making the verifier in a thread."""
        with self._making:
            if self._warmed:
                return
            self._warmed = True
            if self._wants_worker and (self._verifier is not None or not self.refresh):
                # Only a bundle to verify starts the worker: a load served from a recorded signer never imports it.
                from kernelpin.trust.worker import SignatureWorker, WorkerGone

                with contextlib.suppress(WorkerGone):  # verified in-process then
                    self._worker = SignatureWorker.start(self.policy, self.project_root)
                    return
            if self._verifier is None:
                threading.Thread(target=self._warm, name="kernelpin-sigstore", daemon=True).start()

    def _warm(self) -> None:
        with contextlib.suppress(KernelpinError):  # reported by the first real use
            _ = self.verifier

    def _verify(self, repo_id: str, variant: str, metadata: bytes, bundle: bytes) -> Verified | None:
        """verify_bundle: by this user's receipt for these bytes under this trust root when there is one (the
        policy asked of the signer it recorded), else in the signature worker when one runs, else (or when it
        fails to answer) here; a verification that passed leaves a receipt."""
        from kernelpin.trust import signature

        recalled = self._recall(metadata, bundle)
        if recalled is not None:
            enforce(self.policy, repo_id, variant, Evidence(EvidenceKind.RELEASE, recalled.signer))
            return recalled
        root = self._receipt_root
        verified: Verified | None = None
        under: str | None = None  # the root it was verified under
        if self._worker is not None:
            from kernelpin.trust.worker import WorkerGone  # imported by the worker's start

            with contextlib.suppress(WorkerGone):
                verified, under = self._worker.verify(repo_id, variant, metadata, bundle)
        if verified is None:
            verified = signature.verify_bundle(repo_id, variant, metadata, bundle, self.policy, self.verifier)
            under = self._verifier_root
        if verified is not None and root is not None and self.receipts is not None and under == root:
            self.receipts.keep(root, metadata, bundle, verified)
        return verified

    def check(self, repo_id: str, variant: str, metadata: bytes | None, bundle: bytes | None) -> LockedSignature:
        """What the lock records of one variant's signature, after verifying it (see verify_bundle)."""
        from kernelpin.trust import signature

        if bundle is None:
            verified = signature.verify_bundle(repo_id, variant, metadata or b"", None, self.policy, None)
        elif metadata is None:
            raise SignatureError(
                repo_id,
                variant,
                f"{BUNDLE} without a metadata.json to sign",
                "the release is broken; ask the publisher to fix it",
            )
        else:
            verified = self._verify(repo_id, variant, metadata, bundle)
        if verified is None:
            return LockedSignature(None)
        return LockedSignature(
            verified.signer, verified.bundle_sha256, verified.log_index, verified.log_id, verified.integrated_time
        )

    def recheck(
        self, repo_id: str, variant: str, directory: Path, locked: LockedSignature | None, files: bool = False
    ) -> Signer | None:
        """`sync`'s check of an installed variant whose files matched the lock: what the lock records (or that it
        records nothing) put to the policy; a recorded signer's bundle verifies again, offline (or this user's
        receipt vouches for it), and names that signer (a lock edited to claim a signer is caught here).
        `files`: the full check, never by a receipt, and every file against the signed digest (`kernelpin verify
        --signatures`). Returns the signer verified, None for a variant admitted unsigned."""
        from kernelpin.trust import signature

        if locked is None or locked.signer is None:
            enforce(self.policy, repo_id, variant, Evidence.recorded(locked, EvidenceKind.LOCK))
            return None
        if files:
            verified = signature.verify_variant(directory, repo_id, self.policy, self.verifier)
            found = (
                LockedSignature(None) if verified is None else LockedSignature(verified.signer, verified.bundle_sha256)
            )
        else:
            bundle = directory / BUNDLE
            found = self.check(
                repo_id, variant, (directory / METADATA).read_bytes(), bundle.read_bytes() if bundle.is_file() else None
            )
        if found.signer != locked.signer or found.bundle_sha256 != locked.bundle_sha256:
            raise SignatureError(
                repo_id,
                variant,
                f"the lock records a signature by {locked.signer.describe()}, "
                f"but the bundle is {'unsigned' if found.signer is None else 'by ' + found.signer.describe()}",
                "the lock was edited: regenerate it with `kernelpin lock --upgrade-package "
                f"{repo_id}` and review the change",
            )
        return found.signer
