"""`hpctl`: argument parsing, dispatch, and the one place errors become a line on stderr and an exit code."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from botocore.exceptions import BotoCoreError, ClientError

from hpctl import __version__, drift, examples, kubeconfig, plan_command, predestroy, preflight
from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl import wait as waiting
from hpctl.aws import Clients, enable_debug_log
from hpctl.errors import (
    EXIT_AWS,
    EXIT_CODE_TABLE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    HpctlError,
    UsageError,
    describe_aws_error,
    one_line,
)
from hpctl.output import fields, is_terminal, print_json, print_table, table, to_json
from hpctl.target import Target, parse_duration, parse_time, resolve
from hpctl.wait import MIN_INTERVAL, cluster_in_service, nodes_at_target, software_updated, wait_for_cluster

MakeClients = Callable[[str, str | None], Any]


def _ask(prompt: str) -> str:  # replaced in tests
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


def _stdin_is_terminal() -> bool:  # replaced in tests
    return is_terminal(sys.stdin)


def confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not _stdin_is_terminal():
        raise UsageError(f"{question.rstrip('?')}: needs confirmation; stdin is not a terminal, pass --yes")
    return _ask(f"{question} [y/N] ").strip().lower() in {"y", "yes"}


def _err(message: str) -> None:
    print(f"hpctl: {message}", file=sys.stderr)


def _check_groups(desc: dict[str, Any], groups: Sequence[str]) -> list[str]:
    """The cluster's instance group names; UsageError naming any of `groups` it lacks."""
    known = [g["InstanceGroupName"] for g in desc.get("InstanceGroups", [])]
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise UsageError(
            f"no instance group {', '.join(unknown)} in {desc.get('ClusterName')} (have: {', '.join(known) or 'none'})"
        )
    return known


def _check_statuses(statuses: Sequence[str]) -> list[str]:
    """--status values in botocore's spelling, matched without regard to case; UsageError for any other."""
    valid = {s.lower(): s for s in api.node_statuses()}
    unknown = [s for s in statuses if s.lower() not in valid]
    if unknown:
        raise UsageError(f"unknown --status {', '.join(unknown)} (valid: {', '.join(valid.values())})")
    return [valid[s.lower()] for s in statuses]


def _selected_nodes(sm: Any, t: Target, groups: Sequence[str], statuses: Sequence[str]) -> list[dict[str, Any]]:
    """Nodes of the cluster in `groups` and `statuses` (all when empty), after checking both exist."""
    wanted = _check_statuses(statuses)
    if groups:
        _check_groups(api.describe_cluster(sm, t.cluster), groups)
    contains = groups[0] if len(groups) == 1 else None
    return nodeops.filter_nodes(api.iter_nodes(sm, t.cluster, contains), groups, wanted)


# --- commands -------------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    desc = api.describe_cluster(sm, t.cluster)
    counts = nodeops.status_counts(api.iter_nodes(sm, t.cluster))
    groups = [
        {
            "name": g.get("InstanceGroupName"),
            "instance_type": g.get("InstanceType"),
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
    found = _selected_nodes(clients("sagemaker"), t, args.group, args.status)
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


def _interval(text: str) -> float:
    seconds = parse_duration(text)
    if seconds < MIN_INTERVAL:
        raise UsageError(f"--interval {text} is too short: at least {MIN_INTERVAL:g}s between polls")
    return seconds


def cmd_wait(args: argparse.Namespace, t: Target, clients: Any) -> int:
    result = wait_for_cluster(
        clients("sagemaker"),
        t.cluster,
        timeout=parse_duration(args.timeout),
        interval=_interval(args.interval),
        check=nodes_at_target if args.wait_for == "nodes" else cluster_in_service,
    )
    if args.json:
        print_json(
            {
                "cluster": t.cluster,
                "status": result.status,
                "elapsed_seconds": round(result.elapsed),
                "timed_out": result.exit_code == 4,
                "failure_message": result.failure_message,
            }
        )
    elif result.exit_code == 4:
        _err(f"timed out after {args.timeout}: cluster {t.cluster} is still {result.status}")
    elif result.exit_code != EXIT_OK:
        _err(f"cluster {t.cluster} is {result.status}: {result.failure_message or 'no failure message'}")
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
    interval = _interval(args.interval) if args.follow else 0.0
    min_level = api.LEVELS.index(args.level) if args.level else 0
    node = api.normalize_node_id(args.node) if args.node else None
    sm = clients("sagemaker")

    def fetch(since: dt.datetime | None) -> list[dict[str, Any]]:
        picked: list[dict[str, Any]] = []
        for event in api.iter_events(sm, t.cluster, after=since, before=before, group=args.group, node=node):
            level = event.get("EventLevel", "Info")
            if (api.LEVELS.index(level) if level in api.LEVELS else 0) >= min_level:
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
    return _follow_events(args.json, interval, records, fetch)


def _follow_events(
    as_json: bool,
    interval: float,
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
        waiting._sleep(interval)
        # ListClusterEvents' EventTimeAfter: ask again from the newest event seen (its ID keeps it from repeating).
        records = [_event_record(e) for e in fetch(last)]


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
        _err(f"no session opened: {' and '.join(missing)} not on PATH; run the command above where they are")
        return EXIT_FAILED
    return subprocess.call(command)  # noqa: S603 - fixed argv, no shell


def cmd_ssh_config(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    arn = api.describe_cluster(sm, t.cluster)["ClusterArn"]
    found = _selected_nodes(sm, t, args.group, args.status)
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
        found = _selected_nodes(sm, t, args.group, args.status)
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
        _err("aborted, nothing sent")
        return EXIT_FAILED
    results, stop_error = nodeops.run_batches(sm, action, t.cluster, node_ids)
    if args.json:
        print_json(nodeops.results_json(results))
    else:
        print_table(
            ["NODE", "RESULT", "CODE", "MESSAGE"], [[r.node, r.result, r.code, r.message] for r in results]
        )
    if stop_error:
        _err(stop_error)
        return EXIT_AWS
    failed = [r for r in results if r.result != "ok"]
    if failed:
        _err(f"{len(failed)} of {len(results)} node(s) failed")
        return EXIT_FAILED
    return EXIT_OK


# Without a rolling-update policy every node of the groups is patched at once: "all cluster nodes experience
# downtime" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster-software.html).
ALL_AT_ONCE = "No --batch-size/--batch-percent: every node of {scope} is patched at once, all of them down meanwhile."


def cmd_update_software(args: argparse.Namespace, t: Target, clients: Any) -> int:
    groups = list(dict.fromkeys(args.group))
    request = api.software_update_request(
        t.cluster,
        groups,
        batch_size=args.batch_size,
        batch_percent=args.batch_percent,
        rollback_batch_size=args.rollback_batch_size,
        wait_interval=args.wait_interval,
        alarms=args.alarm,
        image_id=args.image_id,
    )
    sm = clients("sagemaker")
    desc = api.describe_cluster(sm, t.cluster)
    known = _check_groups(desc, groups)
    scope = ", ".join(groups) if groups else f"all groups ({', '.join(known)})"
    rolling = args.batch_size is not None or args.batch_percent is not None
    how = "Nodes are patched in rolling batches." if rolling else ALL_AT_ONCE.format(scope=scope)
    if args.dry_run:
        if args.json:
            print_json(request)
        else:
            counts = {g["InstanceGroupName"]: g.get("CurrentCount", 0) for g in desc.get("InstanceGroups", [])}
            for name in groups or known:
                print(f"dry run: would update the software of {name} ({counts.get(name, 0)} node(s))")
            print(how)
            print("UpdateClusterSoftware request:")
            print_json(request)
        return EXIT_OK
    if not confirm(f"Update the software of {scope} in cluster {t.cluster} ({t.region})? {how}", args.yes):
        _err("aborted, nothing sent")
        return EXIT_FAILED
    arn = sm.update_cluster_software(**request)["ClusterArn"]
    if not args.wait:
        if args.json:
            print_json({"cluster_arn": arn, "request": request})
        else:
            print(f"software update started for {scope} of {arn}; follow it with `hpctl wait` and `hpctl events`")
        return EXIT_OK
    if not args.json:
        print(f"software update started for {scope} of {arn}; waiting for it")
    result = wait_for_cluster(
        sm,
        t.cluster,
        timeout=parse_duration(args.timeout),
        interval=_interval(args.interval),
        check=software_updated(groups),
    )
    if args.json:
        print_json({"cluster_arn": arn, "request": request, "exit_code": result.exit_code,
                    "failure_message": result.failure_message})
    elif result.exit_code == EXIT_OK:
        print(f"software update of {scope} succeeded")
    elif result.exit_code == EXIT_TIMEOUT:
        _err(f"timed out after {args.timeout}: the software update of {scope} is still running")
    else:
        _err(f"software update of {scope} did not succeed: {result.failure_message or result.status}")
    return result.exit_code


def cmd_kubeconfig(args: argparse.Namespace, t: Target, clients: Any) -> int:
    name = args.eks_cluster
    if name is None and t.explicit_cluster:
        desc = api.describe_cluster(clients("sagemaker"), t.cluster)
        eks_arn = desc.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn")
        if not eks_arn:  # never the config's EKS cluster: it may belong to another HyperPod cluster
            raise UsageError(f"cluster {t.cluster} reports no EKS orchestrator: pass --eks-cluster NAME")
        name = eks_arn.rsplit("/", 1)[-1]
    if name is None and t.cfg is not None:
        from infra.config import eks_cluster_name

        name = eks_cluster_name(t.cfg)
    if name is None:
        raise UsageError("cannot tell the EKS cluster: pass --eks-cluster NAME or --config")
    eks = clients("eks").describe_cluster(name=name)["cluster"]
    entry = kubeconfig.build_entry(eks, t.region, t.profile, args.alias)
    if args.print:
        if args.json:
            print_json(entry)
        else:
            print(kubeconfig.dump(entry), end="")
        return EXIT_OK
    path = Path(args.kubeconfig).expanduser() if args.kubeconfig else kubeconfig.default_path()
    kubeconfig.write_merged(path, entry, set_current=not args.no_set_context)
    if args.json:
        print_json({"kubeconfig": str(path), "context": entry["current-context"], "eks_cluster": name})
    else:
        print(f"context {entry['current-context']} written to {path}")
    return EXIT_OK


def cmd_drift(args: argparse.Namespace, t: Target, clients: Any) -> int:
    if t.cluster != t.cfg.hyperpod.cluster_name:
        _err(
            f"warning: comparing cluster {t.cluster} with the config of {t.cfg.hyperpod.cluster_name} "
            f"({args.config or 'config/default.yaml'})"
        )
    deployed = api.find_cluster(clients("sagemaker"), t.cluster)
    changes = drift.compare(deployed, t.cfg)
    if args.json:
        print_json(
            {
                "cluster": t.cluster,
                "drift": bool(changes),
                "replaces_cluster": drift.replaces_cluster(changes),
                "changes": drift.changes_json(changes),
            }
        )
        return EXIT_FAILED if changes else EXIT_OK
    if not changes:
        print(f"no drift: {t.cluster} matches {args.config or 'config/default.yaml'}")
        return EXIT_OK
    print(f"cdk deploy would change {t.cluster}:")
    print_table(
        ["GROUP", "FIELD", "DEPLOYED", "CONFIG", "EFFECT"],
        [[c.group, c.field, c.deployed, c.config, c.effect] for c in changes],
    )
    if drift.replaces_cluster(changes):
        _err(
            "WARNING: a create-only field changes: cdk deploy would REPLACE the whole HyperPod cluster "
            "and lose "
            "every node. Use a new instance group instead."
        )
    return EXIT_FAILED


def cmd_preflight(args: argparse.Namespace, t: Target, clients: Any) -> int:
    cdk_out = Path(args.cdk_out)
    if not cdk_out.is_dir():
        raise UsageError(f"--cdk-out {cdk_out} is not a directory: run `cdk synth` first or pass its output")
    checks = preflight.run_all(t.cfg, clients, cdk_out)
    failed = [c for c in checks if c.verdict == preflight.FAIL]
    if args.json:
        print_json({"ok": not failed, "checks": preflight.checks_json(checks)})
    else:
        print_table(["CHECK", "VERDICT", "REASON"], [[c.name, c.verdict.upper(), c.reason] for c in checks])
        warned = sum(c.verdict == preflight.WARN for c in checks)
        print(f"\n{len(checks)} checks: {len(failed)} failed, {warned} warnings")
    return EXIT_FAILED if failed else EXIT_OK


def cmd_pre_destroy(args: argparse.Namespace, t: Target, clients: Any) -> int:
    vpc = predestroy.vpc_id(t.cfg, clients)
    blockers = predestroy.find(t.cfg, clients, vpc) if vpc else []
    ours = [b for b in blockers if b.ours]
    failed: list[tuple[predestroy.Blocker, str]] = []
    if args.delete and ours:
        if not confirm(f"Delete {len(ours)} resource(s) of {t.cfg.project} left in {vpc} ({t.region})?", args.yes):
            _err("aborted, nothing deleted")
            return EXIT_FAILED
        failed = predestroy.remove(clients, blockers)
    if args.json:
        print_json({"vpc": vpc, "deleted": bool(args.delete), "failed": [b.id for b, _ in failed],
                    "blockers": [{"kind": b.kind, "id": b.id, "detail": b.detail, "ours": b.ours} for b in blockers]})
    elif not blockers:
        print(f"nothing outside CloudFormation blocks deleting {vpc or 'the VPC (network stack not found)'}")
    else:
        print_table(["KIND", "ID", "DETAIL", "TAGGED FOR THIS CLUSTER"],
                    [[b.kind, b.id, b.detail, "yes" if b.ours else "no"] for b in blockers])
        if not args.delete:
            print("\nWhile the cluster runs, delete LoadBalancer Services and Ingresses with kubectl first (their "
                  "controller re-creates a deleted load balancer); then `hpctl pre-destroy --delete` removes "
                  "what is tagged for this cluster. Untagged ones are someone else's: not touched.")
    for blocker, error in failed:
        _err(f"{blocker.id}: {error}")
    # Still in the way: whatever was not deleted, and the deletes that failed.
    remaining = [b for b in blockers if not (args.delete and b.ours)] + [b for b, _ in failed]
    return EXIT_FAILED if remaining else EXIT_OK


def cmd_render_examples(args: argparse.Namespace, t: Target, clients: Any) -> int:
    minutes = args.checkpoint_interval_minutes
    if not 0 < minutes < float("inf"):  # also refuses NaN
        raise UsageError(f"--checkpoint-interval-minutes must be more than zero, got {minutes:g}")
    files = examples.render(t.cfg, gpus=args.gpus, efa=args.efa, checkpoint_interval_minutes=minutes)
    if args.out == "-":
        print(examples.stream(files), end="")
        return EXIT_OK
    written, removed = examples.write(files, Path(args.out))
    if args.json:
        print_json({"written": [str(p) for p in written], "removed": [str(p) for p in removed]})
    else:
        for path in written:
            print(f"wrote {path}")
        for path in removed:
            print(f"removed {path} (an earlier rendering; this config makes no such file)")
    return EXIT_OK


def cmd_clusters(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    records = []
    for summary in api.iter_clusters(sm):
        desc = api.describe_cluster(sm, summary["ClusterArn"])
        groups = desc.get("InstanceGroups", [])
        orchestrator = desc.get("Orchestrator") or {}
        records.append(
            {
                "cluster": summary.get("ClusterName"),
                "status": summary.get("ClusterStatus"),
                "orchestrator": ", ".join(sorted(orchestrator)) or None,
                "nodes_current": sum(g.get("CurrentCount", 0) for g in groups),
                "nodes_target": sum(g.get("TargetCount", 0) for g in groups),
                "node_counts": nodeops.status_counts(api.iter_nodes(sm, summary["ClusterArn"])),
                "created": summary.get("CreationTime"),
                "arn": summary.get("ClusterArn"),
            }
        )
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
                f"{r['nodes_current']}/{r['nodes_target']}",
                " ".join(f"{status}={count}" for status, count in r["node_counts"].items()),
                r["created"],
            ]
            for r in records
        ],
    )
    print(f"{len(records)} HyperPod cluster(s) in {t.region}", file=sys.stderr)
    return EXIT_OK


# --- parser ---------------------------------------------------------------------------------------

DESCRIPTION = """Day-2 operations for a SageMaker HyperPod cluster orchestrated by Amazon EKS.

The cluster comes from --cluster NAME or ARN or from the app's config file (--config, default
config/default.yaml). The region from --region, else the cluster ARN, else AWS_REGION, AWS_DEFAULT_REGION
or the profile's region, else the config. These options go before or after the command."""


def _add_common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """The options every command takes. On the commands they default to SUPPRESS, so that a value given
    before the command (`hpctl --region X status`) is not overwritten by the command's default."""
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    where = parser.add_argument_group("target")
    where.add_argument(
        "--cluster", help="HyperPod cluster name or ARN (default: hyperpod.cluster_name of the config)", **unset
    )
    where.add_argument("--config", help="the app's config file (default: config/default.yaml)", **unset)
    where.add_argument(
        "--region",
        help="AWS region (default: the cluster ARN's, else AWS_REGION/AWS_DEFAULT_REGION/profile, else the config)",
        **unset,
    )
    where.add_argument("--profile", help="AWS named profile", **unset)
    parser.add_argument("--json", action="store_true", help="machine-readable JSON on stdout", **unset)
    parser.add_argument("--debug", action="store_true", help="log every AWS request on stderr (botocore)", **unset)


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _add_common(common, suppress=True)
    return common


def _add(
    sub: Any, name: str, common: argparse.ArgumentParser, help_text: str, example: str
) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        parents=[common],
        help=help_text,
        description=help_text,
        epilog=f"example:\n  {example}\n\n{EXIT_CODE_TABLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _bounded(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high], with a one-line error otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"{value} is out of range: {low}-{high}" if high is not None else f"must be at least {low}"
            )
        return value

    return parse


_positive = _bounded(1)


def _level(text: str) -> str:
    """--level in any case: warn, WARN and Warn are Warn."""
    for level in api.LEVELS:
        if level.lower() == text.lower():
            return level
    raise argparse.ArgumentTypeError(f"unknown level {text!r} (valid: {', '.join(api.LEVELS)})")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage of update-software is a screenful), pointing at --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="hpctl",
        description=DESCRIPTION,
        epilog="example:\n  hpctl status --config config/prod.yaml\n\n" + EXIT_CODE_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hpctl {__version__}")
    _add_common(parser, suppress=False)
    common = _common()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = _add(
        sub,
        "clusters",
        common,
        "every HyperPod cluster of the region: status, orchestrator, nodes current/target and by status",
        "hpctl clusters --region us-east-1",
    )
    p.set_defaults(handler=cmd_clusters, need_cluster=False)

    p = _add(
        sub,
        "status",
        common,
        "cluster status, failure message, instance groups and node counts",
        "hpctl status",
    )
    p.set_defaults(handler=cmd_status)

    p = _add(
        sub,
        "nodes",
        common,
        "list every node (all pages), filtered by group and status",
        "hpctl nodes --group gpu-workers --status Failure --json",
    )
    p.add_argument("--group", action="append", default=[], help="only this instance group (repeatable)")
    p.add_argument(
        "--status",
        action="append",
        default=[],
        help="only this node status, e.g. Running, Pending, Failure (repeatable)",
    )
    p.set_defaults(handler=cmd_nodes)

    p = _add(
        sub,
        "wait",
        common,
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
    p.add_argument("--timeout", default="2h", help="give up after this long (default 2h; 90s, 15m, 2h30m, 1d)")
    p.add_argument("--interval", default="30s", help=f"time between polls (default 30s, at least {MIN_INTERVAL:g}s)")
    p.set_defaults(handler=cmd_wait)

    p = _add(
        sub,
        "events",
        common,
        "recent cluster events (ListClusterEvents), oldest first",
        "hpctl events --level Warn --since 2h",
    )
    p.add_argument(
        "--level", type=_level, metavar="LEVEL", help="only events at this level or above: Info, Warn, Error"
    )
    p.add_argument("--since", help="only events after this: a duration back from now (2h) or an ISO time")
    p.add_argument("--until", help="only events before this: a duration back from now or an ISO time")
    p.add_argument("--group", help="only events of this instance group")
    p.add_argument("--node", help="only events of this node (i-... or hyperpod-i-...)")
    p.add_argument(
        "--limit", type=_positive, default=50, help="show at most this many, the newest (default 50)"
    )
    p.add_argument("--follow", "-f", action="store_true", help="keep polling and print new events until Ctrl-C")
    p.add_argument("--interval", default="30s", help="with --follow: time between polls (default 30s)")
    p.set_defaults(handler=cmd_events)

    p = _add(
        sub,
        "connect",
        common,
        "open an SSM session on a node (or print the command)",
        "hpctl connect hyperpod-i-0123456789abcdef0",
    )
    p.add_argument(
        "node", metavar="NODE", help="instance ID (i-...) or Kubernetes node name (hyperpod-i-...)"
    )
    p.add_argument(
        "--print", action="store_true", help="print the aws ssm start-session command, do not run it"
    )
    p.set_defaults(handler=cmd_connect)

    p = _add(
        sub,
        "ssh-config",
        common,
        "print ssh Host entries with an SSM ProxyCommand for every node",
        "hpctl ssh-config > ~/.ssh/config.d/hyperpod",
    )
    p.add_argument("--group", action="append", default=[], help="only this instance group (repeatable)")
    p.add_argument("--status", action="append", default=[], help="only nodes in this status (repeatable)")
    # The nodes run the Amazon Linux EKS AMI (lifecycle_scripts/on_create.sh); its login is ec2-user
    # (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/managing-users.html).
    p.add_argument("--user", default="ec2-user", help="the User line's login name (default ec2-user)")
    p.set_defaults(handler=cmd_ssh_config)

    for action, what in (("reboot", "BatchRebootClusterNodes"), ("replace", "BatchReplaceClusterNodes")):
        p = _add(
            sub,
            action,
            common,
            f"{action} nodes ({what}, 25 per call) after a confirmation",
            f"hpctl {action} i-0123456789abcdef0 hyperpod-i-0fedcba9876543210 --dry-run\n"
            f"  hpctl {action} --group gpu-workers --status Failure --dry-run",
        )
        p.add_argument(
            "nodes", nargs="*", metavar="NODE", help="instance IDs (i-...) or node names (hyperpod-i-...)"
        )
        p.add_argument("--group", action="append", default=[], help="select the nodes of this group (repeatable)")
        p.add_argument("--status", action="append", default=[], help="select the nodes in this status (repeatable)")
        p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        p.add_argument(
            "--dry-run", action="store_true", help="show the calls that would be made, call nothing"
        )
        p.set_defaults(handler=cmd_batch)

    p = _add(
        sub,
        "update-software",
        common,
        "patch the node software (UpdateClusterSoftware) in rolling batches",
        "hpctl update-software --group gpu-workers --batch-percent 25 --wait-interval 300",
    )
    p.add_argument(
        "--group", action="append", default=[], help="only this instance group (repeatable; default all)"
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch-size", type=_positive, help="at most this many nodes at once (INSTANCE_COUNT)")
    size.add_argument(
        "--batch-percent",
        type=_bounded(1, 100),
        help="at most this percent of a group at once, 1-100 (CAPACITY_PERCENTAGE)",
    )
    p.add_argument(
        "--rollback-batch-size", type=_positive, help="nodes at once when rolling back (INSTANCE_COUNT)"
    )
    p.add_argument(
        "--wait-interval",
        type=_bounded(0, 3600),
        metavar="SECONDS",
        help="seconds to wait between batches (0-3600)",
    )
    p.add_argument(
        "--alarm", action="append", default=[], help="CloudWatch alarm that triggers a rollback (repeatable)"
    )
    p.add_argument("--image-id", help="a specific AMI (default: the latest HyperPod release)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--dry-run", action="store_true", help="check the groups, print what would happen and the request"
    )
    p.add_argument("--wait", action="store_true", help="wait until every group's software update has finished")
    p.add_argument("--timeout", default="6h", help="with --wait: give up after this long (default 6h)")
    p.add_argument("--interval", default="60s", help="with --wait: time between polls (default 60s)")
    p.set_defaults(handler=cmd_update_software)

    p = _add(
        sub,
        "kubeconfig",
        common,
        "write (merge) or print the kubeconfig entry of the EKS cluster",
        "hpctl kubeconfig --kubeconfig ~/.kube/hyperpod --alias hyperpod-dev",
    )
    p.add_argument("--print", action="store_true", help="print the entry instead of writing it")
    p.add_argument(
        "--kubeconfig", metavar="PATH", help="file to merge into (default: $KUBECONFIG or ~/.kube/config)"
    )
    p.add_argument(
        "--eks-cluster", help="EKS cluster name (default: <project>-eks, or the HyperPod orchestrator)"
    )
    p.add_argument("--alias", help="context name (default: the EKS cluster ARN)")
    p.add_argument("--no-set-context", action="store_true", help="do not change current-context")
    p.set_defaults(handler=cmd_kubeconfig)

    p = _add(
        sub,
        "drift",
        common,
        "compare the deployed cluster with the config (exit 1 on drift)",
        "hpctl drift --config config/prod.yaml",
    )
    p.set_defaults(handler=cmd_drift, need_config=True)

    p = _add(
        sub,
        "preflight",
        common,
        "read-only checks before cdk deploy (exit 1 when one fails)",
        "cdk synth && hpctl preflight --cdk-out cdk.out",
    )
    p.add_argument(
        "--cdk-out", default="cdk.out", metavar="DIR", help="synthesized templates (default cdk.out)"
    )
    p.set_defaults(handler=cmd_preflight, need_config=True)

    p = _add(
        sub,
        "pre-destroy",
        common,
        "list what Kubernetes left in the VPC outside CloudFormation (load balancers, detached ENIs); "
        "--delete removes what is tagged for this cluster (exit 1 while anything remains)",
        "hpctl pre-destroy --config config/prod.yaml --delete",
    )
    p.add_argument("--delete", action="store_true", help="delete those tagged for this cluster, after a confirmation")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=cmd_pre_destroy, need_config=True)

    p = _add(
        sub,
        "render-examples",
        common,
        "write the data-scientist manifests (training with auto-resume, inference, NCCL smoke test) for the config",
        "hpctl render-examples --config config/prod.yaml --out my-examples\n"
        "  hpctl render-examples --config config/prod.yaml | kubectl apply -f -",
    )
    p.add_argument(
        "--out", default="-", metavar="DIR", help="directory to write to (default -: one YAML stream on stdout)"
    )
    p.add_argument("--gpus", type=_positive, help="NVIDIA GPUs per node (needed for a type not in hpctl's table)")
    p.add_argument("--efa", type=_bounded(0), help="EFA devices per node (default: hpctl's table, else 0)")
    p.add_argument(
        "--checkpoint-interval-minutes",
        type=float,
        default=examples.CHECKPOINT_INTERVAL_MINUTES,
        metavar="M",
        help="how often the training example checkpoints, e.g. the interval `hpctl plan` gives "
        f"(default {examples.CHECKPOINT_INTERVAL_MINUTES:g})",
    )
    p.set_defaults(handler=cmd_render_examples, need_config=True)

    p = _add(sub, "plan", common, plan_command.HELP, plan_command.EXAMPLE)
    plan_command.add_arguments(p)
    p.set_defaults(handler=plan_command.run, need_config=True)
    return parser


def main(argv: Sequence[str] | None = None, *, make_clients: MakeClients | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code or 0)
    from infra.errors import ConfigError

    target = None
    try:
        if args.debug:
            enable_debug_log()
        need_cluster = getattr(args, "need_cluster", True) and not getattr(args, "eks_cluster", None)
        target = resolve(args, need_config=getattr(args, "need_config", False), need_cluster=need_cluster)
        if warning := target.region_warning():
            _err(warning)
        factory = make_clients or (lambda region, profile: Clients(region, profile))
        return int(args.handler(args, target, factory(target.region, target.profile)))
    except ConfigError as error:
        _err(str(error))
        return EXIT_USAGE
    except HpctlError as error:
        _err(str(error))
        return error.exit_code
    except (ClientError, BotoCoreError) as error:
        line, code = describe_aws_error(error, target.region if target else None)
        _err(line)
        return code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except (OSError, ValueError) as error:  # a path that cannot be written or read, a file that is not JSON
        _err(one_line(f"{type(error).__name__}: {error}"))
        return EXIT_USAGE
