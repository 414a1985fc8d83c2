"""The release side of signatures: `tools.release stage` and `kernelpin publish`'s check keep a variant's
`metadata.json.sigstore` beside its metadata.json (the kernels-data layout: the digest covers neither, nor
`__pycache__`), and `kernels verify-signature`'s own function, given the test kit's trust root, accepts the
staged release served by the test Hub."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpin.publisher.release import check_release
from testkit.fake_kernel import CPU_213, write_variant
from testkit.releasing import hub_env
from testkit.sigstore_root import Identity, SigstoreRoot
from tools.release.stage import stage


@pytest.fixture
def signed_variant(tmp_path: Path) -> tuple[SigstoreRoot, Path]:
    root = SigstoreRoot()
    variant = write_variant(tmp_path / "build-out" / "img2gray", "1.0.0", CPU_213)
    root.sign_variant(variant, Identity())
    (variant / "__pycache__").mkdir()
    (variant / "__pycache__" / "_impl.cpython-311.pyc").write_bytes(b"\0")  # left by an import of the build
    return root, variant


def test_stage_keeps_the_signature_and_leaves_bytecode_out(signed_variant, tmp_path: Path) -> None:
    _, variant = signed_variant
    release = stage([variant], tmp_path / "release", "kernels-community/img2gray")
    staged = release.root / "build" / CPU_213
    assert (staged / "metadata.json.sigstore").read_bytes() == (variant / "metadata.json.sigstore").read_bytes()
    assert not (staged / "__pycache__").exists()
    assert f"build/{CPU_213}/metadata.json.sigstore" in {file.path for file in release.files}
    # publish's own check reads the same layout, bytecode left by an import included.
    (staged / "__pycache__").mkdir()
    (staged / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert check_release(release.root).tag == "v1.0.0"
    # A planted file is still refused: only the bundle beside metadata.json is outside the digest.
    shutil.copyfile(staged / "metadata.json.sigstore", staged / "extra.sigstore")
    with pytest.raises(Exception, match="extra.sigstore: present but not in the digest"):
        check_release(release.root)


# `kernels verify-signature` as its users run it, in its own process, with Sigstore's production root swapped for
# the test kit's (kernels calls Verifier.production() when it verifies; where kernels keeps its verify module and
# command line, kernels.verify or kernels._internals.verify by version: kernelpin.loading.kernels_internals).
_KERNELS_WITH_TEST_ROOT = """
import sys
from sigstore.models import TrustedRoot
from sigstore.verify import Verifier
from kernelpin.loading import kernels_internals
verify = kernels_internals.module("verify", "the test")
main = kernels_internals.attribute("cli", "main", "the test")
root = TrustedRoot.from_file(sys.argv[1])
verify.Verifier.production = classmethod(lambda cls, offline=False: Verifier(trusted_root=root))
sys.argv = ["kernels", *sys.argv[2:]]
main()
"""


def test_kernels_verify_signature_accepts_the_staged_release(signed_variant, tmp_path: Path, hub) -> None:
    root, variant = signed_variant
    release = stage([variant], tmp_path / "release", "kernels-community/img2gray")
    repo = hub.repo("trusted/img2gray-signed", "kernel")
    repo.write(
        {
            path.relative_to(release.root).as_posix(): path.read_bytes()
            for path in release.root.rglob("*")
            if path.is_file()
        },
        clear=True,
    )
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    repo.branch("v1")
    trusted_root = root.write_trusted_root(tmp_path / "trusted_root.json")
    env = hub_env(hub.endpoint, tmp_path / "hf", HF_HUB_DISABLE_TELEMETRY="0")  # kernels' user agent needs it on

    def kernels_verify_signature() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-c",
                _KERNELS_WITH_TEST_ROOT,
                str(trusted_root),
                "verify-signature",
                "--all-variants",
                "trusted/img2gray-signed",
                "1",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = kernels_verify_signature()
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"{CPU_213}: (kernel|the) metadata is correctly signed", done.stdout), done.stdout  # 0.17 | 0.18+
    # The same release signed by another Sigstore instance fails it: the trust root given is the one used.
    SigstoreRoot().sign_variant(release.root / "build" / CPU_213, Identity())
    repo.write(
        {
            f"build/{CPU_213}/metadata.json.sigstore": (
                release.root / "build" / CPU_213 / "metadata.json.sigstore"
            ).read_bytes()
        }
    )
    repo.commit("re-signed elsewhere")
    repo.branch("v1")
    done = kernels_verify_signature()
    assert done.returncode == 1 and re.search(
        "metadata signature verification failed|the metadata could not be verified against its signature", done.stdout
    ), done.stdout + done.stderr  # 0.17 | 0.18+


def test_publish_checks_signatures(signed_variant, tmp_path: Path) -> None:
    from kernelpin.publisher.release import PublishError, check_signatures

    root, variant = signed_variant
    trusted_root = root.write_trusted_root(tmp_path / "trusted_root.json")
    release = stage([variant], tmp_path / "release", "acme/img2gray")
    signers = check_signatures(release.root, release.variants, required=True, trusted_root=trusted_root)
    assert signers[CPU_213].identity.endswith("/.github/workflows/build.yaml@refs/heads/main")
    staged = release.root / "build" / CPU_213
    # A bad signature is refused whether or not signatures are required.
    (staged / "metadata.json.sigstore").write_text("{}")
    for required in (True, False):
        with pytest.raises(PublishError, match="is not a Sigstore bundle.*python -m sigstore sign --bundle"):
            check_signatures(release.root, release.variants, required=required, trusted_root=trusted_root)
    # Unsigned: refused only when signatures are required (the CI release job requires them).
    (staged / "metadata.json.sigstore").unlink()
    assert check_signatures(release.root, release.variants, required=False, trusted_root=trusted_root) == {
        CPU_213: None
    }
    with pytest.raises(
        PublishError, match=f"build/{CPU_213}: unsigned \\(no metadata.json.sigstore\\) and --require-signatures"
    ):
        check_signatures(release.root, release.variants, required=True, trusted_root=trusted_root)


def test_publish_require_signatures_on_the_command_line(signed_variant, tmp_path: Path, cli) -> None:
    root, variant = signed_variant
    trusted_root = root.write_trusted_root(tmp_path / "trusted_root.json")
    release = stage([variant], tmp_path / "release", "acme/img2gray")
    args = ("publish", str(release.root), "--repo", "acme/img2gray", "--dry-run", "--require-signatures")
    status, out, err = cli(*args, "--trusted-root", str(trusted_root))
    assert status == 0 and "Dry run: would upload" in out, err
    # Sigstore's own root does not trust the test kit's CA: the same signature is refused.
    status, _, err = cli(*args)
    assert status == 1 and "issued by another CA" in err
    (release.root / "build" / CPU_213 / "metadata.json.sigstore").unlink()
    status, _, err = cli(*args, "--trusted-root", str(trusted_root))
    assert status == 1 and f"build/{CPU_213}: unsigned (no metadata.json.sigstore) and --require-signatures" in err
