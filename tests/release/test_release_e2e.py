"""build -> stage -> Hub -> lock -> sync -> load, with real builds, a real Hub API (olah) and the real CLI.

The release lives in a kernel repository (the Hub's type for kernels). An application pins
`"acme/img2gray" = "^0.1"`, gets exactly the bits of v0.1.0 and runs the op on a real image; bumping to `^0.2`
gets v0.2.0, never the prerelease v0.2.1-rc.1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from huggingface_hub import HfApi

from kernelpin.files.integrity import sha256_file
from kernelpin.format.metadata import sha256_hex
from kernelpin.store import lockfiles
from testkit.releasing import (
    BUILT_VERSIONS,
    REPO_ID,
    VERSIONS,
    Released,
    consumer_project,
    hub_env,
    kernelpin,
    load_and_check,
    run,
)

CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def metadata_of(released: Released, version: str) -> dict:
    return json.loads((released.staged[version] / "build" / CPU_VARIANT / "metadata.json").read_text())


def digest_of(released: Released, version: str) -> dict[str, str]:
    """path -> hex sha256 from metadata.json (which stores base64, as kernels_data does)."""
    return {path: sha256_hex(value) for path, value in metadata_of(released, version)["digest"]["files"].items()}


def test_staged_layout_is_the_build(released: Released):
    for version in VERSIONS:
        staged = released.staged[version]
        variant = staged / "build" / CPU_VARIANT
        metadata = metadata_of(released, version)
        assert (metadata["version"], metadata["semver"], metadata["variant"]) == (0, version, CPU_VARIANT)
        digest = digest_of(released, version)
        files = sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file())
        assert files == sorted([*digest, "metadata.json"])
        assert {name: sha256_file(variant / name) for name in digest} == digest
        if version in BUILT_VERSIONS:  # real builds carry the package folder older kernels import, and `upstream`
            assert "img2gray/__init__.py" in digest and metadata["upstream"] == "https://github.com/acme/img2gray"
        readme = (staged / "README.md").read_text()
        assert f"# img2gray {version}" in readme and f"`{CPU_VARIANT}`" in readme
        assert f'"{REPO_ID}" = 0\n' in readme
    # One namespace per build: versions can be loaded side by side.
    assert len({metadata_of(released, v)["id"] for v in BUILT_VERSIONS}) == len(BUILT_VERSIONS)


def test_dry_run_lists_exactly_what_the_tag_serves(released: Released, tmp_path: Path):
    env = hub_env(released.hub.endpoint, tmp_path / "hf")
    done = run(
        [
            sys.executable,
            "-m",
            "kernelpin",
            "publish",
            str(released.staged["0.1.0"]),
            "--repo",
            REPO_ID,
            "--dry-run",
            "--json",
        ],
        env=env,
    )
    plan = json.loads(done.stdout)
    assert (plan["tag"], plan["branch"], plan["version"], plan["variants"]) == ("v0.1.0", "v0", "0.1.0", [CPU_VARIANT])
    served = HfApi(endpoint=released.hub.endpoint).list_repo_tree(
        REPO_ID, recursive=True, revision="v0.1.0", repo_type="kernel"
    )
    assert sorted((f["path"], f["size"]) for f in plan["files"]) == sorted(
        (entry.path, entry.size) for entry in served if hasattr(entry, "size")
    )
    digest = digest_of(released, "0.1.0")
    listed = {f["path"]: f["sha256"] for f in plan["files"]}
    assert all(listed[f"build/{CPU_VARIANT}/{name}"] == sha for name, sha in digest.items())

    human = run(
        [sys.executable, "-m", "kernelpin", "publish", str(released.staged["0.1.0"]), "--repo", REPO_ID, "--dry-run"],
        env=env,
    ).stdout
    assert "Dry run: would upload" in human and "tagged v0.1.0" in human and "Hub was not contacted" in human
    assert "and move branch v0 to it, unless v0 holds a newer release" in human
    prerelease = run(
        [
            sys.executable,
            "-m",
            "kernelpin",
            "publish",
            str(released.staged["0.2.1-rc.1"]),
            "--repo",
            REPO_ID,
            "--dry-run",
        ],
        env=env,
    ).stdout
    assert "0.2.1-rc.1 is a prerelease: no major-version branch is moved" in prerelease


def test_publish_refuses_to_move_a_release_tag(released: Released, tmp_path: Path):
    before = (released.repo.head(), released.repo.git("show-ref", "--tags"))
    env = hub_env(released.hub.endpoint, tmp_path / "hf")
    for repo_type in ([], ["--repo-type", "kernel"]):
        done = run(
            [
                sys.executable,
                "-m",
                "kernelpin",
                "publish",
                str(released.staged["0.1.0"]),
                "--repo",
                REPO_ID,
                *repo_type,
            ],
            env=env,
            check=False,
        )
        assert done.returncode == 1
        assert (
            f"acme/img2gray already has tag v0.1.0 (at {released.commits['0.1.0'][:12]}); release tags are never moved"
        ) in done.stderr
    assert (released.repo.head(), released.repo.git("show-ref", "--tags")) == before


def test_lock_sync_load_then_bump(released: Released, tmp_path: Path):
    env = hub_env(released.hub.endpoint, tmp_path / "hf")
    project = consumer_project(tmp_path / "app", "^0.1", REPO_ID)

    kernelpin(["lock"], project, env)
    (kernel,) = lockfiles.read(project / "kernelpin.lock").kernels
    assert (kernel.version, kernel.ref, kernel.commit) == ("0.1.0", "refs/tags/v0.1.0", released.commits["0.1.0"])
    assert kernel.repo_type == "kernel"  # found as a kernel repository (the lock records the type it resolved)
    (variant,) = kernel.variants
    digest = digest_of(released, "0.1.0")
    assert variant.name == CPU_VARIANT and variant.backend == "cpu"
    assert {f.path: f.sha256 for f in variant.files if f.path != "metadata.json"} == digest

    synced = json.loads(kernelpin(["sync", "--json"], project, env).stdout)["synced"]
    assert [(s["repo"], s["variant"]) for s in synced] == [(REPO_ID, CPU_VARIANT)]
    checked = load_and_check(project, REPO_ID, env)
    assert (checked["version"], checked["variant"], checked["namespace"]) == (
        "0.1.0",
        CPU_VARIANT,
        metadata_of(released, "0.1.0")["id"],
    )
    assert checked["directory"] == synced[0]["directory"]  # the synced, verified files were imported
    assert checked["shape"] == [300, 451] and checked["mismatches"] == 0 and checked["max_diff_opencv"] <= 1

    consumer_project(project, "^0.2", REPO_ID)
    assert kernelpin(["lock", "--check"], project, env, check=False).returncode == 1
    kernelpin(["lock"], project, env)
    (kernel,) = lockfiles.read(project / "kernelpin.lock").kernels
    assert (kernel.version, kernel.commit) == ("0.2.0", released.commits["0.2.0"])
    versions = json.loads(kernelpin(["versions", REPO_ID, "--json"], project, env).stdout)["versions"]
    assert {row["version"]: row["satisfies"] for row in versions} == {
        "0.2.1-rc.1": False,
        "0.2.0": True,
        "0.1.0": False,
    }
    kernelpin(["sync"], project, env)
    checked = load_and_check(project, REPO_ID, env)
    assert (checked["version"], checked["namespace"]) == ("0.2.0", metadata_of(released, "0.2.0")["id"])
    assert checked["mismatches"] == 0


def test_the_release_holds_the_bits_that_were_built(released: Released, tmp_path: Path):
    """One source of truth: v0.1.0's files are byte for byte the conda package's (when the recipe is in this
    checkout), else the files tools/builder/op.py wrote."""
    source = released.sources["0.1.0"]
    if (source / "metadata.json").is_file():
        built = {path.relative_to(source).as_posix(): sha256_file(path) for path in source.rglob("*") if path.is_file()}
    else:
        from rattler.package.paths_json import PathsJson
        from rattler.package_streaming import extract

        (package,) = sorted(source.rglob("img2gray-0.1.0-*.conda"))
        extract(package, tmp_path / "package")
        built = {
            "/".join(entry.relative_path.parts[2:]): entry.sha256.hex()
            for entry in PathsJson.from_package_directory(tmp_path / "package").paths
            if entry.relative_path.parts[:2] == ("site-packages", "img2gray")
        }
    staged = released.staged["0.1.0"] / "build" / CPU_VARIANT
    assert {
        path.relative_to(staged).as_posix(): sha256_file(path) for path in staged.rglob("*") if path.is_file()
    } == built
