"""format/nesting.py: the bound on parsed data's depth that every TOML reader applies, whatever the interpreter's
recursion limit (tests/kernelpin/format/test_deep_input.py runs the readers under two limits)."""

from __future__ import annotations

import pytest

from kernelpin.format.nesting import MAX_NESTING, NestedTooDeep, within_nesting


def nested(depth: int) -> list[object]:
    """A list `depth` levels deep: [[[...]]]."""
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_the_nesting_bound_is_exact_and_walks_without_recursion() -> None:
    assert within_nesting({"a": nested(100)}, limit=101) == {"a": nested(100)}
    with pytest.raises(NestedTooDeep, match=f"nested more than {MAX_NESTING} deep"):
        within_nesting({"a": nested(100)})
    with pytest.raises(NestedTooDeep):
        within_nesting(nested(50_000))  # far past any recursion limit: the walk keeps its own stack


def test_scalars_and_strings_are_not_nesting() -> None:
    document = {"a": "[" * 1000, "b": 1, "c": [{"d": [1, 2]}]}
    assert within_nesting(document, limit=4) is document  # dict, list, dict, list: four levels
