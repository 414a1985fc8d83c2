"""The fenced code blocks of a Markdown document, for the tests that run the docs' examples as written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# A block is skipped by the doc tests only where the document says why, in a comment just above the fence.
COMMENT = re.compile(r"<!--\s*(?P<text>.+?)\s*-->\s*$")
NOT_RUN = re.compile(r"not run by (?P<by>\S+?):\s*(?P<reason>.+)$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w+-]*)\s*$")


@dataclass(frozen=True)
class CodeBlock:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    comment: str | None  # an HTML comment on the line above the fence: how the doc tests are to treat it

    @property
    def not_run(self) -> str | None:
        """The stated reason, when the document marks the block as not run."""
        marker = NOT_RUN.match(self.comment or "")
        return marker["reason"] if marker else None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def code_blocks(path: Path) -> list[CodeBlock]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[CodeBlock] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent = opening["indent"]
        end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path.name}:{index + 1}: code fence never closed")
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        comment = COMMENT.search(previous)
        blocks.append(
            CodeBlock(
                path, index + 1, opening["language"], "\n".join(body) + "\n", comment["text"] if comment else None
            )
        )
        index = end + 1
    return blocks
