"""The deployment's configuration, validated at synth by the service's own models.

Settings come from CDK context (`-c NAME=value`) or, failing that, the synth
process's environment, under the same names as the Lambdas' variables. They
go through `load_settings`, so a window below twice the fold fails
`cdk synth` with the validator's message, before anything reaches AWS; the
initial rules document is read by `load_rules_json` (a key given twice is
refused, naming the key) and checked by `parse_rules` the same way, the
refusal naming the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aws_cdk import RemovalPolicy
from constructs import Node

from infra.log_retention import RETENTION_DAYS
from infra.model_access import parse_model_id
from memory_core.rules import InvalidRules, load_rules_json, parse_rules
from memory_core.settings import FIELDS, Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent
# CloudWatch Logs accepts these retentions (in days) only.
RETENTION_CHOICES = RETENTION_DAYS
DEFAULT_MODEL_ID = "amazon.nova-lite-v1:0"


@dataclass(frozen=True)
class DeploymentConfig:
    settings: Settings
    stage: Literal["prod", "dev"]
    summariser: Literal["bedrock", "offline"]
    bedrock_model_id: str
    rules_document: dict[str, Any]
    log_retention_days: int
    api_rate_limit: int
    api_burst_limit: int
    converse_p99_alarm_ms: int

    @property
    def production(self) -> bool:
        return self.stage == "prod"

    @property
    def removal_policy(self) -> RemovalPolicy:
        """Data and logs outlive a production stack; a development one takes them along."""
        return RemovalPolicy.RETAIN if self.production else RemovalPolicy.DESTROY

    def settings_environment(self) -> dict[str, str]:
        """The settings as the Lambdas read them: one variable per field."""
        return self.settings.as_environment()


def load_config(node: Node, environ: Mapping[str, str]) -> DeploymentConfig:
    def value(name: str, default: str | None = None) -> str | None:
        found = node.try_get_context(name)
        if found is None:
            found = environ.get(name, default)
        return None if found is None else str(found)

    settings_values = {
        name.upper(): found for name in FIELDS if (found := value(name.upper())) is not None
    }
    settings = load_settings(settings_values)
    rules_path = ROOT / (value("rulesFile", "rules.example.json") or "")
    try:
        rules_document = load_rules_json(rules_path.read_bytes())
        parse_rules(rules_document, settings.turn_retention_days)
    except InvalidRules as refusal:  # not UTF-8, not JSON, a key twice, or bad rules
        raise InvalidRules(f"{rules_path}: {refusal}") from None
    stage = value("stage", "prod")
    if stage not in ("prod", "dev"):
        raise ValueError(f"context stage must be 'prod' or 'dev', not {stage!r}")
    summariser = value("summariser", "bedrock")
    if summariser not in ("bedrock", "offline"):
        raise ValueError(f"context summariser must be 'bedrock' or 'offline', not {summariser!r}")
    bedrock_model_id = value("bedrockModelId", DEFAULT_MODEL_ID) or ""
    # A malformed id would otherwise surface at the first model call, as AccessDenied.
    parse_model_id(bedrock_model_id)
    log_retention_days = int(value("logRetentionDays", "30") or 30)
    if log_retention_days not in RETENTION_CHOICES:
        raise ValueError(
            f"context logRetentionDays must be one of {sorted(RETENTION_CHOICES)}, "
            f"not {log_retention_days}"
        )
    return DeploymentConfig(
        settings=settings,
        stage=stage,  # type: ignore[arg-type]
        summariser=summariser,  # type: ignore[arg-type]
        bedrock_model_id=bedrock_model_id,
        rules_document=rules_document,
        log_retention_days=log_retention_days,
        api_rate_limit=int(value("apiRateLimit", "50") or 50),
        api_burst_limit=int(value("apiBurstLimit", "100") or 100),
        converse_p99_alarm_ms=int(value("converseP99AlarmMs", "1500") or 1500),
    )
