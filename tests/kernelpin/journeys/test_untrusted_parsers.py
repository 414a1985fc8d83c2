"""Issue 48: no input kernelpin does not control ends in a traceback. Every parser of such input is named in its
module's `__untrusted_input__` (kernelpin.errors says the contract); for each there is a property test here:
generated inputs (tests/kernelpin/hostile_input.py: deep nesting, huge numbers, digits of other scripts, control
characters, trailing newlines, truncation, values of any type where a structure expects one) end in a value or in a
KernelpinError whose first line names the input, never in another exception.

The set of parsers is read from the code: `test_every_declared_parser_has_a_property_test` fails when a parser is
declared without a test here (or a test names no declared parser, or a declared name is no function), and
`test_every_parse_function_is_declared` when a function named `parse`/`parse_*` is not declared (the convention a
new parser is found by)."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kernelpin.environment import parse_backend
from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import check_repo_path
from kernelpin.files.private_state import PrivateFiles
from kernelpin.format import kernels_lock, lockfile
from kernelpin.format.conda_attestation import (
    parse_publication_statement,
    parse_sidecar,
    publication_statement,
    sidecar_bytes,
)
from kernelpin.format.conda_package import parse_prefix_record
from kernelpin.format.kernel_status import parse_status
from kernelpin.format.metadata import parse_metadata
from kernelpin.format.python_api import describe
from kernelpin.format.ranges import Range, Version
from kernelpin.format.signer import LockedSignature, Signer
from kernelpin.format.spec import check_repo_id, parse_dependencies, parse_requirement
from kernelpin.format.variant import Backend, Variant
from kernelpin.front import kernels_api
from kernelpin.hub.limits import Limits
from kernelpin.hub.listing import (
    check_commit,
    check_ref_name,
    next_page,
    parse_refs,
    parse_tree_page,
    remote_file,
)
from kernelpin.hub.source import HubSettings
from kernelpin.hub.throttle import retry_after_seconds
from kernelpin.loading import local_kernels
from kernelpin.loading.archive import read_members
from kernelpin.loading.runtime import policy_beside
from kernelpin.project import Project, read_document, read_policy, read_requirements
from kernelpin.store.resolutions import Resolutions
from kernelpin.trust.policy import parse_policy
from kernelpin.trust.receipts import SignatureReceipts, _key, _name
from kernelpin.trust.signature import Verified
from testkit.fake_kernel import CPU_213, variant_files
from tests.kernelpin.helpers import REPO_ROOT
from tests.kernelpin.hostile_input import PIECES, UNTRUSTED, blobs, data, texts

HEX40, HEX64 = "0123456789abcdef" * 2 + "01234567", "ab" * 32
CONTROL = {chr(code) for code in (*range(0x20), 0x7F)} - {"\n"}


def answers(call: Callable[[], Any], names: str) -> Any:
    """What `call` returns; a KernelpinError is fine when its first line says `names` and carries no control
    character that would act on a terminal. Any other exception fails the test (hypothesis shows the input)."""
    try:
        return call()
    except KernelpinError as error:
        message = str(error)
        assert names in message.splitlines()[0], message
        assert not CONTROL & set(message), message
        return error


# --- seeds: one well-formed example of each input ---------------------------------------------------------------

SIGNATURE = LockedSignature(
    Signer("https://issuer", "me@acme.dev", "https://github.com/acme/k", HEX40, "refs/tags/v1"),
    HEX64,
    7,
    "cd" * 32,
    1_700_000_000,
)
VARIANT = lockfile.LockedVariant(
    CPU_213,
    (lockfile.LockedFile("__init__.py", 12, "12" * 32), lockfile.LockedFile("metadata.json.sigstore", 900, HEX64)),
    backend="cpu",
    signature=SIGNATURE,
)
KERNEL = lockfile.LockedKernel("acme/k", "kernel", "^1", HEX40, "refs/tags/v1.0.0", "1.0.0", (VARIANT,))
LOCK_TEXT = lockfile.render(lockfile.Lock((KERNEL,)))
KERNELS_LOCK_TEXT = kernels_lock.render(lockfile.Lock((KERNEL,)))
METADATA = variant_files("1.0.0", CPU_213)["metadata.json"]
STATUS = b'kind = "redirect"\ndestination = "acme/new"\nrevision = "v2"\n'
PYPROJECT = (
    '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n"acme/k" = "^1.2"\n"acme/j" = 1\n'
    '"acme/r" = { revision = "v1.0.0" }\n\n[tool.kernelpin.trust]\nrequire-signatures = true\n'
    '[tool.kernelpin.trust.publishers.acme]\nsigners = [{ repository = "acme/kernels", ref = "refs/heads/main" }]\n'
)
REFS = {
    "branches": [{"name": "v1", "ref": "refs/heads/v1", "targetCommit": HEX40}],
    "tags": [{"name": "v1.0.0", "ref": "refs/tags/v1.0.0", "targetCommit": HEX40}],
    "converts": [],
}
TREE = [
    {"type": "directory", "path": "build", "oid": HEX40, "size": 0},
    {"type": "file", "path": f"build/{CPU_213}/__init__.py", "oid": HEX40, "size": 12},
    {"type": "file", "path": f"build/{CPU_213}/_ops.so", "oid": HEX40, "size": 9, "lfs": {"oid": HEX64, "size": 9}},
]
SOURCE = (
    "from .functional import gray\n__all__ = ['gray', 'layers']\n\n"
    "def scale(x: 'Tensor', *, factor: float = 2.0) -> 'Tensor':\n    '''Scale.'''\n    return x\n"
)
FUNCTIONAL = "def gray(x, dim: int = -3, weights=(0.299, 0.587, 0.114)):\n    return x\n"
LAYERS = "class Gray:\n    has_backward = False\n    can_torch_compile = True\n"
VARIANT_NAMES = (
    CPU_213,
    "torch-2.13-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-stable-abi211-rocm71-x86_64-linux",
    "tvm-ffi01-cu130-x86_64-linux",
    "torch-universal",
    "mlx-metal",
    "sdk",
    "sdk-cpu-cpython-3.12-abi3-x86_64-linux",
)
RANGES = ("^1.2.3", ">=1, <2", "1.x", "1.2.3 - 2.3", "~1.2.3-rc.1", ">=0.1.0-alpha.1 <0.2 || 2.*", "v1.2")
ENVIRONMENT = {
    "KERNELPIN_HTTP_TIMEOUT": "30",
    "KERNELPIN_DEADLINE": "600",
    "KERNELPIN_MAX_LISTING": "1000",
    "KERNELPIN_MAX_RESPONSE_BYTES": "1048576",
    "KERNELPIN_DOWNLOADS": "4",
    "KERNELPIN_READS": "8",
    "HF_ENDPOINT": "https://mirror.example/hub",
    "HF_HUB_OFFLINE": "1",
}


def zip_of(files: dict[str, bytes], compression: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


ARCHIVES = tuple(
    zip_of({"__init__.py": SOURCE.encode(), "sub/mod.py": FUNCTIONAL.encode() * 8}, method)
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2)
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("untrusted")
    directory.chmod(0o700)
    return directory


# --- Hub answers ---------------------------------------------------------------------------------------------------


@UNTRUSTED
@given(data(REFS))
def test_refs_answers(answer) -> None:
    refs = answers(lambda: parse_refs(answer, "kernel", "the refs of acme/k", 1000), "the refs of acme/k")
    if not isinstance(refs, KernelpinError):
        assert all(check_commit(commit, "x") == commit for commit in {**refs.tags, **refs.branches}.values())


@UNTRUSTED
@given(data(TREE))
def test_tree_pages(page) -> None:
    answers(lambda: parse_tree_page(page, "the file listing of acme/k"), "the file listing of acme/k")


@UNTRUSTED
@given(data(HEX40, "main"))
def test_commits_and_ref_names(value) -> None:
    answers(lambda: check_commit(value, "the refs of acme/k"), "the refs of acme/k")
    answers(lambda: check_ref_name(value, "the refs of acme/k"), "the refs of acme/k")


@UNTRUSTED
@given(data(TREE[2]))
def test_listed_files(entry) -> None:
    fields = entry if isinstance(entry, dict) else {}
    lfs = fields.get("lfs")
    answers(
        lambda: remote_file(
            "build/x/_ops.so",
            fields.get("size"),
            fields.get("oid"),
            lfs.get("oid") if isinstance(lfs, dict) else lfs,
            "here",
        ),
        "here",
    )


@UNTRUSTED
@given(texts("120", "Wed, 21 Oct 2015 07:28:00 GMT", "0"))
def test_retry_after_headers(value) -> None:
    wait = answers(lambda: retry_after_seconds(value, 1.4e9), "Retry-After")
    assert wait is None or (isinstance(wait, float) and 0 <= wait < float("inf"))


@UNTRUSTED
@given(
    texts('<https://huggingface.co/api/kernels/a/b/tree/main?cursor=x>; rel="next"', '<a>; rel="prev", <b>; rel=next')
)
def test_link_headers(value) -> None:
    following = answers(lambda: next_page(value), "Link")
    assert following is None or (isinstance(following, str) and following)


@UNTRUSTED
@given(st.dictionaries(st.sampled_from(sorted(ENVIRONMENT)), texts(*ENVIRONMENT.values()), max_size=4))
def test_hub_settings_and_limits_from_the_environment(environ) -> None:
    named = " ".join(sorted(environ)) or "none"
    for parse in (Limits.from_env, HubSettings.from_env):
        result = answers(lambda parse=parse: parse(environ), "")
        if isinstance(result, KernelpinError):
            assert any(str(result).startswith(name) for name in environ), (named, result)


# --- locks, pyproject.toml, policy, requirements --------------------------------------------------------------------


@UNTRUSTED
@given(texts(LOCK_TEXT))
def test_locks(text) -> None:
    answers(lambda: lockfile.parse(text, "kernelpin.lock"), "kernelpin.lock")


@UNTRUSTED
@given(texts(KERNELS_LOCK_TEXT))
def test_kernels_locks(text) -> None:
    content = text.encode("utf-8", "surrogatepass")
    why = answers(lambda: kernels_lock.out_of_step(content, lockfile.Lock((KERNEL,))), "kernels.lock")
    assert why is None or (isinstance(why, str) and why.startswith("kernels.lock"))


@UNTRUSTED
@given(texts(KERNELS_LOCK_TEXT))
# Failed before: the message sorted the file's repository ids, a number among them raised TypeError; a control
# character in one reached the message.
@example('[{"dependency": {"repo-id": 1}, "lock": {"commit": "x"}}, {"dependency": {"repo-id": "a"}, "lock": {}}]')
@example('[{"dependency": {"repo-id": "acme/\\u001b[2Jx"}, "lock": {"commit": "x"}}]')
@example(KERNELS_LOCK_TEXT.replace(f'"{HEX40}"', "[1]"))
def test_kernels_lock_commits(text) -> None:
    commit = answers(lambda: kernels_api.locked_commit("acme/k", text, "kernels.lock"), "kernels.lock")
    assert isinstance(commit, (str, KernelpinError))


def _project(scratch: Path, text: str) -> Project:
    (scratch / "pyproject.toml").write_bytes(text.encode("utf-8", "surrogatepass"))
    return Project(scratch)


@UNTRUSTED
@given(texts(PYPROJECT))
def test_pyprojects(scratch, text) -> None:
    project = _project(scratch, text)
    for read in (read_policy, read_requirements, read_document):
        answers(lambda read=read: read(project), "")  # pyproject.toml or the table it names
    answers(lambda: policy_beside(scratch / "kernelpin.lock"), "")


def _pyproject_data(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return {}


@UNTRUSTED
@given(st.one_of(texts(PYPROJECT).map(_pyproject_data), data(tomllib.loads(PYPROJECT))))
def test_policies(pyproject) -> None:
    if isinstance(pyproject, dict):
        answers(lambda: parse_policy(pyproject), "")


@UNTRUSTED
@given(data(tomllib.loads(PYPROJECT)["tool"]["kernels"]["dependencies"]), texts("acme/k", "Org-1/k.v2_x"))
@example({"acme/j": {"\x1f": None}}, "acme/j")  # found by this test: an unknown key was echoed raw
def test_requirements(table, repo_id) -> None:
    if isinstance(table, dict):
        answers(lambda: parse_dependencies(table), "")
        for value in table.values():
            answers(lambda value=value: parse_requirement(repo_id, value, "the entry"), "")


@UNTRUSTED
@given(texts("acme/k", "Org-1/k.v2_x", "kernels-community/activation"))
def test_repository_ids(text) -> None:
    answers(lambda: check_repo_id(text), "")


@UNTRUSTED
@given(data(SIGNATURE.to_table()))
def test_locked_signatures(table) -> None:
    answers(lambda: LockedSignature.from_table(table, "acme/k variant", "run `kernelpin lock`"), "acme/k variant")


# --- what a release holds ------------------------------------------------------------------------------------------


@UNTRUSTED
@given(blobs(STATUS))
def test_kernel_status_files(content) -> None:
    answers(lambda: parse_status(content, "acme/k at 0123456789ab: kernel-status.toml"), "kernel-status.toml")


@UNTRUSTED
@given(blobs(METADATA))
def test_metadata_files(content) -> None:
    answers(lambda: parse_metadata(content, "acme/k metadata.json"), "acme/k metadata.json")


@UNTRUSTED
@given(data(json.loads(METADATA)))
def test_metadata_documents(document) -> None:
    content = json.dumps(document, allow_nan=True).encode() if not _too_deep(document) else b"[" * 5000
    answers(lambda: parse_metadata(content, "acme/k metadata.json"), "acme/k metadata.json")


# metadata.json with per-capability builds (kernelpin.format.capabilities.parse_listing reads that key).
CAPABILITY_METADATA = {
    **json.loads(METADATA),
    "capability-builds": {
        "sm_90": {"archs": ["9.0"], "files": {"__init__.py": json.loads(METADATA)["digest"]["files"]["__init__.py"]}},
        "sm_100": {"archs": ["10.0+PTX"], "files": {"_impl.py": json.loads(METADATA)["digest"]["files"]["_impl.py"]}},
    },
}


@UNTRUSTED
@given(data(CAPABILITY_METADATA, CAPABILITY_METADATA["capability-builds"]))
# found by this test in a fresh-clone CI run: an unsafe path's error named the listing, not the document
@example({"sm_100": {"archs": ["10.0+PTX"], "files": {"": None}}})
def test_capability_build_listings(value) -> None:
    document = (
        value if isinstance(value, dict) and "digest" in value else {**CAPABILITY_METADATA, "capability-builds": value}
    )
    content = json.dumps(document, allow_nan=True).encode() if not _too_deep(document) else b"[" * 5000
    answers(lambda: parse_metadata(content, "acme/k metadata.json"), "acme/k metadata.json")


def _too_deep(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (RecursionError, ValueError):
        return True
    return False


@UNTRUSTED
@given(texts(*VARIANT_NAMES))
@example("torch0")  # found by this test: ValueError, not a KernelpinError
@example("torch" + "9" * 5000)  # int() of more than 4300 digits is a ValueError of its own
def test_variant_names(name) -> None:
    answers(lambda: Variant.parse(name), "variant name")
    answers(lambda: lockfile.is_variant_name(name), "")


@UNTRUSTED
@given(texts("cu130", "cuda-13.0", "rocm71", "rocm-7.1", "xpu20253", "cann81", "cpu", "metal"))
def test_backends(tag) -> None:
    answers(lambda: Backend.parse(tag), "backend")
    answers(lambda: parse_backend(tag), "backend")


@UNTRUSTED
@given(texts(*RANGES))
def test_ranges(text) -> None:
    answers(lambda: Range.parse(text), "")


@UNTRUSTED
@given(texts("1.2.3", "1.0.0-rc.1+build.5", "v2.0.0", "0.0.1-alpha"))
def test_versions_and_tags(text) -> None:
    answers(lambda: Version.parse(text), "")
    assert answers(lambda: Version.from_tag(text), "") is None or True


@UNTRUSTED
@given(texts(SOURCE), texts(FUNCTIONAL), texts(LAYERS))
def test_python_sources_for_describe_api(init, functional, layers) -> None:
    files = {"__init__.py": init, "functional.py": functional, "layers.py": layers}
    api = answers(
        lambda: describe(lambda path: files[path].encode("utf-8", "surrogatepass") if path in files else None), ""
    )
    assert not isinstance(api, KernelpinError)


@UNTRUSTED
@given(blobs(*ARCHIVES))
def test_archives(content) -> None:
    members = answers(lambda: read_members(content, "acme/k build: k.zip"), "acme/k build: k.zip")
    if not isinstance(members, KernelpinError):
        assert all(check_repo_path(path, "member") == path for path in members)


@UNTRUSTED
@given(texts("build/x/__init__.py", "a/b.so", "README.md"))
def test_repository_paths(path) -> None:
    answers(lambda: check_repo_path(path, "the listing of acme/k"), "the listing of acme/k")


# --- conda channels: attestations and installed records --------------------------------------------------------

STATEMENT = publication_statement("img2gray-0.1.0-cpu_h0_100.conda", HEX64, "https://prefix.dev/acme").payload()
SIDECAR = sidecar_bytes(['{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}'])
PREFIX_RECORD = json.dumps(
    {
        "name": "img2gray",
        "version": "0.1.0",
        "build": "cpu_h0_100",
        "fn": "img2gray-0.1.0-cpu_h0_100.conda",
        "sha256": HEX64,
        "subdir": "linux-64",
        "channel": "https://prefix.dev/acme",
        "files": ["lib/python3.11/site-packages/img2gray/__init__.py"],
    }
).encode()


@UNTRUSTED
@given(blobs(STATEMENT))
@example(b"[" * 5000)  # found by this test: RecursionError escaped json.loads
def test_publication_statements(payload) -> None:
    # Its refusals name the statement or the field of it at fault ("subject sha256 '...' is not a sha256"): the
    # payload has no name of its own to carry (the caller's message names the package).
    answers(lambda: parse_publication_statement(payload), "")


@UNTRUSTED
@given(blobs(SIDECAR))
def test_attestation_sidecars(body) -> None:
    answers(lambda: parse_sidecar(body, hashlib.sha256(body).hexdigest()), "attestation sidecar")
    answers(lambda: parse_sidecar(body, HEX64), "attestation sidecar")


@UNTRUSTED
@given(blobs(PREFIX_RECORD))
def test_installed_package_records(content) -> None:
    answers(lambda: parse_prefix_record(content, "conda-meta/img2gray.json"), "conda-meta/img2gray.json")


# --- what kernelpin keeps for the user, and the environment --------------------------------------------------------


def _state(scratch: Path) -> Path:
    state = scratch / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    return state


REQUIREMENT = parse_requirement("acme/k", "^1")
RESOLUTION = {"format": 1, "variants": [CPU_213], "lock": LOCK_TEXT, "publisher-trusted": False}
MOVE = {"format": 1, "moved": {"commit": HEX40, "destination": "acme/new", "revision": None}}


@UNTRUSTED
@given(
    st.one_of(
        data(RESOLUTION, MOVE).map(lambda value: json.dumps(value) if not _too_deep(value) else "["),
        texts(json.dumps(RESOLUTION), json.dumps(MOVE)),
    )
)
def test_remembered_resolutions(scratch, text) -> None:
    resolutions = Resolutions("https://hub", _state(scratch))
    path = resolutions.path(REQUIREMENT)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    path.chmod(0o600)
    answers(lambda: resolutions.read(REQUIREMENT), str(path))
    answers(lambda: resolutions.read_move(REQUIREMENT), str(path))


VERIFIED = Verified(SIGNATURE.signer, HEX64, 7, "cd" * 32, 1_700_000_000)  # type: ignore[arg-type]


@UNTRUSTED
@given(blobs(json.dumps({**_key("root", b"m", b"b"), "verified": VERIFIED.fields()}).encode()))
def test_signature_receipts(scratch, content) -> None:
    directory = _state(scratch) / "signatures"
    directory.mkdir(mode=0o700, exist_ok=True)
    receipt = directory / _name(_key("root", b"m", b"b"))
    receipt.write_bytes(content)
    recalled = answers(lambda: SignatureReceipts(PrivateFiles(directory)).recall("root", b"m", b"b"), "")
    assert recalled is None or isinstance(recalled, Verified)


@UNTRUSTED
@given(texts("acme/k=/opt/k", "acme/a=/a:acme/b=~/b=c"))
@example("\x00acme/k=/opt/k")  # found by this test: the repository id's refusal did not name LOCAL_KERNELS
def test_local_kernels_variable(text) -> None:
    answers(lambda: local_kernels.parse(text), "LOCAL_KERNELS")


# --- the set of parsers, derived from the code ----------------------------------------------------------------------

PROPERTY_TESTS = {
    "kernelpin.hub.listing.parse_refs": test_refs_answers,
    "kernelpin.hub.listing.parse_tree_page": test_tree_pages,
    "kernelpin.hub.listing.check_commit": test_commits_and_ref_names,
    "kernelpin.hub.listing.check_ref_name": test_commits_and_ref_names,
    "kernelpin.hub.listing.remote_file": test_listed_files,
    "kernelpin.hub.throttle.retry_after_seconds": test_retry_after_headers,
    "kernelpin.hub.listing.next_page": test_link_headers,
    "kernelpin.hub.limits.Limits.from_env": test_hub_settings_and_limits_from_the_environment,
    "kernelpin.hub.source.HubSettings.from_env": test_hub_settings_and_limits_from_the_environment,
    "kernelpin.format.lockfile.parse": test_locks,
    "kernelpin.format.kernels_lock.out_of_step": test_kernels_locks,
    "kernelpin.front.kernels_api.locked_commit": test_kernels_lock_commits,
    "kernelpin.project.read_policy": test_pyprojects,
    "kernelpin.project.read_requirements": test_pyprojects,
    "kernelpin.project.read_document": test_pyprojects,
    "kernelpin.loading.runtime.policy_beside": test_pyprojects,
    "kernelpin.trust.policy.parse_policy": test_policies,
    "kernelpin.format.spec.parse_dependencies": test_requirements,
    "kernelpin.format.spec.parse_requirement": test_requirements,
    "kernelpin.format.spec.check_repo_id": test_repository_ids,
    "kernelpin.format.signer.LockedSignature.from_table": test_locked_signatures,
    "kernelpin.format.kernel_status.parse_status": test_kernel_status_files,
    "kernelpin.format.metadata.parse_metadata": test_metadata_files,
    "kernelpin.format.capabilities.parse_listing": test_capability_build_listings,
    "kernelpin.format.variant.Variant.parse": test_variant_names,
    "kernelpin.format.variant.Backend.parse": test_backends,
    "kernelpin.environment.parse_backend": test_backends,
    "kernelpin.format.ranges.Range.parse": test_ranges,
    "kernelpin.format.ranges.Version.parse": test_versions_and_tags,
    "kernelpin.format.ranges.Version.from_tag": test_versions_and_tags,
    "kernelpin.format.python_api.describe": test_python_sources_for_describe_api,
    "kernelpin.loading.archive.read_members": test_archives,
    "kernelpin.files.integrity.check_repo_path": test_repository_paths,
    "kernelpin.store.resolutions.Resolutions.read": test_remembered_resolutions,
    "kernelpin.store.resolutions.Resolutions.read_move": test_remembered_resolutions,
    "kernelpin.trust.receipts.SignatureReceipts.recall": test_signature_receipts,
    "kernelpin.loading.local_kernels.parse": test_local_kernels_variable,
    "kernelpin.format.conda_attestation.parse_publication_statement": test_publication_statements,
    "kernelpin.format.conda_attestation.parse_sidecar": test_attestation_sidecars,
    "kernelpin.format.conda_package.parse_prefix_record": test_installed_package_records,
}


def _definitions(tree: ast.Module, module: str) -> list[str]:
    """Every function of a module by its qualified name (module.Class.function)."""
    found = []
    stack: list[tuple[str, ast.AST]] = [(module, tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                stack.append((f"{prefix}.{child.name}", child))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append(f"{prefix}.{child.name}")
    return found


def _declared(tree: ast.Module) -> list[str]:
    """The names a module's `__untrusted_input__ = ("parse", "Class.parse", ...)` lists."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(target) for target in node.targets] == ["__untrusted_input__"]:
            return list(ast.literal_eval(node.value))
    return []


def parser_functions(root: Path = REPO_ROOT) -> dict[str, bool]:
    """{qualified name: declared} of every function of kernelpin that its module's `__untrusted_input__` names or
    that is named `parse` / `parse_*` (a private `_parse_*` is a part of one). A declared name that is no function
    of its module is listed too (declared, so the property-test check names it)."""
    found = {}
    for path in sorted((root / "kernelpin").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = {f"{module}.{name}" for name in _declared(tree)}
        for name in _definitions(tree, module):
            short = name.rsplit(".", 1)[1]
            if name in declared or short == "parse" or short.startswith("parse_"):
                found[name] = name in declared
        found.update(dict.fromkeys(declared - found.keys(), True))
    return found


def test_every_declared_parser_has_a_property_test() -> None:
    declared = {name for name, is_declared in parser_functions().items() if is_declared}
    assert sorted(declared - PROPERTY_TESTS.keys()) == [], "named in __untrusted_input__ without a property test here"
    assert sorted(PROPERTY_TESTS.keys() - declared) == [], "a property test here for a function not declared"
    assert all(callable(test) for test in PROPERTY_TESTS.values())


# Named like parsers, but of no input kernelpin does not control; each with why.
NOT_UNTRUSTED = {
    # argparse's own method, overridden to word its errors: the command line is the user's.
    "kernelpin.cli._CommandParser.parse_known_args",
}


def test_every_parse_function_is_declared() -> None:
    undeclared = {name for name, declared in parser_functions().items() if not declared}
    assert sorted(undeclared - NOT_UNTRUSTED) == []
    assert undeclared >= NOT_UNTRUSTED  # an exemption that no longer exists is dropped here


def test_the_derivation_finds_declarations_and_names(tmp_path: Path) -> None:
    (tmp_path / "kernelpin" / "sub").mkdir(parents=True)
    (tmp_path / "kernelpin" / "sub" / "m.py").write_text(
        '__untrusted_input__ = ("A.load", "gone")\nclass A:\n    @classmethod\n    def load(cls, x): ...\n'
        "def parse_thing(x): ...\ndef _parse_part(x): ...\ndef other(x): ...\n"
    )
    assert parser_functions(tmp_path) == {
        "kernelpin.sub.m.A.load": True,
        "kernelpin.sub.m.parse_thing": False,
        "kernelpin.sub.m.gone": True,
    }


def test_the_seeds_are_well_formed(scratch: Path) -> None:
    """Mutations start from input each parser accepts (else they would test only its first refusal)."""
    assert lockfile.parse(LOCK_TEXT, "x").kernels == (KERNEL,)
    assert parse_refs(REFS, "kernel", "x", 10).tags == {"v1.0.0": HEX40}
    assert len(parse_tree_page(TREE, "x")) == 3
    assert parse_status(STATUS, "x").destination == "acme/new"
    assert parse_metadata(METADATA, "x").variant == CPU_213
    assert len(read_requirements(_project(scratch, PYPROJECT))) == 3
    assert parse_policy(tomllib.loads(PYPROJECT)).requires_signature("acme/k")[0]
    assert all(Variant.parse(name) for name in VARIANT_NAMES) and all(Range.parse(text) for text in RANGES)
    assert all(read_members(archive, "x") for archive in ARCHIVES)
    assert [
        f.name for f in describe({"__init__.py": SOURCE.encode(), "functional.py": FUNCTIONAL.encode()}.get).functions
    ] == ["gray"]
    assert LockedSignature.from_table(SIGNATURE.to_table(), "x", "y") == SIGNATURE
    assert Limits.from_env(ENVIRONMENT).downloads == 4 and HubSettings.from_env(ENVIRONMENT).offline
    assert set(PIECES) >= {"\n", "\x00", "\u0663", "\u00b2", "9" * 400, "["}
