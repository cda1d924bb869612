"""A rules document as it is stored: UTF-8 JSON, read strictly before its rules are checked.

Every reader of a rules document (the local file and its SIGHUP reload, the
AppConfig configuration, `rules_cli validate`, the synth) goes through
`load_rules_json`, so none of them reads with Python's lenient `json.loads`:
`{"tenants": {...}, "tenants": {}}` would keep the last `tenants` and empty
the tenant list. A key given twice, at any depth, is refused, naming the key.
"""

from __future__ import annotations

import json
from typing import Any

from memory_core.rules.model import InvalidRules
from memory_core.strict_json import (
    NOT_JSON,
    NUMBER_TOO_LARGE,
    TOO_DEEP,
    is_duplicate_key,
    strict_loads,
)

# strict_json's own refusals carry no position worth showing (it is always 0).
_WITHOUT_POSITION = frozenset({NOT_JSON, NUMBER_TOO_LARGE, TOO_DEEP})


class UnreadableRules(InvalidRules):
    """The document is not UTF-8 JSON, or gives a key twice: its rules cannot be checked.

    The message is what is wrong, without saying where the document came
    from: `is not UTF-8 text: ...`, `is not JSON: ...` or `duplicate key 'tenants'`.
    """


def load_rules_json(raw: str | bytes) -> Any:
    """The JSON document in `raw` (UTF-8 when bytes), or UnreadableRules saying why not."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise UnreadableRules(f"is not UTF-8 text: {error}") from None
    else:
        text = raw
    try:
        return strict_loads(text)
    except json.JSONDecodeError as error:
        if is_duplicate_key(error):
            raise UnreadableRules(error.msg) from None
        if error.msg in _WITHOUT_POSITION:
            raise UnreadableRules(f"is not JSON: {error.msg}") from None
        raise UnreadableRules(f"is not JSON: {error}") from None
