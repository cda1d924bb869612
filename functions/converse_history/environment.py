"""Where the Lambda finds its resources: table, queue, rules source, caller identity.

Validated at import beside the service settings, so a missing table name or an
AppConfig source without its names fails the cold start, not the first call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from adapters.dynamodb_store import TABLE_NAME_PATTERN
from memory_core.settings import from_environment


class Environment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    table_name: str = Field(min_length=3, max_length=255, pattern=TABLE_NAME_PATTERN)
    compaction_queue_url: str = Field(min_length=1)
    rules_source: Literal["file", "appconfig"] = "file"
    rules_file: Path = Path("rules.example.json")
    appconfig_application: str | None = None
    appconfig_environment: str | None = None
    appconfig_profile: str | None = None
    rules_max_age_seconds: PositiveInt = 45
    caller_identity: Literal["required", "optional"] = "required"
    """`optional` only for the local runner: through API Gateway the caller is always known."""

    @model_validator(mode="after")
    def _appconfig_named(self) -> Self:
        if self.rules_source == "appconfig":
            missing = [
                name.upper()
                for name in ("appconfig_application", "appconfig_environment", "appconfig_profile")
                if not getattr(self, name)
            ]
            if missing:
                raise ValueError(f"RULES_SOURCE=appconfig needs {', '.join(missing)}")
        return self


def load_environment(environ: Mapping[str, str] | None = None) -> Environment:
    return from_environment(Environment, environ, "environment")
