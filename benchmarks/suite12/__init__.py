"""A real 12-benchmark pytest-benchmark suite (see test_suite12.py)."""
