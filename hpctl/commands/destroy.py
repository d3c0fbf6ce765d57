"""Before a destroy: pre-destroy lists (and with --delete removes) what Kubernetes and GuardDuty left in the VPC
outside CloudFormation. What counts and how it is removed is in hpctl/predestroy.py."""

from __future__ import annotations

import argparse
from typing import Any

from hpctl import predestroy
from hpctl.commands.options import add_command, add_yes
from hpctl.commands.terminal import confirm, err
from hpctl.errors import EXIT_FAILED, EXIT_OK
from hpctl.output import print_json, print_table
from hpctl.target import Target


def cmd_pre_destroy(args: argparse.Namespace, t: Target, clients: Any) -> int:
    vpc = predestroy.vpc_id(t.cfg, clients)
    blockers = predestroy.find(t.cfg, clients, vpc) if vpc else []
    ours = [b for b in blockers if b.ours]
    failed: list[tuple[predestroy.Blocker, str]] = []
    if args.delete and ours:
        if not confirm(f"Delete {len(ours)} resource(s) Kubernetes or GuardDuty left in {vpc} ({t.region})?",
                       args.yes):
            err("aborted, nothing deleted")
            return EXIT_FAILED
        failed = predestroy.remove(clients, blockers)
    if args.json:
        print_json({"vpc": vpc, "deleted": bool(args.delete), "failed": [b.id for b, _ in failed],
                    "blockers": [{"kind": b.kind, "id": b.id, "detail": b.detail, "ours": b.ours} for b in blockers]})
    elif not blockers:
        print(f"nothing outside CloudFormation blocks deleting {vpc or 'the VPC (network stack not found)'}")
    else:
        print_table(["KIND", "ID", "DETAIL", "TAGGED FOR THIS CLUSTER OR BY GUARDDUTY"],
                    [[b.kind, b.id, b.detail, "yes" if b.ours else "no"] for b in blockers])
        if not args.delete:
            print("\nWhile the cluster runs, delete LoadBalancer Services and Ingresses with kubectl first (their "
                  "controller re-creates a deleted load balancer); then `hpctl pre-destroy --delete` removes "
                  "what is tagged for this cluster or by GuardDuty (GuardDutyManaged=true). Untagged ones are "
                  "someone else's: not touched.")
    for blocker, error in failed:
        err(f"{blocker.id}: {error}")
    # Still in the way: whatever was not deleted, and the deletes that failed.
    remaining = [b for b in blockers if not (args.delete and b.ours)] + [b for b, _ in failed]
    return EXIT_FAILED if remaining else EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "pre-destroy",
        cmd_pre_destroy,
        "list what Kubernetes and GuardDuty left in the VPC outside CloudFormation (load balancers, detached ENIs, "
        "GuardDuty's endpoint and security group); --delete removes what is tagged for this cluster or by "
        "GuardDuty (exit 1 while anything remains)",
        "hpctl pre-destroy --config config/prod.yaml --delete",
        need_config=True,
    )
    p.add_argument("--delete", action="store_true",
                   help="delete those tagged for this cluster or by GuardDuty, after a confirmation")
    add_yes(p)
