"""Recovering nodes: reboot and replace, in batches of at most 25 nodes a call, after a confirmation."""

from __future__ import annotations

import argparse
from typing import Any

from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl.commands.options import add_command, add_yes
from hpctl.commands.selection import add_selection, selected_nodes
from hpctl.commands.terminal import confirm, err
from hpctl.errors import EXIT_AWS, EXIT_FAILED, EXIT_OK, UsageError
from hpctl.output import print_json, print_table
from hpctl.target import Target

# What each action does to a node, said in the prompt. Replace: botocore's SageMaker model, documentation of
# BatchReplaceClusterNodes ("destroys all instance volumes, including both root and secondary volumes").
CONSEQUENCE = {
    "reboot": "Each node is rebooted (BatchRebootClusterNodes); its pods are interrupted.",
    "replace": "Each instance is terminated and replaced (BatchReplaceClusterNodes): its root and secondary "
    "volumes are replaced too, and the data on them is lost.",
}


def _batch_targets(args: argparse.Namespace, sm: Any, t: Target) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Node IDs to act on (named, or selected by --group/--status) and what ListClusterNodes knows of them.

    The nodes are looked up when they are selected or for --dry-run; named nodes without --dry-run are sent
    as given (the API reports an unknown one in its per-node result).
    """
    named = nodeops.parse_node_ids(args.nodes)
    selecting = bool(args.group or args.status)
    if not named and not selecting:
        raise UsageError(f"{args.command}: name the nodes, or select them with --group and/or --status")
    if named and selecting:
        raise UsageError(f"{args.command}: name the nodes or select them with --group/--status, not both")
    if not selecting and not args.dry_run:
        return named, {}
    if selecting:
        found = selected_nodes(sm, t, args.group, args.status)
        if not found:
            raise UsageError(f"no node of {t.cluster} ({t.region}) matches --group/--status")
        return [n["InstanceId"] for n in found], {n["InstanceId"]: n for n in found}
    api.describe_cluster(sm, t.cluster)  # the cluster exists, or exit 3 naming the region
    known = {n["InstanceId"]: n for n in api.iter_nodes(sm, t.cluster)}
    missing = [n for n in named if n not in known]
    if missing:
        raise UsageError(f"not a node of {t.cluster} ({t.region}): {', '.join(missing)}")
    return named, known


def _describe_node(node_id: str, known: dict[str, dict[str, Any]]) -> str:
    node = known.get(node_id)
    if node is None:
        return node_id
    return f"{node_id} ({node.get('InstanceGroupName')}, {nodeops.node_status(node)})"


def cmd_batch(args: argparse.Namespace, t: Target, clients: Any) -> int:
    action = args.command
    sm = clients("sagemaker")
    node_ids, known = _batch_targets(args, sm, t)
    plan = api.batches(node_ids)
    if args.dry_run:
        if args.json:
            nodes = [
                {"node": n, "group": known[n].get("InstanceGroupName"), "status": nodeops.node_status(known[n])}
                for n in node_ids
            ]
            print_json({"dry_run": True, "action": action, "cluster": t.cluster, "nodes": nodes, "batches": plan})
        else:
            print(f"dry run: would {action} {len(node_ids)} node(s) of {t.cluster} in {len(plan)} call(s):")
            for i, batch in enumerate(plan, 1):
                print(f"  call {i}: {' '.join(batch)}")
            for node_id in node_ids:
                print(f"  {_describe_node(node_id, known)}: would be {action}d")
            print(CONSEQUENCE[action])
        return EXIT_OK
    listed = ", ".join(_describe_node(n, known) for n in node_ids[:10])
    more = f" and {len(node_ids) - 10} more" if len(node_ids) > 10 else ""
    question = (
        f"{action.capitalize()} {len(node_ids)} node(s) of cluster {t.cluster} ({t.region}): {listed}{more}? "
        + CONSEQUENCE[action]
    )
    if not confirm(question, args.yes):
        err("aborted, nothing sent")
        return EXIT_FAILED
    results, stop_error = nodeops.run_batches(sm, action, t.cluster, node_ids)
    if args.json:
        print_json(nodeops.results_json(results))
    else:
        print_table(
            ["NODE", "RESULT", "CODE", "MESSAGE"], [[r.node, r.result, r.code, r.message] for r in results]
        )
    if stop_error:
        err(stop_error)
        return EXIT_AWS
    failed = [r for r in results if r.result != "ok"]
    if failed:
        err(f"{len(failed)} of {len(results)} node(s) failed")
        return EXIT_FAILED
    return EXIT_OK


def register(sub: Any) -> None:
    for action, what in (("reboot", "BatchRebootClusterNodes"), ("replace", "BatchReplaceClusterNodes")):
        p = add_command(
            sub,
            action,
            cmd_batch,
            f"{action} nodes ({what}, 25 per call) after a confirmation",
            f"hpctl {action} i-0123456789abcdef0 hyperpod-i-0fedcba9876543210 --dry-run\n"
            f"  hpctl {action} --group gpu-workers --status Failure --dry-run",
        )
        p.add_argument("nodes", nargs="*", metavar="NODE", help="instance IDs (i-...) or node names (hyperpod-i-...)")
        add_selection(
            p,
            group="select the nodes of this group (repeatable)",
            status="select the nodes in this status (repeatable)",
        )
        add_yes(p)
        p.add_argument("--dry-run", action="store_true", help="show the calls that would be made, call nothing")
