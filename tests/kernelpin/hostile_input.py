"""Hypothesis strategies for input kernelpin does not control, and the settings profile its property tests share.

Generated inputs start from a well-formed example (a lock, a metadata.json, a refs answer, ...) and are mutated
the ways an attacker or a broken server would: cut short, a hostile piece put in (control characters, a trailing
newline, digits of other scripts, huge numbers, brackets), nested deeply, a value of the structure replaced by
another of any type. Random input of the same kind comes beside them.

The profile `untrusted-input` keeps example counts modest (the test machines are shared); set
KERNELPIN_PROPERTY_EXAMPLES for a longer run.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "untrusted-input",
    max_examples=int(os.environ.get("KERNELPIN_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
UNTRUSTED = settings.get_profile("untrusted-input")

DEPTH = 600  # deeper than tomllib, json and ast.unparse go with the default recursion limit
PIECES = (
    "\n",
    "\r\n",
    "\x00",
    "\x1b[2J",
    "\x85",
    "\u202e",
    "\u2028",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: str.isdigit() and int() accept it
    "\u00b2",  # SUPERSCRIPT TWO: isdigit() says yes, int() refuses
    "\uff11",  # FULLWIDTH DIGIT ONE
    "\U0001d7d9",  # MATHEMATICAL DOUBLE-STRUCK DIGIT ONE
    "9" * 400,
    "1e999",
    "-1",
    "nan",
    "..",
    "/",
    "\\",
    '"',
    "'",
    "[",
    "]",
    "{",
    "}",
    "=",
    ":",
    "@",
    " ",
    "é",
    "\U0010ffff",
)
_OTHER_DIGITS = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def _nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> str:
    """`seed` changed one to three times: cut, a hostile piece put in, a span dropped, digits of another script,
    a deep nesting put in, a trailing newline."""
    text = seed
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["cut", "insert", "drop", "digits", "nest", "newline"]))
        if kind == "cut":
            text = text[:at]
        elif kind == "insert":
            text = text[:at] + draw(st.sampled_from(PIECES) | st.text(max_size=8)) + text[at:]
        elif kind == "drop":
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif kind == "digits":
            text = text.translate(_OTHER_DIGITS)
        elif kind == "nest":
            text = text[:at] + _nested(draw(st.integers(1, DEPTH))) + text[at:]
        else:
            text += "\n"
    return text


def texts(*seeds: str) -> st.SearchStrategy[str]:
    """Mutations of the seeds, the seeds with a hostile piece appended, and random text."""
    seeded = st.sampled_from(seeds)
    return st.one_of(
        seeded.flatmap(mutated),
        st.tuples(seeded, st.sampled_from(PIECES)).map("".join),
        st.text(max_size=60),
    )


@st.composite
def _mutated_bytes(draw: st.DrawFn, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["cut", "flip", "insert", "text"]))
        if kind == "cut":
            del data[at:]
        elif kind == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data[at:at] = draw(st.sampled_from(PIECES)).encode("utf-8", "surrogatepass")
    return bytes(data)


def blobs(*seeds: bytes) -> st.SearchStrategy[bytes]:
    """Byte-level mutations of the seeds (cut, flipped, inserted), the seeds' text mutated, and random bytes."""
    seeded = st.sampled_from(seeds)
    return st.one_of(
        seeded.flatmap(_mutated_bytes),
        seeded.flatmap(lambda seed: mutated(seed.decode("utf-8", "replace"))).map(
            lambda text: text.encode("utf-8", "surrogatepass")
        ),
        st.binary(max_size=200),
    )


HUGE = st.sampled_from([10**40, -(10**40), 2**63, 2**64 + 1, -1, 0, 10**4000])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HUGE,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(PIECES),
    st.text(max_size=20),
)


def _deep(depth: int) -> Any:
    value: Any = "x"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


VALUES = st.one_of(
    st.recursive(
        SCALARS,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=12,
    ),
    st.integers(DEPTH, 3 * DEPTH).map(_deep),
)


@st.composite
def _leaf_replaced(draw: st.DrawFn, seed: Any) -> Any:
    """`seed` (JSON-like data) with one value somewhere in it replaced by any value."""
    if isinstance(seed, dict) and seed and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(seed)))
        return {**seed, key: draw(_leaf_replaced(seed[key]))}
    if isinstance(seed, list) and seed and draw(st.booleans()):
        at = draw(st.integers(0, len(seed) - 1))
        return [*seed[:at], draw(_leaf_replaced(seed[at])), *seed[at + 1 :]]
    return draw(VALUES)


def _loads_or(text: str, otherwise: Any) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return otherwise


def data(*seeds: Any) -> st.SearchStrategy[Any]:
    """JSON-like data: the seeds with one value replaced, their JSON text mutated and parsed again, any value."""
    seeded = st.sampled_from(seeds)
    return st.one_of(
        seeded.flatmap(_leaf_replaced),
        seeded.flatmap(lambda seed: mutated(json.dumps(seed)).map(lambda text: _loads_or(text, seed))),
        VALUES,
    )
