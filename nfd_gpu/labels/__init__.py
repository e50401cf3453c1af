"""Labelers: pure functions from a snapshot to labels, plus the one validator."""
