"""Issue 48, findings 3 and 5: input nested deeper than a recursive parser or printer goes is a clear refusal
(or a problem in the description), never RecursionError. On d72b531 a 1 KB kernel-status.toml of arrays 500 deep
crashed lock, get_kernel, info, variants and describe-api (format/kernel_status.parse_status), and describe-api
died in ast.unparse on 2 KB of valid Python (format/python_api)."""

from __future__ import annotations

import email
import json
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from kernelpin.commands.verify_conda import channel_attestations
from kernelpin.errors import KernelpinError
from kernelpin.format.conda_attestation import sidecar_bytes
from kernelpin.format.kernel_status import parse_status
from kernelpin.format.python_api import describe
from kernelpin.format.ranges import Version
from kernelpin.front.kernels_api import locked_commit
from kernelpin.hub.http_errors import refusal
from kernelpin.loading.runtime import policy_beside
from kernelpin.project import entry_to_add, find_project, read_policy
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, write_variant

MAX_NESTING = 100  # python_api.MAX_NESTING, the bound the problem names
WHERE = "acme/old at 0123456789ab: kernel-status.toml"


@pytest.fixture(params=["default", 10_000], ids=lambda limit: f"recursion-limit-{limit}")
def recursion_limit(request: pytest.FixtureRequest) -> Iterator[None]:
    """The interpreter's recursion limit as the host left it: torch.compile raises it to 2000, hypothesis moves it.
    Before format/nesting.py a raised limit let tomllib parse 500-deep input, and the refusals changed (a full suite
    run and a run of a few rooms disagreed)."""
    before = sys.getrecursionlimit()
    if request.param != "default":
        sys.setrecursionlimit(request.param)
    yield
    sys.setrecursionlimit(before)


@pytest.mark.usefixtures("recursion_limit")
@pytest.mark.parametrize(
    "text",
    [
        "kind = " + "[" * 500 + "]" * 500,
        'kind = "redirect"\ndestination = "acme/x"\nrevision = ' + "[" * 500 + "]" * 500,
        "kind = " + "{a = " * 400 + "1" + "}" * 400,
    ],
    ids=["arrays", "revision-arrays", "inline-tables"],
)
def test_a_deeply_nested_status_file_is_refused_in_one_line(text: str) -> None:
    assert len(text) <= 4096
    with pytest.raises(KernelpinError) as refused:
        parse_status(text.encode(), WHERE)
    assert str(refused.value) == (
        f"{WHERE}: nested deeper than TOML is parsed; the repository's kernel-status.toml is broken: ask its publisher"
    )


DEEP_SOURCES = {
    "not": "def f(x=" + "not " * 400 + "x):\n    '''Deep.'''\n",
    "attributes": "def f(x=a" + ".b" * 2000 + "):\n    pass\n",
    "union": "def f(x: " + " | ".join(["int"] * 400) + "):\n    pass\n",
    "returns": "def f() -> " + "not " * 400 + "x:\n    pass\n",
}


@pytest.mark.parametrize("source", DEEP_SOURCES.values(), ids=DEEP_SOURCES)
def test_a_signature_too_deep_to_render_is_a_problem_not_a_crash(source: str) -> None:
    files = {"__init__.py": b"from .functional import f\n", "functional.py": source.encode()}
    api = describe(files.get)
    assert [(function.name, function.signature, function.module) for function in api.functions] == [
        ("f", "f(...)", "functional")
    ]
    assert api.problems == [f"functional.py: f's signature is nested more than {MAX_NESTING} deep; not shown"]


def test_a_signature_just_within_the_bound_is_rendered() -> None:
    depth = MAX_NESTING - 10
    source = "def f(x=" + "not " * depth + "x):\n    pass\n"
    (function,) = describe({"__init__.py": source.encode()}.get).functions
    assert function.signature == "f(x=" + "not " * depth + "x)"


def test_describe_api_of_a_deep_source_answers(tmp_path, hf_env, cli) -> None:
    deep = {"deep.py": DEEP_SOURCES["not"].encode(), "__init__.py": b"from .deep import f\n"}
    write_variant(tmp_path / "build" / CPU_213, "1.0.0", CPU_213, extra=deep)
    status, out, err = cli("describe-api", str(tmp_path), "--json")
    assert status == 0, err
    document = json.loads(out)
    assert document["functions"][0]["signature"] == "f(...)"
    assert document["problems"] == [f"deep.py: f's signature is nested more than {MAX_NESTING} deep; not shown"]


DEEP_PYPROJECT = '[project]\nname = "app"\n[tool.kernelpin.trust]\nrequire-signatures = ' + "[" * 500 + "]" * 500 + "\n"


@pytest.mark.usefixtures("recursion_limit")
def test_a_deeply_nested_pyproject_is_refused_where_a_project_or_load_reads_its_policy(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text(DEEP_PYPROJECT)
    with pytest.raises(KernelpinError, match=r"pyproject.toml: not valid TOML"):
        read_policy(find_project(tmp_path))
    with pytest.raises(KernelpinError, match=r"pyproject.toml: not valid TOML"):
        policy_beside(tmp_path / "kernelpin.lock")


@pytest.mark.usefixtures("recursion_limit")
def test_a_deeply_nested_lock_is_refused_with_its_fix(tmp_path) -> None:
    lock = tmp_path / "kernelpin.lock"
    lock.write_text("version = 3\nextra = " + "[" * 500 + "]" * 500 + "\n")
    with pytest.raises(
        KernelpinError, match=r"kernelpin.lock: not valid TOML \(.*\); delete it and run `kernelpin lock`"
    ):
        lockfiles.read(lock)


@pytest.mark.usefixtures("recursion_limit")
def test_deep_json_in_a_kernels_lock_or_a_signature_bundle_is_one_line() -> None:
    # Both raised RecursionError before: neither reader caught it (a kernels.lock is the project's file, a bundle
    # the publisher's input).
    with pytest.raises(KernelpinError, match=r"kernels.lock: not a kernels.lock \(.*\); run `kernelpin lock`"):
        locked_commit("acme/x", "[" * 100_000, "kernels.lock")
    with pytest.raises(KernelpinError, match="attestation bundle 0 is not JSON"):
        sidecar_bytes(["[" * 500 + "]" * 500])


@pytest.mark.usefixtures("recursion_limit")
def test_a_channels_deep_repodata_and_a_hubs_deep_error_page_are_no_traceback(tmp_path) -> None:
    # A channel's repodata.json 100,000 '[' deep raised RecursionError out of `kernelpin verify-conda` before.
    (tmp_path / "linux-64").mkdir()
    (tmp_path / "linux-64" / "repodata.json").write_text("[" * 100_000)
    package = SimpleNamespace(filename="img2gray-0.1.0-0.conda")
    with pytest.raises(OSError, match=r"repodata.json is not repodata"):
        channel_attestations(package, tmp_path.as_uri(), "linux-64", 5.0)  # type: ignore[arg-type]
    # An error page whose JSON nests deeper than the bound is shown as the text it is.
    headers = email.message_from_string("Content-Type: application/json\n\n")
    error = refusal(
        500, "Internal Server Error", "https://hub/x", headers, b'{"error": ' + b"[" * 500 + b"]" * 500 + b"}"
    )
    assert error.status == 500 and str(error).startswith("Server error '500 Internal Server Error'")
    assert '{"error": [[[' in str(error)  # the page as text, not its lists rendered one by one


def test_branches_in_other_digits_are_no_major_versions() -> None:
    # d72b531: int("²") raised ValueError; "v٣" counted as the branch v3.
    versions = [Version.parse("3.0.0")]
    assert entry_to_add("acme/x", None, versions, {"v²", "v٣", "v3"}).value == 3
    assert entry_to_add("acme/x", None, versions, {"v٣"}).value == "^3.0.0"
    assert entry_to_add("acme/x", None, [], {"v٣", "v2"}).value == 2
