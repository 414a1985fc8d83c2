"""Issue 28 (5, 6): kernel dependencies. A chain of any depth locks without a RecursionError, and
`load(repo, backend="cpu")` loads the CPU builds of the kernel's dependencies too, as `kernels` does."""

from __future__ import annotations

import json
import sys

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.spec import parse_requirement
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading import runtime
from kernelpin.resolve import _resolve_dependencies, resolve
from testkit.fake_kernel import CPU_213, variant_files
from tests.kernelpin.helpers import TRUSTED_ORG

CUDA_213 = "torch213-cxx11-cu130-x86_64-linux"


def chained(i: int, depth: int, cycle: bool = False) -> lockfile.LockedKernel:
    """acme/k<i> of a chain acme/k0 -> acme/k1 -> ... of `depth` kernels (-> acme/k0 again, with `cycle`)."""
    after = (i + 1) % depth if cycle else i + 1
    file = lockfile.LockedFile("__init__.py", 1, "0" * 64)
    return lockfile.LockedKernel(
        repo_id=f"acme/k{i}",
        repo_type="kernel",
        requirement=1,
        commit=f"{i:040x}",
        ref="refs/heads/v1",
        version="1.0.0",
        variants=(
            lockfile.LockedVariant(CPU_213, (file,), "cpu", None, ((f"acme/k{after}", 1),) if after < depth else ()),
        ),
        required_by=(f"acme/k{i - 1}",) if i else (),
    )


def test_a_thousand_deep_dependency_chain_locks(hf_env):
    # Failed before: RecursionError in the dependency walk of `lock`.
    depth = 1100
    previous = lockfile.Lock(tuple(chained(i, depth) for i in range(depth)))  # fresh: nothing is asked of the Hub
    lock = resolve(
        HubSource(HubSettings.from_env()), [parse_requirement("acme/k0", 1)], previous, upgrade=lambda repo_id: False
    )
    assert {k.repo_id: k for k in lock.kernels} == {k.repo_id: k for k in previous.kernels}
    assert lockfile.staleness([parse_requirement("acme/k0", 1)], lock) == []  # `lock --check`


def test_a_dependency_cycle_is_still_refused_at_any_depth():
    for depth in (1, 3, 1500):
        chain = {f"acme/k{i}": chained(i, depth, cycle=True) for i in range(1, depth)}
        with pytest.raises(
            KernelpinError,
            match=r"^kernel dependency cycle: acme/k0 -> acme/k1 -> .*acme/k0 \("
            if depth > 1
            else r"^kernel dependency cycle: acme/k0 -> acme/k0",
        ):
            _resolve_dependencies(
                {"acme/k0": chained(0, depth, cycle=True)},
                {"acme/k0": parse_requirement("acme/k0", 1)},
                lambda r, chain=chain: chain[r.repo_id],
            )


def publish_two_backends(repo, version: str, depends: list[dict], init: str) -> str:
    """A release with a CPU and a CUDA build, each whose __init__.py is `init` and whose metadata lists
    `depends`, on branch v<major>."""
    files = {}
    for variant in (CPU_213, CUDA_213):
        own = variant_files(version, variant, extra={"__init__.py": init.encode()})
        document = json.loads(own["metadata.json"])
        own["metadata.json"] = json.dumps({**document, "kernel-depends": depends}).encode()
        files.update({f"build/{variant}/{path}": data for path, data in own.items()})
    repo.write(files, clear=True)
    commit = repo.commit(f"build {version}")
    repo.branch(f"v{version.split('.')[0]}", commit)
    return commit


def test_load_with_backend_cpu_loads_the_cpu_builds_of_the_dependencies(new_repo, project, cli, monkeypatch):
    # Failed before: the kernel was the CPU build, its dependency the CUDA one (backend was not passed down).
    dep_id, dep = new_repo("dep", "kernel", TRUSTED_ORG)
    publish_two_backends(dep, "1.0.0", [], "from ._impl import VARIANT\n")
    kernel_id, kernel = new_repo("uses-dep", "kernel", TRUSTED_ORG)
    publish_two_backends(
        kernel,
        "1.0.0",
        [{"repo-id": dep_id, "version": 1}],
        f"import kernels\nDEP_VARIANT = kernels.get_kernel_dep({dep_id!r}).VARIANT\nfrom ._impl import VARIANT\n",
    )
    root = project(f'"{kernel_id}" = 1\n')
    assert cli("lock")[0] == 0
    monkeypatch.setattr(
        runtime, "_environment", lambda: Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(9, 0))
    )
    for loaded in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[loaded]
    module = kernelpin.load(kernel_id, lock=root, backend="cpu")
    assert (module.VARIANT, module.DEP_VARIANT) == (CPU_213, CPU_213)
    on_cuda = kernelpin.load(kernel_id, lock=root)
    assert (on_cuda.VARIANT, on_cuda.DEP_VARIANT) == (CUDA_213, CUDA_213)
