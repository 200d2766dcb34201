"""Handler module: the custom-agent scenes of tests/adk/agents.py."""

from shared.adk import adk_handler
from tests.adk.agents import scenes

handle = adk_handler(scenes)
