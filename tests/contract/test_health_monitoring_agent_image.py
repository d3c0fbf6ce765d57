"""The execution role can pull the health-monitoring agent's image in every region SageMaker offers.

The image is the one the dependencies chart renders: its ``health-monitoring-agent.imageUri`` template, read
from the copy of the chart's ``_helpers.tpl`` in tests/contract/pinned/ (the chart files the contract tests read,
stored at the commit the config pins and checked by their git object ids in test_aws_contract.py), with the values
the chart installer gives the chart.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from infra.config.hyperpod import DEPENDENCIES_CHART_REVISION
from infra.facts import health_monitoring_agent
from infra.facts.aws_lists import sagemaker_regions
from infra.facts.intrinsics import render
from infra.runtime.chart_installer.handler.properties import parse_values
from tests.conftest import cdk_json_context, new_app

PINNED = Path(__file__).parent / "pinned" / "sagemaker-hyperpod-cli"
STORED: dict[str, Any] = json.loads((PINNED / "SOURCE.json").read_text(encoding="utf-8"))
HELPERS_PATH = "helm_chart/HyperPodHelmChart/charts/health-monitoring-agent/templates/_helpers.tpl"
PULL_ACTIONS = ("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
AGNOSTIC = "region-agnostic"


@cache
def _template() -> str:
    """The body of the chart's ``health-monitoring-agent.imageUri`` definition, without its comments (Go
    template comments, ``{{/* ... */}}``, hold no action)."""
    text = (PINNED / HELPERS_PATH).read_text(encoding="utf-8")
    start = text.index('{{- define "health-monitoring-agent.imageUri" -}}')
    following = text.find("{{- define ", start + 1)
    body = text[start:] if following < 0 else text[start:following]
    return re.sub(r"\{\{-? ?/\*.*?\*/ ?-?\}\}", "", body, flags=re.S)


def _one(pattern: str, text: str) -> re.Match[str]:
    matches = list(re.finditer(pattern, text, re.S))
    assert len(matches) == 1, f"{pattern!r} occurs {len(matches)} times in the chart's imageUri template"
    return matches[0]


@cache
def _chart_logic() -> tuple[dict[str, str], tuple[str, str], str, str]:
    """What the template's image selection is made of: the region map, the (region, account) fallback, the
    printf format of the URI and the default tag, parsed from the template text."""
    body = _template()
    entries = _one(r"\$regionAccountMap := dict\s(.*?)-\}\}", body).group(1)
    words = re.findall(r'"([^"]*)"', entries)
    assert len(words) % 2 == 0 and words, entries
    region_map = dict(zip(words[::2], words[1::2], strict=True))
    _one(r"\$accountId := index \$regionAccountMap \$region", body)
    fallback = _one(r"\{\{- if not \$accountId -\}\}(.*?)\{\{- end -\}\}", body).group(1)
    region = _one(r'\$region = "([^"]+)"', fallback).group(1)
    account = _one(r'\$accountId = "([^"]+)"', fallback).group(1)
    uri_format = _one(r'printf "([^"]+)" \$accountId \$region \$imageTag', body).group(1)
    tag = _one(r'\$imageTag := \.Values\.imageTag \| default "([^"]+)"', body).group(1)
    return region_map, (region, account), uri_format, tag


def _rendered_image(agent_values: dict[str, Any]) -> str:
    """The image the template renders for ``agent_values`` (the subchart's values), as its text says: an
    ``hmaimage`` override wins; else the explicit region (highest priority) picks the map's account, and a
    region outside the map falls back to both the fallback's region and account."""
    body = _template()
    _one(r"\{\{- if \.Values\.hmaimage -\}\}", body)
    if agent_values.get("hmaimage"):
        return str(agent_values["hmaimage"])
    _one(r"\{\{- if \.Values\.region -\}\}\s*\{\{- \$region = \.Values\.region -\}\}", body)
    region = agent_values.get("region")
    assert region, "the chart installer always sets health-monitoring-agent.region"
    region_map, (fallback_region, fallback_account), uri_format, tag = _chart_logic()
    account = region_map.get(region)
    if not account:
        region, account = fallback_region, fallback_account
    return uri_format.replace("%s", "{}").format(account, region, agent_values.get("imageTag") or tag)


def _repository_arn(image: str) -> str:
    """The ECR repository ARN of a private ECR image URI in the aws partition (host ``*.amazonaws.com``)."""
    match = re.fullmatch(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com/([a-z0-9._/-]+):[\w.-]+", image)
    assert match, image
    account, region, repository = match.groups()
    return f"arn:aws:ecr:{region}:{account}:repository/{repository}"


def _image_arn(region: str) -> str:
    """The repository the chart pulls the agent from when the installer deploys it for ``region``."""
    values = parse_values({}, region)  # the values the chart installer gives the chart in that region
    return _repository_arn(_rendered_image(values["health-monitoring-agent"]))


def test_the_copy_is_the_file_at_the_pinned_commit_the_facts_cite():
    data = (PINNED / HELPERS_PATH).read_bytes()
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == STORED["files"][HELPERS_PATH]["blob"]
    assert STORED["commit"] == DEPENDENCIES_CHART_REVISION, (
        "the dependencies chart pin moved: store the cited files at the new commit (tests/contract/pinned) and "
        "update infra/facts/health_monitoring_agent.py")
    assert f"{STORED['repository']}@{STORED['commit']}:{HELPERS_PATH}" == health_monitoring_agent.SOURCE


def test_the_facts_are_the_template_s():
    region_map, (fallback_region, fallback_account), uri_format, _ = _chart_logic()
    facts = health_monitoring_agent
    assert region_map == facts.REGION_ACCOUNTS
    assert (fallback_region, fallback_account) == (facts.FALLBACK_REGION, facts.FALLBACK_ACCOUNT)
    assert uri_format == f"%s.dkr.ecr.%s.amazonaws.com/{health_monitoring_agent.REPOSITORY}:%s"
    for region in sorted(sagemaker_regions()):
        account, image_region = health_monitoring_agent.image_registry(region)
        assert _image_arn(region) == (f"arn:{health_monitoring_agent.PARTITION}:ecr:{image_region}:{account}:"
                                      f"repository/{health_monitoring_agent.REPOSITORY}")


def test_the_rendering_follows_the_template():
    """Inside the map the image is the region's own; outside, us-east-1's; an override wins."""
    assert _image_arn("us-west-2") == "arn:aws:ecr:us-west-2:905418368575:repository/hyperpod-health-monitoring-agent"
    for region in ("ap-northeast-2", "ap-south-2"):
        assert _image_arn(region) == (
            "arn:aws:ecr:us-east-1:767398015722:repository/hyperpod-health-monitoring-agent")
    image = "111122223333.dkr.ecr.eu-west-3.amazonaws.com/mirror/agent:1"
    assert _rendered_image({"region": "eu-west-3", "hmaimage": image}) == image


@pytest.fixture(scope="module")
def role_policies() -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """For each SageMaker region (and a region-agnostic stack): the stack's partition and the execution role's
    policy statements, synthesized once in one app."""
    from aws_cdk import Environment, Stack

    from infra.constructs.hyperpod.execution_role import HyperPodExecutionRole

    app = new_app(context=cdk_json_context())
    stacks: dict[str, Stack] = {}
    for region in [*sorted(sagemaker_regions()), AGNOSTIC]:
        env = None if region == AGNOSTIC else Environment(account="111122223333", region=region)
        stack = Stack(app, f"Role-{region}", env=env)
        HyperPodExecutionRole(
            stack, "ExecutionRole", eks_cluster_arn=stack.format_arn(service="eks", resource="cluster",
                                                                     resource_name="c"),
            vpc_id="vpc-1", subnet_ids=["subnet-1"], security_group_ids=["sg-1"],
            lifecycle_bucket_arn=stack.format_arn(service="s3", region="", account="", resource="b"),
            lifecycle_prefix="lifecycle")
        stacks[region] = stack
    assembly = app.synth()
    result = {}
    for region, stack in stacks.items():
        resources = assembly.get_stack_by_name(stack.stack_name).template["Resources"]
        (policy,) = [r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]
        result[region] = (stack.partition, policy["Properties"]["PolicyDocument"]["Statement"])
    return result


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _matches(pattern: str, arn: str) -> bool:
    """IAM's resource matching: ``*`` any run of characters, ``?`` any one character."""
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, arn) is not None


def _allows(statements: list[dict[str, Any]], action: str, arn: str, partition: str = "aws") -> bool:
    """Whether an Allow statement grants ``action`` on ``arn`` (``AWS::Partition`` read as ``partition``)."""
    return any(
        s["Effect"] == "Allow" and "Condition" not in s
        and any(_matches(a, action) for a in _as_list(s["Action"]))
        and any(_matches(render(r).replace("<AWS::Partition>", partition), arn) for r in _as_list(s["Resource"]))
        for s in statements)


@pytest.mark.parametrize("region", sorted(sagemaker_regions()))
def test_the_execution_role_can_pull_the_image_the_chart_renders(role_policies, region):
    partition, statements = role_policies[region]
    arn = _image_arn(region)
    if partition != health_monitoring_agent.PARTITION:
        # The chart renders an aws-partition image, which a role of another partition cannot pull; IAM refuses a
        # policy naming another partition's ARN, so nothing names it (docs/constructs/hyperpod-execution-role.md).
        assert not any(arn in json.dumps(s) for s in statements)
        return
    for action in PULL_ACTIONS:
        assert _allows(statements, action, arn), (region, action, arn)
    assert _allows(statements, "ecr:GetAuthorizationToken", "*")


def test_a_region_agnostic_role_can_pull_every_image_the_chart_can_render(role_policies):
    partition, statements = role_policies[AGNOSTIC]
    assert partition.startswith("${Token[")
    for region in sorted(sagemaker_regions()):
        if role_policies[region][0] != health_monitoring_agent.PARTITION:
            continue
        for action in PULL_ACTIONS:
            assert _allows(statements, action, _image_arn(region)), (region, action)
    (grant,) = [s for s in statements if s["Sid"] == "HealthMonitoringAgentPull"]
    assert len(_as_list(grant["Resource"])) == len(health_monitoring_agent.all_image_registries()) == 17
