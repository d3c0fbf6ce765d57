"""Before a deploy: preflight (read-only checks of the account and the synthesized templates) and drift
(the deployed cluster against the config). The checks themselves are in hpctl/preflight.py and hpctl/drift.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from hpctl import cluster as api
from hpctl import drift, preflight
from hpctl.commands.options import add_command
from hpctl.commands.terminal import err
from hpctl.errors import EXIT_FAILED, EXIT_OK, UsageError
from hpctl.output import print_json, print_table
from hpctl.target import DEFAULT_CONFIG, Target
from infra.guards.create_only import refused_version_change


def eks_version(deployed: dict[str, Any] | None, clients: Any) -> str | None:
    """The Kubernetes version of the EKS cluster that orchestrates ``deployed`` (eks:DescribeCluster), None when
    there is none or it cannot be read (said on stderr: the rest of the drift is still worth reporting)."""
    arn = ((deployed or {}).get("Orchestrator") or {}).get("Eks", {}).get("ClusterArn")
    if not arn:
        return None
    try:
        version = clients("eks").describe_cluster(name=arn.rsplit("/", 1)[-1])["cluster"].get("version")
    except ClientError as error:
        err(f"warning: the EKS cluster's version is not compared ({error.response['Error'].get('Code')})")
        return None
    return version if isinstance(version, str) else None


def cmd_drift(args: argparse.Namespace, t: Target, clients: Any) -> int:
    if t.cluster != t.cfg.hyperpod.cluster_name:
        err(
            f"warning: comparing cluster {t.cluster} with the config of {t.cfg.hyperpod.cluster_name} "
            f"({args.config or DEFAULT_CONFIG})"
        )
    deployed = api.find_cluster(clients("sagemaker"), t.cluster)
    # HyperPod keeps a type of a flexible group while nodes run on it: ask which types the dropped ones run.
    removed = drift.removed_types(deployed, t.cfg)
    running = {group: {n["InstanceType"] for n in api.iter_nodes(clients("sagemaker"), t.cluster, group)
                       if n.get("InstanceGroupName") == group} for group in removed}
    changes = drift.compare(deployed, t.cfg, running, eks_version(deployed, clients))
    if args.json:
        print_json(
            {
                "cluster": t.cluster,
                "drift": bool(changes),
                "refused": drift.refused(changes),
                "changes": drift.changes_json(changes),
            }
        )
        return EXIT_FAILED if changes else EXIT_OK
    if not changes:
        print(f"no drift: {t.cluster} matches {args.config or DEFAULT_CONFIG}")
        return EXIT_OK
    print(f"cdk deploy would change {t.cluster}:")
    print_table(
        ["GROUP", "FIELD", "DEPLOYED", "CONFIG", "EFFECT"],
        [[c.group, c.field, c.deployed, c.config, c.effect] for c in changes],
    )
    if any(c.effect == drift.REFUSED for c in changes):
        err(
            "WARNING: a field HyperPod keeps for the life of an instance group changes: the synth refuses it and "
            "cdk deploy could not make it. Add a new instance group with the new values instead."
        )
    if any(c.effect == drift.EKS_REFUSES for c in changes):
        (step,) = [c for c in changes if c.effect == drift.EKS_REFUSES]
        err(f"WARNING: {refused_version_change(step.deployed, step.config)}.")
    for change in changes:
        if change.effect in (drift.REMOVE_NODES, drift.REMOVE_REFUSED):
            err(f"WARNING: removing instance group {change.group} terminates its nodes and the jobs on them: "
                f"{change.note}.")
    if any(c.effect == drift.BUSY for c in changes):
        err(
            "WARNING: the config drops instance types that still run nodes, which HyperPod does not allow (the "
            "synth cannot see nodes): keep the types until their nodes are gone, or replace those nodes first."
        )
    return EXIT_FAILED


def cmd_preflight(args: argparse.Namespace, t: Target, clients: Any) -> int:
    return _report(args, preflight.run_all(t.cfg, clients, _cdk_out(args)))


def _cdk_out(args: argparse.Namespace) -> Path:
    cdk_out = Path(args.cdk_out)
    if not cdk_out.is_dir():
        raise UsageError(f"--cdk-out {cdk_out} is not a directory: run `cdk synth` first or pass its output")
    return cdk_out


def _report(args: argparse.Namespace, checks: list[preflight.Check]) -> int:
    failed = [c for c in checks if c.verdict == preflight.FAIL]
    if args.json:
        print_json({"ok": not failed, "checks": preflight.checks_json(checks)})
    else:
        print_table(["CHECK", "VERDICT", "REASON"], [[c.name, c.verdict.upper(), c.reason] for c in checks])
        warned = sum(c.verdict == preflight.WARN for c in checks)
        print(f"\n{len(checks)} checks: {len(failed)} failed, {warned} warnings")
    return EXIT_FAILED if failed else EXIT_OK


def cmd_guard(args: argparse.Namespace, t: Target, clients: Any) -> int:
    """Only preflight's replacement check: the deployed templates (GetTemplate) against the synthesized ones, with
    synth's engine. The delivery pipeline runs it before each stage's deploy (stacks/pipeline.py)."""
    return _report(args, preflight.check_replacement(t.cfg, clients, _cdk_out(args)))


def register(sub: Any) -> None:
    add_command(
        sub,
        "drift",
        cmd_drift,
        "compare the deployed cluster with the config (exit 1 on drift)",
        "hpctl drift --config config/prod.yaml",
        need_config=True,
    )

    for name, handler, help_text in (
        ("preflight", cmd_preflight, "read-only checks before cdk deploy (exit 1 when one fails)"),
        ("guard", cmd_guard, "the replacement guard against the deployed templates (read-only; exit 1 on a refusal)"),
    ):
        p = add_command(sub, name, handler, help_text, f"cdk synth && hpctl {name} --cdk-out cdk.out", need_config=True)
        p.add_argument("--cdk-out", default="cdk.out", metavar="DIR", help="synthesized templates (default cdk.out)")
