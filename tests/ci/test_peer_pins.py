"""tools/ci/peer_pins.py: the benchmarks' peers against the newest release on the package index.

The parsing and the comparison on their own; the whole check through real pip against a local PEP 503 index made
here (one pinned peer behind it, one current); and the project's own pins against the index pip is configured
with, one test per peer, skipped where that index is unreachable.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from packaging.version import Version

from tools.ci import peer_pins
from tools.ci.peer_pins import ROOT, Pin, newest_listed, pins, stale


def test_pins_are_the_exact_pins_by_canonical_name():
    text = "# a comment\nOpenCV_Python_Headless==5.1.0.95  # why\ntorch>=2.0\n\npillow == 13.0.0\n"
    found = pins(text, ROOT / "requirements" / "dev.txt")
    assert {name: str(pin.version) for name, pin in found.items()} == {
        "opencv-python-headless": "5.1.0.95",
        "pillow": "13.0.0",
    }


def test_a_pin_that_is_no_version_is_refused_by_line():
    with pytest.raises(ValueError, match=r"'pillow==latest' is not a version pin; write name==version"):
        pins("pillow==latest\n", ROOT / "requirements" / "dev.txt")


def test_newest_listed_reads_pips_first_line():
    output = "opencv-python-headless (5.1.0.95)\nAvailable versions: 5.1.0.95, 5.0.0.93\n"
    assert newest_listed(output) == Version("5.1.0.95")
    assert newest_listed("") is None


def pin(name: str, version: str) -> Pin:
    return Pin(name, Version(version), ROOT / "requirements" / "dev.txt")


def test_stale_compares_public_versions():
    pinned = [pin("torch", "2.13.0"), pin("pillow", "13.0.0"), pin("opencv-python-headless", "5.0.0.93")]
    newest = {"torch": Version("2.13.0+cpu"), "pillow": None, "opencv-python-headless": Version("5.1.0.95")}
    assert [(s.pin.name, str(s.newest)) for s in stale(pinned, newest)] == [("opencv-python-headless", "5.1.0.95")]
    assert (
        stale([pin("torch", "2.13.0")], {"torch": Version("2.15.0")}, held={})[0]
        .message()
        .startswith(
            "torch==2.13.0 (requirements/dev.txt) is behind 2.15.0, the newest release on the index: pin 2.15.0"
        )
    )


def local_index(root: Path, releases: dict[str, list[str]]) -> str:
    """A PEP 503 simple index of sdist links (pip index versions reads the listing; nothing is downloaded)."""
    for name, versions in [("pip", ["26.0"]), *releases.items()]:
        folder = root / "simple" / name
        folder.mkdir(parents=True)
        links = "".join(f'<a href="{name}-{v}.tar.gz">{name}-{v}.tar.gz</a>\n' for v in versions)
        (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return (root / "simple").as_uri()


def pip_environment() -> dict[str, str]:
    """This environment without pip's configuration (its find-links and extra indexes would answer too)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("PIP_")} | {
        "PIP_CONFIG_FILE": os.devnull
    }


def test_a_held_pin_passes_until_a_release_newer_than_its_decision_appears():
    """torch is held at 2.13.0 on purpose (peer_pins.HELD says why): 2.15.0, known when that was decided, is not
    stale; a later release is, so the decision is taken anew."""
    pin = Pin("torch", Version("2.13.0"), ROOT / "requirements" / "dev.txt")
    held = {"torch": (Version("2.15.0"), "why")}
    assert stale([pin], {"torch": Version("2.15.0")}, held) == []
    assert [s.newest for s in stale([pin], {"torch": Version("2.16.0")}, held)] == [Version("2.16.0")]
    assert [s.newest for s in stale([pin], {"torch": Version("2.15.0")}, {})] == [Version("2.15.0")]


def test_a_pin_behind_the_index_fails_the_check_by_name(tmp_path):
    url = local_index(tmp_path / "index", {"opencv-python-headless": ["5.0.0.93", "5.1.0.95"], "pillow": ["13.0.0"]})
    requirements = tmp_path / "dev.txt"
    requirements.write_text("opencv-python-headless==5.0.0.93\npillow==13.0.0\n")
    status, lines = peer_pins.check([requirements], ["--index-url", url], pip_environment())
    assert status == 1, lines
    assert "pillow==13.0.0: current (newest 13.0.0)" in lines
    assert any(line.startswith("opencv-python-headless==5.0.0.93") and "behind 5.1.0.95" in line for line in lines)
    requirements.write_text("opencv-python-headless==5.1.0.95\npillow==13.0.0\n")
    assert peer_pins.check([requirements], ["--index-url", url], pip_environment())[0] == 0


def test_an_unreachable_index_skips_saying_so(tmp_path):
    url = (tmp_path / "nowhere").as_uri()
    status, lines = peer_pins.check([ROOT / "requirements" / "dev.txt"], ["--index-url", url], pip_environment())
    assert status == 0
    assert lines[0].startswith("skipped: the package index is unreachable"), lines


@pytest.fixture(scope="module")
def index_answers() -> None:
    reason = peer_pins.unreachable()
    if reason is not None:
        pytest.skip(f"the package index pip is configured with is unreachable ({reason}): pins not checked")


@pytest.mark.parametrize("peer", peer_pins.PEERS)
def test_each_peer_is_pinned_at_the_newest_release(index_answers, peer):
    pinned = {pin.name: pin for pin in peer_pins.peer_pins()}
    assert peer in pinned, f"{peer} is pinned in none of {[str(p) for p in peer_pins.REQUIREMENTS]}"
    behind = stale([pinned[peer]], peer_pins.newest_releases([peer]))
    assert not behind, behind[0].message()
