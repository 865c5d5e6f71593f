"""The text suite of docs/suites.md, new version: split_words with str.split."""

from pytest_benchmark.fixture import BenchmarkFixture

TEXT = " ".join(f"word{i % 97}" for i in range(600)) + " "


def split_words(text: str) -> list[str]:
    return text.split()


def test_split(benchmark: BenchmarkFixture) -> None:
    words = benchmark(split_words, TEXT)
    benchmark.extra_info["words"] = len(words)


def test_upper(benchmark: BenchmarkFixture) -> None:
    benchmark(str.upper, TEXT)
