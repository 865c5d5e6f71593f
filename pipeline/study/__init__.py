"""The simulation study: synthetic A/A and known-gain campaigns, and their calibration tables."""
