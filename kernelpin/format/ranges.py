"""Semantic versions and version ranges with npm / Cargo semantics.

Range syntax (node-semver, with Cargo's reading of a bare version):
  ``^1.2.3`` ``~1.2`` ``1.x`` ``1.2.*`` ``*`` ``1.2.3 - 2.3`` ``<`` ``<=`` ``>`` ``>=`` ``=``,
  comparators joined by spaces or commas (intersection), ``||`` between alternatives (union).
  A bare version without wildcards is a caret requirement (``1.2`` means ``^1.2``, as in Cargo);
  ``=1.2.3`` is exact. A leading ``v`` on a version is allowed. The empty range is an error.

Prereleases: a prerelease version satisfies an alternative only if it satisfies every comparator
and some comparator of that alternative names a prerelease of the same MAJOR.MINOR.PATCH.
"""

from __future__ import annotations

import operator
import re
import string
from collections.abc import Callable, Iterable, Iterator
from functools import total_ordering

from kernelpin.errors import KernelpinError
from kernelpin.records import record

__untrusted_input__ = (
    "Version.parse",
    "Version.from_tag",
    "Range.parse",
)  # parsers of input kernelpin does not control (kernelpin.errors)

_NUMBER = re.compile(r"0|[1-9][0-9]*")
MAX_DIGITS = 20  # enough for any 64-bit number (Cargo's limit); longer ones are typos or attacks
_ECHO_LIMIT = 60  # characters of the input quoted back in an error message
_IDENTIFIER = r"[0-9A-Za-z-]+"  # compiled when first used (re caches it): most runs read no pre-release
_WILDCARDS = ("x", "X", "*")
_PART_NAMES = ("major", "minor", "patch")
_VERSION_EXAMPLES = 'examples: "1.2.3", "0.1.0-rc.1", "1.0.0+build.5"'
_RANGE_EXAMPLES = 'examples: "^0.1", "~1.2.3", ">=1.2, <2", "1.x || 2.x"'


class RangeError(KernelpinError, ValueError):
    """A version range that cannot be parsed; the message names the problem and its position."""


class VersionError(KernelpinError, ValueError):
    """A version string that is not strict SemVer 2.0.0."""


class _Problem(Exception):
    """What is wrong with one version token; the caller adds the context."""


def _echo(text: str) -> str:
    """The input quoted in a message, cut short: a 10,000-character range must not make a 30 KB error."""
    if len(text) <= _ECHO_LIMIT:
        return repr(text)
    return f"{text[:_ECHO_LIMIT]!r}... ({len(text)} characters)"


def _number(part: str, what: str) -> int:
    if len(part) > MAX_DIGITS:
        raise _Problem(f"{what} has {len(part)} digits; at most {MAX_DIGITS} are allowed")
    return int(part)


# What SemVer orders versions by (Version._precedence): major, minor, patch, release, prerelease identifiers.
_Precedence = tuple[int, int, int, bool, tuple[tuple[int, int, str], ...]]


@total_ordering
@record
class Version:
    """A SemVer 2.0.0 version.

    Ordering is SemVer precedence (§11); build metadata does not change precedence, it only breaks
    ties so that the order is total and agrees with ``==`` (as Cargo's ``semver`` crate does).
    Range matching ignores build metadata entirely.
    """

    major: int
    minor: int
    patch: int
    prerelease: tuple[str | int, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse a strict SemVer string such as ``1.2.3-rc.1+b5``; raise VersionError otherwise."""
        try:
            partial = _parse_partial(text)
            if None in partial.numbers:
                raise _Problem("a version needs MAJOR.MINOR.PATCH, all numbers")
        except _Problem as problem:
            raise VersionError(f"invalid version {_echo(text)}: {problem}; {_VERSION_EXAMPLES}") from None
        return partial.lower()

    @classmethod
    def from_tag(cls, tag: str) -> Version | None:
        """The version a git tag such as ``v1.2.3`` or ``1.2.3-rc.1`` names; None for any other tag.

        Only full versions count: ``v1.2``, ``main`` and ``release-1`` are not release tags.
        """
        try:
            return cls.parse(tag.removeprefix("v"))
        except VersionError:
            return None

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def _precedence(self) -> _Precedence:
        # Numeric identifiers sort below alphanumeric ones; a release sorts above its prereleases.
        identifiers = tuple((1, 0, part) if isinstance(part, str) else (0, part, "") for part in self.prerelease)
        return (self.major, self.minor, self.patch, not self.prerelease, identifiers)

    def same_precedence(self, other: Version) -> bool:
        """One release under SemVer precedence: build metadata aside, `1.0.0` and `1.0.0+rebuild` are equal."""
        return self._precedence == other._precedence

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return (self._precedence, self.build) < (other._precedence, other.build)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(part) for part in self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


_COMPARISONS: dict[str, Callable[[_Precedence, _Precedence], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
}


@record
class Comparator:
    """One primitive comparison such as ``>=1.2.0``; every range desugars to these."""

    op: str
    version: Version

    def test(self, version: Version) -> bool:
        return _COMPARISONS[self.op](version._precedence, self.version._precedence)

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


@record
class Range:
    """A parsed version range: ``alternatives`` joined by ``||``, each an intersection of comparators.

    An empty alternative (from ``*``) accepts every release.
    """

    text: str
    alternatives: tuple[tuple[Comparator, ...], ...]

    @classmethod
    def parse(cls, text: str) -> Range:
        """Parse a range such as ``^0.1``, ``>=1.2, <2`` or ``1.x || 2.x``; raise RangeError otherwise."""
        if not text.strip():
            problem = 'the range is empty (write "*" to accept any release)'
            raise RangeError(f"invalid version range {_echo(text)}: {problem}; {_RANGE_EXAMPLES}")
        tokens = [*_tokenize(text), _Token("end", "", len(text))]
        alternatives = []
        start = 0
        for index, token in enumerate(tokens):
            if token.kind in ("or", "end"):
                if index == start:
                    where = "before '||'" if token.kind == "or" else "after '||'"
                    raise _range_error(text, f"empty alternative {where}", token.pos)
                alternatives.append(_parse_alternative(text, tokens[start : index + 1]))
                start = index + 1
        return cls(text, tuple(alternatives))

    def contains(self, version: Version) -> bool:
        return any(_alternative_contains(alternative, version) for alternative in self.alternatives)

    def best(self, versions: Iterable[Version]) -> Version | None:
        """The highest of ``versions`` that this range contains, or None."""
        return max(filter(self.contains, versions), default=None)

    def __str__(self) -> str:
        return " || ".join(" ".join(map(str, alternative)) or "*" for alternative in self.alternatives)


def _alternative_contains(comparators: tuple[Comparator, ...], version: Version) -> bool:
    if not all(comparator.test(version) for comparator in comparators):
        return False
    core = (version.major, version.minor, version.patch)
    return not version.is_prerelease or any(
        c.version.is_prerelease and (c.version.major, c.version.minor, c.version.patch) == core for c in comparators
    )


# --- versions as written in ranges: possibly partial ("1.2", "1.x", "*") -------------------------


@record
class _Partial:
    numbers: tuple[int | None, int | None, int | None]  # None: omitted or a wildcard
    prerelease: tuple[str | int, ...]
    build: tuple[str, ...]
    wildcard: bool  # written with x/X/*, which makes a bare version an x-range rather than a caret

    @property
    def given(self) -> int:
        """How many leading parts are numbers."""
        return self.numbers.index(None) if None in self.numbers else 3

    def lower(self) -> Version:
        major, minor, patch = (number or 0 for number in self.numbers)
        return Version(major, minor, patch, self.prerelease, self.build)

    def bump(self, level: int) -> Version:
        """The first release above every version that agrees on the first ``level + 1`` parts."""
        parts = [number or 0 for number in self.numbers[: level + 1]]
        parts[level] += 1
        major, minor, patch = parts + [0] * (2 - level)
        return Version(major, minor, patch)


def _parse_partial(text: str) -> _Partial:
    core, build_sep, build_text = text.partition("+")
    core, pre_sep, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) > 3:
        raise _Problem(f"{_echo(text)} has {len(parts)} dot-separated parts, at most MAJOR.MINOR.PATCH are allowed")
    numbers: list[int | None] = []
    for name, part in zip(_PART_NAMES, parts, strict=False):
        if part in _WILDCARDS:
            numbers.append(None)
        elif numbers and numbers[-1] is None:
            raise _Problem(f"the {name} part {_echo(part)} of {_echo(text)} follows a wildcard")
        elif _NUMBER.fullmatch(part):
            numbers.append(_number(part, f"the {name} part of {_echo(text)}"))
        else:
            raise _Problem(f"the {name} part of {_echo(text)} is {_echo(part)}, not a number without leading zeros")
    wildcard = None in numbers
    if (pre_sep or build_sep) and (len(numbers) < 3 or wildcard):
        raise _Problem(f"{_echo(text)} has a prerelease or build suffix but not a full MAJOR.MINOR.PATCH")
    prerelease = tuple(_prerelease_identifier(part, text) for part in pre_text.split(".")) if pre_sep else ()
    build = tuple(_identifier(part, text) for part in build_text.split(".")) if build_sep else ()
    numbers += [None] * (3 - len(numbers))
    return _Partial((numbers[0], numbers[1], numbers[2]), prerelease, build, wildcard)


def _identifier(part: str, text: str) -> str:
    if not re.fullmatch(_IDENTIFIER, part):
        raise _Problem(f"{_echo(part)} in {_echo(text)} is not a non-empty identifier of [0-9A-Za-z-]")
    return part


def _prerelease_identifier(part: str, text: str) -> str | int:
    """An identifier of a prerelease: a number where it is all digits (compared as one)."""
    _identifier(part, text)
    if part.isdigit():
        if not _NUMBER.fullmatch(part):
            raise _Problem(f"numeric prerelease identifier {_echo(part)} in {_echo(text)} has a leading zero")
        return _number(part, f"numeric prerelease identifier {_echo(part)}")
    return part


# --- desugaring: operator + partial version -> primitive comparators ------------------------------


def _below(version: Version) -> Comparator:
    """``<X.Y.Z-0``: below X.Y.Z and all its prereleases, so a desugared upper bound admits none of them."""
    return Comparator("<", Version(version.major, version.minor, version.patch, (0,)))


_NOTHING = (_below(Version(0, 0, 0)),)


def _desugar(op: str, partial: _Partial) -> tuple[Comparator, ...]:
    given = partial.given
    if given == 0:  # "*" under any operator: everything, or nothing for a strict bound
        return _NOTHING if op in ("<", ">") else ()
    if op == "":
        op = "=" if partial.wildcard else "^"
    lower = partial.lower()
    if op == "^":
        major, minor, _ = partial.numbers
        level = 0 if major or given == 1 else 1 if minor or given == 2 else 2
        return (Comparator(">=", lower), _below(partial.bump(level)))
    if op == "~":
        return (Comparator(">=", lower), _below(partial.bump(min(given - 1, 1))))
    if given == 3:
        return (Comparator(op, lower),)
    # A partial version stands for all versions that agree on its given parts.
    if op == "=":
        return (Comparator(">=", lower), _below(partial.bump(given - 1)))
    if op == ">":
        return (Comparator(">=", partial.bump(given - 1)),)
    if op == ">=":
        return (Comparator(">=", lower),)
    if op == "<":
        return (_below(lower),)
    return (_below(partial.bump(given - 1)),)  # "<="


# --- tokenizer and parser -------------------------------------------------------------------------


@record
class _Token:
    kind: str  # "op", "or", "comma", "hyphen", "version", "end"
    text: str
    pos: int


_OPERATORS = ("<=", ">=", "<", ">", "=", "^", "~")
_VERSION_CHARS = frozenset(string.ascii_letters + string.digits + ".-+*")


def _tokenize(text: str) -> Iterator[_Token]:
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char.isspace():
            pos += 1
            continue
        op = next((op for op in _OPERATORS if text.startswith(op, pos)), None)
        if text.startswith("||", pos):
            token = _Token("or", "||", pos)
        elif char == ",":
            token = _Token("comma", ",", pos)
        elif char == "-":  # a version never starts with '-', so this separates a hyphen range
            token = _Token("hyphen", "-", pos)
        elif op is not None:
            token = _Token("op", op, pos)
        elif char.isascii() and (char.isalnum() or char == "*"):
            end = pos
            while end < len(text) and text[end] in _VERSION_CHARS:
                end += 1
            token = _Token("version", text[pos:end], pos)
        else:
            raise _range_error(text, f"unexpected {_echo(char)}", pos)
        yield token
        pos += len(token.text)


def _parse_alternative(text: str, tokens: list[_Token]) -> tuple[Comparator, ...]:
    """Parse ``item ([,] item)*`` up to the closing ``||`` or end token.

    An item is ``[op] version`` or ``version - version``.
    """
    comparators: list[Comparator] = []
    index = 0
    expect_item = True
    while tokens[index].kind not in ("or", "end"):
        token, following = tokens[index], tokens[index + 1]
        if token.kind == "comma":
            if expect_item:
                raise _range_error(text, "unexpected ','", token.pos)
            expect_item = True
            index += 1
            continue
        if token.kind == "op":
            comparators += _desugar(token.text, _version_after(text, token, following))
            index += 2
        elif token.kind == "version" and following.kind == "hyphen":
            upper = _version_after(text, following, tokens[index + 2])
            comparators += _desugar(">=", _partial_at(text, token)) + _desugar("<=", upper)
            index += 3
        elif token.kind == "version":
            comparators += _desugar("", _partial_at(text, token))
            index += 1
        else:
            raise _range_error(text, f"unexpected {_echo(token.text)}", token.pos)
        expect_item = False
    if expect_item:
        raise _range_error(text, "expected a version after ','", tokens[index].pos)
    return tuple(comparators)


def _version_after(text: str, token: _Token, following: _Token) -> _Partial:
    if following.kind != "version":
        found = "the end" if following.kind == "end" else repr(following.text)
        raise _range_error(text, f"expected a version after {_echo(token.text)}, found {found}", following.pos)
    return _partial_at(text, following)


def _partial_at(text: str, token: _Token) -> _Partial:
    written = token.text
    if written[:1] == "v" and written[1:2].isdigit():
        written = written[1:]
    try:
        return _parse_partial(written)
    except _Problem as problem:
        raise _range_error(text, str(problem), token.pos) from None


def _range_error(text: str, problem: str, pos: int) -> RangeError:
    return RangeError(f"invalid version range {_echo(text)} at position {pos}: {problem}; {_RANGE_EXAMPLES}")
