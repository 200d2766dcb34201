"""Handler module: the LlmAgent over the scripted model of tests/adk/agents.py."""

from shared.adk import adk_handler
from tests.adk.agents import assistant

handle = adk_handler(assistant)
