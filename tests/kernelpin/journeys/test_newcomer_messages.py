"""Messages a newcomer meets (issue 45): each names what the user did, in the words they wrote it (TOML, the
command, the call), and how to fix it; none points at pyproject.toml for what did not come from there."""

from __future__ import annotations

import pytest

import kernelpin
import kernelpin.cli
from kernelpin.errors import KernelpinError


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("true", "true (a boolean) is not a requirement"),
        ("[1, 2]", "[1, 2] (an array) is not a requirement"),
        ("1.5", "1.5 (a float) is not a requirement"),
    ],
)
def test_a_wrong_requirement_is_named_as_toml_writes_it(img2gray, project, cli, written, said):
    # Failed before: "True is not a requirement", "[1, 2] is not ..." (Python's spelling).
    project(f'"acme/img2gray" = {written}\n')
    status, _, err = cli("lock")
    assert status == 1 and f"error: [tool.kernels.dependencies] 'acme/img2gray': {said}; use e.g." in err
    assert "True" not in err


def test_a_dependencies_table_that_is_no_table_is_named_as_toml_writes_it(project, cli):
    # Failed before: "must be a table, not Array ('[1, 2]')": tomlkit's class name.
    root = project("")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\nversion = "1.0"\n[tool.kernels]\ndependencies = [1, 2]\n'
    )
    status, _, err = cli("lock")
    assert status == 1 and "[tool.kernels.dependencies] in pyproject.toml must be a table, not an array ([1, 2])" in err
    assert "Array" not in err


def test_add_names_its_own_arguments(img2gray, project, cli):
    # Failed before: both sent the user to [tool.kernels.dependencies], which they had not written.
    project('"acme/img2gray" = "^0.1"\n')
    status, _, err = cli("add", "acme/no-such-kernel")
    assert status == 1 and "check the name in `kernelpin add`'s arguments" in err and "tool.kernels" not in err
    status, _, err = cli("add", "acme/img2gray@^7")
    assert status == 1 and "tool.kernels" not in err
    assert err.startswith("error: acme/img2gray@^7: no version satisfies ^7 (available: 1.0.0-rc.1, 0.2.0, ")
    assert err.rstrip().endswith(
        "give `kernelpin add` a range that one of them satisfies, or acme/img2gray alone for the newest release"
    )


def test_get_kernel_names_its_own_call(img2gray, hf_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KernelpinError) as error:
        kernelpin.get_kernel("acme/no-such-kernel", version=0)
    assert "check the name in get_kernel('acme/no-such-kernel', version=0)" in str(error.value)
    with pytest.raises(KernelpinError) as error:
        kernelpin.get_kernel("acme/img2gray", version="^9")
    assert "change the requirement in get_kernel('acme/img2gray', version='^9')" in str(error.value)
    assert "tool.kernels" not in str(error.value)


@pytest.mark.parametrize("relative", [False, True])
def test_a_local_kernels_path_that_does_not_exist_says_so(hf_env, tmp_path, monkeypatch, relative):
    # Failed before: "no build variants there (expected .../build/<variant>/)", as if the directory were empty.
    monkeypatch.chdir(tmp_path)
    path = "build/dev/img2gray" if relative else str(tmp_path / "nowhere")
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/img2gray={path}")
    with pytest.raises(KernelpinError) as error:
        kernelpin.get_kernel("acme/img2gray", version=0)
    message = str(error.value)
    assert (
        f"{path} does not exist" in message
        or f"{path} (a relative path, read from the working directory {tmp_path}) does not exist" in message
    )
    assert "no build variants" not in message and "point LOCAL_KERNELS at the directory of a build" in message


@pytest.mark.parametrize(
    ("given", "suggested"), [("--upgade", "--upgrade"), ("--dry-runn", "--dry-run"), ("--chek", "--check")]
)
def test_a_mistyped_option_gets_a_did_you_mean(capsys, given, suggested):
    # Failed before: "unrecognized arguments: --upgade", where a mistyped command got "did you mean".
    with pytest.raises(SystemExit) as exit_:
        kernelpin.cli.main(["lock", given])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"kernelpin lock: error: unknown option '{given}'; did you mean '{suggested}'?"
    )


def test_an_option_with_nothing_close_points_at_help(capsys):
    with pytest.raises(SystemExit):
        kernelpin.cli.main(["sync", "--zzzzzz", "extra"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kernelpin sync: error: unknown option '--zzzzzz' "
        "(`kernelpin sync --help` lists its options); unexpected "
        "argument 'extra'"
    )


def test_one_revision_is_singular(img2gray, project, cli):
    # Failed before: "1 revisions, ...".
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync")[0] == 0
    status, out, _ = cli("cache")
    assert status == 0 and "\n1 revision, " in f"\n{out}" and "1 revisions" not in out
