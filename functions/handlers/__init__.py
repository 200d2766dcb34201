"""Handler modules: one agent each. Pick one with A2A_HANDLER=functions.handlers.<name>."""
