"""The service settings (SPEC 2), read from the environment and validated together.

The handlers call `load_settings()` at module import, so a bad value fails the
Lambda's cold start (and the local runner's start) with the reason, before
anything is served. The window's numbers sit beside the fold trigger on
purpose: the two are halves of one memory and are validated as one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from memory_core.rules import TENANT_ID_PATTERN
from memory_core.trim import TrimShape
from memory_core.window import WindowLimits

M = TypeVar("M", bound=BaseModel)


class InvalidSettings(ValueError):
    """The environment does not describe a service that can run correctly."""


class Settings(BaseModel):
    """One field per environment variable, named as the variable in lower case."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    history_window_max_tokens: PositiveInt = Field(4000, description="token budget of the window")
    history_window_max_messages: PositiveInt = Field(25, description="hard cap on history messages")
    history_window_floor_messages: PositiveInt = Field(
        10, description="newest history messages always kept, even over budget"
    )
    history_message_max_tokens: PositiveInt = Field(
        1000, description="a history message over this is trimmed"
    )
    memory_fold_min_tokens: PositiveInt = Field(
        2000, description="unfolded history tokens that trigger a compaction"
    )
    turn_retention_days: PositiveInt = Field(
        30, description="turns' TTL; at least every tenant's historyDays"
    )
    memory_summary_max_tokens: PositiveInt = Field(
        800, description="the fold's summary is capped at this many tokens"
    )
    compaction_lease_seconds: PositiveInt = Field(
        900, description="how long a requested compaction blocks another; a lost one expires"
    )
    tenant_usage_metrics: tuple[str, ...] = Field(
        (),
        description="tenants whose token usage metrics also carry a `tenant` dimension",
    )
    """Comma-separated tenant ids; none by default. Every dimension value is a custom
    metric billed on its own, so the model's token usage goes to CloudWatch as
    service-wide totals, and per tenant to the log (`PowertoolsTelemetry.reply_usage`);
    the tenants named here get the four metrics under their name as well."""

    @field_validator("tenant_usage_metrics", mode="before")
    @classmethod
    def _tenant_ids(cls, value: object) -> object:
        """`acme, globex` as the environment gives it; each a tenant id, none twice."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",")] if value.strip() else []
        if not isinstance(value, list | tuple):
            return value  # pydantic names the type
        problems = [
            "an empty id (a comma too many)"
            if tenant == ""
            else f"{tenant!r} is not a tenant id (ids match {TENANT_ID_PATTERN})"
            for tenant in dict.fromkeys(value)
            if not isinstance(tenant, str) or not re.fullmatch(TENANT_ID_PATTERN, tenant)
        ]
        problems += [
            f"{tenant!r} is named twice"
            for tenant in dict.fromkeys(value)
            if isinstance(tenant, str) and value.count(tenant) > 1
        ]
        if problems:
            raise ValueError("comma-separated tenant ids expected: " + "; ".join(problems))
        return tuple(value)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = [
            problem
            for problem in (
                self._floor_above_cap(),
                self._window_below_twice_the_fold(),
                self._summary_above_window(),
            )
            if problem
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _floor_above_cap(self) -> str | None:
        if self.history_window_floor_messages <= self.history_window_max_messages:
            return None
        return (
            f"HISTORY_WINDOW_FLOOR_MESSAGES ({self.history_window_floor_messages}) must be "
            f"<= HISTORY_WINDOW_MAX_MESSAGES ({self.history_window_max_messages}): the cap "
            "is hard, and a floor above it could never be kept."
        )

    def _summary_above_window(self) -> str | None:
        if self.memory_summary_max_tokens <= self.history_window_max_tokens:
            return None
        return (
            f"MEMORY_SUMMARY_MAX_TOKENS ({self.memory_summary_max_tokens}) must be <= "
            f"HISTORY_WINDOW_MAX_TOKENS ({self.history_window_max_tokens}): a memory larger "
            "than the window would cost more than the history it replaces."
        )

    def _window_below_twice_the_fold(self) -> str | None:
        # The point of seed 000: the window and the fold are two halves of one memory.
        if self.history_window_max_tokens >= 2 * self.memory_fold_min_tokens:
            return None
        return (
            f"HISTORY_WINDOW_MAX_TOKENS ({self.history_window_max_tokens}) must be >= "
            f"2x MEMORY_FOLD_MIN_TOKENS ({self.memory_fold_min_tokens}): the fold is "
            "asynchronous, and below 2x a stretch of conversation ages out of the window "
            "before the fold absorbs it, held by neither."
        )

    def as_environment(self) -> dict[str, str]:
        """The variables that give these settings, one per field (a Lambda's environment)."""
        return {
            name.upper(): ",".join(value) if isinstance(value, tuple) else str(value)
            for name, value in self
        }

    @property
    def trim_shape(self) -> TrimShape:
        return TrimShape.for_budget(self.history_message_max_tokens)

    @property
    def window_limits(self) -> WindowLimits:
        return WindowLimits(
            max_tokens=self.history_window_max_tokens,
            max_messages=self.history_window_max_messages,
            floor_messages=self.history_window_floor_messages,
            trim=self.trim_shape,
        )


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings from `environ` (the process environment when None), or InvalidSettings.

    Only the variables named by the fields are read; with an explicit mapping
    the process environment is not consulted at all, so tests and the
    synth-time check see exactly what they pass.
    """
    return from_environment(Settings, environ, "service settings")


def from_environment(model: type[M], environ: Mapping[str, str] | None, what: str) -> M:
    """A model of environment variables (one per field, its name upper-cased), validated."""
    source = os.environ if environ is None else environ
    names = model.model_fields
    values = {name: source[name.upper()] for name in names if name.upper() in source}
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise InvalidSettings(f"invalid {what}: " + describe_errors(error)) from None


FIELDS = tuple(Settings.model_fields)
COUNTS = tuple(name for name, field in Settings.model_fields.items() if field.annotation is int)
"""The settings that are positive integers: all but `tenant_usage_metrics`."""
_POSITIVE_INTEGER_ERRORS = {"int_type", "int_parsing", "int_from_float", "greater_than"}


def describe_errors(error: ValidationError) -> str:
    reasons = []
    for detail in error.errors():
        field = ".".join(str(part) for part in detail["loc"]).upper()
        message = str(detail["msg"]).removeprefix("Value error, ")
        if detail["type"] in _POSITIVE_INTEGER_ERRORS:
            reasons.append(f"{field}: must be a positive integer (got {detail['input']!r})")
        elif field:
            reasons.append(f"{field}: {message} (got {detail['input']!r})")
        else:
            reasons.append(message)
    return "; ".join(reasons)
