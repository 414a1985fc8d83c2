"""kernelpin.get_kernel, the lockless one-liner, against the test Hub (and the real `kernels` as the peer):
resolves on the spot, downloads only this machine's variant, verifies it, remembers the resolution where only
this user writes (so `version=N` works offline), and says how to pin it. Every test failed before: kernelpin
had no get_kernel."""

from __future__ import annotations

import inspect
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.loading import kernels_internals
from kernelpin.store.resolutions import state_dir
from testkit.fake_kernel import CPU_213, kernel_files, publish
from testkit.releasing import hub_env, run
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.format.test_kernels_compat import publish_depending, with_dependency  # noqa: F401 (a fixture)
from tests.kernelpin.helpers import TRUSTED_ORG, UNTRUSTED_ORG, fresh_interpreter, snapshot_dir

OTHER = "torch213-cxx11-cu130-x86_64-linux"


@pytest.fixture(autouse=True)
def unpinned_warnings_name_the_pin():
    """Every lockless load here warns how to pin it (the one-liner's contract, test_version_n_is_the_branch...): the
    warnings are taken here and each is checked to carry that hint, instead of escaping into the run's summary."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnpinnedKernelWarning)
        yield
    for warning in caught:
        if issubclass(warning.category, UnpinnedKernelWarning):
            assert "was loaded without a lock" in str(warning.message) and "to pin it, " in str(warning.message)
        else:  # any other warning is passed on, as pytest would show it
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


@pytest.fixture
def state(hf_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own kernelpin state directory (where get_kernel remembers what it resolved)."""
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def fresh_modules():
    """Forget kernel modules loaded by the test, as a new process would not have them."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("_kernelpin_"):
            del sys.modules[name]


def forget_kernels() -> None:
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


@pytest.fixture
def line(new_repo) -> tuple[str, object, str, str]:
    """A trusted kernel with tags v1.0.0, v1.1.0 (both on branch v1, which is at v1.1.0) and v2.0.0:
    (repo_id, repo, commit of v1.0.0, commit of v1.1.0)."""
    repo_id, repo = new_repo("oneliner", "kernel", TRUSTED_ORG)
    first = publish(repo, "1.0.0", variants=(CPU_213, OTHER))
    second = publish(repo, "1.1.0", variants=(CPU_213, OTHER))
    repo.branch("v1")
    publish(repo, "2.0.0", variants=(CPU_213, OTHER))
    return repo_id, repo, first, second


def cached_variants(cache: Path, repo_id: str, commit: str) -> set[str]:
    build = snapshot_dir(cache, repo_id, commit, "kernel") / "build"
    return {entry.name for entry in build.iterdir()} if build.is_dir() else set()


def test_get_kernel_takes_what_kernels_get_kernel_takes():
    import kernels

    ours = inspect.signature(kernelpin.get_kernel).parameters
    theirs = inspect.signature(kernels.get_kernel).parameters
    assert list(ours) == list(theirs)
    assert all(ours[name].kind == theirs[name].kind and ours[name].default == theirs[name].default for name in ours)
    ours = inspect.signature(kernelpin.has_kernel).parameters
    assert list(ours) == list(inspect.signature(kernels.has_kernel).parameters)


def test_version_n_is_the_branch_only_this_variant_is_downloaded_and_the_pin_is_shown(
    line, state, hf_env, fresh_modules
):
    repo_id, _, _, at_branch = line
    with pytest.warns(UnpinnedKernelWarning) as caught:
        module = kernelpin.get_kernel(repo_id, version=1)
    assert (module.VERSION, module.VARIANT) == ("1.1.0", CPU_213)
    (warning,) = caught
    assert f"to pin it, run `kernelpin add {repo_id}@1`" in str(warning.message)
    assert at_branch[:12] in str(warning.message)
    assert cached_variants(hf_env, repo_id, at_branch) == {CPU_213}  # not the CUDA build
    assert kernelpin.get_kernel(repo_id, version=1) is module  # imported once


def test_a_range_a_tag_and_a_commit_resolve_on_the_spot(line, state, fresh_modules):
    repo_id, _, first, _ = line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernelpin.get_kernel(repo_id, version="^1.0").VERSION == "1.1.0"
        assert kernelpin.get_kernel(repo_id, version=">=2").VERSION == "2.0.0"
        assert kernelpin.get_kernel(repo_id, revision="v1.0.0").VERSION == "1.0.0"
        assert kernelpin.get_kernel(repo_id, revision=first).VERSION == "1.0.0"
    hints = [str(w.message) for w in caught if w.category is UnpinnedKernelWarning]
    assert f"run `kernelpin add {repo_id}@^1.0`" in hints[0]
    assert f'add "{repo_id}" = {{ revision = "v1.0.0" }} to [tool.kernels.dependencies]' in hints[2]


def test_offline_by_version_after_an_online_call(hub, line, state, hf_env, monkeypatch, fresh_modules, tmp_path):
    """kernelpin loads `version=N` offline after one online call with any kernels installed. The installed kernels
    judged in the same situation: before 0.18 it recorded no ref, so offline it cannot tell which commit
    `version=1` named and fails; 0.18 on records refs/v1 in its cache (`_record_ref_in_cache`) and loads."""
    repo_id, _, _, at_branch = line
    kernelpin.get_kernel(repo_id, version=1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    forget_kernels()
    module = kernelpin.get_kernel(repo_id, version=1)
    assert (module.VERSION, module.VARIANT) == ("1.1.0", CPU_213)
    assert kernelpin.has_kernel(repo_id, version=1)
    # The peer in the same situation, in processes of its own: an online call, then the same call offline.
    env = hub_env(hub.endpoint, tmp_path / "kernels-home", HF_HUB_DISABLE_TELEMETRY="0")  # ANCHORS §8
    code = f"import kernels; print(kernels.get_kernel({repo_id!r}, version=1).VERSION)"
    assert run([sys.executable, "-c", code], env=env).stdout.strip() == "1.1.0"
    offline = run([sys.executable, "-c", code], env={**env, "HF_HUB_OFFLINE": "1"}, check=False)
    if kernels_internals._release(kernels_internals.installed_version("the test")) >= (0, 18):
        assert (offline.returncode, offline.stdout.strip()) == (0, "1.1.0"), offline.stderr
        assert (
            tmp_path / "kernels-home" / "hub" / f"kernels--{repo_id.replace('/', '--')}" / "refs" / "v1"
        ).read_text().strip() == at_branch  # what it went by: the ref it recorded online
    else:
        assert offline.returncode != 0 and "1.1.0" not in offline.stdout


def test_offline_without_an_earlier_resolution_says_what_to_do(line, state, monkeypatch):
    repo_id = line[0]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(KernelpinError, match=r"has not resolved it online before .* call get_kernel once online"):
        kernelpin.get_kernel(repo_id, version=1)


def test_offline_a_cached_file_that_changed_is_refused(line, state, hf_env, monkeypatch, fresh_modules):
    repo_id, _, _, at_branch = line
    kernelpin.get_kernel(repo_id, version=1)
    impl = snapshot_dir(hf_env, repo_id, at_branch, "kernel") / "build" / CPU_213 / "_impl.py"
    impl.resolve().write_text("VARIANT = 'planted'\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    forget_kernels()
    with pytest.raises(IntegrityError, match="_impl.py"):
        kernelpin.get_kernel(repo_id, version=1)


def test_a_download_that_does_not_match_its_metadata_digest_is_deleted_and_not_imported(new_repo, state, hf_env):
    repo_id, repo = new_repo("lying", "kernel", TRUSTED_ORG)
    files = kernel_files("1.0.0", variants=(CPU_213,))
    files[f"build/{CPU_213}/_impl.py"] = b"VARIANT = 'not what metadata.json hashed'\n"
    repo.write(files, clear=True)
    repo.commit("release")
    repo.branch("v1")
    with pytest.raises(IntegrityError, match=r"_impl.py: sha256 .* The downloaded file was deleted"):
        kernelpin.get_kernel(repo_id, version=1)
    assert not list((hf_env / f"kernels--{repo_id.replace('/', '--')}" / "blobs").glob("*_impl*"))
    assert not any(name.startswith("_kernelpin_") and "lying" in name for name in sys.modules)


def test_an_untrusted_publisher_needs_trust_remote_code(new_repo, state, fresh_modules):
    repo_id, repo = new_repo("untrusted", "kernel", UNTRUSTED_ORG)
    publish(repo, "1.0.0", variants=(CPU_213,))
    repo.branch("v1")
    with pytest.raises(
        KernelpinError, match=rf"{UNTRUSTED_ORG} is not a trusted kernel publisher .* trust_remote_code=True"
    ):
        kernelpin.get_kernel(repo_id, version=1)
    assert kernelpin.get_kernel(repo_id, version=1, trust_remote_code=[repo_id]).VERSION == "1.0.0"
    # What trust_remote_code let through once is not remembered as trusted: the same commit needs it again.
    forget_kernels()
    with pytest.raises(KernelpinError, match=rf"{UNTRUSTED_ORG} is not a trusted kernel publisher"):
        kernelpin.get_kernel(repo_id, version=1)


def test_no_fitting_build_lists_the_variants_and_has_kernel_says_false(new_repo, state):
    repo_id, repo = new_repo("cuda-only", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0", variants=(OTHER,))
    repo.branch("v1")
    with pytest.raises(NoVariantError, match=rf"no build variant fits this environment .*\n  {OTHER}: "):
        kernelpin.get_kernel(repo_id, version=1)
    assert kernelpin.has_kernel(repo_id, version=1) is False


def test_version_and_revision_together_or_neither_are_refused(line, state):
    with pytest.raises(KernelpinError, match="give exactly one of version="):
        kernelpin.get_kernel(line[0], version=1, revision="v1.0.0")
    with pytest.raises(KernelpinError, match="give exactly one of version="):
        kernelpin.get_kernel(line[0])


def test_the_remembered_resolution_is_private_and_another_users_is_refused(line, state, fresh_modules):
    repo_id = line[0]
    kernelpin.get_kernel(repo_id, version=1)
    (record,) = (state / "resolved").iterdir()
    assert state.stat().st_mode & 0o777 == 0o700 and record.stat().st_mode & 0o777 == 0o600
    (state / "resolved").chmod(0o777)  # anyone could now replace the record
    with pytest.raises(KernelpinError, match=r"resolved can be written by other users, so kernelpin does not use"):
        kernelpin.get_kernel(repo_id, version=1)


def test_the_state_directory_follows_xdg():
    assert state_dir({"XDG_STATE_HOME": "/x"}) == Path("/x/kernelpin")
    assert state_dir({"KERNELPIN_STATE_DIR": "/y", "XDG_STATE_HOME": "/x"}) == Path("/y")


def test_a_second_online_call_asks_only_for_the_refs_and_follows_a_moved_branch(
    line, state, monkeypatch, fresh_modules
):
    from kernelpin.hub.source import HubSource

    repo_id, repo, _, _ = line
    kernelpin.get_kernel(repo_id, version=1)
    forget_kernels()
    asked: list[str] = []
    for method in ("tree", "stream", "read_ahead", "trusted_publisher"):
        real = getattr(HubSource, method)
        monkeypatch.setattr(
            HubSource,
            method,
            lambda self, *a, _real=real, _name=method, **k: (
                asked.append(_name if _name not in ("stream", "read_ahead") else a[3].rsplit("/", 1)[-1]),
                _real(self, *a, **k),
            )[1],
        )
    assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.1.0"
    # The commit is unchanged: its listing and files are what was resolved before, and so is the Hub's trusted
    # mark on its publisher, which let it through then (asked for again before: a second request).
    assert asked == []
    publish(repo, "1.2.0", variants=(CPU_213,))
    repo.branch("v1")  # kernel-builder moved the branch
    forget_kernels()
    assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.2.0"
    # The listing, metadata.json once (read to pin the variant, written to the cache from memory: it was
    # downloaded twice before), and the files whose bytes the cache lacks (_impl.py of 1.1.0 is the same blob).
    assert sorted(asked) == ["__init__.py", "metadata.json", "tree", "trusted_publisher"]


def test_a_second_online_call_reads_what_it_remembered_once_and_writes_nothing(line, state, monkeypatch, fresh_modules):
    # Failed before: remembering the unchanged resolution read it a second time (its JSON, and the lock inside it
    # through tomllib), about 1.5 ms of a warm one-liner's 35 (issue 53).
    from kernelpin.files import confined
    from kernelpin.store.resolutions import Resolutions

    repo_id, repo, _, _ = line
    kernelpin.get_kernel(repo_id, version=1)
    forget_kernels()
    reads: list[object] = []
    writes: list[object] = []
    real_read, real_write = Resolutions.read, confined.replace_file
    monkeypatch.setattr(Resolutions, "read", lambda self, *a: (reads.append(a), real_read(self, *a))[1])
    monkeypatch.setattr(confined, "replace_file", lambda *a, **k: (writes.append(a), real_write(*a, **k))[1])
    assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.1.0"
    assert (len(reads), writes) == (1, [])
    publish(repo, "1.2.0", variants=(CPU_213,))
    repo.branch("v1")
    forget_kernels()
    assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.2.0"
    # A new commit: read again just before it is written (another process may have written it since).
    assert len(reads) == 3 and len(writes) == 1


def test_an_unsigned_kernel_is_loaded_without_importing_sigstore_or_tomlkit(line, state, tmp_path, monkeypatch):
    # Failed before: the check of an unsigned release imported sigstore (a third of a second) to find no bundle,
    # and the project's publisher policy was read with tomlkit (its formatting is only needed to edit the file).
    strict = tmp_path / "strict"
    strict.mkdir()  # a project whose policy (read after a byte-order mark) requires signatures
    (strict / "pyproject.toml").write_text(
        "\ufeff[tool.kernelpin.trust]\nrequire-signatures = true\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    printed, modules = fresh_interpreter(
        textwrap.dedent(f"""
        import os, kernelpin
        print(kernelpin.get_kernel({line[0]!r}, version=1).VERSION)
        os.chdir("strict")
        try:
            kernelpin.get_kernel({line[0]!r}, version=1)
        except kernelpin.errors.KernelpinError as error:
            print(error)
    """)
    )
    assert printed.splitlines()[0] == "1.1.0"
    assert "require" in printed.splitlines()[1] and "signature" in printed.splitlines()[1]
    assert not [name for name in modules if name.split(".")[0] in ("sigstore", "tomlkit")]


def test_the_one_liner_imports_only_what_its_way_needs(line, state, tmp_path, monkeypatch):
    # Failed before: every get_kernel imported kernelpin.commands.info (only a miss's hint or get_kernel_variants use
    # it) and built sysconfig's configuration to learn that a Python before 3.13 is not free-threaded.
    monkeypatch.chdir(tmp_path)
    printed, modules = fresh_interpreter(
        textwrap.dedent(f"""
        import torch, kernelpin
        print(kernelpin.get_kernel({line[0]!r}, version=1).VERSION)
    """)
    )
    assert printed.strip() == "1.1.0"
    assert "kernelpin.commands.info" not in modules and "kernelpin.builds" not in modules
    if sys.version_info < (3, 13):
        assert "sysconfig" not in modules


def test_a_cold_call_asks_for_the_likely_builds_metadata_beside_the_listing(
    hub, line, state, hf_env, monkeypatch, fresh_modules
):
    # Failed before: metadata.json was asked for once the listing had come, a round trip later.
    repo_id, _, _, at_branch = line
    server = HostileHub(hub.endpoint, Lies(tree_delay=0.5))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.1.0"
    listed = min(at for at, path in server.arrivals if "/tree/" in path)
    metadata = [at for at, path in server.arrivals if path.endswith("/metadata.json")]
    assert [path for _, path in server.arrivals if path.endswith("/metadata.json")] == [
        f"/kernels/{repo_id}/resolve/{at_branch}/build/{CPU_213}/metadata.json"
    ]  # once, this machine's build
    assert metadata[0] - listed < 0.4  # not after the listing's answer


def test_metadata_read_ahead_counts_only_as_the_listing_names_it(
    hub, line, state, hf_env, monkeypatch, new_repo, fresh_modules
):
    # A listing whose git blob id of metadata.json is not the file's: the bytes read ahead are not taken, and the
    # variant is refused as it was before the read-ahead.
    import httpx2

    repo_id, _, _, at_branch = line
    tree = httpx2.get(
        f"{hub.endpoint}/api/kernels/{repo_id}/tree/{at_branch}", params={"recursive": "true"}, follow_redirects=True
    ).json()
    for entry in tree:
        if entry["path"] == f"build/{CPU_213}/metadata.json":
            entry["oid"] = "0" * 40
    with HostileHub(hub.endpoint, Lies(tree=tree)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(KernelpinError, match="does not match the repository listing"):
            kernelpin.get_kernel(repo_id, version=1)
    # A kernel without this machine's exact build: the guess is missing, the build the listing chooses is read.
    stable = "torch-stable-abi210-cpu-x86_64-linux"
    other_id, other = new_repo("stable-only", "kernel", TRUSTED_ORG)
    publish(other, "1.0.0", variants=(stable,))
    other.branch("v1")
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    assert stable == kernelpin.get_kernel(other_id, version=1).VARIANT


def test_a_silent_file_server_costs_one_timeout_with_the_read_ahead(
    hub, line, state, hf_env, monkeypatch, fresh_modules
):
    # The metadata.json read ahead that gets no answer is the error (once), not read again for a second timeout.
    import time

    monkeypatch.setenv("KERNELPIN_HTTP_TIMEOUT", "1")
    with HostileHub(hub.endpoint, Lies(file_delay=30)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        start = time.monotonic()
        with pytest.raises(KernelpinError, match=r"metadata.json .*no answer .* within 1 s"):
            kernelpin.get_kernel(line[0], version=1)
        assert time.monotonic() - start < 1.8


def test_a_read_ahead_nobody_waits_for_does_not_hold_up_the_exit(hub, state, hf_env, monkeypatch, new_repo, tmp_path):
    # Failed before: the read-ahead ran in an executor's thread, which the interpreter joins at exit, so a guess the
    # listing did not choose, stalled by the server, kept a finished program alive until its request timed out.
    import time

    stable = "torch-stable-abi210-cpu-x86_64-linux"
    repo_id, repo = new_repo("stable-only", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0", variants=(stable,))
    repo.branch("v1")
    monkeypatch.setenv("KERNELPIN_HTTP_TIMEOUT", "20")
    monkeypatch.chdir(tmp_path)
    with HostileHub(hub.endpoint, Lies(stall_path=f"build/{CPU_213}/metadata.json", endless_for=30)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        start = time.monotonic()
        printed, _ = fresh_interpreter(f"import kernelpin\nprint(kernelpin.get_kernel({repo_id!r}, version=1).VARIANT)")
        took = time.monotonic() - start
    assert printed.strip() == stable
    assert took < 10, f"the interpreter exited {took:.1f} s after it started"


def test_kernel_dependencies_load_first_and_a_cycle_is_refused(with_dependency, new_repo, state, fresh_modules):
    kernel_id, _, _dep_id, dep_commit = with_dependency
    module = kernelpin.get_kernel(kernel_id, version=2)
    assert (module.VERSION, module.DEP_VERSION) == ("2.0.0", "1.4.0") and dep_commit in module.DEP_FILE
    selfish_id, selfish = new_repo("selfish", "kernel", TRUSTED_ORG)
    publish_depending(selfish, "1.0.0", [{"repo-id": selfish_id, "version": 1}], "VERSION = '1.0.0'\n")
    with pytest.raises(KernelpinError, match=rf"kernel dependency cycle: {selfish_id} -> {selfish_id}"):
        kernelpin.get_kernel(selfish_id, version=1)


def test_a_cold_call_writes_metadata_json_once_and_a_lock_then_reads_it_from_the_snapshot(
    hub, line, state, hf_env, project, cli, monkeypatch, fresh_modules
):
    # Failed before: the cold call kept a second copy as blobs/<git blob id> (a file lock and an fsync more).
    repo_id, _, _, at_branch = line
    kernelpin.get_kernel(repo_id, version=1)
    blobs = hf_env / f"kernels--{repo_id.replace('/', '--')}" / "blobs"
    names = sorted(blob.name for blob in blobs.iterdir())
    files = kernel_files("1.1.0", variants=(CPU_213, OTHER))
    assert len(names) == sum(path.startswith(f"build/{CPU_213}/") for path in files)  # one blob per file, by sha256
    assert all(len(name) == 64 for name in names)
    project(f'"{repo_id}" = 1\n')
    server = HostileHub(hub.endpoint, Lies())
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock")
        assert status == 0, err
    fetched = [path for _, path in server.arrivals if path.endswith("/metadata.json")]
    assert fetched == [f"/kernels/{repo_id}/resolve/{at_branch}/build/{OTHER}/metadata.json"]  # not this variant's
