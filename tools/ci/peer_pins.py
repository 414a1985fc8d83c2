"""Whether the benchmarks' peers are pinned at their newest release on the index pip installs from.

    python -m tools.ci.peer_pins [--index-url URL]

benchmarks/bench_op.py compares the op with OpenCV, PIL (pillow, and pillow-simd in its own environment) and torch
eager at the versions requirements/ pins. A pin left behind hides a faster peer: OpenCV 5.0 -> 5.1 made
cvtColor(RGB2GRAY) 1.7-1.8x faster while requirements/dev.txt still pinned 5.0 (issue 54). This asks pip
(`pip index versions`, so pip's own configuration: index, extra indexes, find-links) for each peer's newest release
and exits 1 naming every pin behind it. Where the index cannot be reached it says so and exits 0: the check needs
the index, and an offline run has nothing to compare against.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[2]
# The files that pin the benchmarks' peers, and the peers (the libraries bench_op.py times against the op).
REQUIREMENTS = (ROOT / "requirements" / "dev.txt", ROOT / "requirements" / "bench-pillow-simd.txt")
PEERS = ("opencv-python-headless", "pillow", "pillow-simd", "torch")
# Pins held behind the index on purpose: name -> (the newest release when that was decided, why). A release newer
# than the one recorded makes the pin stale again, so the decision is taken anew.
HELD: dict[str, tuple[Version, str]] = {
    "torch": (
        Version("2.15.0"),
        (
            "torch is the platform the op and every test build against, not only a timed peer: CI installs the "
            "CPU-only 2.13.0 wheel from a local mirror, while 2.14/2.15 are multi-GB CUDA wheels on PyPI (PyTorch's "
            "CPU index is not reachable here)"
        ),
    ),
}
# A package every index serves: asked first, so that "unreachable" and "no such release" are told apart.
PROBE = "pip"


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    source: Path


@dataclass(frozen=True)
class Stale:
    pin: Pin
    newest: Version

    def message(self) -> str:
        source = self.pin.source.relative_to(ROOT) if self.pin.source.is_relative_to(ROOT) else self.pin.source
        return (
            f"{self.pin.name}=={self.pin.version} ({source}) is behind {self.newest}, "
            f"the newest release on the index: pin {self.newest} and re-run the benchmarks against it"
        )


def pins(text: str, source: Path) -> dict[str, Pin]:
    """The exact pins (`name==version`) of a requirements file's text, by canonical name."""
    found: dict[str, Pin] = {}
    for line in text.splitlines():
        requirement = line.split("#", 1)[0].strip()
        name, separator, version = requirement.partition("==")
        if not separator:
            continue
        canonical = str(canonicalize_name(name.strip()))
        try:
            found[canonical] = Pin(canonical, Version(version.strip()), source)
        except InvalidVersion:
            raise ValueError(f"{source}: {line.strip()!r} is not a version pin; write name==version") from None
    return found


def peer_pins(files: Sequence[Path] = REQUIREMENTS, peers: Sequence[str] = PEERS) -> list[Pin]:
    """The pins of the peers in `files` (a peer pinned nowhere is not one the benchmarks use)."""
    every: dict[str, Pin] = {}
    for path in files:
        if path.is_file():
            every |= pins(path.read_text(), path)
    return [every[canonicalize_name(peer)] for peer in peers if canonicalize_name(peer) in every]


def newest_listed(pip_output: str) -> Version | None:
    """The newest release in `pip index versions NAME`'s output (its first line: `NAME (VERSION)`)."""
    match = re.search(r"^\S+ \(([^)]+)\)\s*$", pip_output, re.MULTILINE)
    return Version(match.group(1)) if match else None


def stale(
    pinned: Sequence[Pin], newest: Mapping[str, Version | None], held: Mapping[str, tuple[Version, str]] = HELD
) -> list[Stale]:
    """The pins behind the newest release, comparing public versions (2.13.0 and 2.13.0+cpu are one release); a
    held pin only once a release newer than the one its decision recorded appears."""
    behind = []
    for pin in pinned:
        release = newest.get(pin.name)
        floor = held[pin.name][0] if pin.name in held else pin.version
        if release is not None and Version(release.public) > Version(floor.public):
            behind.append(Stale(pin, release))
    return behind


def ask_pip(
    name: str, pip_args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check", *pip_args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else None,
        timeout=300,
        check=False,
    )


def unreachable(pip_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> str | None:
    """None where the index answers, else why not (pip's last line of error)."""
    probe = ask_pip(PROBE, pip_args, env)
    if probe.returncode == 0 and newest_listed(probe.stdout) is not None:
        return None
    lines = [line for line in probe.stderr.splitlines() if line.strip() and not line.startswith("WARNING: pip index")]
    return lines[-1].strip() if lines else f"pip index versions {PROBE} exited {probe.returncode}"


def newest_releases(
    names: Sequence[str], pip_args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> dict[str, Version | None]:
    """Each name's newest release on the index (None: the index has none)."""
    return {name: newest_listed(ask_pip(name, pip_args, env).stdout) for name in names}


def check(
    files: Sequence[Path] = REQUIREMENTS, pip_args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> tuple[int, list[str]]:
    """(exit status, lines to print): 1 and one line per pin behind the index, 0 when all are current or the index
    is unreachable (said so)."""
    reason = unreachable(pip_args, env)
    if reason is not None:
        return 0, [f"skipped: the package index is unreachable ({reason}); the peers' pins were not checked"]
    pinned = peer_pins(files)
    newest = newest_releases([pin.name for pin in pinned], pip_args, env)
    behind = stale(pinned, newest)
    stale_pins = {s.pin for s in behind}
    lines = [f"{pin.name}=={pin.version}: {_status(pin, newest[pin.name])}" for pin in pinned if pin not in stale_pins]
    return (1 if behind else 0), lines + [s.message() for s in behind]


def _status(pin: Pin, newest: Version | None) -> str:
    if newest is None:
        return "not on the index"
    if pin.name in HELD and Version(pin.version.public) < Version(newest.public):
        return f"held (newest {newest}): {HELD[pin.name][1]}"
    return f"current (newest {newest})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-url", help="ask this index instead of pip's configured one")
    args = parser.parse_args(argv)
    status, lines = check(pip_args=["--index-url", args.index_url] if args.index_url else [], env=os.environ)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
