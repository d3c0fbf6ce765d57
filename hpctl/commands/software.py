"""Patching the node software: update-software (UpdateClusterSoftware), optionally waiting for it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from hpctl import cluster as api
from hpctl.commands.options import add_command, add_deprecated, add_polling, add_yes, bounded, interval, positive
from hpctl.commands.selection import add_selection, check_groups
from hpctl.commands.terminal import confirm, err
from hpctl.errors import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT, UsageError
from hpctl.output import print_json
from hpctl.target import Target, parse_duration
from hpctl.wait import software_updated, wait_for_cluster

# Without a rolling-update policy every node of the groups is patched at once: "all cluster nodes experience
# downtime" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-cli-command-update-cluster-software.html).
ALL_AT_ONCE = ("No batch size (--batch-size/--batch-percent, or rolling_update in the config): every node of {scope} "
               "is patched at once, all of them down meanwhile.")


def config_rollout(cfg: Any, cluster: str, groups: Sequence[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The DeploymentConfig (from ``rolling_update``) and ImageId the config gives ``groups`` of ``cluster``.

    One request carries one of each for all its groups, so the groups must agree; a group with a custom image
    must be sent its image (AWS: "if an instance group uses a custom AMI, you must provide an ImageId",
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_UpdateClusterSoftware.html).
    Nothing comes from a config of another cluster.
    """
    if cfg is None or cfg.hyperpod.cluster_name != cluster:
        return None, None
    chosen = [g for g in cfg.hyperpod.instance_groups if g.name in groups]
    deployments = {g.name: g.rolling_update.deployment_config() if g.rolling_update else None for g in chosen}
    images = {g.name: g.image_id for g in chosen}
    for what, values in (("rolling_update", deployments), ("image_id", images)):
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            raise UsageError(f"the groups {', '.join(values)} have different {what} settings in the config and one "
                             "update takes one: update them one at a time with --group")
    return (next(iter(deployments.values()), None), next(iter(images.values()), None))


def cmd_update_software(args: argparse.Namespace, t: Target, clients: Any) -> int:
    # --timeout and --interval are checked before anything is sent: a mistake in them must not leave an
    # update running that the command then reports as a usage error.
    timeout, pause = (parse_duration(args.timeout), interval(args.interval)) if args.wait else (0.0, 0.0)
    groups = list(dict.fromkeys(args.group))
    sm = clients("sagemaker")
    desc = api.describe_cluster(sm, t.cluster)
    known = check_groups(desc, groups)
    deployment, image_id = config_rollout(t.cfg, t.cluster, groups or known)
    request = api.software_update_request(
        t.cluster,
        groups,
        deployment=deployment,
        batch_size=args.batch_size,
        batch_percent=args.batch_percent,
        rollback_batch_size=args.rollback_batch_size,
        wait_interval=args.wait_interval,
        alarms=args.alarm,
        image_id=args.image_id or image_id,
    )
    scope = ", ".join(groups) if groups else f"all groups ({', '.join(known)})"
    rolling = "RollingUpdatePolicy" in request.get("DeploymentConfig", {})
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
        err("aborted, nothing sent")
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
    result = wait_for_cluster(sm, t.cluster, timeout=timeout, interval=pause, check=software_updated(groups))
    if args.json:
        print_json({"cluster_arn": arn, "request": request, "exit_code": result.exit_code,
                    "failure_message": result.failure_message})
    elif result.exit_code == EXIT_OK:
        print(f"software update of {scope} succeeded")
    elif result.exit_code == EXIT_TIMEOUT:
        err(f"timed out after {args.timeout}: the software update of {scope} is still running")
    else:
        err(f"software update of {scope} did not succeed: {result.failure_message or result.status}")
    return result.exit_code


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "update-software",
        cmd_update_software,
        "patch the node software (UpdateClusterSoftware) in rolling batches: those of the groups' rolling_update "
        "in the config, unless these options say otherwise",
        "hpctl update-software --group gpu-workers --batch-percent 25 --batch-wait 300",
    )
    add_selection(p, group="only this instance group (repeatable; default all)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--batch-size", type=positive, help="at most this many nodes at once (INSTANCE_COUNT)")
    size.add_argument(
        "--batch-percent",
        type=bounded(1, 100),
        help="at most this percent of a group at once, 1-100 (CAPACITY_PERCENTAGE)",
    )
    p.add_argument("--rollback-batch-size", type=positive, help="nodes at once when rolling back (INSTANCE_COUNT)")
    # The pause between batches (WaitIntervalInSeconds); --interval is how often --wait polls. --wait-interval
    # read as the latter, so it is the deprecated spelling of this.
    p.add_argument(
        "--batch-wait",
        dest="wait_interval",
        type=bounded(0, 3600),
        metavar="SECONDS",
        help="seconds to wait between batches (0-3600; WaitIntervalInSeconds)",
    )
    add_deprecated(p, "--wait-interval", "--batch-wait", "wait_interval", type=bounded(0, 3600), metavar="SECONDS")
    p.add_argument(
        "--alarm", action="append", default=[], help="CloudWatch alarm that triggers a rollback (repeatable)"
    )
    p.add_argument("--image-id", help="a specific AMI (default: the groups' image_id in the config, else the latest "
                                      "HyperPod release)")
    add_yes(p)
    p.add_argument(
        "--dry-run", action="store_true", help="check the groups, print what would happen and the request"
    )
    p.add_argument("--wait", action="store_true", help="wait until every group's software update has finished")
    add_polling(p, timeout="6h", interval="60s", when="with --wait")
