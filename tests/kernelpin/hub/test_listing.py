"""kernelpin.hub.listing directly: the one parser of the Hub's answers, each refusal with its exact message and
each bound at its edge (what a mutation run showed no other test would notice losing). Pure: no server."""

from __future__ import annotations

import re

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import MAX_FILE_SIZE
from kernelpin.hub.limits import LimitExceeded
from kernelpin.hub.listing import (
    MalformedAnswer,
    Refs,
    RemoteFile,
    check_commit,
    check_count,
    check_ref_name,
    files_of,
    next_page,
    parse_refs,
    parse_tree_page,
    remote_file,
)

WHERE = "the listing of acme/x"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def refused(message: str) -> pytest.RaisesContext:
    return pytest.raises(
        MalformedAnswer,
        match="^"
        + re.escape(f"{WHERE}: {message}; the server is broken or hostile: do not use it for this repository")
        + "$",
    )


def test_commits_are_40_lowercase_hex_digits():
    assert check_commit(COMMIT, WHERE) == COMMIT
    for bad in (COMMIT[:-1], COMMIT + "0", COMMIT.upper(), "g" * 40, 40, None):
        with refused(f"commit {repr(bad)[:80]} is not 40 lowercase hex digits"):
            check_commit(bad, WHERE)


@pytest.mark.parametrize("name", ["v1.0.0", "release/1", "a", "x" * 255, "v1.0.0+build.5", "1.0.0-rc.1"])
def test_git_ref_names_are_kept(name):
    assert check_ref_name(name, WHERE) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 256,
        "a..b",
        "a//b",
        "/a",
        "a/",
        "a b",
        "a\tb",
        "a\x7f",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[b",
        "a\\b",
        5,
        None,
    ],
)
def test_names_git_refuses_are_refused(name):
    with refused(f"{repr(name)[:80]} is not a git tag or branch name"):
        check_ref_name(name, WHERE)


def test_counts_are_bounded_at_the_limit():
    check_count(10, 10, WHERE)
    with pytest.raises(
        LimitExceeded,
        match=re.escape(
            f"{WHERE}: more than 10 entries (KERNELPIN_MAX_LISTING); the repository is not a kernel or the server is "
            "hostile. If it is genuine, set KERNELPIN_MAX_LISTING=N to allow more"
        ),
    ):
        check_count(11, 10, WHERE)


def tag(name: str, commit: str = COMMIT) -> dict:
    return {"name": name, "targetCommit": commit}


def test_refs_are_parsed_into_tags_and_branches():
    refs = parse_refs({"tags": [tag("v1.0.0")], "branches": [tag("v1", "f" * 40)], "converts": [1]}, "kernel", WHERE, 2)
    assert refs == Refs("kernel", {"v1.0.0": COMMIT}, {"v1": "f" * 40})
    assert parse_refs({}, "model", WHERE, 0) == Refs("model", {}, {})


def test_refs_are_bounded_over_tags_and_branches_together():
    both = {"tags": [tag("a")], "branches": [tag("b")]}
    assert len(parse_refs(both, "kernel", WHERE, 2).branches) == 1
    with pytest.raises(LimitExceeded, match="more than 1 entries"):
        parse_refs(both, "kernel", WHERE, 1)
    with pytest.raises(LimitExceeded, match="more than 1 entries"):
        parse_refs({"tags": [tag("a"), tag("b")]}, "kernel", WHERE, 1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "the refs listing is list, not an object"),
        ({"tags": "v1"}, "'tags' is str, not a list"),
        ({"branches": {"v1": 1}}, "'branches' is dict, not a list"),
        ({"tags": ["v1"]}, "an entry of 'tags' is str 'v1', not an object"),
        ({"branches": [7]}, "an entry of 'branches' is int 7, not an object"),
        ({"tags": [tag("v1"), tag("v1")]}, "tag 'v1' is listed twice"),
        ({"branches": [tag("v1"), tag("v1")]}, "branch 'v1' is listed twice"),
        ({"tags": [{"name": "v1"}]}, "tag 'v1': commit None is not 40 lowercase hex digits"),
        ({"branches": [tag("v1", "x")]}, "branch 'v1': commit 'x' is not 40 lowercase hex digits"),
        ({"tags": [{"targetCommit": COMMIT}]}, "None is not a git tag or branch name"),
    ],
)
def test_malformed_refs_are_refused_with_what_is_wrong(data, message):
    with refused(message):
        parse_refs(data, "kernel", WHERE, 10)


def test_a_listed_file_is_kept_as_given_and_sizes_are_bounded():
    assert remote_file("a.py", 0, None, None, WHERE) == RemoteFile("a.py", 0, None, None)
    kept = remote_file("a.py", MAX_FILE_SIZE, "a" * 40, "b" * 64, WHERE)
    assert kept == RemoteFile("a.py", MAX_FILE_SIZE, "a" * 40, "b" * 64)


@pytest.mark.parametrize(
    ("size", "blob", "lfs", "problem"),
    [
        (MAX_FILE_SIZE + 1, None, None, f"size {MAX_FILE_SIZE + 1} is not between 0 and {MAX_FILE_SIZE}"),
        (-1, None, None, f"size -1 is not between 0 and {MAX_FILE_SIZE}"),
        (True, None, None, f"size True is not between 0 and {MAX_FILE_SIZE}"),
        (1.0, None, None, f"size 1.0 is not between 0 and {MAX_FILE_SIZE}"),
        (1, "A" * 40, None, f"git blob id {'A' * 40!r} is not 40 lowercase hex digits"),
        (1, 5, None, "git blob id '5' is not 40 lowercase hex digits"),
        (1, None, "a" * 63, f"LFS sha256 {'a' * 63!r} is not 64 lowercase hex digits"),
        (1, None, 7, "LFS sha256 '7' is not 64 lowercase hex digits"),
    ],
)
def test_a_listed_file_with_a_field_the_lock_would_refuse_is_refused(size, blob, lfs, problem):
    with pytest.raises(
        KernelpinError,
        match="^"
        + re.escape(
            f"{WHERE}: the repository listing gives 'a.py' a {problem}; the server is broken or hostile: "
            "do not use this revision"
        )
        + "$",
    ):
        remote_file("a.py", size, blob, lfs, WHERE)


def entry(path: object, kind: str = "file", **fields: object) -> dict:
    return {"type": kind, "path": path, "size": 1, "oid": "a" * 40, **fields}


def test_a_tree_page_gives_files_and_directories():
    page = parse_tree_page(
        [entry("build", "directory"), entry("build/a.py", lfs={"oid": "b" * 64}), entry("README.md", lfs=None)], WHERE
    )
    assert page == [
        "build",
        RemoteFile("build/a.py", 1, "a" * 40, "b" * 64),
        RemoteFile("README.md", 1, "a" * 40, None),
    ]
    assert parse_tree_page([], WHERE) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"path": "x"}, "the file listing is dict, not a list"),
        (["x"], "a listing entry is str 'x', not an object"),
        ([entry(5)], "a listing entry's path is 5, not a string"),
        ([entry("a.py", lfs="yes")], "'a.py': 'lfs' is str, not an object"),
        ([entry("a.py", kind="link")], "'a.py': type 'link' is neither 'file' nor 'directory'"),
        ([{"path": "a.py"}], "'a.py': type None is neither 'file' nor 'directory'"),
    ],
)
def test_a_malformed_tree_page_is_refused(data, message):
    with refused(message):
        parse_tree_page(data, WHERE)


def test_a_long_listed_path_is_shown_cut_to_200_characters():
    path = "d/" * 150 + "a.py"
    with pytest.raises(
        KernelpinError, match="^" + re.escape(f"{WHERE}: the repository listing gives {path[:200]!r} a size -1 is")
    ):
        remote_file(path, -1, None, None, WHERE)


def test_an_unsafe_listed_path_is_refused_before_anything_else():
    with pytest.raises(KernelpinError, match=f"^{WHERE}: refusing unsafe path '../a.py'"):
        parse_tree_page([entry("../a.py", kind="link")], WHERE)


def test_a_whole_listing_has_each_path_once_and_no_file_with_files_below():
    files = [RemoteFile("build/x/a.py", 1, None, None), RemoteFile("build/x/b/c.py", 1, None, None)]
    assert files_of(["build", "build/x", *files], WHERE) == files
    with refused("'build/x/a.py' is listed twice"):
        files_of([files[0], files[0]], WHERE)
    with refused("'build' is listed twice"):
        files_of(["build", "build"], WHERE)
    with refused("'build/x' is listed as a file and as a directory"):
        files_of([RemoteFile("build/x", 1, None, None), files[0]], WHERE)
    assert files_of([RemoteFile("top", 1, None, None), RemoteFile("topper/a", 1, None, None)], WHERE)


LONG = "z" * 100


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([LONG], f"a listing entry is str {repr(LONG)[:40]}, not an object"),
        ([entry(["p"] * 30)], f"a listing entry's path is {repr(['p'] * 30)[:40]}, not a string"),
        ([entry("a.py", kind=LONG)], f"'a.py': type {repr(LONG)[:40]} is neither 'file' nor 'directory'"),
    ],
)
def test_a_malformed_entry_is_quoted_cut_short(data, message):
    with refused(message):
        parse_tree_page(data, WHERE)


def test_long_field_values_are_quoted_cut_short_and_errors_name_the_listing():
    with refused(f"an entry of 'tags' is str {repr(LONG)[:40]}, not an object"):
        parse_refs({"tags": [LONG]}, "kernel", WHERE, 10)
    with pytest.raises(LimitExceeded, match="^" + re.escape(f"{WHERE}: more than 0 entries")):
        parse_refs({"tags": [tag("a")]}, "kernel", WHERE, 0)
    for size, blob, lfs, shown in (
        (10**30, None, None, f"size {str(10**30)[:20]} is not"),
        (1, LONG, None, f"git blob id {LONG[:50]!r} is not"),
        (1, None, LONG, f"LFS sha256 {LONG[:70]!r} is not"),
    ):
        with pytest.raises(
            KernelpinError, match="^" + re.escape(f"{WHERE}: the repository listing gives 'a.py' a {shown}")
        ):
            parse_tree_page([entry("a.py", size=size, oid=blob, lfs={"oid": lfs} if lfs else None)], WHERE)


@pytest.mark.parametrize(
    "link",
    [
        '<https://huggingface.co/api/kernels/acme/x/tree/main?cursor=abc&recursive=true>; rel="next"',
        "<https://hub/next>; rel=next",
        '<https://hub/prev>; rel="prev", <https://hub/next>; rel="next"',
        '<https://hub/first>; rel="first"',
        "",
        "garbage",
        '<https://hub/a>; rel="next"; title="x=y"',
        "<>; rel=next",
    ],
)
def test_the_next_page_is_read_from_the_link_header_as_httpx_reads_it(link):
    # huggingface_hub's client read it with httpx's Response.links; kernelpin.hub.wire's answers are read here.
    import httpx2

    theirs = httpx2.Response(200, headers={"Link": link} if link else {}).links.get("next", {}).get("url") or None
    assert next_page(link) == theirs
