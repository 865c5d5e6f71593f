"""JSON text as ingest reads it (contract §2): parsed with ``NaN``/``Infinity`` tokens and
repeated keys kept visible, nesting refused past MAX_DEPTH before parsing, the problems of such
values (``not_finite``, ``duplicate_key``, ``bad_encoding``), and where a field is in the text
(its line and offset) and how it is named in a message.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator, Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since 2.6, not in typeshed
from typing import Any

import numpy as np

MAX_DEPTH = 32
"""Deepest nesting of objects and arrays accepted (valid documents need 3)."""


JsonPath = tuple[str | int, ...]


def field_name(path: JsonPath) -> str:
    """``("breakdown", "decode-0", "mlp")`` -> ``breakdown.decode-0.mlp``; indices as ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(value: Any) -> str:
    """A value as the user wrote it, short enough for one line."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, _Token):
        return value.token
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + '..."'


# -- JSON parsing: positions, non-finite numbers, repeated keys --------------------------------
class _Token(float):
    """A float parsed from a ``NaN``/``Infinity`` token, remembering how it was written."""

    token: str

    def __new__(cls, token: str) -> _Token:
        value = super().__new__(cls, float(token.replace("Infinity", "inf")))
        value.token = token
        return value


class _Object(dict[str, Any]):
    """A JSON object that remembers keys written more than once."""

    repeated: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        obj.repeated = tuple(k for i, k in enumerate(keys) if k in keys[:i])
    return obj


class TooDeep(ValueError):
    """A JSON text nested deeper than MAX_DEPTH: refused before it is parsed."""


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


_LONG_INTEGER = re.compile(r"-?\d+")


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """Deepest nesting of arrays and objects in a JSON text (brackets inside strings do not
    count), computed without recursion so any input can be measured; 0 when the text has too
    few brackets to be nested deeper than ``limit``."""
    if text.count("[") + text.count("{") <= limit:
        return 0  # cannot be deeper than the limit
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    steps = np.where(np.isin(np.frombuffer(brackets, np.uint8), (ord("["), ord("{"))), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


def parse_json(text: str) -> Any:
    """json.loads that keeps NaN/Infinity visible and records repeated keys (raises ValueError:
    :class:`TooDeep` past MAX_DEPTH, ``json.JSONDecodeError`` for the rest)."""
    if nesting_depth(text) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_Token, object_pairs_hook=_object)
    except RecursionError:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # Python's limit on the digits of an integer
        limit = sys.get_int_max_str_digits()
        long = next((m for m in _LONG_INTEGER.finditer(text) if len(m.group()) > limit), None)
        if long is None:
            raise
        message = f"a number with more than {limit} digits"
        raise json.JSONDecodeError(message, text, long.start()) from exc


_SURROGATE = re.compile("[\ud800-\udfff]")


_SURROGATE_MESSAGE = "must be valid Unicode text, got a lone surrogate escape"


def _number_issues(doc: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str, str]]:
    """(path, code, message) for non-finite numbers, overflowing integers, repeated keys and
    strings holding a lone surrogate (``"\\ud800"``: valid JSON, but no Unicode text)."""
    if isinstance(doc, dict):
        for key in getattr(doc, "repeated", ()):
            yield (*path, key), "duplicate_key", "is written more than once in this object"
        for key, value in doc.items():
            if _SURROGATE.search(key):
                yield (*path, key), "bad_encoding", _SURROGATE_MESSAGE
            yield from _number_issues(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _number_issues(value, (*path, i))
    elif isinstance(doc, str):
        if _SURROGATE.search(doc):
            yield path, "bad_encoding", _SURROGATE_MESSAGE
    elif isinstance(doc, _Token):
        yield path, "not_finite", f"must be a finite number, got {doc.token}"
    elif isinstance(doc, float) and math.isnan(doc):  # a value from Python, not from JSON text
        yield path, "not_finite", "must be a finite number, got nan"
    elif _overflows(doc):
        yield path, "not_finite", "must be a finite number, got a number too large for a float"


def _overflows(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return is_int and abs(value) > sys.float_info.max


_WS = " \t\n\r"


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def locate(text: str, path: JsonPath) -> int:
    """1-based line of the key (or array item) at ``path`` in a JSON text; the deepest one found."""
    return text.count("\n", 0, offset(text, path)) + 1


def offset(text: str, path: JsonPath) -> int:
    """Character offset of the key (or array item) at ``path``; the deepest one found."""
    decoder = json.JSONDecoder(parse_constant=float)
    pos, found = _skip(text, 0), 0
    for part in path:
        pos, hit = _child(text, pos, part, decoder)
        if hit < 0:
            break
        found = hit
    return found


def _child(text: str, pos: int, part: str | int, decoder: json.JSONDecoder) -> tuple[int, int]:
    """Position of the value of ``part`` inside the container at ``pos``, and of its key."""
    opener = text[pos : pos + 1]
    if opener not in ("{", "["):
        return pos, -1
    pos, index = _skip(text, pos + 1), 0
    while pos < len(text) and text[pos] not in "}]":
        start = pos
        if opener == "{":
            key, pos = scanstring(text, pos + 1)
            pos = _skip(text, _skip(text, pos) + 1)  # past ':'
            hit = key == part
        else:
            hit = index == part
        if hit:
            return pos, start
        _, pos = decoder.raw_decode(text, pos)
        pos = _skip(text, pos)
        pos, index = _skip(text, pos + 1) if text[pos : pos + 1] == "," else pos, index + 1
    return pos, -1
