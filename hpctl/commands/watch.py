"""Watching the cluster: clusters, status, nodes, wait and events (read-only)."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl import wait as waiting
from hpctl.commands.options import add_command, add_polling, interval, level, positive
from hpctl.commands.selection import add_selection, check_groups, selected_nodes
from hpctl.commands.terminal import err
from hpctl.errors import EXIT_OK, EXIT_TIMEOUT, UsageError, error_code
from hpctl.output import fields, print_json, print_table, table, to_json
from hpctl.target import Target, parse_duration, parse_time
from hpctl.wait import cluster_in_service, nodes_at_target, wait_for_cluster

# `clusters` reads each cluster (DescribeCluster, ListClusterNodes): past this many it says how far it has got.
PROGRESS_EVERY = 10


def _cluster_record(sm: Any, summary: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"cluster": summary.get("ClusterName"), "status": summary.get("ClusterStatus"),
                              "orchestrator": None, "nodes_current": None, "nodes_target": None, "node_counts": {},
                              "created": summary.get("CreationTime"), "arn": summary.get("ClusterArn"),
                              "error": None}
    try:
        desc = api.describe_cluster(sm, summary["ClusterArn"])
        counts = nodeops.status_counts(api.iter_nodes(sm, summary["ClusterArn"]))
    except (ClientError, api.ClusterNotFound) as error:  # one cluster this identity may not read, or just deleted
        record["error"] = f"{error_code(error)}" if isinstance(error, ClientError) else "not found"
        return record
    groups = desc.get("InstanceGroups", [])
    record.update(orchestrator=", ".join(sorted(desc.get("Orchestrator") or {})) or None,
                  nodes_current=sum(g.get("CurrentCount", 0) for g in groups),
                  nodes_target=sum(g.get("TargetCount", 0) for g in groups), node_counts=counts)
    return record


def _unreadable(record: dict[str, Any]) -> str:
    return "denied" if "AccessDenied" in str(record["error"]) else f"unreadable ({record['error']})"


def cmd_clusters(args: argparse.Namespace, t: Target, clients: Any) -> int:
    """Every cluster of the region; one that cannot be read is marked so and the rest are listed."""
    sm = clients("sagemaker")
    summaries = list(api.iter_clusters(sm))
    records = []
    for number, summary in enumerate(summaries, 1):
        records.append(_cluster_record(sm, summary))
        if len(summaries) > PROGRESS_EVERY and number % PROGRESS_EVERY == 0 and number < len(summaries):
            print(f"hpctl: read {number} of {len(summaries)} clusters", file=sys.stderr, flush=True)
    unreadable = [r for r in records if r["error"]]
    if unreadable:
        print(f"hpctl: warning: {len(unreadable)} cluster(s) could not be read: "
              + ", ".join(f"{r['cluster']} {_unreadable(r)}" for r in unreadable), file=sys.stderr)
    if args.json:
        print_json(records)
        return EXIT_OK
    print_table(
        ["CLUSTER", "STATUS", "ORCHESTRATOR", "NODES", "HEALTH", "CREATED"],
        [
            [
                r["cluster"],
                r["status"],
                r["orchestrator"],
                _unreadable(r) if r["error"] else f"{r['nodes_current']}/{r['nodes_target']}",
                " ".join(f"{status}={count}" for status, count in r["node_counts"].items()),
                r["created"],
            ]
            for r in records
        ],
    )
    print(f"{len(records)} HyperPod cluster(s) in {t.region}", file=sys.stderr)
    return EXIT_OK


def cmd_status(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    desc = api.describe_cluster(sm, t.cluster)
    counts = nodeops.status_counts(api.iter_nodes(sm, t.cluster))
    groups = [
        {
            "name": g.get("InstanceGroupName"),
            "instance_type": " or ".join(api.deployed_instance_types(g)) or None,
            "target": g.get("TargetCount"),
            "current": g.get("CurrentCount"),
            "status": g.get("Status"),
        }
        for g in desc.get("InstanceGroups", [])
    ]
    if args.json:
        print_json(
            {
                "cluster": desc.get("ClusterName"),
                "arn": desc["ClusterArn"],
                "region": t.region,
                "status": desc.get("ClusterStatus"),
                "failure_message": desc.get("FailureMessage") or None,
                "instance_groups": groups,
                "node_counts": counts,
                "nodes_total": sum(counts.values()),
            }
        )
        return EXIT_OK
    pairs: list[tuple[str, Any]] = [
        ("Cluster", desc.get("ClusterName")),
        ("ARN", desc["ClusterArn"]),
        ("Region", t.region),
        ("Status", desc.get("ClusterStatus")),
        ("Created", desc.get("CreationTime")),
    ]
    if desc.get("FailureMessage"):
        pairs.append(("Failure", desc["FailureMessage"]))
    print(fields(pairs))
    print()
    print_table(
        ["GROUP", "TYPE", "TARGET", "CURRENT", "STATUS"],
        [[g["name"], g["instance_type"], g["target"], g["current"], g["status"]] for g in groups],
    )
    print()
    summary = "  ".join(f"{status} {count}" for status, count in counts.items()) or "none"
    print(f"Nodes: {sum(counts.values())} ({summary})")
    return EXIT_OK


def cmd_nodes(args: argparse.Namespace, t: Target, clients: Any) -> int:
    found = selected_nodes(clients("sagemaker"), t, args.group, args.status)
    records = [nodeops.node_record(n) for n in found]
    if args.json:
        print_json(records)
        return EXIT_OK
    print_table(
        ["INSTANCE", "K8S NODE", "GROUP", "TYPE", "STATUS", "LAUNCHED", "MESSAGE"],
        [
            [
                r["instance_id"],
                r["k8s_node"],
                r["group"],
                r["instance_type"],
                r["status"],
                r["launch_time"],
                r["message"] if r["status"] != "Running" else "",
            ]
            for r in records
        ],
    )
    print(f"{len(records)} node(s)", file=sys.stderr)
    return EXIT_OK


def cmd_wait(args: argparse.Namespace, t: Target, clients: Any) -> int:
    result = wait_for_cluster(
        clients("sagemaker"),
        t.cluster,
        timeout=parse_duration(args.timeout),
        interval=interval(args.interval),
        check=nodes_at_target if args.wait_for == "nodes" else cluster_in_service,
    )
    if args.json:
        print_json(
            {
                "cluster": t.cluster,
                "status": result.status,
                "elapsed_seconds": round(result.elapsed),
                "timed_out": result.exit_code == EXIT_TIMEOUT,
                "failure_message": result.failure_message,
            }
        )
    elif result.exit_code == EXIT_TIMEOUT:
        err(f"timed out after {args.timeout}: cluster {t.cluster} is still {result.status}")
    elif result.exit_code != EXIT_OK:
        err(f"cluster {t.cluster} is {result.status}: {result.failure_message or 'no failure message'}")
    elif args.wait_for == "nodes":
        print(f"cluster {t.cluster} is {result.status} and every instance group is at its target count")
    else:
        print(f"cluster {t.cluster} is {result.status}")
    return result.exit_code


def _event_record(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "time": e.get("EventTime"),
        "level": e.get("EventLevel"),
        "resource_type": e.get("ResourceType"),
        "group": e.get("InstanceGroupName"),
        "instance_id": e.get("InstanceId"),
        "description": e.get("Description"),
        "event_id": e.get("EventId"),
    }


EVENT_HEADERS = ["TIME", "LEVEL", "RESOURCE", "GROUP", "INSTANCE", "DESCRIPTION"]


def _event_row(r: dict[str, Any]) -> list[Any]:
    return [r["time"], r["level"], r["resource_type"], r["group"], r["instance_id"], r["description"]]


def cmd_events(args: argparse.Namespace, t: Target, clients: Any) -> int:
    after = parse_time(args.since) if args.since else None
    before = parse_time(args.until) if args.until else None
    if after and before and after >= before:
        raise UsageError(f"--since {args.since} is not before --until {args.until}")
    if args.follow and before:
        raise UsageError("--follow shows new events as they come: it takes no --until")
    pause = interval(args.interval) if args.follow else 0.0
    min_level = api.LEVELS.index(args.level) if args.level else 0
    node = api.normalize_node_id(args.node) if args.node else None
    sm = clients("sagemaker")
    groups = list(dict.fromkeys(args.group))
    if groups:  # an unknown group is an error, as in `nodes`, not an empty table
        check_groups(api.describe_cluster(sm, t.cluster), groups)
    # ListClusterEvents filters on one InstanceGroupName: several groups are asked for together and kept here.
    one_group = groups[0] if len(groups) == 1 else None

    def fetch(since: dt.datetime | None) -> list[dict[str, Any]]:
        picked: list[dict[str, Any]] = []
        for event in api.iter_events(sm, t.cluster, after=since, before=before, group=one_group, node=node):
            if groups and event.get("InstanceGroupName") not in groups:
                continue
            event_level = event.get("EventLevel", "Info")
            if (api.LEVELS.index(event_level) if event_level in api.LEVELS else 0) >= min_level:
                picked.append(event)
                if len(picked) >= args.limit:
                    break
        picked.reverse()  # oldest first, newest at the bottom, like a log
        return picked

    records = [_event_record(e) for e in fetch(after)]
    if not args.follow:
        if args.json:
            print_json(records)
        else:
            print_table(EVENT_HEADERS, [_event_row(r) for r in records])
        return EXIT_OK
    return _follow_events(args.json, pause, records, fetch)


def _follow_events(
    as_json: bool,
    pause: float,
    records: list[dict[str, Any]],
    fetch: Callable[[dt.datetime | None], list[dict[str, Any]]],
) -> int:
    """Print the events so far, then poll for newer ones until Ctrl-C (JSON: one object per line)."""
    seen: set[str] = set()
    last = None
    header = True
    while True:
        fresh = [r for r in records if r["event_id"] not in seen]
        if fresh:
            if as_json:
                for r in fresh:
                    print(to_json(r, indent=None), flush=True)
            else:
                print(table(EVENT_HEADERS, [_event_row(r) for r in fresh], header=header), flush=True)
                header = False
        seen.update(r["event_id"] for r in fresh)
        last = max((r["time"] for r in records if r["time"]), default=last)
        waiting._sleep(pause)
        # ListClusterEvents' EventTimeAfter: ask again from the newest event seen (its ID keeps it from repeating).
        records = [_event_record(e) for e in fetch(last)]


def register(sub: Any) -> None:
    add_command(
        sub,
        "clusters",
        cmd_clusters,
        "every HyperPod cluster of the region: status, orchestrator, nodes current/target and by status",
        "hpctl clusters --region us-east-1",
        need_cluster=False,
    )

    add_command(
        sub, "status", cmd_status, "cluster status, failure message, instance groups and node counts", "hpctl status"
    )

    p = add_command(
        sub,
        "nodes",
        cmd_nodes,
        "list every node (all pages), filtered by group and status",
        "hpctl nodes --group gpu-workers --status Failure --json",
    )
    add_selection(
        p,
        group="only this instance group (repeatable)",
        status="only this node status, e.g. Running, Pending, Failure (repeatable)",
    )

    p = add_command(
        sub,
        "wait",
        cmd_wait,
        "wait until the cluster is InService, or with --for nodes also every group at its target count "
        "(exit 0), or Failed (exit 1); timeout exit 4",
        "hpctl wait --for nodes --timeout 3h --interval 60s",
    )
    p.add_argument(
        "--for",
        dest="wait_for",
        choices=("cluster", "nodes"),
        default="cluster",
        help="cluster: InService (default); nodes: InService and every group's current count at its target "
        "(with continuous provisioning a cluster is InService before its nodes are all there)",
    )
    add_polling(p, timeout="2h", interval="30s")

    p = add_command(
        sub,
        "events",
        cmd_events,
        "recent cluster events (ListClusterEvents), oldest first",
        "hpctl events --level Warn --since 2h",
    )
    p.add_argument(
        "--level", type=level, metavar="LEVEL", help="only events at this level or above: Info, Warn, Error"
    )
    p.add_argument("--since", help="only events after this: a duration back from now (2h) or an ISO time")
    p.add_argument("--until", help="only events before this: a duration back from now or an ISO time")
    add_selection(p, group="only events of this instance group (repeatable)")
    p.add_argument("--node", help="only events of this node (i-... or hyperpod-i-...)")
    p.add_argument("--limit", type=positive, default=50, help="show at most this many, the newest (default 50)")
    p.add_argument("--follow", "-f", action="store_true", help="keep polling and print new events until Ctrl-C")
    add_polling(p, interval="30s", when="with --follow")
