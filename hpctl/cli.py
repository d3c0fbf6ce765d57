"""`hpctl`: argument parsing, dispatch, and the one place errors become a line on stderr and an exit code."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hpctl import __version__, drift, examples, kubeconfig, plan_command, preflight
from hpctl import cluster as api
from hpctl import nodes as nodeops
from hpctl.aws import Clients
from hpctl.errors import (
    EXIT_AWS,
    EXIT_CODE_TABLE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    HpctlError,
    UsageError,
    describe_aws_error,
)
from hpctl.output import fields, is_terminal, print_json, print_table
from hpctl.target import Target, parse_duration, parse_time, resolve
from hpctl.wait import wait_for_cluster

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
    sm = clients("sagemaker")
    contains = args.group[0] if len(args.group) == 1 else None
    found = nodeops.filter_nodes(api.iter_nodes(sm, t.cluster, contains), args.group, args.status)
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
        interval=parse_duration(args.interval),
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
    else:
        print(f"cluster {t.cluster} is {result.status}")
    return result.exit_code


def cmd_events(args: argparse.Namespace, t: Target, clients: Any) -> int:
    after = parse_time(args.since) if args.since else None
    before = parse_time(args.until) if args.until else None
    min_level = api.LEVELS.index(args.level) if args.level else 0
    node = api.normalize_node_id(args.node) if args.node else None
    picked: list[dict[str, Any]] = []
    for event in api.iter_events(
        clients("sagemaker"), t.cluster, after=after, before=before, group=args.group, node=node
    ):
        level = event.get("EventLevel", "Info")
        if (api.LEVELS.index(level) if level in api.LEVELS else 0) >= min_level:
            picked.append(event)
            if len(picked) >= args.limit:
                break
    picked.reverse()  # oldest first, newest at the bottom, like a log
    records = [
        {
            "time": e.get("EventTime"),
            "level": e.get("EventLevel"),
            "resource_type": e.get("ResourceType"),
            "group": e.get("InstanceGroupName"),
            "instance_id": e.get("InstanceId"),
            "description": e.get("Description"),
            "event_id": e.get("EventId"),
        }
        for e in picked
    ]
    if args.json:
        print_json(records)
        return EXIT_OK
    print_table(
        ["TIME", "LEVEL", "RESOURCE", "GROUP", "INSTANCE", "DESCRIPTION"],
        [
            [r["time"], r["level"], r["resource_type"], r["group"], r["instance_id"], r["description"]]
            for r in records
        ],
    )
    return EXIT_OK


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
    missing = [tool for tool in ("aws", "session-manager-plugin") if shutil.which(tool) is None]
    if args.print or missing:
        if missing and not args.print:
            _err(f"{' and '.join(missing)} not on PATH; run this where they are installed:")
        print(" ".join(command))
        return EXIT_OK
    return subprocess.call(command)  # noqa: S603 - fixed argv, no shell


def cmd_ssh_config(args: argparse.Namespace, t: Target, clients: Any) -> int:
    sm = clients("sagemaker")
    arn = api.describe_cluster(sm, t.cluster)["ClusterArn"]
    found = nodeops.filter_nodes(api.iter_nodes(sm, t.cluster), args.group, args.status)
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


def cmd_batch(args: argparse.Namespace, t: Target, clients: Any) -> int:
    action = args.command
    node_ids = nodeops.parse_node_ids(args.nodes)
    plan = api.batches(node_ids)
    if args.dry_run:
        if args.json:
            print_json({"dry_run": True, "action": action, "cluster": t.cluster, "batches": plan})
        else:
            print(f"dry run: would {action} {len(node_ids)} node(s) of {t.cluster} in {len(plan)} call(s):")
            for i, batch in enumerate(plan, 1):
                print(f"  call {i}: {' '.join(batch)}")
        return EXIT_OK
    question = f"{action.capitalize()} {len(node_ids)} node(s) of cluster {t.cluster} ({t.region})?"
    if not confirm(question, args.yes):
        _err("aborted, nothing sent")
        return EXIT_FAILED
    results, stop_error = nodeops.run_batches(clients("sagemaker"), action, t.cluster, node_ids)
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
    if args.dry_run:
        if not args.json:
            print("dry run: would call UpdateClusterSoftware with:")
        print_json(request)
        return EXIT_OK
    sm = clients("sagemaker")
    known = [g["InstanceGroupName"] for g in api.describe_cluster(sm, t.cluster).get("InstanceGroups", [])]
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise UsageError(f"no instance group {', '.join(unknown)} in {t.cluster} (have: {', '.join(known)})")
    scope = ", ".join(groups) if groups else f"all groups ({', '.join(known)})"
    if not confirm(
        f"Update the software of {scope} in cluster {t.cluster}? Nodes are patched in rolling batches.",
        args.yes,
    ):
        _err("aborted, nothing sent")
        return EXIT_FAILED
    arn = sm.update_cluster_software(**request)["ClusterArn"]
    if args.json:
        print_json({"cluster_arn": arn, "request": request})
    else:
        print(f"software update started for {scope} of {arn}; follow it with `hpctl wait` and `hpctl events`")
    return EXIT_OK


def cmd_kubeconfig(args: argparse.Namespace, t: Target, clients: Any) -> int:
    name = args.eks_cluster
    if name is None and t.explicit_cluster:
        desc = api.describe_cluster(clients("sagemaker"), t.cluster)
        eks_arn = desc.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn")
        name = eks_arn.rsplit("/", 1)[-1] if eks_arn else None
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
    checks = preflight.run_all(t.cfg, clients, Path(args.cdk_out))
    failed = [c for c in checks if c.verdict == preflight.FAIL]
    if args.json:
        print_json({"ok": not failed, "checks": preflight.checks_json(checks)})
    else:
        print_table(["CHECK", "VERDICT", "REASON"], [[c.name, c.verdict.upper(), c.reason] for c in checks])
        warned = sum(c.verdict == preflight.WARN for c in checks)
        print(f"\n{len(checks)} checks: {len(failed)} failed, {warned} warnings")
    return EXIT_FAILED if failed else EXIT_OK


def cmd_render_examples(args: argparse.Namespace, t: Target, clients: Any) -> int:
    minutes = args.checkpoint_interval_minutes
    if not 0 < minutes < float("inf"):  # also refuses NaN
        raise UsageError(f"--checkpoint-interval-minutes must be more than zero, got {minutes:g}")
    written = examples.write(examples.render(t.cfg, checkpoint_interval_minutes=minutes), Path(args.out))
    if args.json:
        print_json({"written": [str(p) for p in written]})
    else:
        for path in written:
            print(f"wrote {path}")
    return EXIT_OK


# --- parser ---------------------------------------------------------------------------------------

DESCRIPTION = """Day-2 operations for a SageMaker HyperPod cluster orchestrated by Amazon EKS.

The cluster comes from --cluster NAME or from the app's config file (--config, default
config/default.yaml); the region from --region or the config."""


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_argument_group("target")
    where.add_argument(
        "--cluster", help="HyperPod cluster name or ARN (default: hyperpod.cluster_name of the config)"
    )
    where.add_argument("--config", help="the app's config file (default: config/default.yaml)")
    where.add_argument("--region", help="AWS region (default: region of the config)")
    where.add_argument("--profile", help="AWS named profile")
    common.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
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


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpctl",
        description=DESCRIPTION,
        epilog="example:\n  hpctl status --config config/prod.yaml\n\n" + EXIT_CODE_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hpctl {__version__}")
    common = _common()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
        "wait until the cluster is InService (exit 0) or Failed (exit 1); timeout exit 4",
        "hpctl wait --timeout 3h --interval 60s",
    )
    p.add_argument("--timeout", default="2h", help="give up after this long (default 2h; 90s, 15m, 2h, 1d)")
    p.add_argument("--interval", default="30s", help="time between polls (default 30s)")
    p.set_defaults(handler=cmd_wait)

    p = _add(
        sub,
        "events",
        common,
        "recent cluster events (ListClusterEvents), oldest first",
        "hpctl events --level Warn --since 2h",
    )
    p.add_argument("--level", choices=api.LEVELS, help="only events at this level or above")
    p.add_argument("--since", help="only events after this: a duration back from now (2h) or an ISO time")
    p.add_argument("--until", help="only events before this: a duration back from now or an ISO time")
    p.add_argument("--group", help="only events of this instance group")
    p.add_argument("--node", help="only events of this node (i-... or hyperpod-i-...)")
    p.add_argument(
        "--limit", type=_positive, default=50, help="show at most this many, the newest (default 50)"
    )
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
        "hpctl ssh-config --user ubuntu >> ~/.ssh/config.d/hyperpod",
    )
    p.add_argument("--group", action="append", default=[], help="only this instance group (repeatable)")
    p.add_argument("--status", action="append", default=[], help="only nodes in this status (repeatable)")
    p.add_argument("--user", help="add a User line for this login name")
    p.set_defaults(handler=cmd_ssh_config)

    for action, what in (("reboot", "BatchRebootClusterNodes"), ("replace", "BatchReplaceClusterNodes")):
        p = _add(
            sub,
            action,
            common,
            f"{action} nodes ({what}, 25 per call) after a confirmation",
            f"hpctl {action} i-0123456789abcdef0 hyperpod-i-0fedcba9876543210 --dry-run",
        )
        p.add_argument(
            "nodes", nargs="+", metavar="NODE", help="instance IDs (i-...) or node names (hyperpod-i-...)"
        )
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
        type=_positive,
        help="at most this percent of a group at once (CAPACITY_PERCENTAGE)",
    )
    p.add_argument(
        "--rollback-batch-size", type=_positive, help="nodes at once when rolling back (INSTANCE_COUNT)"
    )
    p.add_argument(
        "--wait-interval",
        type=int,
        choices=range(0, 3601),
        metavar="SECONDS",
        help="seconds to wait between batches (0-3600)",
    )
    p.add_argument(
        "--alarm", action="append", default=[], help="CloudWatch alarm that triggers a rollback (repeatable)"
    )
    p.add_argument("--image-id", help="a specific AMI (default: the latest HyperPod release)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--dry-run", action="store_true", help="print the request, call nothing")
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
        "render-examples",
        common,
        "write the data-scientist manifests (training with auto-resume, inference, NCCL smoke test) for the config",
        "hpctl render-examples --config config/prod.yaml --out my-examples",
    )
    p.add_argument("--out", default="examples", metavar="DIR", help="directory to write to (default examples)")
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

    try:
        target = resolve(args, need_config=getattr(args, "need_config", False))
        factory = make_clients or (lambda region, profile: Clients(region, profile))
        return int(args.handler(args, target, factory(target.region, target.profile)))
    except ConfigError as error:
        _err(str(error))
        return EXIT_USAGE
    except HpctlError as error:
        _err(str(error))
        return error.exit_code
    except (ClientError, BotoCoreError) as error:
        line, code = describe_aws_error(error)
        _err(line)
        return code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
