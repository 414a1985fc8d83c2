"""kernelpin.format.conda_package: where a kernel's conda package puts its Hub variant, and conda-meta records read
strictly (the hostile ones verify-conda must refuse in one line)."""

from __future__ import annotations

import json

import pytest

from kernelpin.format.conda_package import (
    MAX_RECORD_BYTES,
    CondaRecordError,
    parse_prefix_record,
    variant_directory,
)

FN = "img2gray-0.1.0-cpu_stableabi211_hdc28760_100.conda"
SHA = "2f6eaaa3918741a5701d5902a167535a3a26b91e78b7c2ce1f84c4703cea95e5"
FILES = [
    "etc/conda/test-files/img2gray/1/check_img2gray.py",
    "lib/python3.11/site-packages/img2gray/__init__.py",
    "lib/python3.11/site-packages/img2gray/metadata.json",
    "lib/python3.11/site-packages/img2gray/img2gray/__init__.py",
]


def record(**changes: object) -> bytes:
    document = {"name": "img2gray", "version": "0.1.0", "build": "cpu_stableabi211_hdc28760_100", "fn": FN}
    document |= {"sha256": SHA, "subdir": "linux-64", "channel": "https://prefix.dev/acme", "files": FILES}
    document |= changes
    return json.dumps(document).encode()


def test_the_variant_directory_of_an_archive_and_of_a_prefix():
    assert variant_directory(FILES, "x") == "lib/python3.11/site-packages/img2gray"
    assert (
        variant_directory(["site-packages/img2gray/metadata.json", "info/index.json"], "x") == "site-packages/img2gray"
    )
    assert (
        variant_directory(["lib/python3.13t/site-packages/k/metadata.json"], "x") == "lib/python3.13t/site-packages/k"
    )


@pytest.mark.parametrize(
    "paths",
    [[], ["site-packages/a/metadata.json", "site-packages/b/metadata.json"], ["site-packages/a/b/metadata.json"]],
)
def test_no_variant_or_several_are_refused(paths):
    with pytest.raises(CondaRecordError, match="expected one kernel variant"):
        variant_directory(paths, "pkg")


def test_a_record_as_rattler_writes_it():
    found = parse_prefix_record(record(), "conda-meta/x.json")
    assert (found.name, found.filename, found.sha256, found.subdir) == ("img2gray", FN, SHA, "linux-64")
    assert found.files == tuple(FILES)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff{", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"name": "a", "name": "b"}', "appears twice"),
        (record(files=[*FILES, "../../etc/passwd"]), "an installed path is unsafe"),
        (record(files=["/etc/passwd"]), "an installed path is unsafe"),
        (record(files="lib"), "'files' is not a list"),
        (record(sha256="ABC"), "'sha256' is not 64"),
        (record(fn="../x.conda"), "holds a path"),
        (record(name=7), "'name' is not a short string"),
        (b"[" * 100_000, "not JSON"),
        (b" " * (MAX_RECORD_BYTES + 1), "over the"),
    ],
)
def test_a_hostile_record_is_refused_in_one_line(content, message):
    with pytest.raises(CondaRecordError, match=message) as refused:
        parse_prefix_record(content, "conda-meta/img2gray.json")
    assert "\n" not in str(refused.value) and "reinstall the package" in str(refused.value)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"url": f"https://prefix.dev/acme/linux-64/{FN}"}, ("https://prefix.dev/acme", "linux-64")),  # rattler, conda
        ({"channel": "https://prefix.dev/acme/"}, ("https://prefix.dev/acme", "linux-64")),  # rattler without url
        ({"channel": "https://conda.anaconda.org/acme/linux-64"}, ("https://conda.anaconda.org/acme", "linux-64")),
        ({"channel": "conda-forge"}, None),  # a name, no URL
    ],
)
def test_the_channel_a_package_came_from(changes, expected):
    from kernelpin.format.conda_package import package_channel

    assert package_channel(parse_prefix_record(record(**changes), "x")) == expected
