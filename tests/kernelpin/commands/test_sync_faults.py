"""Faults: a server dying mid-sync, tampered caches, hostile paths, concurrent syncs, bad input."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files.confined import PARTIAL
from kernelpin.format import lockfile
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading.runtime import module_name
from kernelpin.store import lockfiles
from kernelpin.store.install import Installer, sync
from testkit.fake_kernel import CPU_213, publish
from testkit.hub import HubServer
from tests.kernelpin.helpers import REPO_ROOT, fresh_interpreter, snapshot_files

CPU_ENV = Environment(torch=(2, 13), cuda=None)


def test_server_stopped_mid_sync(tmp_path, project, cli, hf_env, monkeypatch):
    server = HubServer(tmp_path / "dying-hub", trusted_publishers=("acme",))  # kernelpin lock checks the publisher
    repo_id = "acme/big"
    # A 32 MiB library: the transfer is still running when the server is killed.
    publish(server.repo(repo_id), "1.0.0", variants=(CPU_213,), extra={"_big.so": os.urandom(32 << 20)})
    server.start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        root = project(f'"{repo_id}" = "^1"\n')
        assert cli("lock")[0] == 0
        pinned = lockfiles.read(root / "kernelpin.lock")

        stream = HubSource.stream

        def kill_server_during_transfer(self, *args):
            *args, sink = args
            received = 0

            def watching(chunk):
                nonlocal received
                received += len(chunk)
                if received > 1 << 20:
                    server.stop()
                sink(chunk)

            return stream(self, *args, watching)

        monkeypatch.setattr(HubSource, "stream", kill_server_during_transfer)
        installer = Installer(HubSource(HubSettings.from_env()))
        with pytest.raises(
            KernelpinError,
            match=rf"downloading build/{CPU_213}/_big.so of acme/big at [0-9a-f]{{12}}"
            r"(?: failed: cannot reach|: the server sent \d+ bytes, not the 33554432)",
        ):
            sync(pinned, installer, CPU_ENV)
        # The cache holds no partial or unverified file under a usable name.
        (kernel,) = pinned.kernels
        locked = {f"build/{CPU_213}/{f.path}": f for f in kernel.variant(CPU_213).files}
        cached = snapshot_files(hf_env, repo_id, kernel.commit)
        assert f"build/{CPU_213}/_big.so" not in cached
        for path, file in cached.items():
            assert file.stat().st_size == locked[path].size
        assert not list(hf_env.rglob(f"*{PARTIAL}"))  # the partial download is deleted
        monkeypatch.setattr(HubSource, "stream", stream)
        # The server comes back: the same command finishes the job.
        server.start()
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        status, _out, err = cli("sync", "--frozen", "--torch", "2.13")
        assert status == 0, err
        assert cli("verify")[0] == 0
    finally:
        server.stop()


def test_tampered_cache_is_detected_and_never_imported(img2gray, project, cli, hf_env, tmp_path):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    impl = snapshot_files(hf_env, "acme/img2gray", kernel.commit)[f"build/{CPU_213}/_impl.py"]
    marker = tmp_path / "tampered-code-ran"
    impl.write_text(f"open({str(marker)!r}, 'w').close()\nVARIANT = 'evil'\ndef gray(p): return p\n")
    name = module_name(kernel.repo_id, kernel.commit, CPU_213)
    sys.modules.pop(name, None)
    with pytest.raises(
        IntegrityError, match=r"_impl.py: size .* pinned in the lock.*run `kernelpin sync` to replace it"
    ):
        kernelpin.load("acme/img2gray")
    assert not marker.exists() and name not in sys.modules
    status, _, err = cli("verify")
    assert status == 1 and f"modified: acme/img2gray {CPU_213}/_impl.py" in err
    status, out, err = cli("sync")
    assert status == 0 and "1 replaced (modified in the cache)" in out and "did not match the lock; replaced" in err
    assert cli("verify")[0] == 0
    assert kernelpin.load("acme/img2gray").VARIANT == CPU_213
    assert not marker.exists()


def test_server_content_that_differs_from_the_lock_is_deleted(new_repo, project, cli, hf_env):
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,))
    root = project(f'"{repo_id}" = "^1"\n')
    # Lock with an empty cache on another machine, say; here: a lock that pins other bytes for _impl.py.
    assert cli("lock")[0] == 0
    pinned = lockfiles.read(root / "kernelpin.lock")
    (kernel,) = pinned.kernels
    (variant,) = kernel.variants
    files = tuple(dataclasses.replace(f, sha256="0" * 64) if f.path == "_impl.py" else f for f in variant.files)
    kernel = dataclasses.replace(kernel, variants=(dataclasses.replace(variant, files=files),))
    lockfiles.write(root / "kernelpin.lock", lockfile.Lock((kernel,)))
    status, _, err = cli("sync", "--frozen", "--torch", "2.13")
    assert status == 1
    assert "_impl.py: sha256" in err and "The downloaded file was deleted" in err
    assert f"build/{CPU_213}/_impl.py" not in snapshot_files(hf_env, repo_id, kernel.commit)


@pytest.mark.parametrize(
    "hostile",
    [
        {"build": {CPU_213: {"..\\..\\evil.py": b"", "__init__.py": b""}}},
        {"metadata": "../../evil.py"},
        {"metadata": "/etc/evil.py"},
    ],
    ids=["backslash-name-in-tree", "dotdot-in-metadata-digest", "absolute-in-metadata-digest"],
)
def test_hostile_paths_are_refused(new_repo, project, cli, hostile, hf_env):
    # olah answers 500 for a git tree entry named '..', so such trees cannot be served; the paths a
    # server can hand out are odd tree entry names and the file names in metadata.json.
    repo_id, repo = new_repo()
    publish(repo, "0.9.0", variants=(CPU_213,))
    if "metadata" in hostile:
        digest = {"algorithm": "sha256", "files": {hostile["metadata"]: "0" * 64}}
        repo.write({f"build/{CPU_213}/metadata.json": json.dumps({"digest": digest, "backend": {"type": "cpu"}})})
        repo.commit("hostile metadata")
    else:
        repo.commit_tree(hostile, "hostile tree")
    repo.tag("v1.0.0")
    project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 1
    assert f"{repo_id} at " in err and "refusing unsafe path" in err
    assert not list(hf_env.parent.rglob("evil.py"))


def test_hostile_paths_in_a_lock_are_refused(img2gray, project, cli):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    text = (root / "kernelpin.lock").read_text().replace('path = "_impl.py"', 'path = "../../outside.py"')
    (root / "kernelpin.lock").write_text(text)
    status, _, err = cli("sync", "--frozen", "--torch", "2.13")
    assert status == 1 and "refusing unsafe path '../../outside.py'" in err


def test_two_syncs_at_once(img2gray, project, cli, hf_env):
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--all-variants"]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outcomes = [(run.wait(timeout=120), run.stderr.read().decode()) for run in runs]
    assert [status for status, _ in outcomes] == [0, 0], outcomes
    status, out, _ = cli("verify", "--json")
    assert status == 0 and '"ok": true' in out and out.count('"status": "ok"') == 5 * 3


@pytest.mark.parametrize(
    ("dependencies", "message"),
    [
        ('"acme/img2gray" = "^0.1\n', "pyproject.toml: not valid TOML"),
        ('"acme/img2gray" = ">=1.2 <<2"\n', "[tool.kernels.dependencies] 'acme/img2gray':"),
        ('"img2gray" = "^0.1"\n', "'img2gray' is not a Hub repository id; write it as 'org/name'"),
        ('"acme/img2gray" = { version = "^0.1", revision = "main" }\n', "give exactly one of 'version'"),
        ('"acme/img2gray" = { verison = "^0.1" }\n', "unknown key(s) verison"),
        ('"acme/img2gray" = true\n', "is not a requirement; use e.g."),
        ('"acme/k." = "^0.1"\n', "'acme/k.' is not a Hub repository id"),
        ('"acme/img2gray" = { version = -1 }\n', "a major version is a number from 0 to 999999, not -1"),
        ('"acme/img2gray" = -1\n', "a major version is a number from 0 to 999999, not -1"),
        (
            '"acme/no-such-kernel" = "^1"\n',
            "acme/no-such-kernel: no kernel or model repository of that name at http://127.0.0.1:",
        ),
        (
            '"acme/img2gray" = "^0.3"\n',
            "acme/img2gray: no version satisfies ^0.3 (available: 1.0.0-rc.1, 0.2.0, 0.1.1, 0.1.0)",
        ),
        (
            '"acme/img2gray" = 7\n',
            (
                "acme/img2gray: no branch v7 (`= 7` is the branch v7, as `kernels` reads it; "
                "major-version branches: v0; version tags: 1.0.0-rc.1, 0.2.0, 0.1.1, 0.1.0)"
            ),
        ),
        (
            '"acme/img2gray" = { revision = "nope" }\n',
            "acme/img2gray: revision 'nope' is neither a tag nor a branch nor a full 40-character commit sha",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(img2gray, project, cli, dependencies, message):
    root = project(dependencies)
    status, _out, err = cli("lock")
    assert status == 1
    assert message in err
    assert "Traceback" not in err and not (root / "kernelpin.lock").exists()


def test_commands_that_need_no_torch_do_not_import_it(img2gray, project, cli, hf_env):
    project('"acme/img2gray" = "^0.1"\n')
    output, loaded = fresh_interpreter(
        "from kernelpin.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert main(['lock']) == 0\n"
        "assert main(['sync', '--torch', '2.13']) == 0\n"
        "assert main(['verify']) == 0\n"
    )
    assert "usage: kernelpin" in output and loaded & {"torch", "numpy"} == set()


def test_the_load_path_imports_no_editing_or_network_library():
    # `import kernelpin.loading.runtime` runs in every application that loads a kernel: it reads the lock with
    # tomllib; tomlkit (editing), filelock (writing) and huggingface_hub (downloading) load only when needed.
    _, loaded = fresh_interpreter("import kernelpin.loading.runtime")
    assert loaded & {"tomlkit", "filelock", "huggingface_hub", "httpx2", "rich", "torch"} == set()
