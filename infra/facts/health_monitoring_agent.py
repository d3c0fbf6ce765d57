"""Where the HyperPod dependencies chart's health-monitoring agent pulls its image from, by region.

The chart's ``health-monitoring-agent.imageUri`` template renders
``<account>.dkr.ecr.<region>.amazonaws.com/hyperpod-health-monitoring-agent:<tag>``: the account and region from
its ``$regionAccountMap`` when ``health-monitoring-agent.region`` (which the chart installer sets to the stack's
region) is in the map, otherwise us-east-1's. The execution role grants the pull of that repository
(infra/constructs/hyperpod/execution_role.py). tests/contract/test_health_monitoring_agent_image.py parses the
template (a copy of it at SOURCE, in tests/contract/sources/) and fails when these values differ from it, or when
the copy is not of the commit the config pins (infra/config/hyperpod.py: DEPENDENCIES_CHART_REVISION).
"""

from __future__ import annotations

SOURCE = ("aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/"
          "charts/health-monitoring-agent/templates/_helpers.tpl")

# SOURCE: the repository name in the template's printf.
REPOSITORY = "hyperpod-health-monitoring-agent"
# SOURCE: the image hosts end in amazonaws.com (the aws partition's); no other partition's host is rendered.
PARTITION = "aws"

# SOURCE: $regionAccountMap, region -> the account of the ECR registry (in that region) the image is pulled from.
REGION_ACCOUNTS: dict[str, str] = {
    "us-east-1": "767398015722",
    "us-west-2": "905418368575",
    "us-east-2": "851725546812",
    "us-west-1": "011528288828",
    "eu-central-1": "211125453373",
    "eu-north-1": "654654141839",
    "eu-west-1": "533267293120",
    "eu-west-2": "011528288831",
    "eu-south-2": "626887787726",
    "ap-northeast-1": "533267052152",
    "ap-south-1": "011528288864",
    "ap-southeast-1": "905418428165",
    "ap-southeast-2": "851725636348",
    "ap-southeast-3": "971422672635",
    "ap-southeast-4": "084375568333",
    "ca-central-1": "843976229209",
    "sa-east-1": "025066253954",
}
# SOURCE: "Region not in map - fallback both region and account to us-east-1".
FALLBACK_REGION = "us-east-1"
FALLBACK_ACCOUNT = "767398015722"


def image_registry(region: str) -> tuple[str, str]:
    """The (account, region) of the registry the chart pulls the agent's image from for ``region``."""
    if region in REGION_ACCOUNTS:
        return REGION_ACCOUNTS[region], region
    return FALLBACK_ACCOUNT, FALLBACK_REGION


def all_image_registries() -> list[tuple[str, str]]:
    """Every (account, region) the chart can render, sorted: the map's and the fallback's."""
    return sorted({(a, r) for r, a in REGION_ACCOUNTS.items()} | {(FALLBACK_ACCOUNT, FALLBACK_REGION)},
                  key=lambda pair: (pair[1], pair[0]))
