"""Small shared pieces every construct uses: log retention by day count, removal policy by config."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_logs as logs

# CloudWatch Logs accepts only these retention periods (days -> aws_logs.RetentionDays member).
RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}


def retention(days: int) -> logs.RetentionDays:
    """The RetentionDays member for a day count the config validated against RETENTION_DAYS."""
    return getattr(logs.RetentionDays, RETENTION_DAYS[days])


def data_removal_policy(destroy_data_on_delete: bool) -> RemovalPolicy:
    """Data-bearing resources (buckets, log groups, keys) are retained unless the config opts out."""
    return RemovalPolicy.DESTROY if destroy_data_on_delete else RemovalPolicy.RETAIN
