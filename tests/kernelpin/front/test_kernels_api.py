"""Issue 50: a `kernels` user switches with one import. Every name of the installed `kernels.__all__` (0.17.2 to
0.19.1: tools/ci/lowest_deps.py runs this with the oldest) is importable from kernelpin with kernels' signature, and
the loaders kernels offers beside get_kernel (get_locked_kernel, load_kernel, get_local_kernel, install_kernel,
get_loaded_kernels) load through kernelpin's verified path, against the test Hub. Each test failed before: 33 of the
38 names were missing."""

from __future__ import annotations

import inspect
import json
import sys
import warnings
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.loading import kernels_internals
from kernelpin.loading.local_override import LocalKernelOverrideWarning
from testkit.fake_kernel import CPU_213, publish, variant_files, write_variant
from tests.kernelpin.front.test_get_kernel import fresh_modules, state  # noqa: F401 (fixtures)
from tests.kernelpin.helpers import TRUSTED_ORG, fresh_interpreter, snapshot_dir

kernels = pytest.importorskip("kernels")


def _parameters(target: object) -> list[inspect.Parameter]:
    return list(inspect.signature(target).parameters.values())


@pytest.mark.parametrize("name", sorted(kernels.__all__))
def test_every_name_of_kernels_all_imports_from_kernelpin_with_its_signature(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from kernelpin import {name}", namespace)  # noqa: S102 (the import statement itself is what is tested)
    ours, theirs = namespace[name], getattr(kernels, name)
    if ours is theirs or not callable(theirs):
        return
    # kernelpin's own function: kernels' parameters, in kernels' order, with its kinds and defaults; anything more
    # only after them and optional (kernelpin takes more where it says more, never less).
    mine = _parameters(ours)
    expected = [(p.name, p.kind, p.default) for p in _parameters(theirs)]
    assert [(p.name, p.kind, p.default) for p in mine[: len(expected)]] == expected
    assert all(p.default is not inspect.Parameter.empty for p in mine[len(expected) :])


def test_import_kernelpin_imports_neither_torch_nor_the_hub_nor_kernels() -> None:
    output, modules = fresh_interpreter("import kernelpin\nprint(dir(kernelpin) == kernelpin.__all__)")
    assert output.strip() == "True"
    assert {name.split(".")[0] for name in modules} & {"torch", "huggingface_hub", "kernels"} == set()


def test_the_layer_api_without_kernels_names_pip_install_kernels(monkeypatch) -> None:
    monkeypatch.setattr(kernels_internals, "installed_kernels_version", lambda: None)
    with pytest.raises(kernels_internals.KernelsPackageError, match=r"pip install 'kernels>=0.17.2'$"):
        kernelpin.LayerRepository  # noqa: B018 (taking the name is what raises)


@pytest.fixture
def released(new_repo) -> tuple[str, str, str]:
    """A trusted kernel with v1.0.0 and v1.1.0 (branch v1 at v1.1.0): (repo_id, commit of 1.0.0, of 1.1.0)."""
    repo_id, repo = new_repo("switch", "kernel", TRUSTED_ORG)
    first = publish(repo, "1.0.0")
    second = publish(repo, "1.1.0")
    repo.branch("v1")
    return repo_id, first, second


def _kernels_lock(path: Path, repo_id: str, commit: str) -> Path:
    path.write_text(json.dumps([{"dependency": {"repo-id": repo_id, "version": 1}, "lock": {"commit": commit}}]))
    return path


def test_get_locked_kernel_loads_a_kernels_lock_commit_verified_and_load_kernel_then_offline(
    released, state, hf_env, tmp_path, fresh_modules
) -> None:
    repo_id, first, _ = released
    lockfile = _kernels_lock(tmp_path / "kernels.lock", repo_id, first)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnpinnedKernelWarning)  # kernels.lock pins it
        module = kernelpin.get_locked_kernel(repo_id, lockfile=lockfile)
    assert (module.VERSION, module.VARIANT) == ("1.0.0", CPU_213)
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    assert kernelpin.load_kernel(repo_id, lockfile=lockfile).VERSION == "1.0.0"  # nothing downloaded
    (snapshot_dir(hf_env, repo_id, first, "kernel") / "build" / CPU_213 / "__init__.py").write_text("EDITED = 1\n")
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    with pytest.raises(IntegrityError):
        kernelpin.load_kernel(repo_id, lockfile=lockfile)


def test_load_kernel_downloads_nothing(released, state, hf_env, tmp_path, fresh_modules) -> None:
    repo_id, first, _ = released
    with pytest.raises(KernelpinError, match="offline"):
        kernelpin.load_kernel(repo_id, lockfile=_kernels_lock(tmp_path / "kernels.lock", repo_id, first))
    assert not snapshot_dir(hf_env, repo_id, first, "kernel").exists()


def test_a_kernels_lock_names_the_kernel_or_says_what_it_holds(released, state, tmp_path) -> None:
    repo_id, first, _ = released
    lockfile = _kernels_lock(tmp_path / "kernels.lock", "acme/other", first)
    with pytest.raises(KernelpinError, match=rf"^{repo_id} is not in {lockfile} \(locked: acme/other\)"):
        kernelpin.get_locked_kernel(repo_id, lockfile=lockfile)


def test_get_locked_kernel_follows_the_kernelpin_lock_beside_and_refuses_another_commit(
    released, project, cli, state, fresh_modules
) -> None:
    repo_id, first, second = released
    root = project(f'"{repo_id}" = 1\n')
    _kernels_lock(root / "kernels.lock", repo_id, "0" * 40)
    assert cli("lock")[0] == 0  # kernelpin.lock, and kernels.lock brought in step with it
    assert json.loads((root / "kernels.lock").read_text())[0]["lock"]["commit"] == second
    assert kernelpin.get_locked_kernel(repo_id, lockfile=root / "kernels.lock").VERSION == "1.1.0"
    _kernels_lock(root / "kernels.lock", repo_id, first)
    with pytest.raises(KernelpinError, match="run `kernelpin lock` to bring kernels.lock in step"):
        kernelpin.get_locked_kernel(repo_id, lockfile=root / "kernels.lock")


def test_get_local_kernel_loads_a_build_on_disk_verified(tmp_path, state, fresh_modules) -> None:
    root = tmp_path / "checkout"
    write_variant(root / "build" / CPU_213, "9.9.9", CPU_213)
    module = kernelpin.get_local_kernel(root)
    assert (module.VERSION, module.VARIANT) == ("9.9.9", CPU_213)
    (root / "build" / CPU_213 / "__init__.py").write_text("EDITED = 1\n")
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    with pytest.raises(IntegrityError, match="rebuild it"):
        kernelpin.get_local_kernel(root)


def test_install_kernel_downloads_and_verifies_without_importing(released, state, hf_env, fresh_modules) -> None:
    repo_id, _, second = released
    before = set(sys.modules)
    directory = kernelpin.install_kernel(repo_id, version=1)
    assert directory.name == CPU_213 and (directory / "__init__.py").is_file()
    assert directory.parent.parent == snapshot_dir(hf_env, repo_id, second, "kernel")
    assert {name for name in set(sys.modules) - before if name.startswith("_kernelpin_")} == set()


def test_get_loaded_kernels_answers_kernels_loaded_kernel(released, state, fresh_modules) -> None:
    repo_id, _, second = released
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpinnedKernelWarning)
        module = kernelpin.get_kernel(repo_id, version=1)
    (loaded,) = [k for k in kernelpin.get_loaded_kernels() if k.module is module]
    assert isinstance(loaded, kernelpin.LoadedKernel) and loaded.repo_info.repo_id == repo_id
    assert str(loaded.repo_info.revision) == second


@pytest.fixture
def local_with_dep(new_repo, tmp_path) -> tuple[Path, str, str]:
    """A build on disk (build/<variant>/, as the builder leaves it) whose metadata.json names a Hub kernel (1.2.0 on
    branch v1) under kernel-depends and whose __init__.py takes it with kernels.get_kernel_dep, as a kernel with
    dependencies does: (its directory, the dependency's repo id, its commit)."""
    dep_id, dep = new_repo("local-dep", "kernel", TRUSTED_ORG)
    commit = publish(dep, "1.2.0")
    dep.branch("v1")
    init = f"import kernels\nDEP = kernels.get_kernel_dep({dep_id!r})\nfrom ._impl import VARIANT\nVERSION = '9.9.9'\n"
    root = tmp_path / "checkout"
    directory = write_variant(root / "build" / CPU_213, "9.9.9", CPU_213, extra={"__init__.py": init.encode()})
    document = json.loads((directory / "metadata.json").read_text())
    document["kernel-depends"] = [{"repo-id": dep_id, "version": 1}]
    (directory / "metadata.json").write_text(json.dumps(document))  # metadata.json is not in its own digest
    return root, dep_id, commit


def _kernels_says(hub, tmp_path: Path, code: str, **env: str) -> str:
    """What `code` prints run with the installed kernels against the test Hub, in a process of its own."""
    from testkit.releasing import hub_env, run

    environ = hub_env(hub.endpoint, tmp_path / "kernels-home", HF_HUB_DISABLE_TELEMETRY="0", **env)  # ANCHORS §8
    return run([sys.executable, "-c", code], env=environ).stdout.strip()


def test_get_local_kernel_loads_its_kernel_depends_from_the_hub_verified(
    hub, local_with_dep, state, hf_env, tmp_path, fresh_modules
) -> None:
    """As kernels' get_local_kernel (its resolvers: the directory, LOCAL_KERNELS, then the Hub, for the kernel's
    kernel-depends too), through kernelpin's HubResolver: the dependency's files verified, a changed cached file
    refused. Failed before: 'a local build with kernel-depends is not supported yet'."""
    root, dep_id, commit = local_with_dep
    with pytest.warns(UnpinnedKernelWarning, match=dep_id):  # resolved on the spot, as get_kernel resolves it
        module = kernelpin.get_local_kernel(root)
    assert (module.VERSION, module.DEP.VERSION, module.DEP.VARIANT) == ("9.9.9", "1.2.0", CPU_213)
    (loaded,) = [k for k in kernelpin.loaded_kernels() if k.repo_id == dep_id]
    assert loaded.commit == commit and sys.modules[loaded.module] is module.DEP  # kernelpin imported it
    # The judge: kernels' own get_local_kernel takes the same release of the dependency.
    code = f"import kernels, pathlib; print(kernels.get_local_kernel(pathlib.Path({str(root)!r})).DEP.VERSION)"
    assert _kernels_says(hub, tmp_path, code) == "1.2.0"
    # Verified: a changed cached file of the dependency is refused, where kernels would run it.
    (snapshot_dir(hf_env, dep_id, commit, "kernel") / "build" / CPU_213 / "_impl.py").write_text("VARIANT = 'x'\n")
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    with pytest.raises(IntegrityError, match="_impl.py"):
        kernelpin.get_local_kernel(root)


def test_a_local_kernels_build_gets_its_kernel_depends_as_kernels_does(
    hub, local_with_dep, state, tmp_path, monkeypatch, fresh_modules
) -> None:
    """LOCAL_KERNELS under get_kernel: a build there with kernel-depends gets them from the Hub, verified, as kernels'
    get_kernel does. Failed before: 'a local build with kernel-depends is not supported yet'."""
    root, dep_id, _ = local_with_dep
    repo_id = f"{TRUSTED_ORG}/on-disk-only"
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={root}")
    with pytest.warns(LocalKernelOverrideWarning), pytest.warns(UnpinnedKernelWarning, match=dep_id):
        module = kernelpin.get_kernel(repo_id, version=1)
    assert (module.VERSION, module.DEP.VERSION) == ("9.9.9", "1.2.0")
    code = f"import kernels; print(kernels.get_kernel({repo_id!r}, version=1).DEP.VERSION)"
    assert _kernels_says(hub, tmp_path, code, LOCAL_KERNELS=f"{repo_id}={root}") == "1.2.0"


def test_a_hub_kernels_dependency_in_local_kernels_loads_from_disk_as_kernels_does(
    hub, new_repo, state, tmp_path, monkeypatch, fresh_modules
) -> None:
    """kernels asks LOCAL_KERNELS before the Hub for a kernel's kernel-depends too. Failed before: kernelpin took
    the dependency from the Hub whatever LOCAL_KERNELS said."""
    dep_id, dep = new_repo("dep", "kernel", TRUSTED_ORG)
    publish(dep, "1.0.0")
    dep.branch("v1")
    top_id, top = new_repo("top", "kernel", TRUSTED_ORG)
    init = f"import kernels\nDEP = kernels.get_kernel_dep({dep_id!r})\nfrom ._impl import VARIANT\n"
    own = variant_files("2.0.0", CPU_213, extra={"__init__.py": init.encode()})
    document = json.loads(own["metadata.json"])
    document["kernel-depends"] = [{"repo-id": dep_id, "version": 1}]
    own["metadata.json"] = json.dumps(document).encode()
    top.write({f"build/{CPU_213}/{path}": data for path, data in own.items()}, clear=True)
    top.commit("release 2.0.0")
    top.tag("v2.0.0")
    top.branch("v2")
    write_variant(tmp_path / "dep-on-disk" / "build" / CPU_213, "1.5.0", CPU_213)
    monkeypatch.setenv("LOCAL_KERNELS", f"{dep_id}={tmp_path / 'dep-on-disk'}")
    with pytest.warns(LocalKernelOverrideWarning, match=dep_id), pytest.warns(UnpinnedKernelWarning, match=top_id):
        module = kernelpin.get_kernel(top_id, version=2)
    assert module.DEP.VERSION == "1.5.0"  # the build on disk, not the Hub's 1.0.0
    code = f"import kernels; print(kernels.get_kernel({top_id!r}, version=2).DEP.VERSION)"
    assert _kernels_says(hub, tmp_path, code, LOCAL_KERNELS=f"{dep_id}={tmp_path / 'dep-on-disk'}") == "1.5.0"


def test_under_a_lock_a_local_build_with_kernel_depends_is_refused_even_when_allowed(
    local_with_dep, project, cli, state, monkeypatch, fresh_modules
) -> None:
    """Where a lock decides what runs, an allowed LOCAL_KERNELS build may replace a locked kernel, but one with
    kernel-depends is refused: the lock pins none of its dependencies (no test held this before)."""
    root, dep_id, _ = local_with_dep
    app = project(f'"{dep_id}" = 1\n')
    assert cli("lock")[0] == 0
    monkeypatch.setenv("LOCAL_KERNELS", f"{dep_id}={root}")
    monkeypatch.setenv("KERNELPIN_ALLOW_LOCAL_KERNELS", "1")
    with pytest.raises(
        KernelpinError, match="not loaded where a lock decides what runs .* remove it from LOCAL_KERNELS"
    ):
        kernelpin.load(dep_id, lock=app)
