"""Where the rules' JSON Schema lives, and the one bound it takes from the settings.

The schema is draft-04, the dialect AWS AppConfig's JSON Schema validator
speaks. `historyDays` may not exceed `TURN_RETENTION_DAYS`, a deployment
setting, so the deployed schema gets its `maximum` from the settings.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from memory_core.rules.model import DEFAULT_HISTORY_DAYS

SCHEMA_FILE = Path(__file__).with_name("rules.schema.json")


def schema_with_retention(schema: dict[str, Any], turn_retention_days: int) -> dict[str, Any]:
    """The schema as deployed: `historyDays` bounded by the retention.

    Where the retention is shorter than the default `historyDays`, a tenant
    must state its own, as the model requires.
    """
    bound = copy.deepcopy(schema)
    tenant = bound["definitions"]["tenant"]
    tenant["properties"]["historyDays"]["maximum"] = turn_retention_days
    if turn_retention_days < DEFAULT_HISTORY_DAYS:
        tenant["required"] = ["historyDays"]
    return bound
