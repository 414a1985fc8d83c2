"""Issue 48, end to end on the test Hub (olah): a signed SDK variant is locked (finding 1); a kernel-status.toml
redirect never loosens the policy of the repository the user named (finding 2); a moved kernel loads offline as it
did online, and has_kernel answers for it as get_kernel loads it (finding 4)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.front.hub import KernelRedirectWarning
from kernelpin.trust.policy import SignatureError
from testkit.fake_kernel import CPU_213, kernel_files
from testkit.sigstore_root import Identity

ACME = Identity(
    repository="acme-corp/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.0.0", commit="a" * 40
)


def released(repo, version: str, sigstore=None, variants=(CPU_213,), extra: dict[str, bytes] | None = None) -> str:
    files = kernel_files(version, variants=variants)
    if sigstore is not None:
        files = sigstore[0].sign_files(files, ACME)
    repo.write({**files, **(extra or {})}, clear=True)
    commit = repo.commit(f"release {version}")
    repo.tag(f"v{version}")
    repo.branch(f"v{version.split('.')[0]}")
    return commit


def moved(repo, destination: str) -> None:
    """The old repository's next release on v1: its builds kept, and a kernel-status.toml naming `destination`."""
    released(
        repo, "1.0.1", extra={"kernel-status.toml": f'kind = "redirect"\ndestination = "{destination}"\n'.encode()}
    )


def policy_file(directory: Path, sigstore, publishers: str) -> None:
    (directory / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "1"\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n{publishers}'
    )


def quietly(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KernelRedirectWarning)
        warnings.simplefilter("ignore", kernelpin.UnpinnedKernelWarning)
        return call()


def test_a_signed_sdk_variant_is_locked(new_repo, project, cli, sigstore) -> None:
    # d72b531: AttributeError: 'NoneType' object has no attribute 'name' (trust/gate.py, _served_as_other).
    repo_id, repo = new_repo("sdk", "kernel")
    released(repo, "1.0.0", sigstore, variants=("sdk", "sdk-cpython-3.12-abi3-x86_64-linux", CPU_213))
    root = project(f'"{repo_id}" = "^1"\n')
    with open(root / "pyproject.toml", "a") as stream:
        stream.write(
            f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n[tool.kernelpin.trust.publishers.acme]\n'
        )
    status, _, err = cli("lock")
    assert status == 0, err
    assert 'name = "sdk"' in (root / "kernelpin.lock").read_text()


@pytest.mark.parametrize(
    "origin",
    [
        '[tool.kernelpin.trust.publishers."{old}"]\nrequire-signatures = true\n',
        '[tool.kernelpin.trust.publishers."{old}"]\nsigners = [{{ repository = "acme-corp/kernels" }}]\n',
    ],
)
def test_a_redirect_keeps_the_origins_signature_requirement(
    hub, hf_env, new_repo, tmp_path, monkeypatch, sigstore, origin
):
    # d72b531 loaded acme/evil's unsigned code through acme/x's unsigned kernel-status.toml.
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("named", "kernel")
    evil_id, evil = new_repo("evil", "kernel")
    released(evil, "1.0.0")
    moved(old, evil_id)
    policy_file(tmp_path, sigstore, origin.format(old=old_id))
    with pytest.raises(SignatureError) as refused:
        quietly(lambda: kernelpin.get_kernel(old_id, version=1))
    assert str(refused.value).startswith(f"{evil_id} {CPU_213}: no signature (metadata.json.sigstore), but ")
    assert f'publishers."{old_id}"' in str(refused.value)  # the entry that asked for it: the one the user named
    assert "moved" in str(refused.value)
    # The same destination, asked for by its own name, is judged by its own entry: it is not what the user named.
    assert quietly(lambda: kernelpin.get_kernel(evil_id, version=1)).VERSION == "1.0.0"
    with pytest.raises(SignatureError):  # has_kernel refuses as get_kernel does
        quietly(lambda: kernelpin.has_kernel(old_id, version=1))


def test_a_redirect_to_a_signed_release_of_an_allowed_signer_loads(
    hub, hf_env, new_repo, tmp_path, monkeypatch, sigstore
):
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("named", "kernel")
    new_id, new = new_repo("signed-new", "kernel")
    released(new, "1.0.0", sigstore)
    moved(old, new_id)
    policy_file(
        tmp_path,
        sigstore,
        f'[tool.kernelpin.trust.publishers."{old_id}"]\nsigners = [{{ repository = "acme-corp/kernels" }}]\n',
    )
    assert quietly(lambda: kernelpin.get_kernel(old_id, version=1)).VERSION == "1.0.0"


def test_a_moved_kernel_loads_offline_as_online_and_has_kernel_answers(hub, hf_env, new_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("old", "kernel")
    new_id, new = new_repo("new", "kernel")
    released(old, "1.0.0")
    released(new, "1.5.0")
    moved(old, new_id)
    # d72b531: has_kernel raised KernelMoved (with advice about locks) where get_kernel loads.
    assert kernelpin.has_kernel(old_id, version=1) is True
    assert quietly(lambda: kernelpin.get_kernel(old_id, version=1)).VERSION == "1.5.0"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # d72b531: "has not resolved it online before": only the destination was remembered.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernelpin.get_kernel(old_id, version=1).VERSION == "1.5.0"
    assert any(issubclass(w.category, KernelRedirectWarning) for w in caught)
    assert kernelpin.has_kernel(old_id, version=1) is True
    with pytest.raises(KernelpinError, match="has not resolved it online before"):
        kernelpin.get_kernel(old_id, version=2)
