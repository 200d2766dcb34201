"""Handler module: the custom-agent scenes as LONG_RUNNING turns (run by the worker)."""

from shared.adk import adk_handler
from tests.adk.agents import scenes

handle = adk_handler(scenes)
LONG_RUNNING = True
