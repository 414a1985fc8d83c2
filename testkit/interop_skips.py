"""The skip policy of the interop and differential suites (tests/interop_suites.toml): a skip there is a failure
unless the list allows it with a reason. tests/conftest.py applies it to every test and module report."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

LIST = Path(__file__).resolve().parents[1] / "tests" / "interop_suites.toml"


@dataclass(frozen=True)
class SkipPolicy:
    suites: tuple[str, ...]
    allowed: dict[str, str]  # node id (or prefix) -> reason

    @classmethod
    def read(cls, path: Path = LIST) -> SkipPolicy:
        document = tomllib.loads(path.read_text())
        allowed = {entry["test"]: entry["reason"] for entry in document.get("allowed-skip", [])}
        if any(not reason.strip() for reason in allowed.values()):
            raise ValueError(f"{path}: every allowed skip needs a reason")
        return cls(tuple(document["suites"]), allowed)

    def problem(self, nodeid: str, reason: str) -> str | None:
        """Why skipping `nodeid` (for `reason`) fails the run, or None when it may be skipped."""
        path = nodeid.split("::", 1)[0]
        if path not in self.suites or any(nodeid.startswith(test) for test in self.allowed):
            return None
        return (
            f"{nodeid} skipped ({reason}) in an interop suite: a judge that cannot run is a failed check. "
            f"Install what it needs, or list it with a reason under [[allowed-skip]] in {LIST.name}"
        )
