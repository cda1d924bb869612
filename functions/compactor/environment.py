"""The compactor's resources: the table, which summariser to use, and its own queue."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from adapters.dynamodb_store import TABLE_NAME_PATTERN
from memory_core.settings import from_environment


class CompactorEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    table_name: str = Field(min_length=3, max_length=255, pattern=TABLE_NAME_PATTERN)
    summariser: Literal["offline", "bedrock"] = "offline"
    bedrock_model_id: str | None = None
    compaction_queue_url: str | None = Field(None, min_length=1)
    """Its own queue, where the rest of a long erase is queued again; without it, an
    unfinished share fails its record, which comes back and carries on."""

    @model_validator(mode="after")
    def _bedrock_needs_a_model(self) -> Self:
        if self.summariser == "bedrock" and not self.bedrock_model_id:
            raise ValueError("SUMMARISER=bedrock needs BEDROCK_MODEL_ID")
        return self


def load_compactor_environment(environ: Mapping[str, str] | None = None) -> CompactorEnvironment:
    return from_environment(CompactorEnvironment, environ, "compactor environment")
