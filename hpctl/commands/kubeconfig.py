"""kubectl access: kubeconfig writes (merges) or prints the kubeconfig entry of the EKS cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hpctl import cluster as api
from hpctl import kubeconfig
from hpctl.commands.options import add_command, bounded
from hpctl.errors import EXIT_OK, UsageError
from hpctl.output import print_json
from hpctl.target import Target


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
    entry = kubeconfig.build_entry(eks, t.region, t.profile, args.alias, args.local_port)
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


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "kubeconfig",
        cmd_kubeconfig,
        "write (merge) or print the kubeconfig entry of the EKS cluster",
        "hpctl kubeconfig --kubeconfig ~/.kube/hyperpod --alias hyperpod-dev",
    )
    p.add_argument("--print", action="store_true", help="print the entry instead of writing it")
    p.add_argument(
        "--kubeconfig", metavar="PATH", help="file to merge into (default: $KUBECONFIG or ~/.kube/config)"
    )
    p.add_argument("--eks-cluster", help="EKS cluster name (default: <project>-eks, or the HyperPod orchestrator)")
    p.add_argument("--alias", help="context name (default: the EKS cluster ARN)")
    p.add_argument("--no-set-context", action="store_true", help="do not change current-context")
    p.add_argument(
        "--local-port",
        type=bounded(1, 65535),
        metavar="PORT",
        help="an entry for https://localhost:PORT, a tunnel to the endpoint you run yourself (docs/hpctl.md)",
    )
