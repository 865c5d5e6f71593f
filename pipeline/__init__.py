"""explain-pipeline: decide whether a performance improvement is real and explained."""

__version__ = "0.1.0"
