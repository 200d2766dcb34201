"""Handler modules that only test configurations load."""
