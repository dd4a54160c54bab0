"""Targets and their settings: the target file, durations, promotion gates."""
