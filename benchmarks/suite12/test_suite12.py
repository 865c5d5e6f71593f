"""A real 12-benchmark pytest-benchmark suite, measured by benchmarks/measure_suite12.py.

Half of it does work whose speed does not depend on the process (hashing bytes, sorting numbers
and strings, a checksum): these are the steady ones. The other half builds and reads dicts and
sets of strings and JSON documents, whose cost depends on the string hashes, which Python
randomizes per process (PYTHONHASHSEED): the collision pattern, and so the probe count, differs
from run to run. Inputs are made once per process with a fixed seed, so both sides of a
comparison see the same data.

``--suite12-slower NAME`` (conftest.py) makes benchmark NAME do 10% more work: the "one
benchmark got slower" change of the measurements.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

_RNG = random.Random(12)
_BYTES = _RNG.randbytes(1 << 20)
_INTS = [_RNG.randrange(1 << 30) for _ in range(50_000)]
_FLOATS = [_RNG.random() for _ in range(50_000)]
_WORDS = ["".join(_RNG.choices("abcdefghijklmnopqrstuvwxyz", k=8)) for _ in range(20_000)]
_TEXT = " ".join(_RNG.choices(_WORDS[:2_000], k=50_000))
_DOCUMENT = {w: {"n": i, "tags": [w[:3], w[3:]]} for i, w in enumerate(_WORDS[:5_000])}
_JSON = json.dumps(_DOCUMENT)
_HALF = set(_WORDS[:10_000])
_OTHER = set(_WORDS[5_000:15_000])

Benchmark = Callable[..., Any]


def _scaled(data: Any, slower: bool) -> Any:
    """``data`` (bytes or a list) with 10% more items when this benchmark is the slower one."""
    return data + data[: len(data) // 10] if slower else data


def test_sha256(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_BYTES, slower("test_sha256"))
    benchmark(lambda: hashlib.sha256(data).digest())


def test_blake2b(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_BYTES, slower("test_blake2b"))
    benchmark(lambda: hashlib.blake2b(data).digest())


def test_crc32(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_BYTES * 4, slower("test_crc32"))
    benchmark(zlib.crc32, data)


def test_sort_ints(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_INTS, slower("test_sort_ints"))
    benchmark(sorted, data)


def test_sort_floats(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_FLOATS, slower("test_sort_floats"))
    benchmark(sorted, data)


def test_sort_strings(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    data = _scaled(_WORDS, slower("test_sort_strings"))
    benchmark(sorted, data)


def test_dict_build(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    words = _scaled(_WORDS, slower("test_dict_build"))
    benchmark(lambda: {w: i for i, w in enumerate(words)})


def test_dict_lookup(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    table = {w: i for i, w in enumerate(_WORDS)}
    probes = _scaled(_WORDS[::2] + [w.upper() for w in _WORDS[::2]], slower("test_dict_lookup"))
    benchmark(lambda: sum(table.get(w, 0) for w in probes))


def test_set_ops(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    other = set(_scaled(sorted(_OTHER), slower("test_set_ops")))
    benchmark(lambda: (len(_HALF & other), len(_HALF | other), len(_HALF ^ other)))


def test_word_count(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    words = _scaled(_TEXT.split(), slower("test_word_count"))
    benchmark(Counter, words)


def test_json_dumps(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    document = _DOCUMENT
    if slower("test_json_dumps"):
        document = _DOCUMENT | _extra()
    benchmark(json.dumps, document)


def test_json_loads(benchmark: Benchmark, slower: Callable[[str], bool]) -> None:
    text = json.dumps(_DOCUMENT | _extra()) if slower("test_json_loads") else _JSON
    benchmark(json.loads, text)


def _extra() -> dict[str, Any]:
    """10% more entries for the JSON document (new keys, the same kind of values)."""
    return {f"{k}!": v for k, v in list(_DOCUMENT.items())[: len(_DOCUMENT) // 10]}


@pytest.fixture
def slower(request: pytest.FixtureRequest) -> Callable[[str], bool]:
    chosen = request.config.getoption("suite12_slower")
    return lambda name: name == chosen
