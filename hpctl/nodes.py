"""Node-level work: filtering, SSM targets, ssh config, batched reboot/replace with per-node results."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError

from hpctl import cluster as api
from hpctl.errors import UsageError, describe_aws_error, error_code

_INSTANCE_ID = re.compile(r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$")


def node_status(node: dict[str, Any]) -> str:
    return str(node.get("InstanceStatus", {}).get("Status", "Unknown"))


def filter_nodes(
    nodes: Iterable[dict[str, Any]], groups: Sequence[str] = (), statuses: Sequence[str] = ()
) -> list[dict[str, Any]]:
    wanted_groups = set(groups)
    wanted_status = {s.lower() for s in statuses}
    return [
        n
        for n in nodes
        if (not wanted_groups or n.get("InstanceGroupName") in wanted_groups)
        and (not wanted_status or node_status(n).lower() in wanted_status)
    ]


def status_counts(nodes: Iterable[dict[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(node_status(n) for n in nodes).items()))


def node_record(node: dict[str, Any]) -> dict[str, Any]:
    """The fields `nodes` shows (and prints in --json)."""
    instance_id = node["InstanceId"]
    return {
        "instance_id": instance_id,
        "k8s_node": api.k8s_node_name(instance_id),
        "group": node.get("InstanceGroupName"),
        "instance_type": node.get("InstanceType"),
        "status": node_status(node),
        "message": node.get("InstanceStatus", {}).get("Message"),
        "launch_time": node.get("LaunchTime"),
        "image_status": node.get("ImageVersionStatus"),
    }


def parse_node_ids(nodes: Sequence[str]) -> list[str]:
    """NODE arguments -> distinct instance IDs, in the order given; refuse anything else."""
    seen: dict[str, None] = {}
    for raw in nodes:
        instance_id = api.normalize_node_id(raw)
        if not _INSTANCE_ID.match(instance_id):
            raise UsageError(f"{raw!r} is not an instance ID (i-...) or a node name (hyperpod-i-...)")
        seen.setdefault(instance_id)
    return list(seen)


def ssh_host_entry(
    cluster_arn: str, node: dict[str, Any], region: str, profile: str | None = None, user: str | None = None
) -> str:
    instance_id = node["InstanceId"]
    target = api.ssm_target(cluster_arn, node["InstanceGroupName"], instance_id)
    proxy = (
        f"aws ssm start-session --target {target} --document-name AWS-StartSSHSession "
        f"--parameters portNumber=%p --region {region}"
    )
    if profile:
        proxy += f" --profile {profile}"
    lines = [f"Host {api.k8s_node_name(instance_id)} {instance_id}", f"  HostName {instance_id}"]
    if user:
        lines.append(f"  User {user}")
    lines.append(f"  ProxyCommand {proxy}")
    return "\n".join(lines)


def session_command(target: str, region: str, profile: str | None = None) -> list[str]:
    command = ["aws", "ssm", "start-session", "--target", target, "--region", region]
    if profile:
        command += ["--profile", profile]
    return command


@dataclass
class NodeResult:
    node: str
    result: str  # ok | failed | skipped
    code: str = ""
    message: str = ""


def run_batches(
    sagemaker: Any, action: str, name: str, node_ids: list[str]
) -> tuple[list[NodeResult], str | None]:
    """Send the nodes in batches of 25; return a result per node and the AWS error that stopped it, if any.

    A batch the API rejects as a whole marks its nodes failed and leaves the later batches unsent.
    """
    results: list[NodeResult] = []
    chunks = api.batches(node_ids)
    for index, chunk in enumerate(chunks):
        try:
            response = api.batch_node_action(sagemaker, action, name, chunk)
        except ClientError as error:
            line, _ = describe_aws_error(error)
            results += [NodeResult(n, "failed", error_code(error), line) for n in chunk]
            for later in chunks[index + 1 :]:
                results += [NodeResult(n, "skipped", "", "not sent after the error above") for n in later]
            return results, line
        failed = {f["NodeId"]: f for f in response.get("Failed", [])}
        succeeded = set(response.get("Successful", []))
        for node in chunk:
            if node in failed:
                results.append(
                    NodeResult(
                        node, "failed", failed[node].get("ErrorCode", ""), failed[node].get("Message", "")
                    )
                )
            elif node in succeeded:
                results.append(NodeResult(node, "ok"))
            else:
                results.append(
                    NodeResult(node, "failed", "NoResult", "the API reported neither success nor failure")
                )
    return results, None


def results_json(results: list[NodeResult]) -> list[dict[str, str]]:
    return [asdict(r) for r in results]
