"""Inspection against the test Hub: what a kernel is (info: license, upstream, backends, dependencies), which
builds this machine and others can use (per variant, per version), the kernels loaded in this process, and a
hint when the version asked for has no build for this machine but a newer one has. Failed before: none of it
existed (kernelpin had no info, no per-variant verdicts, no loaded-kernel listing, no hint)."""

from __future__ import annotations

import json
import sys

import pytest

import kernelpin
from kernelpin import environment
from kernelpin.errors import NoVariantError
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.hub.source import HubSettings, HubSource
from testkit.fake_kernel import CPU_213, kernel_files, publish
from tests.kernelpin.helpers import TRUSTED_ORG

CU130 = "torch213-cxx11-cu130-x86_64-linux"
CPU_212 = "torch212-cxx11-cpu-x86_64-linux"


@pytest.fixture
def grown(new_repo, hf_env, tmp_path, monkeypatch):
    """A kernel whose 1.0.0 has builds for torch 2.12 (CPU) and CUDA only, and 1.1.0 a CPU build for 2.13,
    with upstream, kernels-minver and python-depends in its metadata: (repo_id, commit of 1.0.0)."""
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    repo_id, repo = new_repo("grown", "kernel", TRUSTED_ORG)
    files = kernel_files("1.0.0", variants=(CPU_212, CU130))
    for path in [path for path in files if path.endswith("metadata.json")]:
        document = json.loads(files[path])
        document.update(
            {"upstream": "https://github.com/acme/grown", "kernels-minver": "0.11.0", "python-depends": ["einops"]}
        )
        files[path] = json.dumps(document).encode()
    repo.write(files, clear=True)
    first = repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    repo.branch("v1")
    publish(repo, "1.1.0", variants=(CPU_213, CU130))
    yield repo_id, first
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


def test_info_shows_license_upstream_backends_and_dependencies(grown, cli):
    repo_id, first = grown
    info = kernelpin.info(HubSource(HubSettings.from_env()), repo_id, environment.current({}), revision="v1.0.0")
    assert info.commit == first and info.release == "1.0.0" and info.ref == "refs/tags/v1.0.0"
    assert (info.version, info.revision) == (1, "v1.0.0")  # as kernels info says them: the major, the revision given
    assert info.variant is None  # no build of 1.0.0 fits this machine: its first build describes the kernel
    assert (info.license, info.upstream, info.kernels_minver) == (
        "Apache-2.0",
        "https://github.com/acme/grown",
        "0.11.0",
    )
    assert info.python_depends == ["einops"] and info.kernel_depends == [] and info.kernel_requirements == []
    assert info.backends == ["cpu", "cuda"] and info.variants == [CPU_212, CU130]
    status, out, err = cli("info", repo_id, "--json")  # no project here: the newest major-version branch, v1
    assert status == 0, err
    assert json.loads(out) == {**info.as_json(dep_tree=False), "ref": "refs/heads/v1", "revision": "v1"}
    status, out, _ = cli("info", repo_id, "--version", "^1.1")
    assert status == 0
    assert "License: Apache-2.0\n" in out and "Python dependencies: -\n" in out and "Backends: cpu, cuda\n" in out
    assert f"Variant: {CPU_213}\n" in out and "Version: 1\n" in out and "Release: 1.1.0\n" in out
    assert "Revision: v1.1.0\n" in out and "Ref: refs/tags/v1.1.0\nRepository type: kernel\n" in out


def test_info_on_a_release_with_a_backend_less_sdk_build(new_repo, hf_env, cli):
    """An `sdk` build names no backend: info lists the others' (before issue 52 it raised AttributeError)."""
    repo_id, repo = new_repo("with-sdk", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0", variants=(CPU_213, "sdk"))
    repo.branch("v1")
    info = kernelpin.info(HubSource(HubSettings.from_env()), repo_id, environment.current({}), revision="v1.0.0")
    assert info.backends == ["cpu"] and info.variants == ["sdk", CPU_213]
    status, out, err = cli("info", repo_id)
    assert status == 0 and "Backends: cpu\n" in out, err


def test_variants_are_judged_for_this_machine_and_for_a_described_one(grown, project, cli):
    repo_id, _ = grown
    # As kernels answers (issue 50: kernelpin answered VariantFit, without `.variant`): kernels' own decisions.
    decisions = kernelpin.get_kernel_variants(repo_id, revision="v1.0.0")
    assert [(type(d).__name__, d.variant.variant_str) for d in decisions] == [
        ("VariantRejected", CPU_212),
        ("VariantRejected", CU130),
    ]
    assert all(isinstance(d, kernelpin.VariantRejected) for d in decisions)
    assert "torch 2.12 != 2.13" in decisions[0].reason
    decisions = kernelpin.get_kernel_variants(repo_id, revision="v1.1.0")
    assert isinstance(decisions[0], kernelpin.VariantAccepted) and decisions[0].variant.variant_str == CPU_213
    assert [d.variant.variant_str for d in decisions] == [CPU_213, CU130]
    app = kernelpin.find_project(project(f'"{repo_id}" = 1\n'))
    other = environment.current({"torch": "2.13", "backend": "cu130"})
    listed = kernelpin.versions(app, HubSource(HubSettings.from_env()), repo_id, other)
    assert [row.version for row in listed.versions] == ["1.1.0", "1.0.0"]
    assert [(v.name, v.fits, v.chosen) for v in listed.versions[1].variants] == [
        (CU130, True, True),
        (CPU_212, False, False),
    ]
    status, out, err = cli("versions", repo_id, "--variants", "--torch", "2.12", "--json")
    assert status == 0, err
    rows = json.loads(out)["versions"]
    assert [[v["name"] for v in row["variants"] if v["chosen"]] for row in rows] == [[], [CPU_212]]
    status, out, _ = cli("versions", repo_id, "--variants")  # this machine: torch 2.13, CPU
    assert status == 0 and f"{CPU_213}" in out and "1 of 2 fit" in out
    assert "variants" not in json.loads(cli("versions", repo_id, "--json")[1])["versions"][0]


def test_no_build_for_this_machine_points_at_the_newer_version_that_has_one(grown):
    repo_id, _ = grown
    with pytest.raises(
        NoVariantError,
        match=r"Version 1.1.0 \(tag v1.1.0\) has a build for this machine "
        rf"\({CPU_213}\): require it, e.g. `kernelpin add {repo_id}@\^1.1.0`",
    ):
        kernelpin.get_kernel(repo_id, version=1)
    assert kernelpin.has_kernel(repo_id, revision="v1.0.0") is False
    assert kernelpin.has_kernel(repo_id, revision="v1.1.0") is True


def test_loaded_kernels_lists_what_this_process_imported(grown):
    repo_id, _ = grown
    with pytest.warns(UnpinnedKernelWarning, match=f"to pin it, run `kernelpin add {repo_id}@"):
        module = kernelpin.get_kernel(repo_id, version="^1.1")
    (loaded,) = [k for k in kernelpin.loaded_kernels() if k.repo_id == repo_id]
    assert sys.modules[loaded.module] is module
    assert loaded.variant == CPU_213 and loaded.directory.name == CPU_213 and len(loaded.commit) == 40


def test_sync_of_a_locked_version_without_a_build_here_names_the_newer_one_that_has(grown, project, cli):
    repo_id, _ = grown
    project(f'"{repo_id}" = "~1.0"\n')
    assert cli("lock")[0] == 0
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and "no build variant fits this environment" in err
    assert f"Version 1.1.0 (tag v1.1.0) has a build for this machine ({CPU_213}): require it" in err
    status, _, err = cli("--offline", "sync", "--torch", "2.13")  # offline the Hub is not asked
    assert status == 1 and "no build variant fits" in err and "Version 1.1.0" not in err
