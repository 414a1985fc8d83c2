"""Issue 20: a hostile Hub, mirror or proxy. Server data never reaches a path, a loop or memory unchecked:
`lock`, `sync`, `load` and `outdated` refuse what a Hub cannot mean, stop at the command's deadline and at
their limits, with a one-line error naming the problem, and write nothing outside the cache or target.

Every server here is tests.kernelpin.faulty_hub.HostileHub in front of the suite's real Hub: it lies where told to
and forwards the rest. Deadlines are short (KERNELPIN_DEADLINE) so that the suite stays fast."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.files.confined import PARTIAL
from kernelpin.hub.listing import files_of, parse_refs, parse_tree_page
from kernelpin.loading.runtime import module_name
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.helpers import AS_NOBODY, REPO_ROOT, require_nobody, snapshot_dir

OURS = {"hf-cache", "hf-home", "state", "app", "vendor"}  # what kernelpin and the test may write below tmp_path


@pytest.fixture(scope="module")
def released(hub) -> tuple[str, str]:
    """A kernel repository with one release (with a 200 KB library, so that a disk of 64 KiB fills up)."""
    repo_id = "acme/hostile-target"
    commit = publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=(CPU_213,), extra={"_big.so": os.urandom(200_000)})
    return repo_id, commit


@pytest.fixture
def locked(released, project, cli, monkeypatch) -> Path:
    """The project, locked against the real Hub."""
    repo_id, _ = released
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    return root


def outside(tmp_path: Path) -> list[Path]:
    """Everything below tmp_path that is neither the cache, the project nor a vendoring target."""
    return sorted(path for path in tmp_path.rglob("*") if path.relative_to(tmp_path).parts[0] not in OURS)


def one_line_error(status: int, err: str, *expected: str) -> None:
    assert status == 1, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err


def fresh_load(repo_id: str, commit: str, **kwargs):
    name = module_name(repo_id, commit, CPU_213)
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]
    return kernelpin.load(repo_id, **kwargs)


# --- 1-2. headers name no file: ETag and X-Repo-Commit are never used --------------------------------


def test_an_etag_that_is_a_path_writes_nothing_outside_the_cache(
    hub, released, locked, new_repo, project, cli, tmp_path, monkeypatch
):
    # Failed before: huggingface_hub named the blob after the ETag, so the server's bytes landed in
    # tmp_path/OUTSIDE/planted.pth (a .pth runs at the next Python start), and sync failed on the link;
    # in `sync`, in `load`, and in `lock` of a build without digests (its files were downloaded to be hashed).
    repo_id, commit = released
    undigested, repo = new_repo("no-digest", "kernel")
    publish(repo, "1.0.0", variants=(CPU_213,), metadata=False)
    with HostileHub(hub.endpoint, Lies(file_headers={"ETag": '"../../../OUTSIDE/planted.pth"'})) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--torch", "2.13")
        assert status == 0, err
        shutil.rmtree(snapshot_dir(locked.parent / "hf-cache", repo_id, commit, "kernel"))
        assert fresh_load(repo_id, commit).VERSION == "1.0.0"
        assert cli("verify")[0] == 0
        project(f'"{undigested}" = "^1"\n')
        status, _, err = cli("lock")
        assert status == 0, err
    assert outside(tmp_path) == []


def test_an_x_repo_commit_that_is_a_path_writes_nothing_outside_the_cache(
    hub, released, locked, cli, tmp_path, monkeypatch
):
    # Failed before: a 404 carrying this header made huggingface_hub create tmp_path/OUTSIDE/no-exist.
    repo_id, commit = released
    lies = Lies(
        file_status=404, file_headers={"X-Repo-Commit": "../../../OUTSIDE/no-exist", "X-Error-Code": "EntryNotFound"}
    )
    with HostileHub(hub.endpoint, lies) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--torch", "2.13")
        one_line_error(status, err, f"failed at {endpoint}: HTTP 404")
        with pytest.raises(KernelpinError, match="HTTP 404"):
            fresh_load(repo_id, commit)
    assert outside(tmp_path) == []


def test_what_is_verified_is_what_is_imported_whatever_commit_the_server_names(hub, released, locked, cli, monkeypatch):
    # Failed before: huggingface_hub filed the files under the server's X-Repo-Commit, sync and verify
    # checked them there, and load found nothing under the locked commit (a bare FileNotFoundError).
    repo_id, commit = released
    with HostileHub(hub.endpoint, Lies(file_headers={"X-Repo-Commit": "0" * 40})) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert cli("sync", "--torch", "2.13")[0] == 0
    assert cli("verify")[0] == 0
    assert fresh_load(repo_id, commit).VERSION == "1.0.0"


# --- 3, 7. listings: every commit id checked, malformed answers refused in one line ------------------


def _tags(target: object) -> dict:
    return {"tags": [{"name": "v1.0.0", "ref": "refs/tags/v1.0.0", "targetCommit": target}], "branches": []}


def _file(path: object, **fields: object) -> dict:
    return {"type": "file", "path": path, "size": 1, "oid": "0" * 40, **fields}


# Each lie is made from the released commit, so that only the lie itself is wrong. The end-to-end cases
# cover each kind of defect; test_every_malformed_answer_is_refused_by_the_listing_parser the other shapes.
@pytest.mark.parametrize(
    ("lie", "message"),
    [
        (lambda c: Lies(refs=_tags("../../../home/.bashrc")), "commit '../../../home/.bashrc' is not 40 lowercase hex"),
        (lambda c: Lies(refs=_tags(c.upper())), "is not 40 lowercase hex digits"),
        (lambda c: Lies(refs=_tags(c[:39])), "is not 40 lowercase hex digits"),
        (lambda c: Lies(refs={"tags": [{"name": "v1.0.0", "ref": "refs/tags/v1.0.0"}]}), "commit None is not"),
        (lambda c: Lies(refs={"tags": "v1.0.0"}), "'tags' is str, not a list"),
        (lambda c: Lies(tree=[_file(5)]), "a listing entry's path is 5, not a string"),
        (lambda c: Lies(tree=[_file("build/x/a.py")] * 2), "'build/x/a.py' is listed twice"),
    ],
    ids=[
        "tag-traversal",
        "tag-uppercase",
        "tag-39-digits",
        "tag-without-target",
        "tags-a-string",
        "path-a-number",
        "path-twice",
    ],
)
def test_a_listing_the_hub_cannot_mean_is_refused_in_one_line(
    hub, released, locked, cli, tmp_path, monkeypatch, lie, message
):
    # Failed before: the commit went unchecked into paths and the lock (uppercase and 39 digits were written,
    # a path became a revision), and malformed listings raised KeyError/TypeError tracebacks.
    _, commit = released
    lies = lie(commit)
    before = (locked / "kernelpin.lock").read_bytes()
    with HostileHub(hub.endpoint, lies) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
        one_line_error(status, err, message, endpoint)
        if lies.refs is not None:
            one_line_error(*cli("outdated")[::2], message)
    assert (locked / "kernelpin.lock").read_bytes() == before
    assert outside(tmp_path) == []


@pytest.mark.parametrize(
    ("refs", "tree", "message"),
    [
        ({"tags": [], "branches": [{"name": "v1", "targetCommit": "../x"}]}, None, "branch 'v1': commit '../x'"),
        (["v1.0.0"], None, "the refs listing is list, not an object"),
        ({"tags": ["v1.0.0"]}, None, "an entry of 'tags' is str"),
        ({"tags": [{"name": "v1 0", "targetCommit": "0" * 40}]}, None, "'v1 0' is not a git tag or branch name"),
        ({"branches": [{"name": "v1", "targetCommit": "0" * 40}] * 2}, None, "branch 'v1' is listed twice"),
        (None, {"path": "x"}, "the file listing is dict, not a list"),
        (None, ["build/x/a.py"], "a listing entry is str"),
        (None, [{"type": "link", "path": "build/x/a.py"}], "type 'link' is neither 'file' nor 'directory'"),
        (None, [_file("build/x/a.py", lfs="yes")], "'lfs' is str, not an object"),
        (None, [_file("build/../../a.py")], "refusing unsafe path 'build/../../a.py'"),
        (None, [_file("build/x/a.py", size="1")], "size 1 is not between 0"),
        (None, [{"type": "directory", "path": "build"}, _file("build")], "'build' is listed twice"),
        (None, [_file("build/x"), _file("build/x/a.py")], "'build/x' is listed as a file and as a directory"),
    ],
)
def test_every_malformed_answer_is_refused_by_the_listing_parser(refs, tree, message):
    with pytest.raises(KernelpinError, match=re.escape(message)):
        if refs is not None:
            parse_refs(refs, "kernel", "the refs of acme/x at http://hub", 100)
        else:
            files_of(parse_tree_page(tree, "the file listing of acme/x"), "the file listing of acme/x")


# --- 5-6. deadlines and limits ------------------------------------------------------------------------


def test_a_next_page_on_another_server_is_refused(hub, locked, cli, monkeypatch):
    # It would receive the request, and with it the user's HF_TOKEN.
    with HostileHub(hub.endpoint, Lies(tree_forever=True, next_page_host="127.0.0.2:9")) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        one_line_error(*cli("lock", "--upgrade")[::2], "the next page is on another server (http://127.0.0.2:9/")


def test_a_listing_that_pages_forever_stops_at_the_deadline_or_the_entry_limit(hub, locked, cli, monkeypatch):
    # Failed before: the pages were followed without end (60 s, 3 M entries, 1 GB and growing).
    with HostileHub(hub.endpoint, Lies(tree_forever=True, endless_for=30)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DEADLINE", "1")
        status, _, err = cli("lock", "--upgrade")
        one_line_error(status, err, "KERNELPIN_DEADLINE", endpoint)
        monkeypatch.setenv("KERNELPIN_MAX_LISTING", "50")
        monkeypatch.setenv("KERNELPIN_DEADLINE", "60")
        status, _, err = cli("lock", "--upgrade")
        one_line_error(status, err, "more than 50 entries (KERNELPIN_MAX_LISTING)", endpoint)


@pytest.mark.parametrize("answer", ["refs", "file"])
def test_a_server_that_drips_bytes_is_cut_off_at_the_deadline(hub, released, locked, cli, monkeypatch, answer):
    # Failed before: KERNELPIN_HTTP_TIMEOUT bounds the wait for the next byte only: one byte every 2 s kept
    # `lock` alive past 90 s.
    repo_id, commit = released
    with HostileHub(hub.endpoint, Lies(drip=answer, endless_for=30)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DEADLINE", "1")
        if answer == "refs":
            for command in (("lock", "--upgrade"), ("outdated",)):
                one_line_error(*cli(*command)[::2], "stopped at the 1 s deadline for one command (KERNELPIN_DEADLINE)")
        else:
            one_line_error(*cli("sync", "--torch", "2.13")[::2], "(KERNELPIN_DEADLINE)")
            with pytest.raises(KernelpinError, match=r"KERNELPIN_DEADLINE"):
                fresh_load(repo_id, commit)


def test_an_endless_body_stops_at_the_locked_size_and_leaves_nothing(hub, released, locked, cli, tmp_path, monkeypatch):
    # Failed before: a file locked at a few hundred bytes took an endless body (64 MiB written, a tmpfs filled).
    with HostileHub(hub.endpoint, Lies(endless_file=True, endless_for=30)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--torch", "2.13")
        one_line_error(status, err, "the server sends more than the", "nothing of it is kept")
    cache = tmp_path / "hf-cache"
    assert not list(cache.rglob(f"*{PARTIAL}")) and not [
        p for p in cache.rglob("*") if p.is_file() and p.stat().st_size > 200_000
    ]


def test_refs_listings_are_bounded_in_entries_and_bytes(hub, locked, cli, monkeypatch):
    # Failed before: a refs listing of 1 M tags took 83 s and 700 MB.
    many = {"tags": [{"name": f"t{i}", "targetCommit": "0" * 40} for i in range(200)], "branches": []}
    with HostileHub(hub.endpoint, Lies(refs=many)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_MAX_LISTING", "100")
        one_line_error(*cli("lock", "--upgrade")[::2], "more than 100 entries (KERNELPIN_MAX_LISTING)")
        monkeypatch.setenv("KERNELPIN_MAX_RESPONSE_BYTES", "4096")
        one_line_error(*cli("outdated")[::2], "than 4096 bytes (KERNELPIN_MAX_RESPONSE_BYTES)")
    # 20 MB of JSON (valid: whitespace, then an empty listing) in 20 KB of gzip: expanded, it would pass
    # every byte limit counted on the wire.
    bomb = b" " * (20 << 20) + b'{"tags": [], "branches": []}'
    with HostileHub(hub.endpoint, Lies(refs=bomb, gzip_refs=True)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        one_line_error(*cli("outdated")[::2], "the server compressed its answer (gzip) though kernelpin asked for none")
    monkeypatch.setenv("KERNELPIN_DEADLINE", "soon")
    one_line_error(*cli("outdated")[::2], "KERNELPIN_DEADLINE='soon' is not a number of seconds")


# --- 8. the local disk: full, read-only, leftovers ----------------------------------------------------


def test_an_answer_announced_longer_than_the_limit_is_refused_before_it_is_read(hub, locked, cli, monkeypatch):
    # Failed before: a refs answer announcing 10**15 bytes was read until the server hung up, then reported as
    # "cannot reach ... check the network and HF_ENDPOINT".
    with HostileHub(hub.endpoint, Lies(refs_announced=10**15)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        one_line_error(
            *cli("lock", "--upgrade")[::2], "announces 1000000000000000 bytes", "KERNELPIN_MAX_RESPONSE_BYTES"
        )


def test_a_full_disk_is_reported_as_a_full_disk(hub, released, locked, tmp_path):
    # Failed before: "cannot reach ... check the network and HF_ENDPOINT".
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to mount a small file system")
    cache = tmp_path / "hf-cache"
    cache.mkdir(exist_ok=True)
    script = f"mount -t tmpfs -o size=64k tmpfs {cache} && {sys.executable} -m kernelpin sync --frozen --torch 2.13"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": hub.endpoint}
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        cwd=locked,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "mount" in done.stderr and "permission denied" in done.stderr.lower():
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    one_line_error(done.returncode, done.stderr, "the disk is full", str(cache), "free space there")
    assert "cannot reach" not in done.stderr


def test_a_partial_download_left_by_a_killed_sync_is_removed_by_the_next(hub, locked, cli, tmp_path):
    cache = tmp_path / "hf-cache"
    with HostileHub(hub.endpoint, Lies(drip="file", endless_for=30)) as endpoint:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_ENDPOINT": endpoint}
        syncing = subprocess.Popen(
            [sys.executable, "-m", "kernelpin", "sync", "--frozen", "--torch", "2.13"],
            cwd=locked,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(600):  # until the download has begun (at most a minute)
                if list(cache.rglob(f"*{PARTIAL}")):
                    break
                assert syncing.poll() is None
                time.sleep(0.1)
        finally:
            syncing.kill()  # SIGKILL: no handler runs, the partial file stays
            syncing.wait()
    partials = list(cache.rglob(f"*{PARTIAL}"))  # one per file being downloaded (they download in parallel)
    assert partials
    assert cli("sync", "--frozen", "--torch", "2.13")[0] == 0
    assert not any(partial.exists() for partial in partials)
    assert not list(cache.rglob(f"*{PARTIAL}")) and cli("verify")[0] == 0


def test_a_read_only_cache_without_a_file_names_the_file_and_the_fix(released, locked, cli, tmp_path):
    # Failed before: a bare PermissionError about .kernelpin-locks.
    require_nobody()
    repo_id, commit = released
    assert cli("sync", "--torch", "2.13")[0] == 0
    shared = Path(tempfile.mkdtemp(prefix="kernelpin-readonly-"))
    try:
        shutil.copy(locked / "kernelpin.lock", shared)
        shutil.copytree(tmp_path / "hf-cache", shared / "cache", symlinks=True)
        (snapshot_dir(shared / "cache", repo_id, commit, "kernel") / "build" / CPU_213 / "_big.so").unlink()
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(shared)], check=True)
        script = (
            f"import kernelpin\ntry:\n    kernelpin.load({repo_id!r}, lock={str(shared)!r})\n"
            "except kernelpin.errors.KernelpinError as error:\n    print(error)\n"
        )
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_CACHE": str(shared / "cache"),
            "HF_HOME": str(shared / "hf-home"),
            "HOME": str(shared),
        }
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
        assert f"installing build/{CPU_213}/_big.so: cannot write {shared / 'cache'}" in done.stdout, done.stdout
        assert "permission denied; run `kernelpin sync` as a user who can write there" in done.stdout
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=True)
        shutil.rmtree(shared)
