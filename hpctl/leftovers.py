"""Leftovers of an earlier deployment that block the next one: log groups kept by `cdk destroy` under names
AWS fixes, found before `cdk deploy` fails with AlreadyExists, each with the command that clears it.

The app lets CloudFormation name what it may (the lifecycle bucket carries the stack's UUID); these names it
cannot choose: EKS writes control-plane logs to ``/aws/eks/<cluster>/cluster`` and the CloudWatch agent to
``/aws/containerinsights/<cluster>/<kind>`` (``infra/facts/names.py``). With ``destroy_data_on_delete: false`` the
stacks keep those groups, and the next create of the same project meets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hpctl.errors import is_not_found
from infra.config import eks_cluster_name
from infra.facts.names import container_insights_log_groups, eks_control_plane_log_group


@dataclass(frozen=True)
class Leftover:
    log_group: str
    stack: str  # the stack that creates the group
    stack_exists: bool

    def commands(self, region: str) -> list[str]:
        """What clears the way: delete the group (its events go with it), or adopt it into an existing stack."""
        delete = f"aws logs delete-log-group --region {region} --log-group-name {self.log_group}"
        if not self.stack_exists:
            # CloudFormation imports only into a template that adds nothing but the imported resources, which a
            # first create of the whole stack is not: deleting is the way.
            return [delete]
        return [delete, f"npx cdk import {self.stack}  # give {self.log_group} when asked for its LogGroupName"]


def expected_log_groups(cfg: Any) -> dict[str, str]:
    """Fixed-name log group -> the stack of this project that creates it."""
    eks = eks_cluster_name(cfg)
    groups = {eks_control_plane_log_group(eks): f"{cfg.project}-eks"}
    if cfg.observability.container_insights:
        groups.update({name: f"{cfg.project}-observability" for name in container_insights_log_groups(eks)})
    return groups


def _existing(logs: Any, names: list[str]) -> set[str]:
    found: set[str] = set()
    paginator = logs.get_paginator("describe_log_groups")
    for name in names:
        for page in paginator.paginate(logGroupNamePrefix=name):
            found.update(g["logGroupName"] for g in page.get("logGroups", []) if g["logGroupName"] == name)
    return found


def _stack_log_groups(cloudformation: Any, stack: str) -> set[str] | None:
    """Physical names of the stack's log groups, or None when the stack does not exist."""
    names: set[str] = set()
    try:
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
            names.update(r.get("PhysicalResourceId", "") for r in page.get("StackResourceSummaries", [])
                         if r.get("ResourceType") == "AWS::Logs::LogGroup")
    except ClientError as error:
        if is_not_found(error):
            return None
        raise
    return names


def find(cfg: Any, clients: Any) -> list[Leftover]:
    """Fixed-name groups that exist but that no stack of this project owns."""
    expected = expected_log_groups(cfg)
    present = _existing(clients("logs"), sorted(expected))
    leftovers = []
    owned: dict[str, set[str] | None] = {}
    for name in sorted(present):
        stack = expected[name]
        if stack not in owned:
            owned[stack] = _stack_log_groups(clients("cloudformation"), stack)
        stack_groups = owned[stack]
        if stack_groups is None or name not in stack_groups:
            leftovers.append(Leftover(name, stack, stack_exists=stack_groups is not None))
    return leftovers
