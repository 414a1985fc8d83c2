"""Issue 28 (9, 10): the project's own files as kernelpin finds them. A malformed kernels.lock is one line of
error or rewritten, never a traceback; `add` and `remove` keep pyproject.toml's CRLF line endings."""

from __future__ import annotations

import pytest

from kernelpin.format.layout import LOCKFILE


@pytest.mark.parametrize(
    "content",
    [
        "[" * 100_000,
        '[{"dependency": {"repo-id": ["x"]}, "lock": {"commit": "a"}}]',
        '{"dependency": 1}',
        '[{"dependency": {"repo-id": {"a": 1}}, "lock": {}}]',
    ],
)
def test_a_malformed_kernels_lock_is_reported_and_rewritten_never_a_traceback(img2gray, project, cli, content):
    # Failed before: RecursionError (nesting), TypeError: unhashable type: 'list' (a list as repo-id).
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    (root / "kernels.lock").write_text(content)
    status, _, err = cli("lock", "--check")
    assert status == 1 and "kernels.lock" in err and "Traceback" not in err, err
    status, _, err = cli("add", "acme/img2gray@^0.2")
    assert status == 0, err
    assert cli("lock", "--check")[0] == 0  # `add` re-locked and kept kernels.lock in step
    (root / "kernels.lock").write_text(content)
    status, out, err = cli("lock")
    assert status == 0 and "kept in step" in out, err


def test_add_and_remove_keep_crlf_line_endings(img2gray, new_repo, project, cli):
    # Failed before: every CRLF became LF.
    other, repo = new_repo()
    from testkit.fake_kernel import publish

    publish(repo, "1.0.0")
    root = project("")
    pyproject = root / "pyproject.toml"
    pyproject.write_bytes(pyproject.read_bytes().replace(b"\n", b"\r\n") + b'"acme/img2gray" = "^0.1"\r\n')
    status, _, err = cli("add", other)
    assert status == 0, err
    text = pyproject.read_bytes()
    assert text.count(b"\n") == text.count(b"\r\n") and f'"{other}" = "^1.0.0"\r\n'.encode() in text
    assert (root / LOCKFILE).exists()
    status, _, err = cli("remove", "acme/img2gray")
    assert status == 0, err
    text = pyproject.read_bytes()
    assert text.count(b"\n") == text.count(b"\r\n") and b"img2gray" not in text
    assert text.startswith(b'[project]\r\nname = "app"\r\n')


def test_a_lf_pyproject_stays_lf(img2gray, project, cli):
    root = project("")
    assert cli("add", "acme/img2gray")[0] == 0
    assert b"\r" not in (root / "pyproject.toml").read_bytes()
