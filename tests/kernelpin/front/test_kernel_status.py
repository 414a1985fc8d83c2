"""kernel-status.toml redirects (issue 45): a kernel whose repository says it moved is followed by get_kernel
where the publisher policy admits the destination, with a warning that says so; a move across organizations is a
new publisher; loops end; `lock` names the move and what to require instead. The file is `kernels`' format, read
by kernels' own parser as the judge (kernels has the parser since 0.17.2 and calls it nowhere, up to 0.19.1)."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format.kernel_status import Redirect, parse_status
from kernelpin.front.hub import KernelRedirectWarning
from testkit.fake_kernel import CPU_213, kernel_files
from tests.kernelpin.helpers import TRUSTED_ORG


def released(repo, version: str, extra: dict[str, bytes] | None = None) -> None:
    repo.write({**kernel_files(version, variants=(CPU_213,)), **(extra or {})}, clear=True)
    repo.commit(f"release {version}")
    repo.tag(f"v{version}")
    repo.branch(f"v{version.split('.')[0]}")


def moved(repo, destination: str, revision: str | None = None) -> None:
    """The old repository's next commit on v1: its builds kept, and a kernel-status.toml naming the new one."""
    status = f'kind = "redirect"\ndestination = "{destination}"\n' + (f'revision = "{revision}"\n' if revision else "")
    released(repo, "1.0.1", {"kernel-status.toml": status.encode()})


def _loaded(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = call()
    return module, [str(w.message) for w in caught if issubclass(w.category, KernelRedirectWarning)]


def test_get_kernel_follows_a_move_within_the_organization_and_says_so(hub, hf_env, new_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("old", "kernel")
    new_id, new = new_repo("new", "kernel")
    released(old, "1.0.0")
    released(new, "1.5.0")
    moved(old, new_id)
    module, said = _loaded(lambda: kernelpin.get_kernel(old_id, version=1))
    assert module.VERSION == "1.5.0"  # the destination's v1, not the old repository's 1.0.1
    assert said == [
        (
            f"{old_id} has moved to {new_id} (its kernel-status.toml at {said[0].split(' at ')[1][:12]} says "
            f"so); loading {new_id} 1 instead: to load it by its new name, get_kernel({new_id!r}, ...)"
        )
    ]
    assert [k.repo_id for k in kernelpin.loaded_kernels() if k.repo_id in (old_id, new_id)][-1] == new_id


def test_a_redirect_revision_is_taken_as_written(hub, hf_env, new_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("old", "kernel")
    new_id, new = new_repo("new", "kernel")
    released(new, "2.0.0")
    released(new, "2.1.0")
    moved(old, new_id, revision="v2.0.0")
    module, said = _loaded(lambda: kernelpin.get_kernel(old_id, version=1))
    assert module.VERSION == "2.0.0" and f'loading {new_id} {{ revision = "v2.0.0" }} instead' in said[0]


def test_a_move_to_another_organization_is_a_new_publisher(hub, hf_env, new_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old_id, old = new_repo("old", "kernel")
    new_id, new = new_repo("elsewhere", "kernel", org=TRUSTED_ORG)  # the Hub marks it trusted: not enough
    released(new, "1.0.0")
    moved(old, new_id)
    with pytest.raises(KernelpinError) as error:
        kernelpin.get_kernel(old_id, version=1)
    assert str(error.value) == (
        f"{old_id} has moved to {new_id} (its kernel-status.toml at {str(error.value).split(' at ')[1][:12]} says so), "
        "another organization's: a new publisher, which neither the publisher policy nor trust_remote_code names; "
        f"if you trust it, pass trust_remote_code=[{new_id!r}] or add [tool.kernelpin.trust.publishers."
        f'"{TRUSTED_ORG}"] to pyproject.toml'
    )
    module, said = _loaded(lambda: kernelpin.get_kernel(old_id, version=1, trust_remote_code=[new_id]))
    assert module.VERSION == "1.0.0" and len(said) == 1
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "1"\n[tool.kernelpin.trust.publishers."{TRUSTED_ORG}"]\n'
    )
    assert _loaded(lambda: kernelpin.get_kernel(old_id, version=1))[0].VERSION == "1.0.0"


def test_a_loop_of_moves_ends(hub, hf_env, new_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first_id, first = new_repo("loop-a", "kernel")
    second_id, second = new_repo("loop-b", "kernel")
    moved(first, second_id)
    moved(second, first_id)
    with (
        pytest.raises(
            KernelpinError,
            match=rf"^{first_id} -> {second_id} -> {first_id}: kernel-status.toml "
            "redirects loop",
        ),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", KernelRedirectWarning)
        kernelpin.get_kernel(first_id, version=1)


def test_lock_names_the_move_and_what_to_require(hub, hf_env, new_repo, project, cli):
    old_id, old = new_repo("old", "kernel")
    new_id, new = new_repo("new", "kernel")
    released(new, "1.0.0")
    moved(old, new_id)
    project(f'"{old_id}" = 1\n')
    status, _, err = cli("lock")
    assert status == 1 and f"error: {old_id} has moved to {new_id} (its kernel-status.toml at " in err
    assert f'require "{new_id}" = 1 in [tool.kernels.dependencies] instead' in err


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('kind = "gone"\ndestination = "acme/x"\n', "kind must be \"redirect\", not 'gone'"),
        ('kind = "redirect"\n', "no destination"),
        ('kind = "redirect"\ndestination = "../etc"\n', "destination: '../etc' is not a Hub repository id"),
        ('kind = "redirect"\ndestination = "acme/x"\nrevision = 3\n', "revision must be a tag, branch or commit"),
        ("kind = [", "not TOML"),
    ],
)
def test_a_broken_status_file_is_named(text, problem):
    with pytest.raises(KernelpinError) as error:
        parse_status(text.encode(), "acme/old at 0123456789ab: kernel-status.toml")
    assert str(error.value).startswith(f"acme/old at 0123456789ab: kernel-status.toml: {problem}")


@pytest.mark.parametrize(
    "text",
    [
        'kind = "redirect"\ndestination = "acme/new"\n',
        'kind = "redirect"\ndestination = "other/new"\nrevision = "v2"\n',
    ],
)
def test_kernels_own_parser_reads_the_same_redirect(text):
    status = importlib.import_module(
        "kernels._internals.status" if importlib.util.find_spec("kernels._internals") else "kernels.status"
    )
    theirs = status.KernelStatus.from_toml(text)
    ours = parse_status(text.encode(), "here")
    assert ours.destination == theirs.destination
    # kernels reads an absent revision as "main"; kernelpin keeps the requirement asked (the documented difference)
    assert (ours.revision or "main") == theirs.revision
    assert ours == Redirect(theirs.destination, None if "revision" not in text else theirs.revision), sys.modules[
        "kernels"
    ].__version__
