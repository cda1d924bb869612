"""Where the rules' JSON Schema lives, and the one bound it takes from the settings.

The schema is draft-04, the dialect AWS AppConfig's JSON Schema validator
speaks. `historyDays` may not exceed `TURN_RETENTION_DAYS`, a deployment
setting, so the deployed schema gets its `maximum` from the settings.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("rules.schema.json")


def schema_with_retention(schema: dict[str, Any], turn_retention_days: int) -> dict[str, Any]:
    bound = copy.deepcopy(schema)
    bound["definitions"]["tenant"]["properties"]["historyDays"]["maximum"] = turn_retention_days
    return bound
