"""Count the places a call follows through kernelpin's load front: every function of the front's own modules that
runs, and each function the front calls outside them (a door into another room: its inside is that room's
business, not the front's). sys.setprofile (and threading's, for the threads the call starts) sees every call; a
place is a (module, qualified function name); a room is kernelpin's subpackage or top-level module, as
tests/kernelpin/package/test_structure.py names them. Comprehensions and generator expressions belong to the function that
holds them (Python 3.12 inlines them). A thread's work belongs to the room whose function it runs: a thread running a
front function is the front's (counted as such), one running another room's function is that room's inside."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType
from typing import Any

import kernelpin

PACKAGE = Path(kernelpin.__file__).resolve().parent
RECORDS = str(PACKAGE / "records.py")
_INLINE = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}


def _module(frame: FrameType) -> str | None:
    """The kernelpin module `frame` runs in (`loading.front`), None outside kernelpin, in an inlined body or in a
    record's __init__, __eq__, ... (kernelpin.records: they stand for the methods dataclass generates, which run
    in "<string>")."""
    code = frame.f_code
    root = str(PACKAGE) + "/"
    if not code.co_filename.startswith(root) or code.co_name in _INLINE or code.co_filename == RECORDS:
        return None
    return ".".join(Path(code.co_filename[len(root) :]).with_suffix("").parts)


def visited(call: Callable[[], Any], front: Collection[str]) -> set[tuple[str, str]]:
    """The places `call` visits following the load front, whose modules are `front` (dotted names below kernelpin:
    `loading.front`, or a room: `front`)."""
    seen: set[tuple[str, str]] = set()

    def in_front(module: str) -> bool:
        return any(module == name or module.startswith(name + ".") for name in front)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or (module := _module(frame)) is None:
            return
        outer, door = frame.f_back, in_front(module)
        while outer is not None:  # a place: every kernelpin function above it is the front's, and there is one
            above = _module(outer)
            if above is not None and not in_front(above):
                return
            door = door or above is not None
            outer = outer.f_back
        if door:
            seen.add((module, frame.f_code.co_qualname))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return seen


def rooms(places: Collection[tuple[str, str]]) -> set[str]:
    return {module.split(".")[0] for module, _ in places}
