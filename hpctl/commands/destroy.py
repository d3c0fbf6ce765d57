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


def _result(blocker: predestroy.Blocker, deleting: bool, errors: dict[str, str], shared_vpc: bool) -> str:
    """What became of one resource: deleted, failed, left alone, or to delete with --delete."""
    if blocker.ours:
        if not deleting:
            return "to delete (--delete)"
        return f"failed: {errors[blocker.id]}" if blocker.id in errors else "deleted"
    if shared_vpc:
        return "left alone: not this cluster's (shared VPC: does not block the destroy)"
    return "left alone: not this cluster's, but it blocks deleting the VPC"


def cmd_pre_destroy(args: argparse.Namespace, t: Target, clients: Any) -> int:
    vpc = predestroy.vpc_id(t.cfg, clients)
    blockers = predestroy.find(t.cfg, clients, vpc) if vpc else []
    ours = [b for b in blockers if b.ours]
    # In a VPC the config adopts (network.existing_vpc_id) the destroy deletes no subnet or VPC: another team's
    # resources there block nothing of this cluster's, so only this cluster's decide the exit code.
    shared_vpc = t.cfg.network.existing_vpc_id is not None
    failed: list[tuple[predestroy.Blocker, str]] = []
    deleting = bool(args.delete and ours)
    if deleting:
        if not confirm(f"Delete {len(ours)} resource(s) Kubernetes or GuardDuty left in {vpc} ({t.region})?",
                       args.yes):
            err("aborted, nothing deleted")
            return EXIT_FAILED
        failed = predestroy.remove(clients, blockers)
    errors = {b.id: error for b, error in failed}
    results = {b.id: _result(b, deleting, errors, shared_vpc) for b in blockers}
    # Still in the way: this cluster's that were not deleted or failed, and in its own VPC anyone's.
    remaining = [b for b in blockers if results[b.id] != "deleted" and (b.ours or not shared_vpc)]
    if args.json:
        print_json({"vpc": vpc, "shared_vpc": shared_vpc, "deleted": bool(args.delete),
                    "failed": [b.id for b, _ in failed],
                    "blockers": [{"kind": b.kind, "id": b.id, "detail": b.detail, "ours": b.ours,
                                  "result": results[b.id], "blocks": b in remaining} for b in blockers]})
    elif not blockers:
        print(f"nothing outside CloudFormation blocks deleting {vpc or 'the VPC (network stack not found)'}")
    else:
        print_table(["KIND", "ID", "DETAIL", "TAGGED FOR THIS CLUSTER OR BY GUARDDUTY", "RESULT"],
                    [[b.kind, b.id, b.detail, "yes" if b.ours else "no", results[b.id]] for b in blockers])
        if not args.delete:
            print("\nWhile the cluster runs, delete LoadBalancer Services and Ingresses with kubectl first (their "
                  "controller re-creates a deleted load balancer); then `hpctl pre-destroy --delete` removes "
                  "what is tagged for this cluster or by GuardDuty (GuardDutyManaged=true). Untagged ones are "
                  "someone else's: not touched.")
    for blocker, error in failed:
        err(f"{blocker.id}: {error}")
    return EXIT_FAILED if remaining else EXIT_OK


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "pre-destroy",
        cmd_pre_destroy,
        "list what Kubernetes and GuardDuty left in the VPC outside CloudFormation (load balancers, detached ENIs, "
        "GuardDuty's endpoint and security group); --delete removes what is tagged for this cluster or by "
        "GuardDuty and reports each; exit 1 while something remains that blocks the destroy (in a VPC the config "
        "adopts, only this cluster's)",
        "hpctl pre-destroy --config config/prod.yaml --delete",
        need_config=True,
    )
    p.add_argument("--delete", action="store_true",
                   help="delete those tagged for this cluster or by GuardDuty, after a confirmation")
    add_yes(p)
