"""kernelpin.get_kernel applies the publisher policy `lock` applies (that of the project around the working
directory): a publisher the policy names needs no trust_remote_code, and the chosen variant's Sigstore bundle
is verified against the policy's signers before anything of it is imported. Failed before: get_kernel checked
only the Hub's trusted-publisher mark and never read a bundle (a release signed by anyone loaded)."""

from __future__ import annotations

import sys
import warnings

import pytest

import kernelpin
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.trust.policy import SignatureError
from tests.kernelpin.front.test_get_kernel import fresh_modules, state  # noqa: F401 (fixtures)
from tests.kernelpin.helpers import UNTRUSTED_ORG
from tests.kernelpin.journeys.test_lock_signatures import ACME, ACME_SIGNERS, HIJACKER, release

POLICY = f'[tool.kernelpin.trust.publishers."{UNTRUSTED_ORG}"]\nsigners = {ACME_SIGNERS}\n'


@pytest.fixture
def signed_line(new_repo, project, sigstore):
    """release(identity): a kernel of an organization the Hub does not trust, v1.0.0 on branch v1 signed by
    `identity`, in a project whose policy names that organization with ACME as its only signer."""
    root = project("")
    with open(root / "pyproject.toml", "a") as stream:
        stream.write(f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n{POLICY}')

    def make(identity):
        repo_id, repo = new_repo("signed-oneliner", "kernel", UNTRUSTED_ORG)
        release(repo, sigstore, "1.0.0", identity)
        repo.branch("v1")
        return repo_id

    return make


def test_a_release_its_policy_signer_signed_loads_without_trust_remote_code(
    signed_line,
    state,
    fresh_modules,
):
    repo_id = signed_line(ACME)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpinnedKernelWarning)
        assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.0.0"
    record = next(state.rglob("*.json")).read_text()
    assert "acme-corp/kernels/.github/workflows/release.yaml@refs/tags/v1.0.0" in record  # the signer remembered


def test_a_release_another_identity_signed_is_refused_before_import(signed_line, state, fresh_modules):
    repo_id = signed_line(HIJACKER)
    before = set(sys.modules)
    with pytest.raises(SignatureError, match=r"hijacker/kernels.*acme-corp/kernels"):
        kernelpin.get_kernel(repo_id, version=1, trust_remote_code=True)
    assert not [name for name in set(sys.modules) - before if name.startswith("_kernelpin_")]


def test_a_signed_release_get_kernel_verified_is_not_verified_again_by_its_receipt(
    signed_line, state, hf_env, fresh_modules, monkeypatch
):
    # Failed before: get_kernel kept no signature receipt, so the same bundle was verified by sigstore again after
    # its Hub cache and resolution were gone (and a later `lock` of the release verified it once more).
    import shutil

    from kernelpin.trust import signature

    repo_id = signed_line(ACME)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpinnedKernelWarning)
        kernelpin.get_kernel(repo_id, version=1)
        # A cold call again: no Hub cache, nothing resolved before (another state directory), this user's receipts
        # (XDG_STATE_HOME) kept.
        shutil.rmtree(hf_env)
        monkeypatch.setenv("KERNELPIN_STATE_DIR", str(state.parent / "another-state"))
        for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
            del sys.modules[name]

        def no_sigstore(*args, **kwargs):
            raise AssertionError("verified by sigstore again")

        monkeypatch.setattr(signature, "verify_bundle", no_sigstore)
        assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.0.0"
