"""One pyproject for `kernels` (PyPI 0.17.2) and kernelpin, judged by the real `kernels` code against the test Hub:
`= N` is the branch vN for both (same commit as `kernels lock`), `kernelpin add` writes what `kernels lock` reads,
and a kept `kernels.lock` names the commits kernelpin resolved."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelpin.format.metadata import render
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, kernel_files, publish, variant_files
from testkit.releasing import hub_env, kernels_cli, run
from tests.kernelpin.helpers import TRUSTED_ORG, fresh_interpreter, snapshot_dir

pytest.importorskip("kernels")


def kernels_env(endpoint: str, home: Path) -> dict[str, str]:
    # Telemetry left on: with HF_HUB_DISABLE_TELEMETRY=1 kernels 0.17.2 sends a header httpx rejects (ANCHORS §8).
    return hub_env(endpoint, home, HF_HUB_DISABLE_TELEMETRY="0")


def rebuild(repo, version: str, branch: str) -> str:
    """An untagged upload pushed onto `branch`, as kernel-builder pushes every build."""
    repo.write(kernel_files(version, variants=(CPU_213,), extra={"rebuild.txt": version.encode()}), clear=True)
    commit = repo.commit(f"rebuild {version}")
    repo.branch(branch, commit)
    return commit


@pytest.fixture
def lines(new_repo) -> dict[str, tuple[str, str, str | None]]:
    """Three kernel repositories, each `= 1` meaning a different thing to tags and to the branch:
    name -> (repo_id, the commit of branch v1, the tag on that commit)."""
    ahead_id, ahead = new_repo("branch-ahead", "kernel", TRUSTED_ORG)
    publish(ahead, "1.0.0", variants=(CPU_213,))
    ahead.branch("v1")
    ahead_head = rebuild(ahead, "1.0.1", "v1")  # untagged rebuild on v1 after tag v1.0.0

    behind_id, behind = new_repo("tag-ahead", "kernel", TRUSTED_ORG)
    behind_head = publish(behind, "1.0.0", variants=(CPU_213,))
    behind.branch("v1")
    publish(behind, "1.2.0", variants=(CPU_213,))  # tag v1.2.0 newer than branch v1

    only_id, only = new_repo("branch-only", "kernel", TRUSTED_ORG)
    only_head = rebuild(only, "1.3.0", "v1")  # no tags at all
    return {
        "ahead": (ahead_id, ahead_head, None),
        "behind": (behind_id, behind_head, "v1.0.0"),
        "only": (only_id, only_head, None),
    }


def test_integer_major_locks_the_commit_kernels_lock_locks(hub, lines, project, cli, tmp_path):
    """Failed before: kernelpin read `= 1` as ^1 over tags and locked v1.0.0 (branch ahead) and v1.2.0 (tag ahead)
    where `kernels lock` locks the head of branch v1."""
    root = project("".join(f'"{repo_id}" = 1\n' for repo_id, _, _ in lines.values()))
    kernels_cli(["lock", str(root)], kernels_env(hub.endpoint, tmp_path / "kernels-home"))
    by_kernels = {
        entry["dependency"]["repo-id"]: entry["lock"]["commit"]
        for entry in json.loads((root / "kernels.lock").read_text())
    }
    (root / "kernels.lock").unlink()  # kernelpin is judged on its own lock here
    status, _, err = cli("lock")
    assert status == 0, err
    locked = {k.repo_id: k for k in lockfiles.read(root / "kernelpin.lock").kernels}
    assert {repo_id: kernel.commit for repo_id, kernel in locked.items()} == by_kernels
    for repo_id, head, tag in lines.values():
        assert by_kernels[repo_id] == head
        assert (locked[repo_id].ref, locked[repo_id].tag) == ("refs/heads/v1", tag)
    assert locked[lines["behind"][0]].version == "1.0.0" and locked[lines["ahead"][0]].version is None
    assert cli("lock", "--check")[0] == 0
    status, out, _ = cli("versions", lines["behind"][0], "--json")  # satisfies `= 1`: the tag on the head of v1
    assert [(v["version"], v["satisfies"], v["locked"]) for v in json.loads(out)["versions"]] == [
        ("1.2.0", False, False),
        ("1.0.0", True, True),
    ]


def test_a_moved_branch_keeps_the_lock_fresh_and_outdated_reports_it(hub, lines, project, cli):
    repo_id, head, _ = lines["ahead"]
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0
    moved = rebuild(hub.repo(repo_id, "kernel"), "1.0.2", "v1")
    # Fresh: the lock still pins branch v1 (as a range lock stays fresh when a newer tag appears).
    assert cli("lock", "--check")[0] == 0
    status, out, _ = cli("outdated", "--json")
    assert status == 0
    (row,) = json.loads(out)
    assert row["branch_moved"] is True and row["locked"] == f"v1@{head[:12]}"
    assert row["newest_satisfying"] == f"v1@{moved[:12]}"
    status, out, _ = cli("outdated")
    assert status == 0 and "branch moved" in out
    assert cli("lock", "--upgrade-package", repo_id)[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    assert kernel.commit == moved
    _status, out, _ = cli("outdated", "--json")
    assert json.loads(out)[0]["branch_moved"] is False


def test_a_range_lock_is_stale_under_an_integer_requirement(lines, project, cli):
    """A lock written for `"^1"` (or by kernelpin before `= 1` meant the branch) is stale under `= 1`."""
    repo_id, head, _ = lines["behind"]
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].ref == "refs/tags/v1.2.0"
    project(f'"{repo_id}" = {{ version = 1 }}\n')
    status, _, err = cli("lock", "--check")
    assert (
        status == 1
        and f"{repo_id}: now the branch v1 (`= 1`, as `kernels` reads it), locked as refs/tags/v1.2.0" in err
    )
    assert cli("lock")[0] == 0
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].commit == head


def test_an_integer_without_its_branch_is_refused_naming_the_alternatives(lines, project, cli):
    repo_id, _, _ = lines["behind"]
    project(f'"{repo_id}" = 2\n')
    status, _, err = cli("lock")
    assert status == 1
    assert (
        f"{repo_id}: no branch v2 (`= 2` is the branch v2, as `kernels` reads it; major-version branches: v1; "
        "version tags: 1.2.0, 1.0.0)"
    ) in err
    assert '"^2" (kernelpin only' in err


def test_kernelpin_add_writes_what_kernels_lock_reads(hub, lines, project, cli, tmp_path):
    """Failed before: `add` wrote `"^1.2.0"` and the next `kernels lock .` died with TypeError ('str' object
    cannot be interpreted as an integer)."""
    root = project("")
    behind_id, behind_head, _ = lines["behind"]
    only_id, only_head, _ = lines["only"]
    status, out, err = cli("add", behind_id)
    assert status == 0, err
    assert f"Added {behind_id} = 1 to pyproject.toml (the branch v1 (newest release 1.2.0))" in out
    status, out, err = cli("add", f"{only_id}@^1")  # a whole major line is said as the integer
    assert status == 0 and "kernels lock` will not read" not in err, err  # (the release is unsigned: said so)
    text = (root / "pyproject.toml").read_text()
    assert f'"{behind_id}" = 1\n' in text and f'"{only_id}" = 1\n' in text
    kernels_cli(["lock", str(root)], kernels_env(hub.endpoint, tmp_path / "kernels-home"))
    by_kernels = {
        entry["dependency"]["repo-id"]: entry["lock"]["commit"]
        for entry in json.loads((root / "kernels.lock").read_text())
    }
    assert by_kernels == {behind_id: behind_head, only_id: only_head}
    assert {k.repo_id: k.commit for k in lockfiles.read(root / "kernelpin.lock").kernels} == by_kernels


def test_add_of_a_range_kernels_cannot_express_says_so(lines, new_repo, project, cli):
    root = project("")
    behind_id, _, _ = lines["behind"]
    status, out, err = cli("add", f"{behind_id}@^1.1")
    assert status == 0 and f'Added {behind_id} = "^1.1"' in out
    assert (
        f"warning: {behind_id}: `kernels lock` will not read this entry (it takes only an integer major, the "
        "branch v<N>); kernelpin resolves it against version tags"
    ) in err
    tags_only_id, tags_only = new_repo("tags-only", "kernel", TRUSTED_ORG)
    publish(tags_only, "2.0.0", variants=(CPU_213,))
    status, out, err = cli("add", "--json", tags_only_id)
    assert status == 0, err
    [added] = json.loads(out)["added"]  # one entry per repository given
    assert (added["requirement"], added["kernels_lock_reads"]) == ("^2.0.0", False)
    assert "the repository has no branch v2, which `= 2` would name" in added["note"]
    assert f'"{tags_only_id}" = "^2.0.0"' in (root / "pyproject.toml").read_text()


def kernels_load(calls: dict[str, str], env: dict[str, str]) -> dict[str, dict]:
    """Evaluate each `kernels.<call>` (returning a kernel module) in one fresh process; what each kernel says."""
    script = (
        "import json, kernels\nfrom pathlib import Path\nfound = {}\n"
        + "".join(
            f"module = kernels.{call}\nfound[{key!r}] = {{'version': module.VERSION, "
            f"'variant': module.VARIANT, 'file': module.__file__}}\n"
            for key, call in calls.items()
        )
        + "print(json.dumps(found))"
    )
    done = run([sys.executable, "-c", script], env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kernelpin_lock_keeps_a_kernels_lock_in_step(hub, lines, project, cli, tmp_path):
    """Failed before: kernelpin never touched kernels.lock, so kernels loaded other commits than kernelpin."""
    ahead_id, ahead_head, _ = lines["ahead"]
    behind_id, _, _ = lines["behind"]
    env = kernels_env(hub.endpoint, tmp_path / "kernels-home")
    root = project(f'"{ahead_id}" = 1\n"{behind_id}" = 1\n')
    kernels_cli(["lock", str(root)], env)
    written_by_kernels = (root / "kernels.lock").read_bytes()
    assert cli("lock")[0] == 0
    assert (root / "kernels.lock").read_bytes() == written_by_kernels  # in step already: the same bytes
    # A range `kernels lock` cannot read: kernelpin resolves it (tag v1.2.0) and names that commit in kernels.lock.
    project(f'"{ahead_id}" = 1\n"{behind_id}" = "^1"\n')
    status, out, err = cli("lock")
    assert status == 0 and "~ kernels.lock: kept in step with kernelpin.lock (2 kernels)" in out, err
    locked = {k.repo_id: k.commit for k in lockfiles.read(root / "kernelpin.lock").kernels}
    entries = json.loads((root / "kernels.lock").read_text())
    assert entries == [
        {"dependency": {"repo-id": ahead_id, "version": 1}, "lock": {"commit": ahead_head}},
        {"dependency": {"repo-id": behind_id, "revision": "v1.2.0"}, "lock": {"commit": locked[behind_id]}},
    ]
    # kernels' own reader and loader take it: get_locked_kernel loads the build kernelpin resolved.
    kernels_lock = str(root / "kernels.lock")
    loaded = kernels_load(
        {
            repo_id: f"get_locked_kernel({repo_id!r}, lockfile=Path({kernels_lock!r}))"
            for repo_id in (behind_id, ahead_id)
        },
        env,
    )
    assert {repo_id: (found["version"], found["variant"]) for repo_id, found in loaded.items()} == {
        behind_id: ("1.2.0", CPU_213),
        ahead_id: ("1.0.1", CPU_213),
    }
    assert all(locked[repo_id] in found["file"] for repo_id, found in loaded.items())
    # Out of step (edited, or re-locked by `kernels lock` to other commits): `lock --check` says so, `lock` repairs.
    (root / "kernels.lock").write_text((root / "kernels.lock").read_text().replace(locked[behind_id], "0" * 40))
    status, _, err = cli("lock", "--check")
    assert status == 1 and f"kernels.lock does not name the commits of kernelpin.lock ({behind_id})" in err
    edited = (root / "kernels.lock").read_bytes()
    status, out, _ = cli("lock", "--dry-run")
    assert "Would change: ~ kernels.lock: kept in step" in out and (root / "kernels.lock").read_bytes() == edited
    assert cli("lock")[0] == 0 and cli("lock", "--check")[0] == 0
    assert json.loads((root / "kernels.lock").read_text()) == entries


def test_no_kernels_lock_is_created(lines, project, cli):
    root = project(f'"{lines["ahead"][0]}" = 1\n')
    assert cli("lock")[0] == 0
    assert not (root / "kernels.lock").exists()


def publish_depending(repo, version: str, depends: list[dict], init: str) -> str:
    """A kernel release whose variant's __init__.py is `init` and whose metadata.json lists `kernel-depends`,
    pushed onto branch v<major> as kernel-builder publishes."""
    own = variant_files(version, CPU_213, extra={"__init__.py": init.encode()})
    document = json.loads(own["metadata.json"])
    own["metadata.json"] = render({**document, "kernel-depends": depends}).encode()
    repo.write({f"build/{CPU_213}/{path}": data for path, data in own.items()}, clear=True)
    commit = repo.commit(f"build {version}")
    repo.branch(f"v{version.split('.')[0]}", commit)
    return commit


@pytest.fixture
def with_dependency(new_repo) -> tuple[str, str, str, str]:
    """(kernel, its commit, dependency, its commit): the kernel calls kernels.get_kernel_dep while it loads."""
    dep_id, dep = new_repo("multi", "kernel", TRUSTED_ORG)
    dep_commit = rebuild(dep, "1.4.0", "v1")
    kernel_id, kernel = new_repo("uses-multi", "kernel", TRUSTED_ORG)
    init = (
        f"import kernels\n_dep = kernels.get_kernel_dep({dep_id!r})\nDEP_VERSION = _dep.VERSION\n"
        "DEP_FILE = _dep.__file__\nfrom ._impl import VARIANT, gray\nVERSION = '2.0.0'\n"
    )
    commit = publish_depending(kernel, "2.0.0", [{"repo-id": dep_id, "version": 1}], init)
    return kernel_id, commit, dep_id, dep_commit


def test_a_kernel_dependency_is_locked_synced_verified_and_loaded(hub, with_dependency, project, cli, hf_env, tmp_path):
    """Failed before: the dependency was not locked, and kernelpin.load raised `RuntimeError: get_kernel_dep only
    works during kernel loading` where kernels.get_kernel loads the kernel with its dependency."""
    kernel_id, commit, dep_id, dep_commit = with_dependency
    root = project(f'"{kernel_id}" = 2\n')
    kernels_cli(["lock", str(root)], kernels_env(hub.endpoint, tmp_path / "kernels-home"))
    by_kernels = {
        entry["dependency"]["repo-id"]: entry["lock"]["commit"]
        for entry in json.loads((root / "kernels.lock").read_text())
    }
    assert by_kernels == {kernel_id: commit, dep_id: dep_commit}  # kernels locks the dependency transitively
    status, out, err = cli("lock")
    assert status == 0, err
    lock = lockfiles.read(root / "kernelpin.lock")
    assert {k.repo_id: k.commit for k in lock.kernels} == by_kernels
    assert lock.kernel(kernel_id).variant(CPU_213).depends == ((dep_id, 1),)
    assert lock.kernel(dep_id).required_by == (kernel_id,)
    assert "kept in step" not in out  # the kernels.lock `kernels lock` wrote names the same commits
    assert cli("lock", "--check")[0] == 0
    status, out, err = cli("sync", "--torch", "2.13")
    assert status == 0 and f"{dep_id} " in out, err
    assert cli("verify")[0] == 0
    # Every file of the dependency is checked as the kernel's own: a modified one is not imported; once
    # `kernelpin sync` has replaced it, the kernel loads with its dependency (one fresh process for both).
    impl = next(p for p in snapshot_dir(hf_env, dep_id, dep_commit, "kernel").rglob("_impl.py"))
    impl.unlink()
    impl.write_text("VARIANT = 'planted'\n")
    code = (
        "import kernelpin\nfrom kernelpin.cli import main\nfrom kernelpin.errors import IntegrityError\ntry:\n"
        f"    kernelpin.load({kernel_id!r})\nexcept IntegrityError as error:\n    print('refused:', error)\n"
        "assert main(['-q', 'sync', '--torch', '2.13']) == 0\n"
        "import sys\nsys.modules['kernels'] = sys.modules['kernels.deps'] = None  # as if not installed\n"
        f"try:\n    kernelpin.load({kernel_id!r})\nexcept Exception as error:\n    print('without kernels:', error)\n"
        "del sys.modules['kernels'], sys.modules['kernels.deps']\n"
        f"module = kernelpin.load({kernel_id!r})\nprint('loaded:', module.VERSION, module.DEP_VERSION, module.DEP_FILE)\n"
    )
    printed, _ = fresh_interpreter(code)
    refused, without_kernels, loaded = printed.strip().splitlines()[-3:]
    assert refused.startswith(f"refused: {dep_id} refs/heads/v1: build/{CPU_213}/_impl.py: size 20 != 137 pinned")
    # kernels installed but not importable: the error names the module and the installed version.
    assert (
        without_kernels.startswith(
            f"without kernels: {kernel_id} refs/heads/v2 ({CPU_213}) depends on {dep_id} (kernel-depends) and gets them "
            f"with kernels.get_kernel_dep, which uses kernels."
        )
        and " which cannot be imported " in without_kernels
    )
    _, version, dep_version, dep_file = loaded.split()
    assert (version, dep_version) == ("2.0.0", "1.4.0") and dep_commit in dep_file


def test_a_kernel_without_dependencies_loads_without_kernels(lines, project, cli):
    project(f'"{lines["ahead"][0]}" = 1\n')
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    printed, modules = fresh_interpreter(f"import kernelpin\nprint(kernelpin.load({lines['ahead'][0]!r}).VERSION)")
    assert printed.strip() == "1.0.1" and "kernels" not in modules


def test_dependency_cycles_and_conflicts_are_refused_naming_them(with_dependency, new_repo, project, cli):
    kernel_id, _, dep_id, _ = with_dependency
    project(f'"{kernel_id}" = 2\n"{dep_id}" = {{ revision = "main" }}\n')
    status, _, err = cli("lock")
    assert status == 1
    assert (
        f"{dep_id}: {kernel_id} ({CPU_213}, kernel-depends) requires 1, but [tool.kernels.dependencies] "
        'requires { revision = "main" }; kernelpin locks one build per repository'
    ) in err
    project(f'"{kernel_id}" = 2\n"{dep_id}" = {{ version = 1 }}\n')  # the same requirement, written as a table
    assert cli("lock")[0] == 0
    first_id, first = new_repo("cycle-a", "kernel", TRUSTED_ORG)
    second_id, second = new_repo("cycle-b", "kernel", TRUSTED_ORG)
    publish_depending(first, "1.0.0", [{"repo-id": second_id, "version": 1}], "VERSION = 'a'\n")
    publish_depending(second, "1.0.0", [{"repo-id": first_id, "version": 1}], "VERSION = 'b'\n")
    project(f'"{first_id}" = 1\n')
    status, _, err = cli("lock")
    assert status == 1 and f"kernel dependency cycle: {first_id} -> {second_id} -> {first_id}" in err


def test_after_sync_kernels_finds_the_files_offline_by_version(hub, lines, project, cli, hf_env, tmp_path):
    """Failed before: kernelpin's downloads had no refs/v<N> in the Hub cache, so `kernels` offline could not
    resolve version=N (only an explicit revision)."""
    repo_id, head, _ = lines["ahead"]
    root = project(f'"{repo_id}" = 1\n')
    (root / "kernels.lock").write_text("[]")  # kept in step from here on
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    ref = hf_env / f"kernels--{repo_id.replace('/', '--')}" / "refs" / "v1"
    assert ref.read_text() == head
    offline = {
        **kernels_env(hub.endpoint, tmp_path / "kernels-home"),
        "HF_HUB_CACHE": str(hf_env),
        "HF_HUB_OFFLINE": "1",
    }
    # kernels' resolver takes a KernelDependency until 0.17, (repo_id, KernelVersion) since 0.18.
    code = (
        "import inspect\nfrom kernels._rust import KernelDependency, KernelVersion\n"
        "from kernelpin.loading import kernels_internals\n"
        "resolve = kernels_internals.attribute('versions', 'resolve_kernel_version', 'the test')\n"
        f"version = KernelVersion.Version(1)\n"
        "if 'kernel' in inspect.signature(resolve).parameters:\n"
        f"    print(resolve(KernelDependency(repo_id={repo_id!r}, version=version), local_files_only=True))\n"
        "else:\n"
        f"    print(resolve({repo_id!r}, version, local_files_only=True))"
    )
    done = run([sys.executable, "-c", code], env=offline)
    assert done.stdout.strip() == head
    loaded = kernels_load(
        {
            "by version": f"get_kernel({repo_id!r}, version=1)",
            "locked": f"load_kernel({repo_id!r}, lockfile=Path({str(root / 'kernels.lock')!r}))",
        },
        offline,
    )
    assert all(found["version"] == "1.0.1" and head in found["file"] for found in loaded.values()), loaded


def test_locked_layer_repository_loads_the_layer_kernelpin_resolved(hub, new_repo, project, cli, tmp_path):
    """LockedLayerRepository (kernelize, how transformers uses kernels) reads the kept kernels.lock, here for a
    tag range `kernels lock` cannot express."""
    repo_id, repo = new_repo("layered", "kernel", TRUSTED_ORG)
    layer = (
        "import torch\n\n\nclass Gray(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "class layers:\n    Gray = Gray\n\n\nGray.VERSION = {!r}\n"
    )
    publish_depending(repo, "1.0.0", [], layer.format("1.0.0"))
    repo.tag("v1.0.0")
    commit = publish_depending(repo, "1.1.0", [], layer.format("1.1.0"))
    repo.tag("v1.1.0")
    publish_depending(repo, "1.2.0", [], layer.format("1.2.0-untagged"))  # branch v1 moves on, untagged
    root = project(f'"{repo_id}" = "~1.1"\n')
    (root / "kernels.lock").write_text("[]")
    assert cli("lock")[0] == 0
    assert json.loads((root / "kernels.lock").read_text()) == [
        {"dependency": {"repo-id": repo_id, "revision": "v1.1.0"}, "lock": {"commit": commit}}
    ]
    code = (
        "from pathlib import Path\nfrom kernels import LockedLayerRepository\n"
        f"layer = LockedLayerRepository({repo_id!r}, lockfile=Path({str(root / 'kernels.lock')!r}), "
        "layer_name='Gray').load()\nprint(layer.VERSION)"
    )
    done = run([sys.executable, "-c", code], env=kernels_env(hub.endpoint, tmp_path / "kernels-home"))
    assert done.stdout.strip().splitlines()[-1] == "1.1.0"


def test_kernels_lock_rendering_is_what_kernels_own_reader_and_writer_give():
    """Every requirement form, in kernels' format: its reader takes it and its writer gives the same bytes back
    (order and layout included); model repositories are left out (kernels reads kernel repositories only)."""
    from kernels._rust import KernelLocks

    from kernelpin.format import kernels_lock
    from kernelpin.format.lockfile import Lock, LockedKernel

    def kernel(repo_id: str, requirement, ref: str | None, repo_type: str = "kernel") -> LockedKernel:
        return LockedKernel(
            repo_id,
            repo_type,
            requirement,
            commit=f"{abs(hash(repo_id)) % 10**40:040d}",
            ref=ref,
            version=None,
            variants=(),
        )

    lock = Lock(
        (
            kernel("z/major", 1, "refs/heads/v1"),
            kernel("a/range", "^1.2", "refs/tags/v1.3.0"),
            kernel("m/table", {"version": 2}, "refs/heads/v2"),
            kernel("c/commit", {"revision": "a" * 40}, None),
            kernel("b/branch", {"revision": "main"}, "refs/heads/main"),
            kernel("o/model", 1, "refs/heads/v1", "model"),
        )
    )
    text = kernels_lock.render(lock)
    assert KernelLocks.from_json(text).to_json() == text
    assert [
        (e["dependency"]["repo-id"], e["dependency"].get("version"), e["dependency"].get("revision"))
        for e in json.loads(text)
    ] == [
        ("a/range", None, "v1.3.0"),
        ("b/branch", None, "main"),
        ("c/commit", None, "a" * 40),
        ("m/table", 2, None),
        ("z/major", 1, None),
    ]
    assert kernels_lock.left_out(lock) == ["o/model"]
