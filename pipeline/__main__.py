"""``python -m pipeline`` runs the command line."""

from pipeline.cli import run

run()
