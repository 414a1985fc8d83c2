"""kernelpin.files.integrity and the lock reader's refusals, tested directly: each case is one a mutation run
showed no other test would notice (an unsafe path accepted, a temp file written elsewhere, a field read as
None), so each assertion is the one that fails when the check stops refusing."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files.atomic import staged_directory, write_atomic
from kernelpin.files.integrity import (
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    check_repo_path,
    git_blob_sha1,
    other_owner,
    sha256_file,
    verify_file,
)
from kernelpin.format import lockfile
from kernelpin.format.spec import parse_requirement


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "is empty"),
        ("a\\b", "contains a backslash or NUL"),
        ("a\0b", "contains a backslash or NUL"),
        ("/etc/passwd", "is absolute"),
        ("C:/x", "is absolute"),
        ("C:x", "is absolute"),
        ("C:", "is absolute"),
        ("..", "contains '..', '.' or an empty component"),
        ("a/../../b", "contains '..', '.' or an empty component"),
        (".", "contains '..', '.' or an empty component"),
        ("a/./b", "contains '..', '.' or an empty component"),
        ("a//b", "contains '..', '.' or an empty component"),
        ("a/", "contains '..', '.' or an empty component"),
        ("a\x1bb", "contains a control character"),
        ("a\x9fb", "contains a control character"),
    ],
)
def test_check_repo_path_refuses_paths_that_could_escape(path, problem):
    with pytest.raises(KernelpinError) as refused:
        check_repo_path(path, "acme/x at 0123456789ab")
    assert str(refused.value) == (
        f"acme/x at 0123456789ab: refusing unsafe path {path!r} (it {problem}); the "
        "repository is malformed or hostile: do not use this revision"
    )


def test_a_long_path_is_shown_cut_short_in_the_refusal():
    for length, shown in ((100, repr("\\" * 100)), (101, repr("\\" * 100) + "... (101 characters)")):
        with pytest.raises(KernelpinError, match="^x: refusing unsafe path " + re.escape(shown) + r" \(it contains"):
            check_repo_path("\\" * length, "x")


def test_a_file_another_user_owns_is_theirs(tmp_path):
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    mine, theirs, roots = tmp_path / "mine", tmp_path / "theirs", tmp_path / "roots"
    for path in (mine, theirs, roots):
        path.write_text("x")
    os.chown(theirs, 1, 1)
    assert other_owner(mine) is None and other_owner(roots) is None and other_owner(theirs) == 1


@pytest.mark.parametrize("path", ["a", "_", "a/b", "build/v/_ops.so", "ab:c/z", "..a", "a..", ".hidden/a.py"])
def test_check_repo_path_returns_safe_paths_unchanged(path):
    assert check_repo_path(path, "acme/x") == path


def test_hashes_match_sha256_and_git(tmp_path):
    content = b"kernel bytes\n" * 1000
    (tmp_path / "f").write_bytes(content)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(content).hexdigest()
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    blob = (
        subprocess.run(
            ["git", "-C", str(tmp_path / "repo"), "hash-object", "--stdin"],
            input=content,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )
    assert git_blob_sha1(content) == blob


def test_verify_file_checks_size_then_digest(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    digest = hashlib.sha256(b"abc").hexdigest()
    verify_file(path, 3, digest, "what")
    with pytest.raises(IntegrityError, match=r"^what: size 3 != 4 pinned in the lock$"):
        verify_file(path, 4, digest, "what")
    with pytest.raises(IntegrityError, match=rf"^what: sha256 {digest} != {'0' * 64} pinned in the lock$"):
        verify_file(path, 3, "0" * 64, "what")


def test_names_at_the_limits_are_kept_and_bytes_count_not_characters():
    assert check_repo_path("a" * MAX_NAME_BYTES, "x") == "a" * MAX_NAME_BYTES
    with pytest.raises(KernelpinError, match="has a 256-byte name"):
        check_repo_path("\u00e9" * 128, "x")  # 128 characters, 256 bytes in UTF-8
    longest = "/".join(["d" * 128] * 4)[:MAX_PATH_BYTES]
    assert len(longest.encode()) == MAX_PATH_BYTES and check_repo_path(longest, "x") == longest
    with pytest.raises(KernelpinError, match=r"'dddd.*\.\.\. \(513 characters\) \(it is 513 bytes long"):
        check_repo_path(longest + "e", "x")
    for control in ("\x00", "\x1b", "\x7f", "\x85", "\t", "\n"):
        with pytest.raises(KernelpinError):
            check_repo_path(f"a{control}b", "x")


def test_write_atomic_makes_missing_directories_and_a_hidden_temporary_named_after_the_file(tmp_path, monkeypatch):
    renamed = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: (renamed.append(source), replace(source, target)))
    target = tmp_path / "a" / "b" / "kernelpin.lock"
    write_atomic(target, "caf\u00e9\r\n")
    assert target.read_bytes() == "caf\u00e9\r\n".encode()  # UTF-8 whatever the locale, no newline translation
    (temporary,) = renamed
    assert Path(temporary).parent == target.parent and re.fullmatch(
        r"\.kernelpin\.lock\.\w+\.tmp", Path(temporary).name
    )


def test_write_atomic_writes_utf8_under_a_c_locale(tmp_path):
    code = (
        "import sys; from pathlib import Path; from kernelpin.files.atomic import write_atomic; "
        "write_atomic(Path(sys.argv[1]), 'caf\\u00e9')"
    )
    env = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONUTF8": "0",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONIOENCODING": "",
    }
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")], env=env, check=True, timeout=60)
    assert (tmp_path / "f").read_bytes() == "caf\u00e9".encode()


def test_write_atomic_writes_its_temporary_file_beside_the_target(tmp_path, monkeypatch):
    # A temporary file elsewhere (another filesystem) cannot be renamed into place atomically.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temporary-directory"))
    target = tmp_path / "project" / "kernelpin.lock"
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n" and os.listdir(target.parent) == ["kernelpin.lock"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # not mkstemp's 0600: others read the project
    target.chmod(0o640)
    write_atomic(target, "newer\n")
    assert target.read_text() == "newer\n" and stat.S_IMODE(target.stat().st_mode) == 0o640


def test_an_edited_pyproject_that_is_a_link_stays_a_link(tmp_path):
    # Failed before: the atomic rename replaced the link by a plain file and left its target unchanged.
    shared = tmp_path / "shared" / "pyproject.toml"
    shared.parent.mkdir()
    shared.write_text("[project]\n")
    link = tmp_path / "app" / "pyproject.toml"
    link.parent.mkdir()
    link.symlink_to(shared)
    write_atomic(link, "[project]\nname = 'app'\n")
    assert link.is_symlink() and link.resolve() == shared.resolve()
    assert shared.read_text() == "[project]\nname = 'app'\n"


def test_write_atomic_leaves_the_old_file_and_no_temporary_when_it_fails(tmp_path, monkeypatch):
    target = tmp_path / "pyproject.toml"
    target.write_text("old\n")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["pyproject.toml"]


def test_staged_directory_replaces_the_target_whole_or_not_at_all(tmp_path):
    target = tmp_path / "variant"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(RuntimeError), staged_directory(target) as staging:
        (staging / "half").write_text("half")
        raise RuntimeError("interrupted")
    assert os.listdir(tmp_path) == ["variant"] and os.listdir(target) == ["old"]
    with staged_directory(target) as staging:
        assert staging.parent == tmp_path and stat.S_IMODE(staging.stat().st_mode) == 0o755
        (staging / "new").write_text("new")
    assert os.listdir(tmp_path) == ["variant"] and os.listdir(target) == ["new"]


# --- the lock reader: a required field that is absent is an error, never None --------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GOOD_LOCK = f'''version = 2

[[kernel]]
repo = "acme/x"
repo-type = "model"
requirement = "^1"
version = "1.0.0"
ref = "refs/tags/v1.0.0"
commit = "{COMMIT}"

[[kernel.variant]]
name = "torch213-cxx11-cpu-x86_64-linux"
files = [
    {{path = "__init__.py", size = 3, sha256 = "{"a" * 64}"}},
]
'''


def test_the_lock_reader_accepts_the_good_lock():
    (kernel,) = lockfile.parse(GOOD_LOCK, "kernelpin.lock").kernels
    assert (kernel.commit, kernel.variants[0].name, kernel.variants[0].files[0].sha256) == (
        COMMIT,
        "torch213-cxx11-cpu-x86_64-linux",
        "a" * 64,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f'commit = "{COMMIT}"\n', "[[kernel]] #1 (acme/x): commit is missing"),
        ('name = "torch213-cxx11-cpu-x86_64-linux"\n', "variant #1: name is missing"),
        (f', sha256 = "{"a" * 64}"', "file #1: sha256 is missing"),
        ('repo-type = "model"\n', "repo-type is missing"),
        ('requirement = "^1"\n', "requirement is missing"),
        ("size = 3, ", "size is missing"),
        ('path = "__init__.py", ', "path is missing"),
    ],
    ids=["commit", "variant-name", "file-sha256", "repo-type", "requirement", "size", "path"],
)
def test_a_lock_missing_a_required_field_is_refused(line, message):
    assert line in GOOD_LOCK
    with pytest.raises(KernelpinError, match="run `kernelpin lock` to regenerate the lock") as refused:
        lockfile.parse(GOOD_LOCK.replace(line, "", 1), "kernelpin.lock")
    assert message in str(refused.value)


def _locked(**changes) -> lockfile.LockedKernel:
    (kernel,) = lockfile.parse(GOOD_LOCK, "kernelpin.lock").kernels
    return kernel if not changes else lockfile.LockedKernel(**{**kernel.__dict__, **changes})


@pytest.mark.parametrize(
    ("value", "locked", "reason"),
    [
        ({"version": "^1", "repo-type": "model"}, {}, None),
        ({"version": "^1", "repo-type": "kernel"}, {}, "repo-type changed to kernel (locked: model)"),
        ({"revision": COMMIT}, {"ref": None, "version": None}, None),
        ({"revision": "v1.0.0"}, {}, None),
        ({"revision": "refs/tags/v1.0.0"}, {}, None),
        ({"revision": "v1.0.1"}, {}, "revision changed to v1.0.1 (locked: refs/tags/v1.0.0)"),
        ({"revision": "f" * 40}, {"ref": None, "version": None}, f"revision changed to {'f' * 40} (locked: {COMMIT})"),
        ("^2", {}, "locked version 1.0.0 does not satisfy ^2"),
        ("^1", {"ref": None}, "now a version range ^1, locked as a revision"),
    ],
    ids=[
        "same-type",
        "type-changed",
        "commit-pin",
        "tag-pin",
        "ref-pin",
        "tag-changed",
        "commit-changed",
        "range-unsatisfied",
        "range-after-revision",
    ],
)
def test_why_stale(value, locked, reason):
    assert lockfile.why_stale(parse_requirement("acme/x", value), _locked(**locked)) == reason


def test_render_is_the_documented_form_and_parse_reads_it_back():
    kernel = _locked()
    kernel = lockfile.LockedKernel(
        **{
            **kernel.__dict__,
            "requirement": {"version": "^1", "repo-type": "model"},
            "variants": (
                lockfile.LockedVariant(
                    "torch213-cxx11-cu130-x86_64-linux",
                    (lockfile.LockedFile("b.py", 2, "b" * 64), lockfile.LockedFile("a.py", 1, "a" * 64)),
                    backend="cuda",
                    archs=("8.0", "9.0"),
                ),
                *kernel.variants,
            ),
        }
    )
    text = lockfile.render(lockfile.Lock((kernel,)))
    assert (
        text
        == f'''# This file is generated by kernelpin. Do not edit it by hand:
# change [tool.kernels] in pyproject.toml and run `kernelpin lock`.
version = 3

[[kernel]]
repo = "acme/x"
repo-type = "model"
requirement = {{version = "^1", repo-type = "model"}}
version = "1.0.0"
ref = "refs/tags/v1.0.0"
commit = "{COMMIT}"

[[kernel.variant]]
name = "torch213-cxx11-cpu-x86_64-linux"
files = [
    {{path = "__init__.py", size = 3, sha256 = "{"a" * 64}"}},
]

[[kernel.variant]]
name = "torch213-cxx11-cu130-x86_64-linux"
backend = "cuda"
archs = ["8.0", "9.0"]
files = [
    {{path = "a.py", size = 1, sha256 = "{"a" * 64}"}},
    {{path = "b.py", size = 2, sha256 = "{"b" * 64}"}},
]
'''
    )
    (parsed,) = lockfile.parse(text, "kernelpin.lock").kernels
    assert parsed.variant("torch213-cxx11-cu130-x86_64-linux").files[0] == lockfile.LockedFile("a.py", 1, "a" * 64)
    assert (parsed.requirement, parsed.commit, parsed.variants[1].archs) == (kernel.requirement, COMMIT, ("8.0", "9.0"))


def test_changes_name_what_a_relock_did():
    old = _locked()
    assert lockfile.changes(None, lockfile.Lock((old,))) == [f"+ acme/x 1.0.0 ({COMMIT[:12]})"]
    assert lockfile.changes(lockfile.Lock((old,)), lockfile.Lock()) == ["- acme/x 1.0.0"]
    assert lockfile.changes(lockfile.Lock((old,)), lockfile.Lock((old,))) == []
    moved = _locked(commit="f" * 40)
    (line,) = lockfile.changes(lockfile.Lock((old,)), lockfile.Lock((moved,)))
    assert line.startswith(f"! acme/x: version 1.0.0 now points at another commit ({COMMIT[:12]} -> ffffffffffff)")
    upgraded = _locked(commit="f" * 40, version="1.1.0")
    assert lockfile.changes(lockfile.Lock((old,)), lockfile.Lock((upgraded,))) == ["~ acme/x: 1.0.0 -> 1.1.0"]
    assert lockfile.changes(lockfile.Lock((old,)), lockfile.Lock((_locked(requirement="~1.0"),))) == [
        "~ acme/x: requirement ^1 -> ~1.0"
    ]


def test_staleness_lists_every_reason():
    lock = lockfile.Lock((_locked(),))
    assert lockfile.staleness([], None) == []
    assert lockfile.staleness([parse_requirement("acme/x", "^1")], None) == ["no kernelpin.lock yet"]
    assert lockfile.staleness([parse_requirement("acme/x", "^1")], lock) == []
    assert sorted(lockfile.staleness([parse_requirement("acme/y", "^2")], lock)) == [
        "acme/x: in the lock but no longer required",
        "acme/y: required (^2) but not locked",
    ]
    assert lockfile.staleness([parse_requirement("acme/x", "^2")], lock) == [
        "acme/x: locked version 1.0.0 does not satisfy ^2"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version = 99\n", "lock schema version '99' is not one of 1, 2"),
        ("version = true\n", "lock schema version 'True' is not one of 1, 2"),
        ("version = 2\nkernel = 5\n", "'kernel' must be an array of tables"),
        ("version = 2\nkernel = [5]\n", "[[kernel]] #1: expected a table, found int"),
        ("version = [\n", "not valid TOML"),
    ],
)
def test_a_lock_of_the_wrong_shape_is_refused(text, message):
    with pytest.raises(KernelpinError) as refused:
        lockfile.parse(text, "kernelpin.lock")
    assert str(refused.value).startswith("kernelpin.lock: ") and message in str(refused.value)


def test_a_lock_listing_a_kernel_variant_or_file_twice_is_refused():
    kernel = GOOD_LOCK[GOOD_LOCK.index("[[kernel]]") :]
    with pytest.raises(KernelpinError, match=r"acme/x locked more than once"):
        lockfile.parse(GOOD_LOCK + "\n" + kernel, "kernelpin.lock")
    variant = GOOD_LOCK[GOOD_LOCK.index("[[kernel.variant]]") :]
    with pytest.raises(KernelpinError, match=r"variant lists a variant name twice"):
        lockfile.parse(GOOD_LOCK + "\n" + variant, "kernelpin.lock")
    entry = f'    {{path = "__init__.py", size = 3, sha256 = "{"a" * 64}"}},\n'
    with pytest.raises(KernelpinError, match=r"files lists a path twice"):
        lockfile.parse(GOOD_LOCK.replace(entry, entry * 2), "kernelpin.lock")
