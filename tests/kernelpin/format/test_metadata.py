"""metadata.json: one writer (kernelpin.format.metadata.compose, used by tools/builder/op.py and the fake kernels) in
the format `kernels` reads, and one reader for it, for kernel-builder's builds and for the legacy format."""

from __future__ import annotations

import json
import re
import sys

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.format.metadata import MetadataError, check_kernels_format, parse_metadata, sha256_base64
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, sha256, variant_files, write_variant
from testkit.releasing import ROOT, run
from tests.kernelpin.helpers import fresh_interpreter

CUDA = "torch213-cxx11-cu130-x86_64-linux"


def legacy_variant_files(version: str, variant: str) -> dict[str, bytes]:
    """A variant as build_op wrote it before the kernels format: SemVer `version`, hex digests."""
    files = {name: data for name, data in variant_files(version, variant).items() if name != "metadata.json"}
    document = {
        "id": "_img2gray_old",
        "name": "img2gray",
        "version": version,
        "license": "Apache-2.0",
        "variant": variant,
        "backend": {"type": "cpu"},
        "python-depends": [],
        "digest": {"algorithm": "sha256", "files": {p: sha256(d) for p, d in files.items()}},
    }
    return {**files, "metadata.json": json.dumps(document).encode()}


def kernel_builder_metadata(files: dict[str, bytes]) -> bytes:
    """What kernel-builder writes: the major only, base64 digests, no variant, no SemVer."""
    return json.dumps(
        {
            "id": "_act_0123",
            "name": "activation",
            "version": 1,
            "license": "Apache-2.0",
            "python-depends": [],
            "backend": {"type": "cuda", "archs": ["9.0"]},
            "digest": {"algorithm": "sha256", "files": {p: sha256_base64(sha256(d)) for p, d in files.items()}},
            "provenance": {"kernel-builder": {"version": "0.12.0"}},
        }
    ).encode()


@pytest.mark.parametrize("variant", [CPU_213, CUDA])
def test_kernels_data_parses_what_we_write_and_validates_its_digest(tmp_path, variant):
    kernels_data = pytest.importorskip("kernels_data")
    directory = write_variant(tmp_path / "v", "2.3.1", variant)
    metadata = kernels_data.Metadata.read_from_file(directory / "metadata.json")
    assert (metadata.version, str(metadata.name)) == (2, "img2gray")
    assert re.fullmatch(r"_img2gray_[0-9a-f]{10}", metadata.id)
    metadata.digest.validate(kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, directory))
    ours = parse_metadata((directory / "metadata.json").read_bytes(), "here")
    assert (str(ours.semver), ours.major, ours.variant, ours.legacy) == ("2.3.1", 2, variant, False)
    assert ours.digests == {name: sha256((directory / name).read_bytes()) for name in ("__init__.py", "_impl.py")}
    check_kernels_format(ours, "here")


def test_every_test_build_has_an_id_of_its_own():
    """kernel-builder (and tools/builder/op.py) give every build its own op namespace, and kernels 0.18+ refuses a
    second build under an id already imported in a process. Failed before: every test build was `_img2gray_test`,
    so kernels 0.19.1 refused the second of two test kernels one process loaded ("has the same id ... but it is a
    different build")."""

    def build_id(version: str, variant: str = CPU_213, **kwargs) -> str:
        return json.loads(variant_files(version, variant, **kwargs)["metadata.json"])["id"]

    rebuilt = build_id("1.0.1", extra={"rebuild.txt": b"1.0.1"})
    ids = {build_id("1.0.0"), build_id("1.0.1"), rebuilt, build_id("1.0.0", CUDA), build_id("1.0.0", name="other")}
    assert len(ids) == 5 and build_id("1.0.1", extra={"rebuild.txt": b"1.0.1"}) == rebuilt  # reproducible
    zipped = variant_files("1.0.0", CPU_213, layout="zip")
    assert f"{build_id('1.0.0', layout='zip')}.zip" in zipped and build_id("1.0.0", layout="zip") == build_id("1.0.0")


def test_legacy_and_kernel_builder_metadata_are_read():
    legacy = parse_metadata(legacy_variant_files("0.3.0", CPU_213)["metadata.json"], "old")
    assert (str(legacy.semver), legacy.major, legacy.legacy, legacy.backend) == ("0.3.0", 0, True, "cpu")
    assert legacy.digests["_impl.py"] == sha256(variant_files("0.3.0", CPU_213)["_impl.py"])
    foreign = parse_metadata(kernel_builder_metadata({"__init__.py": b"x"}), "kb")
    assert (foreign.semver, foreign.major, foreign.archs, foreign.digests) == (
        None,
        1,
        ("9.0",),
        {"__init__.py": sha256(b"x")},
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": "one"}, "not valid kernel metadata (version: "),
        ({"version": -1}, "version must be the kernel's major version as an unsigned integer (e.g. 1), not -1"),
        ({"version": True}, "not True"),
        ({"version": 1, "semver": "2.0.0"}, "semver 2.0.0 is not on major version 1 (version)"),
        (
            {"version": 1, "digest": {"algorithm": "sha256", "files": {"a.py": "00" * 32}}},
            "digest.files['a.py'] is not a sha256 in base64 (as kernels_data writes it)",
        ),
        (
            {"version": "1.0.0", "digest": {"algorithm": "sha256", "files": {"a.py": "AA=="}}},
            "digest.files['a.py'] is not a sha256 of 64 hex digits",
        ),
        ({"version": 1, "digest": {"algorithm": "md5", "files": {}}}, "digest.algorithm 'md5' is not sha256"),
        ({"version": 1, "backend": {"type": "cuda", "archs": "9.0"}}, "backend.archs is a string, not a list"),
        ({"version": 1, "digest": {"files": {"../x": "AA=="}}}, "refusing unsafe path '../x'"),
        ([], "the document is a list, not an object"),
    ],
)
def test_malformed_metadata_is_refused_with_the_field(document, message):
    with pytest.raises(KernelpinError) as refused:
        parse_metadata(json.dumps(document), "build/x/metadata.json")
    assert message in str(refused.value)


def test_publishing_refuses_what_kernels_would_refuse(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for name, data in legacy_variant_files("0.3.0", CPU_213).items():
        (old / name).write_bytes(data)
    done = run(
        [sys.executable, "-m", "tools.release", "stage", str(old), "--repo", "acme/gray", "--out", str(tmp_path / "r")],
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    assert (
        'old metadata format ("version" is the SemVer string, digests are hex), which the `kernels` package refuses'
        in done.stderr
    )
    with pytest.raises(MetadataError, match='no "semver"'):
        check_kernels_format(parse_metadata(kernel_builder_metadata({"__init__.py": b"x"}), "kb"), "kb")


@pytest.mark.parametrize("form", ["legacy", "kernel-builder"])
def test_lock_and_sync_read_older_and_foreign_metadata(new_repo, project, cli, form):
    repo_id, repo = new_repo(form, "kernel")
    files = legacy_variant_files("0.3.0", CPU_213)
    if form == "kernel-builder":
        files["metadata.json"] = kernel_builder_metadata({k: v for k, v in files.items() if k != "metadata.json"})
    repo.write({f"build/{CPU_213}/{name}": data for name, data in files.items()})
    repo.commit("release")
    repo.tag("v0.3.0")
    root = project(f'"{repo_id}" = "^0.3"\n')
    status, _, err = cli("lock")
    assert status == 0, err
    (variant,) = lockfiles.read(root / "kernelpin.lock").kernels[0].variants
    assert variant.file("_impl.py").sha256 == sha256(files["_impl.py"])
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0, err


def test_kernelpin_needs_none_of_the_kernels_packages_to_run():
    """kernels-data and kernel-abi-check are used by tests (and the ABI gate when a release has libraries);
    kernelpin itself, load path and CLI, imports neither them nor `kernels`."""
    _, loaded = fresh_interpreter(
        "import kernelpin, kernelpin.loading.runtime, kernelpin.cli, kernelpin.publisher.release, kernelpin.format.metadata"
    )
    assert {name.split(".")[0] for name in loaded} & {"kernels", "kernels_data", "kernel_abi_check"} == set()


def test_optional_kernels_minver_and_upstream_are_written_as_kernels_reads_them():
    """`kernels info` shows `kernels-minver` and `upstream`; kernels refuses a metadata.json whose values it cannot
    parse, so publishing refuses them first."""
    kernels_rust = pytest.importorskip("kernels._rust")
    from kernelpin.format.metadata import compose, render
    from kernelpin.format.ranges import Version

    def document(**optional: str) -> bytes:
        return render(
            compose(
                op_id="_img2gray_x",
                name="img2gray",
                version=Version.parse("1.2.0"),
                license="MIT",
                variant=CPU_213,
                backend={"type": "cpu"},
                files={"__init__.py": "0" * 64},
                builder={"name": "test", "version": "1"},
                **optional,
            )
        ).encode()

    read = kernels_rust.Metadata.from_bytes(
        document(upstream="https://github.com/acme/img2gray", kernels_minver="0.17.0")
    )
    assert (str(read.kernels_minver), read.upstream) == ("0.17.0", "https://github.com/acme/img2gray")
    assert "upstream" not in json.loads(document()) and "kernels-minver" not in json.loads(document())
    check_kernels_format(parse_metadata(document(upstream="git@github.com:acme/img2gray.git"), "m"), "m")
    for optional, message in (
        ({"kernels_minver": "0.17"}, "\"kernels-minver\" '0.17' is not a kernels version"),
        ({"upstream": "acme/img2gray"}, "\"upstream\" 'acme/img2gray' is not a git URL"),
    ):
        with pytest.raises(ValueError):  # kernels' own parser refuses it ...
            kernels_rust.Metadata.from_bytes(document(**optional))
        with pytest.raises(MetadataError, match=message):  # ... and so does publishing
            check_kernels_format(parse_metadata(document(**optional), "m"), "m")
