"""CloudWatch Logs retention, from a number of days."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_logs as logs
from constructs import Construct

if TYPE_CHECKING:
    from infra.config import DeploymentConfig

_BY_DAYS = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
}


RETENTION_DAYS = frozenset(_BY_DAYS)
"""The retention periods CloudWatch Logs offers, in days."""


def retention(days: int) -> logs.RetentionDays:
    return _BY_DAYS[days]


def log_group(scope: Construct, construct_id: str, config: DeploymentConfig) -> logs.LogGroup:
    """A log group with the deployment's retention, kept with a production stack."""
    return logs.LogGroup(
        scope,
        construct_id,
        retention=retention(config.log_retention_days),
        removal_policy=config.removal_policy,
    )
