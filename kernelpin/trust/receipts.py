"""Verified-signature receipts: a Sigstore bundle this user's kernelpin verified once is not verified again.

A receipt says "under the trust root T, the bundle of sha256 B verified over the metadata.json of sha256 M and
named this signer and transparency-log entry", T being signature.trust_root_id: the root's bytes and the
sigstore-python that checked them. Nothing else decides a verification's outcome (the certificate is checked at
the time the log recorded, not now), so a later `lock`, `sync` or `get_kernel` that reads the same bytes under
the same root takes the signer from the receipt, without sigstore (its import alone costs about 0.4 s of CPU),
and puts it to the publisher policy as it is now (kernelpin.trust.gate), as a verification would. A changed
root, bundle or metadata.json is verified again; `kernelpin verify --signatures` always verifies.

A receipt is written only after sigstore-python verified the bytes in this user's command or its signature
worker (a Hub's claims never make one; nor does a bundle the policy refused), into this user's private state
(kernelpin.files.private_state: `$XDG_STATE_HOME/kernelpin/signatures`, with the checks that make it private), and is
believed only when it names exactly (T, B, M).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kernelpin.files.private_state import PrivateFiles
from kernelpin.format.nesting import within_nesting
from kernelpin.records import record

if TYPE_CHECKING:
    from kernelpin.trust.signature import Verified

__untrusted_input__ = ("SignatureReceipts.recall",)  # parsers of input kernelpin does not control (kernelpin.errors)

FORMAT = 1  # what a receipt holds: a new meaning (another extraction of the signer) is a new format
_LIMIT = 64 << 10  # a receipt is about 600 bytes


@record
class SignatureReceipts:
    """This user's receipts of verified bundles, kept in `files` (see the module's docstring)."""

    files: PrivateFiles

    @classmethod
    def of_user(cls, environ: Mapping[str, str] = os.environ) -> SignatureReceipts:
        return cls(PrivateFiles.of_user("signatures", environ))

    def any(self) -> bool:
        """Whether this user has kept any receipt."""
        return self.files.any()

    def recall(self, trust_root: str, metadata: bytes, bundle: bytes) -> Verified | None:
        """What the verification of `bundle` over `metadata` under `trust_root` gave, by this user's receipt;
        None when there is none to believe."""
        key = _key(trust_root, metadata, bundle)
        content = self.files.read(_name(key), _LIMIT)
        if content is None or len(content) >= _LIMIT:
            return None
        try:
            receipt = within_nesting(json.loads(content))
            if not isinstance(receipt, dict) or {k: receipt.get(k) for k in key} != key:
                return None
            from kernelpin.trust.signature import Verified  # a receipt found: a signed release

            verified = Verified.from_fields(receipt.get("verified"))
        except (ValueError, RecursionError):
            return None
        return verified if verified.bundle_sha256 == key["bundle-sha256"] else None

    def keep(self, trust_root: str, metadata: bytes, bundle: bytes, verified: Verified) -> None:
        """Keep the receipt of a verification that passed (best effort: one not written costs a verification)."""
        key = _key(trust_root, metadata, bundle)
        self.files.write(_name(key), json.dumps({**key, "verified": verified.fields()}).encode())


def _key(trust_root: str, metadata: bytes, bundle: bytes) -> dict[str, object]:
    return {
        "format": FORMAT,
        "trust-root": trust_root,
        "bundle-sha256": hashlib.sha256(bundle).hexdigest(),
        "metadata-sha256": hashlib.sha256(metadata).hexdigest(),
    }


def _name(key: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
