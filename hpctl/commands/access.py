"""Getting onto a node: connect (an SSM session) and ssh-config (ssh Host entries through SSM)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from typing import Any

from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl.commands.options import add_command
from hpctl.commands.selection import add_selection, selected_nodes
from hpctl.commands.terminal import err
from hpctl.errors import EXIT_FAILED, EXIT_OK
from hpctl.output import print_json
from hpctl.target import Target


def _resolve_node(sm: Any, t: Target, node: str) -> tuple[str, str, str]:
    """NODE -> (cluster ARN, group, instance id)."""
    instance_id = api.normalize_node_id(node)
    desc = api.describe_cluster(sm, t.cluster)
    details = api.describe_node(sm, t.cluster, instance_id)
    return desc["ClusterArn"], details["InstanceGroupName"], details.get("InstanceId", instance_id)


def cmd_connect(args: argparse.Namespace, t: Target, clients: Any) -> int:
    arn, group, instance_id = _resolve_node(clients("sagemaker"), t, args.node)
    target = api.ssm_target(arn, group, instance_id)
    command = nodeops.session_command(target, t.region, t.profile)
    if args.json:
        print_json({"node": instance_id, "group": group, "target": target, "command": command})
        return EXIT_OK
    if args.print:
        print(" ".join(command))
        return EXIT_OK
    missing = [tool for tool in ("aws", "session-manager-plugin") if shutil.which(tool) is None]
    if missing:
        print(" ".join(command))
        err(f"no session opened: {' and '.join(missing)} not on PATH; run the command above where they are")
        return EXIT_FAILED
    return subprocess.call(command)  # noqa: S603 - fixed argv, no shell


def cmd_ssh_config(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    arn = api.describe_cluster(sm, t.cluster)["ClusterArn"]
    found = selected_nodes(sm, t, args.group, args.status)
    if args.json:
        print_json(
            [
                {
                    "host": api.k8s_node_name(n["InstanceId"]),
                    "instance_id": n["InstanceId"],
                    "target": api.ssm_target(arn, n["InstanceGroupName"], n["InstanceId"]),
                }
                for n in found
            ]
        )
        return EXIT_OK
    print(
        f"# hpctl ssh-config for HyperPod cluster {t.cluster} ({t.region}); "
        "needs aws + session-manager-plugin"
    )
    for node in found:
        print(nodeops.ssh_host_entry(arn, node, t.region, t.profile, args.user))
    return EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "connect",
        cmd_connect,
        "open an SSM session on a node (or print the command)",
        "hpctl connect hyperpod-i-0123456789abcdef0",
    )
    p.add_argument("node", metavar="NODE", help="instance ID (i-...) or Kubernetes node name (hyperpod-i-...)")
    p.add_argument("--print", action="store_true", help="print the aws ssm start-session command, do not run it")

    p = add_command(
        sub,
        "ssh-config",
        cmd_ssh_config,
        "print ssh Host entries with an SSM ProxyCommand for every node",
        "hpctl ssh-config > ~/.ssh/config.d/hyperpod",
    )
    add_selection(
        p, group="only this instance group (repeatable)", status="only nodes in this status (repeatable)"
    )
    # The nodes run the Amazon Linux EKS AMI (lifecycle_scripts/on_create.sh); its login is ec2-user
    # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/managing-users.html).
    p.add_argument("--user", default="ec2-user", help="the User line's login name (default ec2-user)")
