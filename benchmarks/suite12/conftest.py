"""The suite's one option: which benchmark does 10% more work (none by default)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite12-slower",
        default="",
        metavar="NAME",
        help="The benchmark (e.g. test_sha256) that does 10%% more work.",
    )
