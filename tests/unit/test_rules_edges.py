"""The rules' small edges: what a parsed document lets its readers do."""

from __future__ import annotations

import pydantic
import pytest

from memory_core.rules import RateLimit, parse_rules


def test_parsed_rules_cannot_be_changed_by_a_reader() -> None:
    # One parsed document serves every call of a warm Lambda: a handler that set a field
    # would change the next tenant's call.
    rules = parse_rules({"tenants": {"acme": {"rateLimit": {"messages": 2, "perSeconds": 5}}}}, 30)
    tenant = rules.for_tenant("acme")
    assert tenant is not None
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        tenant.max_turns_per_conversation = 99  # type: ignore[misc]
    limit = tenant.rate_limit
    assert isinstance(limit, RateLimit)
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        limit.messages = 99  # type: ignore[misc]
