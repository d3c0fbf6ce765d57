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


# The caller's missing permission: the shape AccessDeniedException of botocore's eks model (DescribeCluster itself
# lists only ResourceNotFoundException, ClientException, ServerException and ServiceUnavailableException there;
# an IAM denial is answered before the operation runs).
ACCESS_DENIED = "AccessDeniedException"


def describe_cluster(name: str, region: str) -> Cluster:
    try:
        description = aws_clients.client("eks", region).describe_cluster(name=name)["cluster"]
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        if code == "ResourceNotFoundException":
            raise ClusterNotFoundError(f"EKS cluster {name} not found in {region}") from None
        if code == ACCESS_DENIED:
            raise ChartInstallerError(
                f"the installer's role may not call eks:DescribeCluster on {name} in {region} ({code}: "
                f"{error.response.get('Error', {}).get('Message', '')}): give it back its DescribeThisCluster "
                "statement and retry; on a deletion whose cluster is already gone, retry keeping this resource "
                "(aws cloudformation delete-stack --retain-resources <its logical ID>)") from None
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


# How kubectl reports an API error: "Error from server (%s): %s" with the status reason (kubectl's
# pkg/cmd/util/helpers.go, StandardErrorMessage), so NotFound for a 404. Any other failure (403, no route, a bad
# token) is not worth waiting for.
NOT_FOUND = "(NotFound)"
# One request may take this long (kubectl's global --request-timeout, "0" by default: no limit, per
# kubernetes/kubernetes#103619); the callers' own limits bound the whole.
REQUEST_TIMEOUT = "--request-timeout=20s"


class KubectlError(ChartInstallerError):
    """kubectl could not read what it was asked for (a failure other than NotFound, or an answer that is not a
    JSON object)."""


def json_answer(result: subprocess.CompletedProcess[str], command: str,
                expected: str = "JSON object") -> dict[str, Any] | None:
    """The JSON object ``kubectl <command>`` printed (``expected`` names it in the error); None when the API server
    answered NotFound."""
    if result.returncode != 0:
        if NOT_FOUND in result.stderr:
            return None
        raise KubectlError(f"kubectl {command} failed: {process.tail(result.stderr) or 'no output'}")
    try:
        answer = json.loads(result.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise KubectlError(f"kubectl {command} printed no {expected}: {process.tail(result.stdout)}")
    return answer
