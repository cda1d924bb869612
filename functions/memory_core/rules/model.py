"""The tenants' rules (`rules.json`, SPEC 3): one document, every tenant.

Strict on purpose: a typo in a field name must not silently become a default,
and `1.5`, `"30"` or `true` are not a number of days. `rules.schema.json`
beside this module describes the same document for AWS AppConfig's validator;
a test keeps the two in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
)

TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
CALLER_ARN_PATTERN = r"^arn:aws[a-z-]*:(iam|sts)::[0-9]{12}:[A-Za-z0-9+=,.@_/-]+$"
RETENTION_DAYS_CONTEXT = "turn_retention_days"
DEFAULT_HISTORY_DAYS = 30

PositiveWholeNumber = Annotated[int, Strict(), Field(gt=0)]
TenantId = Annotated[str, Field(pattern=TENANT_ID_PATTERN)]
CallerArn = Annotated[str, Strict(), Field(pattern=CALLER_ARN_PATTERN)]
PromptCache = Literal["off", "sliding", "stable"]
"""Bedrock prompt caching for the tenant's fragment (SPEC 5, prompt caching).

`off`: no cache point anywhere, for models without prompt caching, which
refuse them. `sliding`: cache points after the memory and after the history.
`stable`: a window whose oldest edge stays put between calls and moves in
chunks (`memory_core.stable_window`), with those points and one where the
previous call's history ended.
"""
PromptCacheTtl = Literal["5m", "1h"]
"""How long Bedrock keeps a cached prefix; `1h` on the models that offer it."""


class InvalidRules(ValueError):
    """The rules document cannot be served; the message names tenant and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class RateLimit(_Strict):
    """At most `messages` from one contact within `perSeconds`, counted by arrival on the
    service's clock, not by `sentAt`, which a caller could backdate (rate_limit.py)."""

    messages: PositiveWholeNumber
    per_seconds: PositiveWholeNumber = Field(alias="perSeconds")


class TenantRules(_Strict):
    # validate_default: the default is checked against the retention too.
    history_days: PositiveWholeNumber = Field(
        DEFAULT_HISTORY_DAYS, alias="historyDays", validate_default=True
    )
    idle_reset_hours: PositiveWholeNumber = Field(24, alias="idleResetHours")
    max_turns_per_conversation: PositiveWholeNumber = Field(25, alias="maxTurnsPerConversation")
    rate_limit: RateLimit | None = Field(None, alias="rateLimit")
    callers: list[CallerArn] = Field(default_factory=list)
    prompt_cache: PromptCache = Field("sliding", alias="promptCache")
    prompt_cache_ttl: PromptCacheTtl = Field("5m", alias="promptCacheTtl")

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _absent_rather_than_null(cls, value: Any) -> Any:
        # The schema (what AppConfig checks) says object: `null` is refused, not "no limit".
        if value is None:
            raise ValueError(
                "must be an object with messages and perSeconds; leave it out for no limit"
            )
        return value

    @field_validator("history_days")
    @classmethod
    def _kept_at_least_history_days(cls, days: int, info: ValidationInfo) -> int:
        retention = (info.context or {}).get(RETENTION_DAYS_CONTEXT)
        if retention is not None and days > retention:
            raise ValueError(
                f"must be <= TURN_RETENTION_DAYS ({retention}): transcripts must be kept "
                "at least historyDays"
            )
        return days


class RulesDocument(_Strict):
    tenants: dict[TenantId, TenantRules]

    def for_tenant(self, tenant_id: str) -> TenantRules | None:
        return self.tenants.get(tenant_id)


def parse_rules(document: Any, turn_retention_days: int) -> RulesDocument:
    """The validated rules, or InvalidRules naming each bad tenant and field."""
    try:
        return RulesDocument.model_validate(
            document, context={RETENTION_DAYS_CONTEXT: turn_retention_days}
        )
    except ValidationError as error:
        raise InvalidRules(describe_errors(error)) from None


# A checked default is reported under its Python name; operators know the JSON one.
_ALIASES = {
    name: field.alias
    for model in (TenantRules, RateLimit)
    for name, field in model.model_fields.items()
    if field.alias
}
_POSITIVE_INTEGER_ERRORS = {"int_type", "greater_than", "int_from_float", "int_parsing"}


def describe_errors(error: ValidationError) -> str:
    return "invalid rules: " + "; ".join(_describe(detail) for detail in error.errors())


def _describe(detail: Mapping[str, Any]) -> str:
    loc = [str(part) for part in detail["loc"]]
    where = []
    if len(loc) >= 2 and loc[0] == "tenants":
        where.append(f"tenant {loc[1]!r}")
        loc = loc[2:]
    if loc and loc[-1] == "[key]":
        return f"{', '.join(where)}: tenant id must match {TENANT_ID_PATTERN}"
    if loc and detail["type"] != "extra_forbidden":
        loc = [_ALIASES.get(part, part) for part in loc]
    if loc:
        where.append(f"field {'.'.join(loc)}")
    return f"{', '.join(where) or 'document'}: {_reason(detail)}"


def _reason(detail: Mapping[str, Any]) -> str:
    kind = detail["type"]
    got = detail.get("input")
    if kind == "extra_forbidden":
        return "unknown field (refused, so that a typo cannot become a default)"
    if kind == "missing":
        return "required"
    if kind in _POSITIVE_INTEGER_ERRORS:
        return f"must be a positive integer (got {got!r})"
    if kind == "literal_error":
        return f"must be {detail['ctx']['expected']} (got {got!r})"
    message = str(detail["msg"]).removeprefix("Value error, ")
    return f"{message} (got {got!r})"
