"""SageMaker HyperPod API calls: describe, list (paginated), events, batch node actions, software updates."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

from botocore.exceptions import ClientError

from hpctl.aws import loader
from hpctl.errors import EXIT_AWS, HpctlError, is_not_found

# BatchRebootClusterNodes / BatchReplaceClusterNodes accept at most this many node IDs a call.
MAX_NODES_PER_BATCH = 25
PAGE_SIZE = 100

LEVELS = ("Info", "Warn", "Error")


@cache
def node_statuses() -> tuple[str, ...]:
    """The node statuses ListClusterNodes reports (ClusterInstanceStatus in botocore's SageMaker model)."""
    model = loader().load_service_model("sagemaker", "service-2")
    return tuple(model["shapes"]["ClusterInstanceStatus"]["enum"])


def cluster_id(cluster_arn: str) -> str:
    """The cluster ID is the last segment of the cluster ARN: arn:...:cluster/abc123 -> abc123."""
    return cluster_arn.rsplit("/", 1)[-1]


def ssm_target(cluster_arn: str, group: str, instance_id: str) -> str:
    """The SSM target of a HyperPod node: sagemaker-cluster:<cluster-id>_<group>-<instance-id>."""
    return f"sagemaker-cluster:{cluster_id(cluster_arn)}_{group}-{instance_id}"


def k8s_node_name(instance_id: str) -> str:
    return f"hyperpod-{instance_id}"


def normalize_node_id(node: str) -> str:
    """Accept an instance ID (i-...) or a Kubernetes node name (hyperpod-i-...)."""
    node = node.strip()
    if node.startswith("hyperpod-"):
        return node[len("hyperpod-") :]
    return node


def region_of(client: Any) -> str:
    return str(getattr(getattr(client, "meta", None), "region_name", None) or "this region")


class ClusterNotFound(HpctlError):
    def __init__(self, name: str, region: str) -> None:
        super().__init__(f"HyperPod cluster {name!r} not found in {region} (this account)", EXIT_AWS)


def describe_cluster(sagemaker: Any, name: str) -> dict[str, Any]:
    try:
        response = sagemaker.describe_cluster(ClusterName=name)
    except ClientError as error:
        if is_not_found(error):
            raise ClusterNotFound(name, region_of(sagemaker)) from None
        raise
    response.pop("ResponseMetadata", None)
    return response


def deployed_instance_types(group: dict[str, Any]) -> list[str]:
    """A described instance group's types, first choice first: its InstanceType, or for a flexible group the
    InstanceRequirements.DesiredInstanceTypes of the last request (botocore's ClusterInstanceGroupDetails)."""
    if group.get("InstanceType"):
        return [group["InstanceType"]]
    return list((group.get("InstanceRequirements") or {}).get("DesiredInstanceTypes") or [])


def find_cluster(sagemaker: Any, name: str) -> dict[str, Any] | None:
    """DescribeCluster, or None when the cluster does not exist."""
    try:
        return describe_cluster(sagemaker, name)
    except ClusterNotFound:
        return None


def iter_clusters(sagemaker: Any) -> Iterator[dict[str, Any]]:
    """Every HyperPod cluster of the region (ListClusters, page after page)."""
    for page in sagemaker.get_paginator("list_clusters").paginate(PaginationConfig={"PageSize": PAGE_SIZE}):
        yield from page.get("ClusterSummaries", [])


def iter_nodes(sagemaker: Any, name: str, group_contains: str | None = None) -> Iterator[dict[str, Any]]:
    """Every node of the cluster, following NextToken page after page."""
    kwargs: dict[str, Any] = {"ClusterName": name, "PaginationConfig": {"PageSize": PAGE_SIZE}}
    if group_contains:
        kwargs["InstanceGroupNameContains"] = group_contains
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(**kwargs):
        yield from page.get("ClusterNodeSummaries", [])


def describe_node(sagemaker: Any, name: str, instance_id: str) -> dict[str, Any]:
    try:
        return sagemaker.describe_cluster_node(ClusterName=name, NodeId=instance_id)["NodeDetails"]
    except ClientError as error:
        if is_not_found(error):
            raise HpctlError(
                f"node {instance_id} not found in cluster {name} ({region_of(sagemaker)})", EXIT_AWS
            ) from None
        raise


def iter_events(
    sagemaker: Any,
    name: str,
    *,
    after: dt.datetime | None = None,
    before: dt.datetime | None = None,
    group: str | None = None,
    node: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Cluster events, newest first, page after page."""
    kwargs: dict[str, Any] = {
        "ClusterName": name,
        "SortBy": "EventTime",
        "SortOrder": "Descending",
        "PaginationConfig": {"PageSize": PAGE_SIZE},
    }
    if after:
        kwargs["EventTimeAfter"] = after
    if before:
        kwargs["EventTimeBefore"] = before
    if group:
        kwargs["InstanceGroupName"] = group
    if node:
        kwargs["NodeId"] = node
    for page in sagemaker.get_paginator("list_cluster_events").paginate(**kwargs):
        yield from page.get("Events", [])


def batches(items: Sequence[str], size: int = MAX_NODES_PER_BATCH) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def batch_node_action(sagemaker: Any, action: str, name: str, node_ids: list[str]) -> dict[str, Any]:
    """One BatchRebootClusterNodes / BatchReplaceClusterNodes call (at most 25 IDs)."""
    if len(node_ids) > MAX_NODES_PER_BATCH:
        raise ValueError(f"at most {MAX_NODES_PER_BATCH} nodes per call, got {len(node_ids)}")
    call = {"reboot": sagemaker.batch_reboot_cluster_nodes, "replace": sagemaker.batch_replace_cluster_nodes}[
        action
    ]
    return call(ClusterName=name, NodeIds=node_ids)


def software_update_request(
    name: str,
    groups: Sequence[str] = (),
    *,
    deployment: dict[str, Any] | None = None,
    batch_size: int | None = None,
    batch_percent: int | None = None,
    rollback_batch_size: int | None = None,
    wait_interval: int | None = None,
    alarms: Sequence[str] = (),
    image_id: str | None = None,
) -> dict[str, Any]:
    """The UpdateClusterSoftware request (shapes per botocore's SageMaker model). ``deployment`` is a
    DeploymentConfig to start from (the groups' rolling_update in the config); each option given replaces
    its part of it."""
    request: dict[str, Any] = {"ClusterName": name}
    if groups:
        request["InstanceGroups"] = [{"InstanceGroupName": g} for g in groups]
    deployment = copy.deepcopy(deployment or {})
    policy: dict[str, Any] = deployment.pop("RollingUpdatePolicy", {})
    if batch_size is not None:
        policy["MaximumBatchSize"] = {"Type": "INSTANCE_COUNT", "Value": batch_size}
    elif batch_percent is not None:
        policy["MaximumBatchSize"] = {"Type": "CAPACITY_PERCENTAGE", "Value": batch_percent}
    if rollback_batch_size is not None:
        if "MaximumBatchSize" not in policy:
            raise HpctlError("--rollback-batch-size needs a batch size: --batch-size, --batch-percent or the "
                             "group's rolling_update in the config", 2)
        policy["RollbackMaximumBatchSize"] = {"Type": "INSTANCE_COUNT", "Value": rollback_batch_size}
    if policy:
        deployment["RollingUpdatePolicy"] = policy
    if wait_interval is not None:
        deployment["WaitIntervalInSeconds"] = wait_interval
    if alarms:
        deployment["AutoRollbackConfiguration"] = [{"AlarmName": a} for a in alarms]
    if deployment:
        request["DeploymentConfig"] = deployment
    if image_id:
        request["ImageId"] = image_id
    return request
