"""Issue 9: kernelpin under attack. Only verified bytes run, nothing outside kernelpin's files is touched,
hostile locks and metadata give clear errors, nothing hangs, edits do not race."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import huggingface_hub.utils._http as hf_http
import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.format import lockfile
from kernelpin.hub.client import capped_timeouts
from kernelpin.hub.listing import remote_file
from kernelpin.loading.runtime import module_name
from kernelpin.store import lockfiles
from kernelpin.store.content import Store
from testkit.fake_kernel import CPU_213, kernel_files, publish, variant_files
from tests.kernelpin.faulty_hub import SilentServer, StatusServer
from tests.kernelpin.helpers import AS_NOBODY, REPO_ROOT, require_nobody, snapshot_dir, snapshot_files


def locked_kernel(root: Path) -> lockfile.LockedKernel:
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    return kernel


def fresh_load(kernel: lockfile.LockedKernel, **kwargs):
    """kernelpin.load as a new process would do it (the module is not imported yet)."""
    name = module_name(kernel.repo_id, kernel.commit, CPU_213)
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]
    return kernelpin.load(kernel.repo_id, **kwargs)


def synced_variant(project, cli, hf_env) -> tuple[lockfile.LockedKernel, Path]:
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    kernel = locked_kernel(root)
    return kernel, snapshot_dir(hf_env, kernel.repo_id, kernel.commit) / "build" / CPU_213


def evil_source(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').close()\nVARIANT = 'evil'\n\ndef gray(pixels):\n    return pixels\n"


# --- 1. only verified bytes run ------------------------------------------------------------------


def test_a_planted_package_next_to_a_listed_module_never_runs(img2gray, project, cli, hf_env, tmp_path):
    kernel, variant = synced_variant(project, cli, hf_env)
    marker = tmp_path / "planted-code-ran"
    (variant / "_impl").mkdir()
    (variant / "_impl" / "__init__.py").write_text(evil_source(marker))  # a package wins over _impl.py
    assert fresh_load(kernel).VARIANT == CPU_213
    assert not marker.exists()
    status, _, err = cli("verify")
    assert status == 1 and f"unlisted: acme/img2gray {CPU_213}/_impl" in err
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0 and f"build/{CPU_213}/_impl is not in the lock; removed" in err
    assert not (variant / "_impl").exists() and cli("verify")[0] == 0


def test_bytecode_caches_are_neither_read_nor_written(img2gray, project, cli, hf_env, tmp_path):
    kernel, variant = synced_variant(project, cli, hf_env)
    marker = tmp_path / "cached-bytecode-ran"
    impl = variant / "_impl.py"
    # A .pyc that Python's own loader would accept for _impl.py: it records the source's mtime and size.
    stat = impl.stat()
    code = compile(evil_source(marker), str(impl), "exec")
    pyc = importlib._bootstrap_external._code_to_timestamp_pyc(code, int(stat.st_mtime), stat.st_size)
    cached = Path(importlib.util.cache_from_source(str(impl)))
    cached.parent.mkdir()
    cached.write_bytes(pyc)
    assert fresh_load(kernel).VARIANT == CPU_213
    assert not marker.exists()
    assert [p.name for p in cached.parent.iterdir()] == [cached.name]  # nothing written


def test_a_lock_that_omits_the_package_code_is_refused(img2gray, project, cli, hf_env, tmp_path):
    kernel, _variant = synced_variant(project, cli, hf_env)
    lock_path = Path.cwd() / "kernelpin.lock"

    def relock(keep: set[str]) -> None:
        variants = tuple(
            dataclasses.replace(v, files=tuple(f for f in v.files if f.path in keep)) if v.name == CPU_213 else v
            for v in kernel.variants
        )
        lockfiles.write(lock_path, lockfile.Lock((dataclasses.replace(kernel, variants=variants),)))

    relock({"metadata.json"})  # the cache still holds __init__.py and _impl.py from the sync
    with pytest.raises(KernelpinError, match=r"lists no __init__.py for variant .*nothing verified can be imported"):
        fresh_load(kernel)
    relock({"metadata.json", "__init__.py"})  # __init__ imports ._impl, which the lock does not list
    with pytest.raises(ModuleNotFoundError, match=r"lists no such module"):
        fresh_load(kernel)
    assert not any(name.startswith(module_name(kernel.repo_id, kernel.commit, CPU_213)) for name in sys.modules)
    status, _, err = cli("verify")
    assert status == 1 and f"unlisted: acme/img2gray {CPU_213}/_impl.py" in err


def test_a_shared_library_is_verified_right_before_the_package_runs(new_repo, project, cli, hf_env, monkeypatch):
    repo_id, repo = new_repo()
    init = b"from pathlib import Path\nLIBRARY = Path(__file__).with_name('_lib.so').read_bytes()\n"
    publish(repo, "1.0.0", variants=(CPU_213,), extra={"__init__.py": init, "_lib.so": b"\x7fELF the real one\n"})
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    kernel = locked_kernel(root)
    assert fresh_load(kernel).LIBRARY == b"\x7fELF the real one\n"
    ensure_variant = Store.ensure_variant

    def install_then_swap_the_library(self, *args, **kwargs):
        # A local attacker who can write the cache swaps the library after kernelpin checked the files.
        result = ensure_variant(self, *args, **kwargs)
        (result.directory / "_lib.so").write_bytes(b"\x7fELF the evil one\n")
        return result

    monkeypatch.setattr(Store, "ensure_variant", install_then_swap_the_library)
    with pytest.raises(IntegrityError, match=r"_lib.so: sha256 .* It is not loaded; run `kernelpin sync`"):
        fresh_load(kernel)


# --- 2. nothing outside kernelpin's files is touched ---------------------------------------------


def test_repair_replaces_a_link_never_what_it_points_to(img2gray, project, cli, hf_env, tmp_path):
    root = project('"acme/img2gray" = "^0.1"\n')
    vendor = tmp_path / "vendor"
    assert cli("sync", "--target", str(vendor), "--torch", "2.13")[0] == 0
    kernel = locked_kernel(root)
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's own file\n")
    vendored = vendor / "acme" / "img2gray" / kernel.commit / "build" / CPU_213 / "_impl.py"
    vendored.unlink()
    vendored.symlink_to(precious)
    status, out, err = cli("sync", "--target", str(vendor), "--torch", "2.13")
    assert status == 0, err
    assert precious.read_text() == "the user's own file\n"
    assert not vendored.is_symlink() and cli("verify", "--target", str(vendor))[0] == 0
    # The Hub cache, where snapshot entries are links to blobs: a relinked entry is replaced, the user's
    # file is kept, and the entry points at a verified blob again.
    assert cli("sync", "--torch", "2.13")[0] == 0
    entry = snapshot_dir(hf_env, kernel.repo_id, kernel.commit) / "build" / CPU_213 / "_impl.py"
    entry.unlink()
    entry.symlink_to(precious)
    status, out, err = cli("sync", "--torch", "2.13")
    assert status == 0 and "1 replaced" in out, err
    assert precious.read_text() == "the user's own file\n"
    assert entry.resolve().parent.name == "blobs" and cli("verify")[0] == 0


def user_directory(tmp_path: Path) -> Path:
    """A user's own directory: files named like a variant's (one must not be "repaired") and others."""
    home = tmp_path / "user-data"
    home.mkdir()
    (home / "_impl.py").write_text("# the user's own _impl.py\n")
    (home / "notes.txt").write_text("the user's notes\n")
    return home


@pytest.mark.parametrize("linked", ["variant", "build"])
def test_a_linked_directory_in_the_target_is_refused_never_followed(img2gray, project, cli, tmp_path, linked):
    # Failed before: sync "removed" the user's notes.txt as not in the lock, "repaired" their _impl.py (deleted
    # it and downloaded the kernel's in its place), and exited 0; verify listed and hashed the user's files.
    root = project('"acme/img2gray" = "^0.1"\n')
    vendor = tmp_path / "vendor"
    assert cli("sync", "--target", str(vendor), "--torch", "2.13")[0] == 0
    kernel = locked_kernel(root)
    build = vendor / "acme" / "img2gray" / kernel.commit / "build"
    home = user_directory(tmp_path)
    link = build / CPU_213 if linked == "variant" else build
    shutil.rmtree(link)
    link.symlink_to(home / CPU_213 if linked == "build" else home)
    if linked == "build":
        (home / CPU_213).mkdir()
        (home / CPU_213 / "_impl.py").write_text("# the user's own _impl.py\n")
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    status, _, err = cli("verify", "--target", str(vendor))
    assert status == 1 and f"{link} is a symbolic link" in err and "remove the link" in err
    with pytest.raises(IntegrityError, match="is a symbolic link"):
        fresh_load(kernel, target=vendor)
    status, _, err = cli("sync", "--target", str(vendor), "--torch", "2.13")
    assert status == 1 and f"{link} is a symbolic link (to {link.readlink()})" in err
    assert "Remove the link (it is not kernelpin's)" in err
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before
    link.unlink()  # what the error says to do
    assert cli("sync", "--target", str(vendor), "--torch", "2.13")[0] == 0
    assert cli("verify", "--target", str(vendor))[0] == 0
    assert fresh_load(kernel, target=vendor).VARIANT == CPU_213
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before


def test_a_linked_variant_directory_in_the_hub_cache_is_refused_never_followed(
    img2gray, project, cli, hf_env, tmp_path
):
    kernel, variant = synced_variant(project, cli, hf_env)
    home = user_directory(tmp_path)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    shutil.rmtree(variant)
    variant.symlink_to(home)
    status, _, err = cli("verify")
    assert status == 1 and f"{variant} is a symbolic link" in err
    with pytest.raises(IntegrityError, match="is a symbolic link"):
        fresh_load(kernel)
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and f"{variant} is a symbolic link (to {home})" in err
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before
    variant.unlink()
    assert cli("sync", "--torch", "2.13")[0] == 0 and cli("verify")[0] == 0
    assert fresh_load(kernel).VARIANT == CPU_213


def test_a_linked_subdirectory_of_a_variant_is_never_repaired_through(new_repo, project, cli, hf_env, tmp_path):
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,), extra={"pkg/__init__.py": b"NAME = 'pkg'\n"})
    root = project(f'"{repo_id}" = "^1"\n')
    vendor = tmp_path / "vendor"
    assert cli("sync", "--target", str(vendor), "--torch", "2.13")[0] == 0
    kernel = locked_kernel(root)
    package = vendor / repo_id / kernel.commit / "build" / CPU_213 / "pkg"
    home = tmp_path / "user-data"
    home.mkdir()
    (home / "__init__.py").write_text("# the user's own file\n")
    shutil.rmtree(package)
    package.symlink_to(home)
    status, _, err = cli("sync", "--target", str(vendor), "--torch", "2.13")
    assert status == 1 and f"{package} is a symbolic link" in err
    assert (home / "__init__.py").read_text() == "# the user's own file\n"
    package.unlink()
    assert cli("sync", "--target", str(vendor), "--torch", "2.13")[0] == 0
    assert (
        cli("verify", "--target", str(vendor))[0] == 0
        and (home / "__init__.py").read_text() == "# the user's own file\n"
    )


def test_verify_fails_when_a_locked_file_of_an_installed_variant_is_missing(img2gray, project, cli, hf_env, tmp_path):
    # Failed before: verify skipped files it did not find and exited 0.
    _kernel, variant = synced_variant(project, cli, hf_env)
    (variant / "_impl.py").unlink()
    status, out, err = cli("verify")
    assert status == 1 and f"missing: acme/img2gray {CPU_213}/_impl.py" in err and "missing" in out
    status, out, _ = cli("verify", "--json")
    assert (
        status == 1
        and {"repo": "acme/img2gray", "variant": CPU_213, "path": "_impl.py", "status": "missing"}
        in json.loads(out)["files"]
    )
    assert cli("sync", "--torch", "2.13")[0] == 0 and cli("verify")[0] == 0  # other variants: not installed, fine


# --- 3. lock fields are validated when the lock is parsed ----------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('commit = "', 'commit = "../../../ESCAPED', "commit '../../../ESCAPED"),
        ('repo = "acme/img2gray"', 'repo = "../.."', "'../..' is not a Hub repository id"),
        ('repo-type = "model"', 'repo-type = "../../x"', "repo-type '../../x' is not one of kernel, model"),
        ('version = "0.1.1"', 'version = "0.1"', "version is not a SemVer version"),
        ("size = ", "size = -", "size -"),
        ('sha256 = "', 'sha256 = "zz', "is not 64 lowercase hex digits"),
        (f'name = "{CPU_213}"', 'name = "../../x"', "name '../../x' is not a variant directory name"),
        ('archs = ["8.0", "9.0", "12.0+PTX"]', 'archs = "9.0"', "archs must be list, not str"),
        ('requirement = "^0.1"', 'requirement = "^0.1 <<"', "invalid version range"),
    ],
    ids=["commit", "repo", "repo-type", "version", "size", "sha256", "variant-name", "archs", "requirement"],
)
def test_every_lock_field_is_validated(img2gray, project, cli, tmp_path, old, new, message):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    text = (root / "kernelpin.lock").read_text()
    assert old in text
    (root / "kernelpin.lock").write_text(text.replace(old, new, 1))
    vendor = tmp_path / "vendor"
    for command in (["lock", "--check"], ["sync", "--frozen", "--all-variants", "--target", str(vendor)]):
        status, _, err = cli(*command)
        assert status == 1 and message in err and "[[kernel]] #1" in err and "run `kernelpin lock`" in err
    assert not vendor.exists() and not list(tmp_path.rglob("ESCAPED*"))


@pytest.mark.parametrize("damage", [b'sha256 = "zz', b"\xff"], ids=["field", "not-utf8"])
def test_kernelpin_lock_regenerates_a_lock_it_cannot_read_as_its_error_says(img2gray, project, cli, damage):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    good = (root / "kernelpin.lock").read_bytes()
    (root / "kernelpin.lock").write_bytes(good.replace(b'sha256 = "', damage, 1))
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and "run `kernelpin lock` to regenerate the lock" in err
    status, _, err = cli("lock")  # what the error says to do: it must not fail on the same lock again
    assert status == 0, err
    assert "warning:" in err and "regenerated from pyproject.toml" in err
    assert (root / "kernelpin.lock").read_bytes() == good


def test_a_lock_that_links_to_a_file_that_is_no_lock_is_never_overwritten(img2gray, project, cli, tmp_path):
    # Failed before: `lock` wrote the new lock over the link's target (a user's file), then said "regenerated",
    # and through a dangling link created a file wherever it pointed.
    root = project('"acme/img2gray" = "^0.1"\n')
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    (root / "kernelpin.lock").symlink_to(notes)
    status, _, err = cli("lock")
    assert status == 1 and "is not a kernelpin lock" in err and "refusing to overwrite it" in err, err
    assert notes.read_text() == "mine\n"
    (root / "kernelpin.lock").unlink()
    (root / "kernelpin.lock").symlink_to(tmp_path / "elsewhere" / "planted.pth")
    status, _, err = cli("lock")
    assert status == 1 and "which does not exist; refusing to create a file there" in err, err
    assert not (tmp_path / "elsewhere").exists()
    (root / "kernelpin.lock").unlink()
    assert cli("lock")[0] == 0


@pytest.mark.parametrize("name", ["kernelpin.lock", "pyproject.toml"])
def test_a_lock_or_pyproject_that_is_not_utf8_is_an_error_not_a_traceback(img2gray, project, cli, name):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    (root / name).write_bytes((root / name).read_bytes() + b"# \xff\xfe latin-1 from an editor\n")
    status, _, err = cli("lock", "--check")
    assert status == 1 and f"{root / name}: not UTF-8" in err
    if name == "kernelpin.lock":
        with pytest.raises(KernelpinError, match="not UTF-8"):
            kernelpin.load("acme/img2gray", lock=root)


def test_a_pyproject_starting_with_a_byte_order_mark_is_read_and_keeps_it(img2gray, new_repo, project, cli):
    # Failed before: "not valid TOML: Empty key at line 1 col 0" (some Windows editors write the mark).
    root = project('"acme/img2gray" = "^0.1"\n')
    pyproject = root / "pyproject.toml"
    pyproject.write_bytes(b"\xef\xbb\xbf" + pyproject.read_bytes())
    status, _, err = cli("lock")
    assert status == 0, err
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,))
    assert cli("add", f"{repo_id}@^1")[0] == 0
    assert cli("remove", "acme/img2gray")[0] == 0
    text = pyproject.read_bytes()
    assert text.startswith(b"\xef\xbb\xbf[project]") and text.count(b"\xef\xbb\xbf") == 1
    assert f'"{repo_id}" = "^1"'.encode() in text and b"img2gray" not in text
    assert cli("lock", "--check")[0] == 0


# --- 4-6. nothing hangs, nothing sticks, errors say what happened --------------------------------


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "kernelpin", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_http_deadline_caps_huggingface_hubs_timeouts_and_keeps_its_shorter_ones():
    """KERNELPIN_HTTP_TIMEOUT caps every request, and must not stretch huggingface_hub's shorter ones: its
    once-a-day, best-effort fetch of the agent-harness registry asks for 3 s, and a flat deadline made a silent
    Hub cost two full timeouts per command (measured: 8.4 s at KERNELPIN_HTTP_TIMEOUT=4)."""
    every = ("connect", "read", "write", "pool")
    assert capped_timeouts(dict.fromkeys(every, 3.0), 30) == dict.fromkeys(every, 3.0)
    assert capped_timeouts({"connect": 60.0, "read": 10.0, "write": None}, 30) == {
        "connect": 30,
        "read": 10.0,
        "write": 30,
        "pool": 30,
    }
    assert capped_timeouts({}, 30) == dict.fromkeys(every, 30)


def test_requests_that_ask_for_no_timeout_get_kernelpin_http_timeout():
    """huggingface_hub's API calls ask for no timeout of their own; httpx would give them its 5 s default, so
    KERNELPIN_HTTP_TIMEOUT=60 ("wait longer") would have been capped at 5 s."""
    from kernelpin.hub.client import use_timeout
    from kernelpin.hub.source import DEFAULT_HTTP_TIMEOUT

    use_timeout(42.0)
    try:
        assert hf_http.get_session().timeout.as_dict() == dict.fromkeys(("connect", "read", "write", "pool"), 42.0)
    finally:
        use_timeout(DEFAULT_HTTP_TIMEOUT)


def test_a_silent_hub_times_out_with_a_clear_error(img2gray, project, cli, monkeypatch):
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    with SilentServer() as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_HTTP_TIMEOUT", "0.5")
        # Subprocesses, so that a hang fails the test (TimeoutExpired) instead of stalling the suite.
        done = run_cli("sync", "--frozen", "--torch", "2.13", timeout=30)
        assert done.returncode == 1
        assert f"no answer from {endpoint}/acme/img2gray/resolve/" in done.stderr and "within 0.5 s" in done.stderr
        assert "KERNELPIN_HTTP_TIMEOUT" in done.stderr
        done = run_cli("lock", "--upgrade", timeout=30)
        assert (
            done.returncode == 1
            and f"listing tags of acme/img2gray failed: no answer from {endpoint}/api/" in done.stderr
        )
    monkeypatch.setenv("KERNELPIN_HTTP_TIMEOUT", "soon")
    status, _, err = cli("lock", "--upgrade")
    assert status == 1 and "KERNELPIN_HTTP_TIMEOUT='soon' is not a number of seconds" in err


def test_a_corrupted_metadata_json_in_the_cache_is_never_trusted(new_repo, project, cli, hf_env):
    """Lock reads metadata.json from the server (one GET, checked against the listing), never from the cache,
    so a corrupted cached copy cannot change a lock; sync finds it, evicts it and fetches it again."""
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,))
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    first = (root / "kernelpin.lock").read_bytes()
    assert cli("sync", "--torch", "2.13")[0] == 0  # caches the variant, its metadata.json included
    kernel = locked_kernel(root)
    cached = snapshot_files(hf_env, repo_id, kernel.commit)[f"build/{CPU_213}/metadata.json"]
    good = cached.read_bytes()
    flipped = bytearray(good)
    flipped[20] ^= 1
    cached.write_bytes(bytes(flipped))  # through the snapshot link: the blob itself
    (root / "kernelpin.lock").unlink()
    assert cli("lock")[0] == 0
    assert (root / "kernelpin.lock").read_bytes() == first
    status, out, err = cli("sync", "--torch", "2.13", "--json")
    assert status == 0, err
    assert json.loads(out)["synced"][0]["repaired"] == [f"build/{CPU_213}/metadata.json"]
    assert snapshot_files(hf_env, repo_id, kernel.commit)[f"build/{CPU_213}/metadata.json"].read_bytes() == good


@pytest.fixture
def no_backoff_waits(monkeypatch):
    """huggingface_hub retries 5xx five times with 1-8 s waits (23 s); the retries still happen."""
    monkeypatch.setattr(hf_http.time, "sleep", lambda seconds: None)


def test_server_errors_and_missing_revisions_are_named(img2gray, project, cli, no_backoff_waits, monkeypatch):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    kernel = locked_kernel(root)
    with StatusServer(500) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--frozen", "--torch", "2.13")
        assert status == 1 and "cannot reach" not in err
        assert f"at {kernel.commit[:12]} failed at {endpoint}: HTTP 500" in err and "the server failed" in err
    with StatusServer(503) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
        assert status == 1 and f"listing tags of acme/img2gray failed at {endpoint}: HTTP 503" in err
    # The Hub's answer for a commit that is gone (force-pushed away, repository rewritten).
    with StatusServer(404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--frozen", "--torch", "2.13")
        assert status == 1
        assert f"of acme/img2gray at {kernel.commit[:12]} failed at {endpoint}: HTTP 404" in err
        assert "that revision does not exist on the server" in err and "--upgrade-package acme/img2gray" in err


# --- 7. loading needs read access only -----------------------------------------------------------


def test_load_from_a_read_only_target_and_cache_as_another_user(img2gray, project, cli, hf_env, tmp_path):
    require_nobody()
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--target", str(tmp_path / "vendor"), "--torch", "2.13")[0] == 0
    assert cli("sync", "--torch", "2.13")[0] == 0
    # pytest's tmp_path is private to root: a world-readable copy, then nothing in it is writable.
    shared = Path(tempfile.mkdtemp(prefix="kernelpin-readonly-"))
    try:
        shutil.copy(root / "kernelpin.lock", shared)
        shutil.copytree(tmp_path / "vendor", shared / "vendor", symlinks=True)
        shutil.copytree(hf_env, shared / "cache", symlinks=True)
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(shared)], check=True)
        script = (
            "import sys, kernelpin\n"
            "print('target', kernelpin.load('acme/img2gray', lock=sys.argv[1], target=sys.argv[2]).VARIANT)\n"
            "for name in [m for m in sys.modules if m.startswith('_kernelpin_')]: del sys.modules[name]\n"
            "print('cache', kernelpin.load('acme/img2gray', lock=sys.argv[1]).VARIANT)\n"
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(shared / "cache"),
            "HF_HOME": str(shared / "hf-home"),
            "HOME": str(shared),
        }
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-c", script, str(shared), str(shared / "vendor")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split() == ["target", CPU_213, "cache", CPU_213]
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=True)
        shutil.rmtree(shared)


# --- 8. concurrent edits -------------------------------------------------------------------------


def test_concurrent_adds_keep_every_entry(new_repo, project, cli, tmp_path):
    repos = []
    for _ in range(6):  # 6 at once loses entries on 2 cores every time without the project lock
        repo_id, repo = new_repo()
        publish(repo, "1.0.0", variants=(CPU_213,))
        repos.append(repo_id)
    root = project("")
    # Each run with a Hub cache of its own: the edit lock belongs to the project, not to a cache (failed
    # before: the lock lived in the cache, all 6 exited 0, pyproject.toml kept 3 entries and the lock 2).
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "kernelpin", "add", f"{repo_id}@^1"],
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_CACHE": str(tmp_path / f"cache-{n}")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, repo_id in enumerate(repos)
    ]
    outcomes = [(run.wait(timeout=120), run.stderr.read()) for run in runs]
    assert [status for status, _ in outcomes] == [0] * len(repos), outcomes
    text = (root / "pyproject.toml").read_text()
    assert all(f'"{repo_id}" = "^1"' in text for repo_id in repos), text
    assert sorted(k.repo_id for k in lockfiles.read(root / "kernelpin.lock").kernels) == sorted(repos)
    assert cli("lock", "--check")[0] == 0
    # The lock's directory ignores itself: `git add -A` in the project never commits it.
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    untracked = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(untracked) == ["??", "??", "kernelpin.lock", "pyproject.toml"]


def test_a_fresh_lock_in_a_read_only_project_needs_no_edit_lock(img2gray, project, cli, hf_env):
    require_nobody()
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    shared = Path(tempfile.mkdtemp(prefix="kernelpin-readonly-project-"))
    try:
        shutil.copy(root / "pyproject.toml", shared)
        shutil.copy(root / "kernelpin.lock", shared)
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(shared)], check=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_CACHE": str(shared / "cache"),
            "HF_HOME": str(shared / "hf-home"),
            "HOME": str(shared),
        }
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-m", "kernelpin", "--project", str(shared), "lock"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "is up to date" in done.stdout, done.stderr[-2000:]
        assert sorted(p.name for p in shared.iterdir()) == ["kernelpin.lock", "pyproject.toml"]
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=True)
        shutil.rmtree(shared)


# --- 9-10. hostile metadata.json, bad pyproject entries ------------------------------------------


def _metadata_with(**fields) -> bytes:
    document = json.loads(variant_files("1.0.0", CPU_213)["metadata.json"])
    document.update(fields)
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (_metadata_with(backend={"type": "cuda", "archs": "9.0"}), "backend.archs is a string, not a list"),
        (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        (_metadata_with(padding="x" * (1 << 20)), "more than the 1048576 bytes a kernel's metadata.json may have"),
        (_metadata_with(digest={"algorithm": "sha256", "files": {"_impl.py": 5}}), "is not a sha256 in base64"),
    ],
    ids=["archs-string", "deep-nesting", "oversized", "digest-type"],
)
def test_hostile_metadata_is_refused_clearly(new_repo, project, cli, hf_env, metadata, message):
    repo_id, repo = new_repo()
    files = kernel_files("1.0.0", variants=(CPU_213,))
    files[f"build/{CPU_213}/metadata.json"] = metadata
    repo.write(files)
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    root = project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 1 and message in err and f"build/{CPU_213}/metadata.json" in err
    assert not (root / "kernelpin.lock").exists()
    if "bytes" in message:  # refused from the listing, before downloading
        assert not list(hf_env.rglob("metadata.json"))


def test_pyproject_tables_of_the_wrong_type_are_clear_errors(project, cli):
    root = project("")
    (root / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool]\nkernels = 5\n')
    status, _, err = cli("lock")
    assert status == 1 and "[tool.kernels] in pyproject.toml must be a table, not an integer" in err


# --- 12. tag ambiguity and moved tags ------------------------------------------------------------


def test_versions_that_differ_only_in_build_metadata_or_prefix_are_refused(new_repo, project, cli):
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,))
    for tag in ("v1.0.0+aaa", "v1.0.0+zzz"):
        publish(repo, "1.0.0", tag=tag, variants=(CPU_213,), extra={"_tag.py": tag.encode()})
    project(f'"{repo_id}" = "=1.0.0"\n')
    status, _, err = cli("lock")
    assert status == 1 and f"{repo_id}: version 1.0.0+zzz is ambiguous" in err
    assert "v1.0.0 -> " in err and "v1.0.0+aaa -> " in err and '{ revision = "v1.0.0" }' in err
    project(f'"{repo_id}" = {{ revision = "v1.0.0+aaa" }}\n')
    assert cli("lock")[0] == 0

    repo_id, repo = new_repo()
    publish(repo, "2.0.0", tag="2.0.0", variants=(CPU_213,))
    publish(repo, "2.0.0", tag="v2.0.0", variants=(CPU_213,), extra={"_other.py": b""})
    project(f'"{repo_id}" = "^2"\n')
    status, _, err = cli("lock")
    assert status == 1 and "2.0.0 -> " in err and "v2.0.0 -> " in err
    repo.tag("v2.0.1")
    repo.tag("2.0.1")  # both spellings on one commit: not ambiguous
    assert cli("lock")[0] == 0


@pytest.mark.parametrize("ref", ["tag", "branch"])
def test_a_full_sha_pin_means_that_commit_even_when_a_ref_is_named_like_it(new_repo, project, cli, ref):
    # Failed before (tag): the pin was silently redirected to the commit the tag named.
    repo_id, repo = new_repo()
    pinned = publish(repo, "1.0.0", variants=(CPU_213,))
    other = publish(repo, "2.0.0", variants=(CPU_213,))
    if ref == "tag":
        repo.tag(pinned, commit=other)
    else:
        repo.branch(pinned, commit=other)
    root = project(f'"{repo_id}" = {{ revision = "{pinned}" }}\n')
    status, _, err = cli("lock")
    assert status == 0, err
    kernel = locked_kernel(root)
    assert (kernel.commit, kernel.ref, kernel.version) == (pinned, None, "1.0.0")
    assert cli("lock", "--check")[0] == 0


@pytest.mark.parametrize(
    ("size", "blob_id", "lfs_sha256", "problem"),
    [
        (1 << 41, None, None, "size 2199023255552 is not between 0"),
        (-1, None, None, "size -1 is not between 0"),
        (10, "../../x", None, "git blob id '../../x' is not 40 lowercase hex digits"),
        (10, None, "ZZ" * 32, "LFS sha256 'ZZZZ"),
        (10, None, "A" * 64, "is not 64 lowercase hex digits"),
    ],
    ids=["huge-size", "negative-size", "bad-blob-id", "junk-lfs-sha256", "uppercase-lfs-sha256"],
)
def test_a_listing_with_fields_the_lock_would_refuse_is_refused_when_read(size, blob_id, lfs_sha256, problem):
    # Failed before: these values went into kernelpin.lock unchecked, and every later command refused the lock.
    with pytest.raises(KernelpinError) as refused:
        remote_file("build/v/_ops.so", size, blob_id, lfs_sha256, "acme/x at 0123456789ab")
    message = str(refused.value)
    assert problem in message and "acme/x at 0123456789ab" in message and "do not use this revision" in message


def test_a_well_formed_listing_entry_is_kept_as_given():
    entry = remote_file("build/v/_ops.so", 10, "a" * 40, "b" * 64, "acme/x at 0123456789ab")
    assert (entry.path, entry.size, entry.blob_id, entry.lfs_sha256) == ("build/v/_ops.so", 10, "a" * 40, "b" * 64)
