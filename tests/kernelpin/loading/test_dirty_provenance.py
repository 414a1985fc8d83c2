"""A build made from uncommitted changes (issue 45): kernelpin warns, as `kernels` does (its DirtyValidator,
0.17.2 to 0.19.1), whichever way it is loaded: get_kernel, a locked load, LOCAL_KERNELS; a clean build, or a
provenance that does not say `"dirty": true`, gets no warning."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from importlib.metadata import version

import pytest

import kernelpin
from kernelpin.loading.provenance import DirtyBuildWarning, dirty_parts
from testkit.fake_kernel import CPU_213, variant_files
from testkit.releasing import hub_env

COMMIT = "c0ffee" + "0" * 34


def dirty_release(repo, provenance: dict) -> None:
    own = variant_files("1.0.0", CPU_213)
    document = json.loads(own["metadata.json"])
    document["provenance"] = {**document["provenance"], **provenance}
    own["metadata.json"] = json.dumps(document).encode()  # metadata.json is not in its own digest
    repo.write({f"build/{CPU_213}/{path}": data for path, data in own.items()}, clear=True)
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    repo.branch("v1")


DIRTY = {
    "kernel": {"commit": COMMIT, "dirty": True},
    "kernel-builder": {"name": "kernel-builder", "version": "0.12.0", "commit": COMMIT, "dirty": False},
}


def _dirty_warnings(call) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, DirtyBuildWarning)]


@pytest.mark.parametrize(
    ("provenance", "parts"),
    [
        ({"kernel": {"dirty": True}}, ["the kernel's sources"]),
        ({"kernel-builder": {"dirty": True}, "kernel": {"dirty": True}}, ["the kernel's sources", "kernel-builder"]),
        ({"kernel": {"dirty": "yes"}}, []),
        ({"kernel": {"dirty": False}}, []),
        ({"kernel": True}, []),
        ([], []),
    ],
)
def test_what_counts_as_dirty(provenance, parts):
    assert dirty_parts({"provenance": provenance}) == parts


def test_get_kernel_and_a_locked_load_warn_and_kernels_warns_too(
    hub, hf_env, new_repo, project, cli, tmp_path, monkeypatch
):
    # Failed before: kernelpin loaded the build without a word.
    repo_id, repo = new_repo("dirty", "kernel")
    dirty_release(repo, DIRTY)
    said = _dirty_warnings(lambda: kernelpin.get_kernel(repo_id, version=1))
    assert said == [
        (
            f"{repo_id} 1.0.0 ({CPU_213}) was built from uncommitted changes (the kernel's sources had "
            "changes no commit holds): its recorded git commit does not identify what it was built from, so "
            "it may not be reproducible; ask its publisher for a build from a clean tree"
        )
    ]
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    assert len(_dirty_warnings(lambda: kernelpin.load(repo_id, lock=root))) == 1
    # The judge: the installed kernels (0.17.2 to 0.19.1 all have DirtyValidator) warns of the same build.
    code = (
        "import logging, sys, kernels; logging.basicConfig(level=logging.WARNING, stream=sys.stdout); "
        f"kernels.get_kernel({repo_id!r}, version=1, trust_remote_code=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "was built from a dirty git tree" in done.stdout, (version("kernels"), done.stdout)


def test_a_clean_build_and_a_local_dirty_build(hub, hf_env, new_repo, tmp_path, monkeypatch):
    repo_id, repo = new_repo("clean", "kernel")
    dirty_release(repo, {"kernel": {"commit": COMMIT, "dirty": False}})
    assert _dirty_warnings(lambda: kernelpin.get_kernel(repo_id, version=1)) == []
    local = tmp_path / "local" / "build" / CPU_213
    local.mkdir(parents=True)
    files = variant_files("1.0.0", CPU_213)
    document = json.loads(files["metadata.json"])
    files["metadata.json"] = json.dumps({**document, "provenance": DIRTY}).encode()
    for name, data in files.items():
        (local / name).write_bytes(data)
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/local-dirty={tmp_path / 'local'}")
    said = _dirty_warnings(lambda: kernelpin.get_kernel("acme/local-dirty", version=1))
    assert len(said) == 1 and said[0].startswith("acme/local-dirty from LOCAL_KERNELS (")
