"""Benchmarks (`make bench`): figures, not pass/fail tests."""
