"""Issue 48, finding 6: every validator matches the whole string. `$` also matches before a trailing newline, so
`re.compile(r"^[0-9a-f]{40}$").match` let `<40 hex digits>\\n` through (a refs answer locked as is, a cache
directory with a newline in its name). The scan below fails on any pattern with a `$` that is used with
match/search (every compiled one counts: a compiled pattern may be handed to a helper that calls .match)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import GIT_OBJECT_ID_RE, SHA256_HEX_RE, is_commit
from kernelpin.format import lockfile
from kernelpin.format.kernel_status import parse_status
from kernelpin.format.spec import check_repo_id, is_repo_id
from kernelpin.hub.listing import parse_refs
from tests.kernelpin.helpers import REPO_ROOT

SCANNED = ("kernelpin", "tools", "testkit")
ANCHOR_CALLS = {"compile", "match", "search"}  # re.fullmatch anchors both ends itself


def _pattern_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # rf"^{PART}/{PART}$": the literal parts carry the anchors
        return "".join(part.value for part in node.values if isinstance(part, ast.Constant))
    return None


def _multiline(call: ast.Call) -> bool:
    flags = [*call.args[1:], *(keyword.value for keyword in call.keywords)]
    return any("MULTILINE" in ast.unparse(flag) or ast.unparse(flag) == "re.M" for flag in flags)


def dollar_outside_classes(pattern: str) -> bool:
    """Whether `pattern` has an unescaped `$` outside a character class (an end anchor)."""
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            return True
    return False


def dollar_anchored_patterns(root: Path, folders: tuple[str, ...] = SCANNED) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr in ANCHOR_CALLS
                    and node.args
                ):
                    continue
                text = _pattern_text(node.args[0])
                if text is not None and dollar_outside_classes(text) and not _multiline(node):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {text!r}")
    return found


def test_no_validator_lets_a_trailing_newline_through() -> None:
    assert dollar_anchored_patterns(REPO_ROOT) == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        'import re\nA = re.compile(r"^[0-9]{3}$")\nB = re.compile(r"^[$]x\\Z")\nC = re.search(rf"^{A}$", "x")\n'
        'D = re.fullmatch(r"x$", "x")\nE = re.search(r"^x$", "x", re.MULTILINE)\nF = re.match(r"a\\$", "a$")\n'
    )
    assert [line.split(":")[1] for line in dollar_anchored_patterns(tmp_path, ("pkg",))] == ["2", "4"]


HEX40, HEX64 = "0123456789abcdef" * 2 + "01234567", "ab" * 32


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "\x00"])
def test_each_validator_refuses_a_trailing_newline(tail: str) -> None:
    assert GIT_OBJECT_ID_RE.match(HEX40 + tail) is None and SHA256_HEX_RE.match(HEX64 + tail) is None
    assert is_repo_id("acme/x") and not is_repo_id("acme/x" + tail)
    with pytest.raises(KernelpinError):
        check_repo_id("acme/x" + tail)
    assert lockfile.is_variant_name("torch213-cxx11-cpu-x86_64-linux")
    assert not lockfile.is_variant_name("torch213-cxx11-cpu-x86_64-linux" + tail)
    with pytest.raises(KernelpinError, match="destination"):
        parse_status(f'kind = "redirect"\ndestination = {json.dumps("acme/x" + tail)}\n'.encode(), "here")


def test_a_refs_answer_with_a_newline_after_the_commit_is_refused() -> None:
    answer = {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": HEX40 + "\n"}], "tags": []}
    with pytest.raises(KernelpinError, match="is not 40 lowercase hex digits"):
        parse_refs(answer, "model", "acme/x refs", 100)


def test_a_commit_id_is_forty_lowercase_hex_digits_and_nothing_more() -> None:
    assert is_commit(HEX40)
    assert not any(is_commit(text) for text in (HEX40.upper(), HEX40[:-1], HEX40 + "0", HEX40 + "\n", "g" * 40, ""))
