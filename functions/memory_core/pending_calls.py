"""The tool calls still waiting for their results: what a message of results may answer.

An agent whose loop goes on through `converse` sends the results of the calls
its model just made as the next message, with no text of the contact's. Such a
message must answer a pending call: one that answers nothing would be left
out of every window (SPEC 5.5.9), recorded for nobody.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_core.turns import Turn


def unanswered_calls(newest_first: Iterable[Turn]) -> list[str]:
    """The newest assistant message's tool calls that no later turn answered, oldest first.

    Reads the conversation newest first and stops at the turn before that
    message: first the tool results recorded since the calls (their ids are
    answered), then the assistant's turns, which Converse merges into one
    message. A contact's text since the calls closed them: none is pending.
    """
    answered: set[str] = set()
    calls: list[str] = []
    in_the_message = False
    for turn in newest_first:
        if turn.role == "assistant":
            in_the_message = True
            calls[:0] = [
                block["toolUse"]["toolUseId"] for block in turn.content if "toolUse" in block
            ]
            continue
        if in_the_message or any("text" in block for block in turn.content):
            break
        answered.update(block["toolResult"]["toolUseId"] for block in turn.content)
    return [call for call in calls if call not in answered]


def answers_only_tools(turn: Turn) -> bool:
    """A message of tool results alone: the agent's loop, not the contact's words."""
    return all("toolResult" in block for block in turn.content)
