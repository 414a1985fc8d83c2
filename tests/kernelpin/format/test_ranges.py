"""kernelpin.format.ranges against npm's and Cargo's documented rules, plus properties."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelpin.format.ranges import Range, RangeError, Version, VersionError

NODE_MODULES = Path(__file__).resolve().parents[3] / "tools" / "ci" / "node" / "node_modules"

# (range, version, expected). Rows follow node-semver's README and its range-include/exclude fixtures,
# and the Cargo book's "Specifying dependencies". Where the two disagree (a bare version), Cargo wins:
# "1.2" means "^1.2", so those rows are marked.
CONTAINS = [
    # a strict bound on "*" admits nothing (a mutation run found no test noticing ">*" matching everything)
    (">*", "1.0.0", False),
    (">x", "0.0.0", False),
    ("<X", "0.0.0", False),
    (">=*", "1.0.0", True),
    ("<=x", "1.0.0", True),
    # an item after another narrows the alternative, never replaces what came before
    (">=1.5 1.2", "1.3.0", False),
    (">=1.5 1.2", "2.0.0", False),
    ("<1.4, >=1.2", "1.5.0", False),
    ("1.2 - 1.4 >=1.3", "1.2.5", False),
    # caret
    ("^1.2.3", "1.2.3", True),
    ("^1.2.3", "1.8.1", True),
    ("^1.2.3", "1.2.2", False),
    ("^1.2.3", "2.0.0", False),
    ("^1.2.3", "2.0.0-alpha", False),
    ("^1.2.3", "1.2.3-beta", False),
    ("^1.2.3", "1.2.4-beta", False),
    ("^1.2", "1.4.2", True),
    ("^1.2", "1.1.9", False),
    ("^1.2", "1.2.0-pre", False),
    ("^1", "1.9.9", True),
    ("^1", "2.0.0", False),
    ("^0.2.3", "0.2.9", True),
    ("^0.2.3", "0.3.0", False),
    ("^0.1.2", "0.1.2", True),
    ("^0.1", "0.1.9", True),
    ("^0.1", "0.2.0", False),
    ("^0.0.3", "0.0.3", True),
    ("^0.0.3", "0.0.4", False),
    ("^0.0.1", "0.0.2", False),
    ("^0.0", "0.0.9", True),
    ("^0.0", "0.1.0", False),
    ("^0", "0.9.0", True),
    ("^0", "1.0.0", False),
    ("^1.2.x", "1.9.0", True),
    ("^1.2.x", "2.0.0", False),
    ("^0.0.x", "0.0.7", True),
    ("^0.0.x", "0.1.0", False),
    ("^x", "1.2.3", True),
    ("^1.2 ^1", "1.4.2", True),
    ("^1.2.3+build", "1.2.3", True),
    ("^1.2.3+build", "1.3.0", True),
    ("^1.2.3+build", "1.2.0", False),
    ("^v1.2", "1.3.0", True),
    # tilde
    ("~1.2.3", "1.2.9", True),
    ("~1.2.3", "1.3.0", False),
    ("~1.2", "1.2.0", True),
    ("~1.2", "1.2.5", True),
    ("~1.2", "1.3.0", False),
    ("~1.2", "1.1.9", False),
    ("~1", "1.2.3", True),
    ("~1", "2.0.0", False),
    ("~1", "0.2.3", False),
    ("~0.2.3", "0.2.9", True),
    ("~0.2.3", "0.3.0", False),
    ("~0.0.1", "0.0.2", True),
    ("~0.0.1", "0.1.0", False),
    ("~0.0.1", "0.1.0-alpha", False),
    ("~x", "0.0.9", True),
    ("~ 1.0.3", "1.0.12", True),
    ("~v0.5.4-pre", "0.5.5", True),
    ("~v0.5.4-pre", "0.5.4", True),
    ("~v0.5.4-beta", "0.5.4-alpha", False),
    # x-ranges
    ("*", "1.2.3", True),
    ("x", "0.0.0", True),
    ("*", "1.2.3-foo", False),
    (">=*", "0.2.4", True),
    ("1.x", "1.0.0", True),
    ("1.x", "1.99.0", True),
    ("1.x", "2.0.0", False),
    ("1.x", "2.0.0-rc.1", False),
    ("1.*", "1.5.0", True),
    ("2.x.x", "2.1.3", True),
    ("2.x.x", "1.1.3", False),
    ("2.x.x", "3.1.3", False),
    ("1.2.x", "1.2.3", True),
    ("1.2.x", "1.3.3", False),
    ("1.2.*", "1.2.0", True),
    ("1.2.*", "1.3.0", False),
    ("=0.7.x", "0.7.2", True),
    ("=0.7.x", "0.8.2", False),
    ("=0.7.x", "0.7.0-asdf", False),
    ("<=0.7.x", "0.7.2", True),
    ("<=0.7.x", "0.6.2", True),
    ("<=0.7.x", "0.7.0-asdf", False),
    (">=0.7.x", "0.6.2", False),
    ("<0.7.x", "0.7.2", False),
    ("<=7.x", "7.9.9", True),
    # bare versions: caret, as in Cargo (npm would read these as exact / x-ranges)
    ("1.2.3", "1.2.3", True),
    ("1.2.3", "1.5.0", True),
    ("1.2.3", "1.2.2", False),
    ("1.2", "1.9.0", True),
    ("2.3", "2.3.1", True),
    ("2.3", "1.3.1", False),
    ("0.2", "0.2.9", True),
    ("0.2", "0.3.0", False),
    ("2", "2.1.2", True),
    ("2", "1.1.2", False),
    # hyphen ranges
    ("1.0.0 - 2.0.0", "1.2.3", True),
    ("1.0.0 - 2.0.0", "2.0.0", True),
    ("1.0.0 - 2.0.0", "2.2.3", False),
    ("1.2.3 - 2.3", "2.3.9", True),
    ("1.2.3 - 2.3", "2.4.0", False),
    ("1.2.3 - 2.3", "2.4.0-rc.1", False),
    ("1.2.3 - 2", "2.9.9", True),
    ("1.2.3 - 2", "3.0.0", False),
    ("1.2 - 2.3.4", "1.2.0", True),
    ("1.2 - 2.3.4", "1.1.9", False),
    ("x - 1.0.0", "0.9.7", True),
    ("1.0.0 - x", "1.9.7", True),
    ("1.2.3-pre+asdf - 2.4.3-pre+asdf", "1.2.3-pre.2", True),
    ("1.2.3-pre+asdf - 2.4.3-pre+asdf", "2.4.3-alpha", True),
    ("1.2.3+asdf - 2.4.3+asdf", "1.2.3-pre.2", False),
    ("1.2.3+asdf - 2.4.3+asdf", "2.4.3-alpha", False),
    # primitives, with and without whitespace
    ("=1.0.0", "1.0.0", True),
    ("=1.0.0", "1.0.1", False),
    ("=1.2", "1.2.7", True),
    ("=1.2", "1.3.0", False),
    (">=1.0.0", "1.0.0", True),
    (">=1.0.0", "0.1.0", False),
    (">1.0.0", "1.0.1", True),
    (">1.0.0", "1.0.0", False),
    (">1.2", "1.2.8", False),
    (">1.2", "1.3.0", True),
    (">1.2", "1.3.0-beta", False),
    (">1", "1.9.9", False),
    (">1", "2.0.0", True),
    ("<=2.0.0", "2.0.0", True),
    ("<=2.0.0", "2.2.9", False),
    ("<2.0.0", "1.9999.9999", True),
    ("<2.0.0", "2.0.0", False),
    ("<1", "1.0.0", False),
    ("<1.2", "1.1.1", True),
    ("< 1.2", "1.1.1", True),
    (">= 1.0.0", "1.0.0", True),
    ("<=   2.0.0", "2.0.0", True),
    (">=1.2.1 1.2.3", "1.2.3", True),
    ("~1.2.1 >=1.2.3", "1.2.3", True),
    ("~1.2.1 >=1.2.3", "1.2.2", False),
    ("~1.2.1 =1.2.3", "1.2.3", True),
    # comma form (Cargo)
    (">=1.2, <2", "1.9.0", True),
    (">=1.2, <2", "2.0.0", False),
    (">=1.2,<2", "1.2.0", True),
    (">= 1.2, < 1.5", "1.4.9", True),
    (">= 1.2, < 1.5", "1.5.0", False),
    (">= 1.2, < 1.5", "1.1.0", False),
    # unions
    ("1.2.x || 2.x", "2.1.3", True),
    ("1.2.x || 2.x", "1.2.3", True),
    ("1.2.x || 2.x", "3.1.3", False),
    ("1.2.x || 2.x", "1.1.3", False),
    (">=0.2.3 || <0.0.1", "0.0.0", True),
    (">=0.2.3 || <0.0.1", "0.2.4", True),
    (">=0.2.3 || <0.0.1", "0.0.3", False),
    ("^0.1.0 || ~3.0.1 || 5.0.0", "3.0.9", True),
    ("^0.1.0 || ~3.0.1 || 5.0.0", "3.2.0", False),
    # prereleases: only through a comparator naming the same MAJOR.MINOR.PATCH
    ("^1.2.3-beta.2", "1.2.3-beta.4", True),
    ("^1.2.3-beta.2", "1.2.3-beta.1", False),
    ("^1.2.3-beta.2", "1.2.4-beta.2", False),
    ("^1.2.3-beta.2", "1.9.0", True),
    ("~1.2.3-beta.2", "1.2.3-beta.4", True),
    ("~1.2.3-beta.2", "1.2.4-beta.2", False),
    ("^0.0.1-alpha", "0.0.1-beta", True),
    ("^0.0.1-alpha", "0.0.1", True),
    ("^1.2.3-rc2", "2.0.0", False),
    (">1.2.3-alpha.3", "1.2.3-alpha.7", True),
    (">1.2.3-alpha.3", "3.4.5-alpha.9", False),
    (">1.2.3-alpha.3", "3.4.5", True),
    ("<1.2.3", "1.2.3-beta", False),
    ("=1.2.3", "1.2.3-beta", False),
    (">=1.2.3-beta.2, <2", "1.2.3-beta.3", True),
    ("^1.0.0", "2.0.0-rc1", False),
    ("1.x || >=1.5.0-rc.1", "1.5.0-rc.2", True),
    # a desugared upper bound "<2.0.0-0" shuts out every 2.0.0 prerelease; an explicit "<2.0.0" does not
    (">=2.0.0-alpha.1, <2", "2.0.0-alpha.2", False),
    (">=2.0.0-alpha.1, <2.0.0", "2.0.0-alpha.2", True),
    ("1.x || >=1.5.0-rc.1", "1.6.0-rc.1", False),
    # build metadata never matters for matching
    ("=1.2.3", "1.2.3+b7", True),
    ("^1.2.3", "1.2.3+b7", True),
]

# (range, normalized form): the desugaring tables of the node-semver README and the Cargo book.
NORMALIZED = [
    ("^1.2.3", ">=1.2.3 <2.0.0-0"),
    ("^0.2.3", ">=0.2.3 <0.3.0-0"),
    ("^0.0.3", ">=0.0.3 <0.0.4-0"),
    ("^1.2.3-beta.2", ">=1.2.3-beta.2 <2.0.0-0"),
    ("^0.0.3-beta", ">=0.0.3-beta <0.0.4-0"),
    ("^1.2.x", ">=1.2.0 <2.0.0-0"),
    ("^0.0.x", ">=0.0.0 <0.1.0-0"),
    ("^0.0", ">=0.0.0 <0.1.0-0"),
    ("^1.x", ">=1.0.0 <2.0.0-0"),
    ("^0.x", ">=0.0.0 <1.0.0-0"),
    ("^0", ">=0.0.0 <1.0.0-0"),
    ("~1.2.3", ">=1.2.3 <1.3.0-0"),
    ("~1.2", ">=1.2.0 <1.3.0-0"),
    ("~1", ">=1.0.0 <2.0.0-0"),
    ("~0.2.3", ">=0.2.3 <0.3.0-0"),
    ("~0.2", ">=0.2.0 <0.3.0-0"),
    ("~0", ">=0.0.0 <1.0.0-0"),
    ("~1.2.3-beta.2", ">=1.2.3-beta.2 <1.3.0-0"),
    ("*", "*"),
    ("1.x", ">=1.0.0 <2.0.0-0"),
    ("1.*", ">=1.0.0 <2.0.0-0"),
    ("1.2.x", ">=1.2.0 <1.3.0-0"),
    ("1.2.*", ">=1.2.0 <1.3.0-0"),
    ("1.2.3 - 2.3.4", ">=1.2.3 <=2.3.4"),
    ("1.2 - 2.3.4", ">=1.2.0 <=2.3.4"),
    ("1.2.3 - 2.3", ">=1.2.3 <2.4.0-0"),
    ("1.2.3 - 2", ">=1.2.3 <3.0.0-0"),
    ("1.2", ">=1.2.0 <2.0.0-0"),
    ("0.1", ">=0.1.0 <0.2.0-0"),
    ("=1.2.3", "=1.2.3"),
    ("=1.2", ">=1.2.0 <1.3.0-0"),
    (">1", ">=2.0.0"),
    (">1.2", ">=1.3.0"),
    ("<1.2", "<1.2.0-0"),
    ("<=1.2", "<1.3.0-0"),
    (">= 1.2", ">=1.2.0"),
    (">=1.2, <2", ">=1.2.0 <2.0.0-0"),
    (">=1.2 <2", ">=1.2.0 <2.0.0-0"),
    ("^v1.2 || 2.x", ">=1.2.0 <2.0.0-0 || >=2.0.0 <3.0.0-0"),
    ("<*", "<0.0.0-0"),
]


@pytest.mark.parametrize(("text", "version", "expected"), CONTAINS)
def test_contains(text: str, version: str, expected: bool) -> None:
    assert Range.parse(text).contains(Version.parse(version)) is expected


@pytest.mark.parametrize(("text", "normalized"), NORMALIZED)
def test_normalized_form(text: str, normalized: str) -> None:
    parsed = Range.parse(text)
    assert parsed.text == text
    assert str(parsed) == normalized


def test_semver_precedence_example() -> None:
    # SemVer 2.0.0 §11, in increasing order.
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]  # fmt: skip
    versions = [Version.parse(text) for text in chain]
    assert all(low < high for low, high in itertools.pairwise(versions))
    assert sorted(versions) == versions


def test_version_fields_and_build_metadata() -> None:
    version = Version.parse("1.2.3-rc.1+b5.007")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert version.prerelease == ("rc", 1)
    assert version.build == ("b5", "007")
    assert version.is_prerelease and not Version.parse("1.2.3").is_prerelease
    assert str(version) == "1.2.3-rc.1+b5.007"
    # Build metadata does not reach precedence (§10) but keeps distinct versions distinct.
    assert Range.parse("=1.2.3-rc.1").contains(version)
    with_a, with_b = Version.parse("1.2.3+a"), Version.parse("1.2.3+b")
    assert with_a != with_b and (with_a < with_b) != (with_b < with_a)  # a total order, agreeing with ==
    assert Version.parse("1.2.3+a") < Version.parse("1.2.4")


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("v1.2.3", "1.2.3"),
        ("1.2.3", "1.2.3"),
        ("v0.1.0-rc.1", "0.1.0-rc.1"),
        ("v1.0.0+build.5", "1.0.0+build.5"),
        ("main", None),
        ("latest", None),
        ("release-1", None),
        ("v1.2", None),  # tags must be full versions
        ("v1", None),
        ("V1.2.3", None),
        ("vv1.2.3", None),
        ("v1.2.3.4", None),
        ("v01.2.3", None),
        ("", None),
    ],
)
def test_from_tag(tag: str, expected: str | None) -> None:
    version = Version.from_tag(tag)
    assert (None if version is None else str(version)) == expected


def test_best() -> None:
    versions = [Version.parse(text) for text in ["0.1.0", "0.1.5", "0.2.0", "0.2.1-rc.1", "1.0.0", "1.4.0-beta"]]
    assert Range.parse("^0.1").best(versions) == Version.parse("0.1.5")
    assert Range.parse("0.2").best(versions) == Version.parse("0.2.0")
    assert Range.parse(">=0.2.1-rc.0, <0.3").best(versions) == Version.parse("0.2.1-rc.1")
    assert Range.parse("*").best(versions) == Version.parse("1.0.0")
    assert Range.parse("^2").best(versions) is None
    assert Range.parse("*").best([]) is None


# --- errors ---------------------------------------------------------------------------------------

RANGE_ERRORS = [
    (">=1.2 <<2", "at position 7", "found '<'"),
    ("^1.2.3.4", "at position 1", "'1.2.3.4' has 4 dot-separated parts"),
    (">=", "at position 2", "expected a version after '>='"),
    ("1.2.3 -", "at position 7", "expected a version after '-'"),
    ("||", "at position 0", "empty alternative before '||'"),
    ("1.2 ||", "at position 6", "empty alternative after '||'"),
    ("|| 1.2", "at position 0", "empty alternative before '||'"),
    ("a.b.c", "at position 0", "the major part of 'a.b.c' is 'a'"),
    ("latest", "at position 0", "'latest'"),
    ("", "the range is empty", '"*"'),
    ("   ", "the range is empty", '"*"'),
    (">=1.2,", "at position 6", "expected a version after ','"),
    (", >=1.2", "at position 0", "unexpected ','"),
    (">=1.2,,<2", "at position 6", "unexpected ','"),
    ("1.x.3", "at position 0", "follows a wildcard"),
    ("01.2.3", "at position 0", "'01', not a number without leading zeros"),
    ("1.2.3-", "at position 0", "'' in '1.2.3-'"),
    ("^1.2.3-beta..1", "at position 1", "'' in '1.2.3-beta..1'"),
    ("^1.2.3-01", "at position 1", "leading zero"),
    ("1.2-beta", "at position 0", "not a full MAJOR.MINOR.PATCH"),
    ("1.x-beta", "at position 0", "not a full MAJOR.MINOR.PATCH"),
    (">=1.2 | <2", "at position 6", "unexpected '|'"),
    ("- 1.2", "at position 0", "unexpected '-'"),
    ("1.2 - - 2", "at position 6", "found '-'"),
    ("1.2.3 - >=2", "at position 8", "found '>='"),
    ("~>1.2", "at position 1", "found '>'"),
    ("^1.2_3", "at position 4", "unexpected '_'"),
]


@pytest.mark.parametrize(("text", "where", "what"), RANGE_ERRORS)
def test_range_errors_name_the_problem(text: str, where: str, what: str) -> None:
    with pytest.raises(RangeError) as caught:
        Range.parse(text)
    message = str(caught.value)
    assert f"invalid version range {text!r}" in message
    assert where in message and what in message
    assert '"^0.1"' in message and '">=1.2, <2"' in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("1.2", "MAJOR.MINOR.PATCH"),
        ("1.2.x", "MAJOR.MINOR.PATCH"),
        ("v1.2.3", "is 'v1'"),
        ("1.2.3.4", "4 dot-separated parts"),
        ("01.2.3", "'01'"),
        ("1.2.3-", "'' in '1.2.3-'"),
        ("1.2.3+", "'' in '1.2.3+'"),
        ("1.2.3-beta_1", "'beta_1'"),
        ("1.2.3-00", "leading zero"),
        (" 1.2.3", "' 1'"),
        ("", "''"),
    ],
)
def test_version_errors(text: str, what: str) -> None:
    with pytest.raises(VersionError) as caught:
        Version.parse(text)
    message = str(caught.value)
    assert f"invalid version {text!r}" in message and what in message and '"1.2.3"' in message
    assert isinstance(caught.value, ValueError)


# --- properties -----------------------------------------------------------------------------------

small = st.integers(0, 3)
identifiers = st.one_of(st.integers(0, 3), st.sampled_from(["alpha", "beta", "rc", "x-1"]))
versions = st.builds(
    Version,
    small,
    small,
    small,
    st.lists(identifiers, max_size=2).map(tuple),
    st.lists(st.sampled_from(["b1", "007", "sha-ab"]), max_size=2).map(tuple),
)
releases = st.builds(Version, small, small, small)


@st.composite
def partial_versions(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(small.map(str), st.sampled_from(["x", "*"])), min_size=1, max_size=3))
    if any(part in ("x", "*") for part in parts):
        first = next(i for i, part in enumerate(parts) if part in ("x", "*"))
        parts = parts[: first + 1]
    text = ".".join(parts)
    if len(parts) == 3 and "x" not in parts and "*" not in parts and draw(st.booleans()):
        text += "-" + ".".join(map(str, draw(st.lists(identifiers, min_size=1, max_size=2))))
    return text


@st.composite
def comparator_sets(draw: st.DrawFn) -> str:
    """One alternative: an operator form or a hyphen range (no '||', no comma)."""
    if draw(st.booleans()):
        op = draw(st.sampled_from(["", "^", "~", "=", ">", ">=", "<", "<=", "v"]))
        version = draw(partial_versions())
        if op == "v" and not version[0].isdigit():
            op = ""
        return op + version
    return f"{draw(partial_versions())} - {draw(partial_versions())}"


@given(versions)
def test_version_str_round_trip(version: Version) -> None:
    assert Version.parse(str(version)) == version
    assert Version.from_tag(f"v{version}") == version


@given(versions, versions, versions)
def test_order_is_total_and_survives_round_trip(a: Version, b: Version, c: Version) -> None:
    assert [a < b, a == b, a > b].count(True) == 1
    assert (a < b) == (Version.parse(str(a)) < Version.parse(str(b)))
    if a <= b and b <= c:
        assert a <= c
    if (a.major, a.minor, a.patch) != (b.major, b.minor, b.patch):
        assert (a < b) == ((a.major, a.minor, a.patch) < (b.major, b.minor, b.patch))
    elif a.is_prerelease != b.is_prerelease:
        assert (a < b) == a.is_prerelease


@given(releases, releases)
def test_caret_tilde_and_wildcard_follow_their_definitions(base: Version, version: Version) -> None:
    core = (base.major, base.minor, base.patch)
    significant = next((i for i, part in enumerate(core) if part), 2)  # left-most non-zero part
    same = lambda n: (version.major, version.minor, version.patch)[: n + 1] == core[: n + 1]  # noqa: E731
    assert Range.parse(f"^{base}").contains(version) == (version >= base and same(significant))
    assert Range.parse(str(base)).contains(version) == (version >= base and same(significant))
    assert Range.parse(f"~{base}").contains(version) == (version >= base and same(1))
    assert Range.parse(f"{base.major}.{base.minor}.x").contains(version) == same(1)
    assert Range.parse(f"{base.major}.*").contains(version) == same(0)
    assert Range.parse(f"^{base}").contains(base)


@given(comparator_sets(), comparator_sets(), versions)
def test_union_contains_iff_either_side(left: str, right: str, version: Version) -> None:
    expected = Range.parse(left).contains(version) or Range.parse(right).contains(version)
    assert Range.parse(f"{left} || {right}").contains(version) == expected


@given(comparator_sets(), comparator_sets(), versions)
def test_comma_intersects(left: str, right: str, version: Version) -> None:
    both = Range.parse(left).contains(version) and Range.parse(right).contains(version)
    joined = Range.parse(f"{left}, {right}").contains(version)
    assert joined == Range.parse(f"{left} {right}").contains(version)
    if version.is_prerelease:
        # One side's prerelease comparator admits the version for the whole set.
        assert joined >= both
    else:
        assert joined == both


@given(comparator_sets(), versions)
def test_normalized_form_round_trips_and_ignores_build(text: str, version: Version) -> None:
    parsed = Range.parse(text)
    reparsed = Range.parse(str(parsed))
    assert reparsed.alternatives == parsed.alternatives
    assert reparsed.contains(version) == parsed.contains(version)
    assert parsed.contains(version) == parsed.contains(Version(version.major, version.minor, version.patch,
                                                               version.prerelease))  # fmt: skip


@given(comparator_sets(), st.lists(versions, max_size=8))
def test_best_is_the_highest_satisfying(text: str, candidates: list[Version]) -> None:
    requirement = Range.parse(text)
    best = requirement.best(candidates)
    satisfying = [version for version in candidates if requirement.contains(version)]
    if best is None:
        assert satisfying == []
    else:
        assert best in candidates and requirement.contains(best)
        assert not any(version > best for version in satisfying)


@given(st.one_of(st.text(), st.from_regex(r"v?[0-9x.]{1,8}(-[a-z0-9.]{0,4})?", fullmatch=True)))
def test_from_tag_accepts_only_full_versions(tag: str) -> None:
    version = Version.from_tag(tag)
    if version is not None:
        assert str(version) == tag.removeprefix("v")  # every accepted tag is canonical SemVer


# The deliberate differences from node-semver (docs/kernelpin.md, "Where kernelpin differs from npm").
# (range, version, kernelpin's answer); node-semver answers the opposite.
DIFFERENCES = [
    ("1.2", "1.5.0", True),  # a bare version is a caret (Cargo); npm: 1.2.x
    ("1.2.3", "1.5.0", True),  # npm: exactly 1.2.3
    ("* || >=2.0.0-beta", "2.0.0-beta.1", True),  # npm collapses the whole range to `*`
    (">=2.0.0-beta || *", "2.0.0-beta.1", True),
]
BUILD_TIE = (["1.2.3+a", "1.2.3+b"], "^1")  # SemVer: equal precedence; kernelpin: the greater build wins

NODE_SEMVER = """
const semver = require("semver");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify({
  satisfies: input.rows.map(([range, version]) => semver.satisfies(version, range)),
  best: [input.tie[0], [...input.tie[0]].reverse()].map((list) => semver.maxSatisfying(list, input.tie[1])),
}));
"""


def _node_semver(rows: list[tuple[str, str]]) -> dict:
    """node-semver's answers, from the `semver` package tools/ci/node pins (./dev setup installs it)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the node-semver comparison needs it")
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    found = subprocess.run([node, "-e", "require.resolve('semver')"], capture_output=True, env=env)
    if found.returncode != 0:
        pytest.fail(f"node-semver is not installed in {NODE_MODULES}: run ./dev setup (npm ci --prefix tools/ci/node)")
    done = subprocess.run(
        [node, "-e", NODE_SEMVER],
        input=json.dumps({"rows": rows, "tie": BUILD_TIE}),
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout)


def test_node_semver_agrees_except_where_documented() -> None:
    bare = re.compile(r"v?\d+(\.\d+){0,2}")  # a bare version: caret here, exact or x-range in npm
    agreeing = [(text, version, expected) for text, version, expected in CONTAINS if not bare.fullmatch(text)]
    rows = [(text, version) for text, version, _ in agreeing + DIFFERENCES]
    node = _node_semver([(text.replace(",", " "), version) for text, version in rows])  # `,`: Cargo's spelling
    expected = [expected for _, _, expected in agreeing] + [not ours for _, _, ours in DIFFERENCES]
    assert dict(zip(map(tuple, rows), node["satisfies"], strict=False)) == dict(zip(rows, expected, strict=False))
    for text, version, ours in DIFFERENCES:
        assert Range.parse(text).contains(Version.parse(version)) is ours
    # npm's maxSatisfying keeps whichever tie comes first; kernelpin picks the greater build either way.
    candidates, text = BUILD_TIE
    assert node["best"] == [candidates[0], candidates[1]]
    assert {
        str(Range.parse(text).best([Version.parse(v) for v in order])) for order in (candidates, candidates[::-1])
    } == {"1.2.3+b"}


HUGE = "9" * 4301  # one digit past Python's int-conversion limit


@pytest.mark.parametrize(
    "text",
    [f"1.0.{HUGE}", f"{HUGE}.0.0", f"1.0.0-{HUGE}", "1.0." + "9" * 21],
    ids=["patch", "major", "prerelease", "21-digits"],
)
def test_huge_numbers_are_version_errors(text: str) -> None:
    with pytest.raises(VersionError, match=r"has \d+ digits; at most 20 are allowed"):
        Version.parse(text)
    with pytest.raises(RangeError, match=r"has \d+ digits; at most 20 are allowed"):
        Range.parse(f">={text}")
    # One hostile tag must not crash resolution for everyone: it is simply not a version.
    assert Version.from_tag(f"v{text}") is None
    assert Version.parse("1.0." + "9" * 20).patch == 10**20 - 1


@pytest.mark.parametrize("text", ["x" * 10_000, "^1 <" + "1" * 10_000, "1.2.3 " + "?" * 10_000])
def test_error_messages_quote_only_the_start_of_long_input(text: str) -> None:
    for parse in (Range.parse, Version.parse):
        with pytest.raises(ValueError) as caught:
            parse(text)
        message = str(caught.value)
        assert len(message) < 600 and f"({len(text)} characters)" in message
