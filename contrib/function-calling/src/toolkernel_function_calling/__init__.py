"""MCP tools for the OpenAI and Anthropic APIs: plain tool definitions and a dispatcher for the calls.

``openai_tools`` / ``openai_response_tools`` / ``anthropic_tools`` turn an
:class:`~toolkernel.client.MCPClient`'s tools into the definitions each API takes;
:class:`Dispatcher` runs the tool calls a model returns through the client and builds
the messages that carry the results back. Plain dicts: neither SDK is needed at run time.
"""

from __future__ import annotations

from toolkernel_function_calling._dispatch import CallResult as CallResult
from toolkernel_function_calling._dispatch import Dispatcher as Dispatcher
from toolkernel_function_calling._schemas import anthropic_tools as anthropic_tools
from toolkernel_function_calling._schemas import openai_response_tools as openai_response_tools
from toolkernel_function_calling._schemas import openai_tools as openai_tools

__all__ = ["CallResult", "Dispatcher", "anthropic_tools", "openai_response_tools", "openai_tools"]
