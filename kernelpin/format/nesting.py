"""A bound on how deeply parsed data may nest, the same in every interpreter.

tomllib, tomlkit and json parse nested arrays and tables recursively, so whether 1 KB of `[[[[...]]]]` ends in
RecursionError depends on the host's recursion limit (torch.compile raises it to 2000, hypothesis moves it): the
same hostile file was refused in one process and parsed in another. Every TOML and JSON reader catches
RecursionError and puts what it parsed through `within_nesting`, so deep input gets its refusal whatever the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

MAX_NESTING = 100  # far beyond any file kernelpin reads (a lock or a pyproject.toml nests under 10 deep)

Parsed = TypeVar("Parsed")


class NestedTooDeep(RecursionError):
    """Parsed data nested deeper than MAX_NESTING: a RecursionError, so the readers' existing refusals apply."""


def within_nesting(value: Parsed, limit: int = MAX_NESTING) -> Parsed:
    """`value` itself; NestedTooDeep when its dicts and lists nest more than `limit` deep (walked with a stack
    of its own, so the check itself cannot recurse too deep)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = list(item)
        else:
            continue
        if depth >= limit:
            raise NestedTooDeep(f"nested more than {limit} deep")
        stack.extend((child, depth + 1) for child in children)
    return value
