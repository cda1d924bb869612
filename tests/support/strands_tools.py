"""A real Strands `@tool` for the agents the tests run on `conversation_memory_client.scripted`."""

from __future__ import annotations

from strands import tool


@tool
def look_up(item: str) -> str:
    """Look an item up in the warehouse.

    Args:
        item: the item's name
    """
    return f"{item}: 3 in stock"
