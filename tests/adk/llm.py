"""Handler module: the LlmAgent over the paced model of tests/adk/agents.py."""

from shared.adk import adk_handler
from tests.adk.agents import paced

handle = adk_handler(paced)
