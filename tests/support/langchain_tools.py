"""Real LangChain tools for the agents the middleware tests run."""

from __future__ import annotations

from langchain_core.tools import StructuredTool, ToolException, tool


@tool
def look_up(item: str) -> str:
    """Look an item up in the warehouse."""
    return f"{item}: 3 in stock"


@tool(return_direct=True)
def place_order(item: str) -> str:
    """Order an item; its confirmation is the agent's answer."""
    return f"ordered {item}"


def _offline(item: str) -> str:
    """Look an item up in a warehouse that is offline."""
    raise ToolException(f"warehouse offline: no answer for {item}")


offline_look_up = StructuredTool.from_function(
    _offline, name="offline_look_up", handle_tool_error=True
)
"""A tool whose failure LangChain turns into an error `ToolMessage`."""


@tool
def crashing_look_up(item: str) -> str:
    """Look an item up in a warehouse whose client crashes."""
    raise RuntimeError(f"connection reset while looking up {item}")
