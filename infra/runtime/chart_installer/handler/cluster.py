"""Access to the EKS cluster: its endpoint, a kubeconfig with a short-lived token for helm and kubectl, and kubectl
run with it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from . import aws_clients, process
from .deadline import Deadline
from .errors import ChartInstallerError, ClusterNotFoundError

TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - the token format prefix, not a secret
TOKEN_EXPIRY_SECONDS = 60


@dataclass(frozen=True)
class Cluster:
    name: str
    region: str
    endpoint: str
    certificate_authority: str


def describe_cluster(name: str, region: str) -> Cluster:
    try:
        description = aws_clients.client("eks", region).describe_cluster(name=name)["cluster"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise ClusterNotFoundError(f"EKS cluster {name} not found in {region}") from None
        raise
    endpoint = description.get("endpoint")
    authority = (description.get("certificateAuthority") or {}).get("data")
    if not endpoint or not authority:
        raise ChartInstallerError(
            f"EKS cluster {name} has no endpoint yet (status {description.get('status')})"
        )
    return Cluster(name=name, region=region, endpoint=endpoint, certificate_authority=authority)


def bearer_token(cluster_name: str, region: str) -> str:
    """The token ``aws eks get-token`` prints: a presigned STS GetCallerIdentity URL that carries
    the cluster name in the signed ``x-k8s-aws-id`` header."""
    sts = aws_clients.client("sts", region)

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers["x-k8s-aws-id"] = cluster_name

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", add_cluster_header)
    url = sts.generate_presigned_url(
        "get_caller_identity", Params={}, ExpiresIn=TOKEN_EXPIRY_SECONDS, HttpMethod="GET"
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def write_kubeconfig(workdir: Path, cluster: Cluster) -> Path:
    """Writes a kubeconfig with a fresh token. Called before every command that talks to the
    cluster, because a token is accepted for 15 minutes only."""
    user = "chart-installer"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster.name,
                "cluster": {
                    "server": cluster.endpoint,
                    "certificate-authority-data": cluster.certificate_authority,
                },
            }
        ],
        "users": [{"name": user, "user": {"token": bearer_token(cluster.name, cluster.region)}}],
        "contexts": [{"name": user, "context": {"cluster": cluster.name, "user": user}}],
        "current-context": user,
    }
    path = workdir / "kubeconfig"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(config, handle)  # JSON is valid YAML, and boto3 ships no YAML writer.
    os.chmod(path, 0o600)  # os.open's mode does not apply to a file that already existed.
    return path


def kubectl(cluster: Cluster, workdir: Path, env: Mapping[str, str], deadline: Deadline,
            args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """kubectl ``args`` against ``cluster`` with a fresh token, stopped at the invocation's deadline."""
    seconds = deadline.seconds_left()
    kubeconfig = write_kubeconfig(workdir, cluster)
    return process.run([process.kubectl_bin(), *args, "--kubeconfig", str(kubeconfig)], env, seconds)
