"""Signatures through lock, sync, load and verify, against the test Hub and the test kit's Sigstore instance
(the project's policy names its trust root): the publisher gate, the signer recorded in the lock, continuity
across upgrades, and every attack of issue 29 where it is caught."""

from __future__ import annotations

import json
import re
import socket
import tomllib
from pathlib import Path

import pytest

from kernelpin.commands import sync as syncing
from kernelpin.errors import KernelpinError
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.project import Project
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, VARIANTS, kernel_files
from testkit.sigstore_root import Identity
from tests.kernelpin.faulty_hub import SilentServer
from tests.kernelpin.helpers import UNTRUSTED_ORG, snapshot_dir

ACME = Identity(
    repository="acme-corp/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.0.0", commit="a" * 40
)
ACME_NEXT = Identity(
    repository="acme-corp/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.1.0", commit="b" * 40
)
HIJACKER = Identity(repository="hijacker/kernels", workflow=".github/workflows/x.yaml", commit="c" * 40)
ACME_WORKFLOW = "https://github.com/acme-corp/kernels/.github/workflows/release.yaml"
HIJACKER_WORKFLOW = "https://github.com/hijacker/kernels/.github/workflows/x.yaml"
ACME_SIGNERS = '[{ repository = "acme-corp/kernels", workflow = ".github/workflows/release.yaml" }]'


@pytest.fixture(autouse=True, params=["worker", "in-process"])
def signature_worker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test both ways: verified in the signature worker (the default) and in the command's process."""
    monkeypatch.setenv("KERNELPIN_SIGNATURE_WORKER", "1" if request.param == "worker" else "0")


@pytest.fixture
def app(project, sigstore):
    """project(dependencies, trust): pyproject.toml with [tool.kernelpin.trust] pointing at the test trust root."""

    def make(dependencies: str, trust: str = "") -> Path:
        root = project(dependencies)
        with open(root / "pyproject.toml", "a") as stream:
            stream.write(f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n{trust}')
        return root

    return make


def release(repo, sigstore, version: str, identity: Identity | None, **kwargs) -> str:
    files = kernel_files(version, **kwargs)
    if identity is not None:
        files = sigstore[0].sign_files(files, identity)
    repo.write(files, clear=True)
    commit = repo.commit(f"release {version}")
    repo.tag(f"v{version}")
    return commit


def locked_signatures(root: Path) -> dict[str, dict]:
    data = tomllib.loads((root / "kernelpin.lock").read_text())
    return {v["name"]: v.get("signature") for v in data["kernel"][0]["variant"]}


def one_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    return line


def test_a_signed_release_is_locked_with_its_signer(new_repo, app, cli, sigstore, hf_env) -> None:
    repo_id, repo = new_repo("signed", "kernel")
    release(repo, sigstore, "1.0.0", ACME)
    root = app(f'"{repo_id}" = "^1"\n', f"[tool.kernelpin.trust.publishers.acme]\nsigners = {ACME_SIGNERS}\n")
    status, out, err = cli("lock")
    assert status == 0, err
    signatures = locked_signatures(root)
    assert set(signatures) == set(VARIANTS)
    signature = signatures[CPU_213]
    assert signature["identity"] == (
        "https://github.com/acme-corp/kernels/.github/workflows/release.yaml@refs/tags/v1.0.0"
    )
    assert (signature["issuer"], signature["source-repository"], signature["source-commit"]) == (
        "https://token.actions.githubusercontent.com",
        "https://github.com/acme-corp/kernels",
        "a" * 40,
    )
    assert signature["log-index"] >= 1 and signature["integrated-time"] > 0 and len(signature["log-id"]) == 64
    lock = lockfiles.read(root / "kernelpin.lock")
    variant = lock.kernels[0].variant(CPU_213)
    assert variant.file("metadata.json.sigstore").sha256 == signature["bundle-sha256"]
    # sync verifies it again from the downloaded bundle, offline; load checks the recorded signer.
    assert cli("sync", "--frozen", "--offline")[0] == 1  # nothing downloaded yet: offline cannot fetch
    status, out, err = cli("sync", "--frozen")
    assert status == 0, err
    status, out, err = cli("verify", "--signatures", "--json")
    assert status == 0, out + err
    rows = json.loads(out)["files"]
    assert {"repo": repo_id, "variant": CPU_213, "path": "metadata.json.sigstore", "status": "signed"} in rows
    # A file changed after sync: verify --signatures names the signed digest it no longer matches.
    impl = (
        hf_env
        / f"kernels--{repo_id.replace('/', '--')}"
        / "snapshots"
        / lock.kernels[0].commit
        / "build"
        / CPU_213
        / "_impl.py"
    )
    impl.write_bytes(b"import os\n")
    status, out, err = cli("verify", "--signatures")
    assert (
        status == 1
        and f"signature: {repo_id} {CPU_213}: the files do not match the signed metadata.json digest (_impl.py)" in err
    )


def test_an_unsigned_release_of_a_trusted_publisher_is_locked_with_a_notice(new_repo, app, cli, sigstore) -> None:
    repo_id, repo = new_repo("unsigned", "kernel")
    release(repo, sigstore, "1.0.0", None)
    root = app(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 0, err
    assert f"warning: {repo_id} 1.0.0: unsigned ({', '.join(sorted(VARIANTS))})" in err
    assert locked_signatures(root)[CPU_213] == {"unsigned": True}
    # Requiring signatures (everywhere, for the organization, or for the repository) refuses it.
    for trust in (
        "require-signatures = true\n",
        "[tool.kernelpin.trust.publishers.acme]\nrequire-signatures = true\n",
        f'[tool.kernelpin.trust.publishers."{repo_id}"]\nrequire-signatures = true\n',
    ):
        app(f'"{repo_id}" = "^1"\n', trust)
        status, _out, err = cli("lock", "--upgrade")
        assert status == 1
        assert one_line(err).startswith(
            f"error: {repo_id} torch212-cxx11-cpu-x86_64-linux: no signature (metadata.json.sigstore), but "
        )
        assert "requires one; ask the publisher to sign the release, or pin a signed one" in err
        # load refuses the unsigned lock too, once the policy requires signatures.
        with pytest.raises(KernelpinError, match="locked unsigned, but .* requires a signature"):
            import kernelpin

            kernelpin.load(repo_id, lock=root / "kernelpin.lock")


def test_untrusted_publishers_are_refused_unless_named(new_repo, app, cli, sigstore) -> None:
    repo_id, repo = new_repo("stranger", "kernel", org=UNTRUSTED_ORG)
    release(repo, sigstore, "1.0.0", None)
    app(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 1
    assert one_line(err) == (
        f"error: {repo_id}: untrusted publisher: the Hub does not mark {UNTRUSTED_ORG} a trusted kernel publisher "
        f"(trustedKernelPublisher) and pyproject.toml does not name it; if you trust it, add "
        f'[tool.kernelpin.trust.publishers."{UNTRUSTED_ORG}"] (or "{repo_id}") to pyproject.toml'
    )
    app(f'"{repo_id}" = "^1"\n', f'[tool.kernelpin.trust.publishers."{repo_id}"]\n')
    assert cli("lock")[0] == 0


def test_wrong_identity_and_attacks_at_lock(new_repo, app, cli, sigstore) -> None:
    trust = f"[tool.kernelpin.trust.publishers.acme]\nsigners = {ACME_SIGNERS}\n"
    repo_id, repo = new_repo("attacked", "kernel")
    release(repo, sigstore, "1.0.0", HIJACKER)
    app(f'"{repo_id}" = "^1"\n', trust)
    status, _, err = cli("lock")
    assert status == 1 and "signed by https://github.com/hijacker/kernels/.github/workflows/x.yaml" in one_line(err)
    assert 'which [tool.kernelpin.trust.publishers."acme"] does not allow' in err
    # Swap across variants, downgrade (an older release's valid bundle), tampered metadata, malformed, huge.
    # Each attack is tagged with the version its other variants' signed metadata.json says (issue 41 finding 5
    # binds them), so that only the variant attacked is refused.
    older = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    cpu, other = f"build/{CPU_213}/metadata.json", "build/torch212-cxx11-cpu-x86_64-linux/metadata.json"
    for name, attack, says in (
        ("swapped variant", lambda good: {cpu + ".sigstore": good[other + ".sigstore"]}, "signs other bytes"),
        ("downgrade", lambda good: {cpu + ".sigstore": older[cpu + ".sigstore"]}, "signs other bytes"),
        ("tampered metadata", lambda good: {cpu: good[cpu].replace(b"Apache-2.0", b"MIT")}, "signs other bytes"),
        ("malformed", lambda good: {cpu + ".sigstore": b"{"}, "is not a Sigstore bundle"),
        ("huge", lambda good: {cpu + ".sigstore": b" " * ((1 << 20) + 1)}, "over the 1048576 a Sigstore bundle may be"),
    ):
        version = f"1.0.{len(repo.refs()[0])}"
        good = sigstore[0].sign_files(kernel_files(version), ACME)
        repo.write({**good, **attack(good)}, clear=True)
        repo.commit(name)
        repo.tag(f"v{version}")
        status, _, err = cli("lock", "--upgrade")
        assert status == 1, name
        line = one_line(err)
        assert line.startswith(f"error: {repo_id} {CPU_213}: ") and says in line, (name, err)


def test_a_swapped_repository_is_refused_by_its_own_policy(new_repo, app, cli, sigstore) -> None:
    """acme/b serving acme/a's release, bundles included: valid signatures, by a signer acme/b's entry does not
    name."""
    a_id, a_repo = new_repo("a", "kernel")
    b_id, b_repo = new_repo("b", "kernel")
    files = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    for repo in (a_repo, b_repo):
        repo.write(files, clear=True)
        repo.commit("release")
        repo.tag("v1.0.0")
    trust = (
        f'[tool.kernelpin.trust.publishers."{a_id}"]\nsigners = {ACME_SIGNERS}\n'
        f'[tool.kernelpin.trust.publishers."{b_id}"]\nsigners = [{{ repository = "acme-corp/b" }}]\n'
    )
    app(f'"{a_id}" = "^1"\n"{b_id}" = "^1"\n', trust)
    status, _, err = cli("lock")
    assert status == 1 and one_line(err).startswith(f"error: {b_id} ") and "acme-corp/kernels" in err


def test_signer_continuity_on_upgrade(new_repo, app, cli, sigstore) -> None:
    repo_id, repo = new_repo("continuity", "kernel")
    release(repo, sigstore, "1.0.0", ACME)
    root = app(f'"{repo_id}" = "^1"\n')  # no signers named: any identity, then held to the first
    assert cli("lock")[0] == 0
    release(repo, sigstore, "1.1.0", ACME_NEXT)  # the same workflow on the next tag: the same signer
    status, _, err = cli("lock", "--upgrade")
    assert status == 0, err
    release(repo, sigstore, "1.2.0", HIJACKER)
    status, _, err = cli("lock", "--upgrade")
    assert status == 1
    assert f"{repo_id} {CPU_213}: the new release is signed by https://github.com/hijacker/kernels/" in err
    assert (
        f"but the locked one by https://github.com/acme-corp/kernels/.github/workflows/release.yaml: the "
        f"publisher's signer changed. If you trust the new one, repeat the command with `--accept-signer "
        f"{repo_id}=https://github.com/hijacker/kernels/.github/workflows/x.yaml`"
    ) in err
    assert "1.1.0" in (root / "kernelpin.lock").read_text()  # nothing written
    status, _out, err = cli(
        "lock",
        "--upgrade",
        "--accept-signer",
        f"{repo_id}=https://github.com/hijacker/kernels/.github/workflows/x.yaml",
    )
    assert status == 0, err
    # Signed, then unsigned: refused the same way.
    release(repo, sigstore, "1.3.0", None)
    status, _, err = cli("lock", "--upgrade")
    assert status == 1 and "the new release is unsigned, but the locked one was signed by" in err
    assert f"--accept-signer {repo_id}=unsigned`" in err
    assert cli("lock", "--upgrade", "--accept-signer", f"{repo_id}=unsigned")[0] == 0
    assert locked_signatures(root)[CPU_213] == {"unsigned": True}


def test_add_and_a_relocking_sync_keep_the_signer_unless_accept_signer_names_the_new_one(
    new_repo, app, cli, sigstore
) -> None:
    """`add` of a new range for a locked kernel and a `sync` that re-locks a changed requirement refuse a change
    of signer as `lock` does, and take the same --accept-signer (the library functions the same argument)."""
    repo_id, repo = new_repo("accept", "kernel")
    release(repo, sigstore, "1.0.0", ACME)
    root = app(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    release(repo, sigstore, "2.0.0", HIJACKER)
    before = (root / "pyproject.toml").read_text()
    status, _, err = cli("add", f"{repo_id}@^2")
    assert status == 1 and f"repeat the command with `--accept-signer {repo_id}={HIJACKER_WORKFLOW}`" in err
    assert (root / "pyproject.toml").read_text() == before and '"1.0.0"' in (root / "kernelpin.lock").read_text()
    status, _, err = cli("add", f"{repo_id}@^2", "--accept-signer", f"{repo_id}={HIJACKER_WORKFLOW}")
    assert status == 0, err
    assert locked_signatures(root)[CPU_213]["identity"].startswith(HIJACKER_WORKFLOW + "@")

    def require(major: int) -> None:
        text = (root / "pyproject.toml").read_text()
        (root / "pyproject.toml").write_text(
            re.sub(rf'^"{repo_id}" = .*$', f'"{repo_id}" = "^{major}"', text, flags=re.MULTILINE)
        )

    release(repo, sigstore, "3.0.0", ACME)  # back to the first signer: a change from the locked one all the same
    require(3)
    project, source = Project(root), HubSource(HubSettings.from_env())
    with pytest.raises(KernelpinError, match=f"repeat the command with `--accept-signer {repo_id}={ACME_WORKFLOW}`"):
        syncing.sync(project, source, None, all_variants=True)
    assert '"2.0.0"' in (root / "kernelpin.lock").read_text()
    synced = syncing.sync(project, source, None, all_variants=True, accepted_signers={repo_id: {ACME_WORKFLOW}})
    assert synced.lock.lock.kernels[0].version == "3.0.0" and synced.variants
    release(repo, sigstore, "4.0.0", HIJACKER)
    require(4)
    status, _, err = cli("sync")
    assert status == 1 and f"--accept-signer {repo_id}={HIJACKER_WORKFLOW}`" in err
    status, _, err = cli("sync", "--accept-signer", f"{repo_id}={HIJACKER_WORKFLOW}")
    assert status == 0, err
    assert '"4.0.0"' in (root / "kernelpin.lock").read_text()
    assert locked_signatures(root)[CPU_213]["identity"].startswith(HIJACKER_WORKFLOW + "@")


@pytest.fixture
def tuf_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Sigstore's TUF repository reached through a proxy at `endpoint` (a silent one, or a closed port), with
    sigstore-python's TUF cache in this test's own directories."""

    def use(endpoint: str) -> None:
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, endpoint)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))

    return use


def test_refresh_trust_root_without_an_answer_fails_at_once_in_one_line(project, cli, tuf_through, monkeypatch) -> None:
    """A silent link (tuf alone would wait 30 s per request and retry, minutes): the refresh waits
    KERNELPIN_HTTP_TIMEOUT, once, before anything is resolved."""
    project('"acme/not-asked-for" = "^1"\n')
    monkeypatch.setenv("KERNELPIN_HTTP_TIMEOUT", "0.5")
    with SilentServer() as silent:
        tuf_through(silent)
        status, out, err = cli("lock", "--refresh-trust-root")
    assert status == 1 and out == ""
    assert one_line(err) == (
        "error: no answer from Sigstore's TUF repository within 0.5 s, so its trust root cannot be refreshed "
        "(offline, or the network blocks it); run without --refresh-trust-root to use the one sigstore-python ships "
        "(it works offline), or set KERNELPIN_HTTP_TIMEOUT=SECONDS to wait longer"
    )


def test_refresh_trust_root_through_a_refused_connection_names_the_cause(project, cli, tuf_through) -> None:
    project('"acme/not-asked-for" = "^1"\n')
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: connections are refused
    tuf_through(f"http://127.0.0.1:{port}")
    status, _out, err = cli("lock", "--refresh-trust-root")
    line = one_line(err)
    assert status == 1 and line.startswith("error: cannot refresh Sigstore's trust root through TUF (")
    assert "Failed to refresh TUF metadata" not in line and "proxy" in line.lower(), line
    assert line.endswith("; run without --refresh-trust-root to use the one sigstore-python ships (it works offline)")


def test_sync_catches_a_lock_that_lies_about_its_signer_and_a_tampered_file(
    new_repo, app, cli, sigstore, hf_env
) -> None:
    repo_id, repo = new_repo("tampered", "kernel")
    commit = release(repo, sigstore, "1.0.0", ACME)
    root = app(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    # A lock edited to claim another signer (the same bundle, another identity): sync verifies the bundle again.
    text = (root / "kernelpin.lock").read_text()
    (root / "kernelpin.lock").write_text(
        text.replace(
            "acme-corp/kernels/.github/workflows/release.yaml", "acme-corp/kernels/.github/workflows/other.yaml"
        )
    )
    status, _, err = cli("sync", "--frozen")
    assert status == 1
    assert one_line(err).startswith(
        f"error: {repo_id} {CPU_213}: the lock records a signature by "
        "https://github.com/acme-corp/kernels/.github/workflows/other.yaml"
    )
    assert "the lock was edited" in err
    assert snapshot_dir(hf_env, repo_id, commit, "kernel").exists()
    (root / "kernelpin.lock").write_text(text)
    assert cli("sync", "--frozen")[0] == 0
    # A file changed on the Hub under a valid signature: it does not match the signed digest the lock pins.
    files = sigstore[0].sign_files(kernel_files("1.0.1"), ACME)
    repo.write({**files, f"build/{CPU_213}/_impl.py": b"import os\n"}, clear=True)
    repo.commit("tampered")
    repo.tag("v1.0.1")
    assert cli("lock", "--upgrade")[0] == 0
    status, _, err = cli("sync", "--frozen")
    assert status == 1 and f"build/{CPU_213}/_impl.py" in err and "sha256" in err, err
