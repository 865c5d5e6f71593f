"""Assess: pairs, paired intervals, explanations and verdicts for the campaigns of a store."""
