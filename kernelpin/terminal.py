"""What kernelpin prints to a terminal: every string with its control characters escaped.

Text from a server (a path or a name in a listing, the message of an error page) could hold ESC sequences
that clear the screen or recolour it, a carriage return or newline that fakes an output line, or a Unicode
direction override that shows text reordered. rich passes all of these through, so kernelpin's consoles
render every string (messages, table cells, titles) through `printable`; `--json` output is escaped by JSON.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

# C0 but newline and tab (kernelpin's own multi-line messages), DEL, C1, and the bidirectional controls.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with each control character written as its escape (`\\x1b`, `\\u202e`)."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


class SafeConsole(Console):
    """A rich Console that renders every string through `printable`."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)
