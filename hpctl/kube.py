"""The EKS API server, through the official `kubernetes` client and the kubeconfig's own credentials.

A context is loaded as kubectl loads it (kubernetes.config.new_client_from_config): the entry `hpctl kubeconfig`
writes gets its token from `aws eks get-token` (an exec credential plugin), which the client runs the same way.
Before anything is sent, the context's API server must be this HyperPod cluster's EKS endpoint (or, through a
forwarded port, name it as tls-server-name), as for `hpctl quotas --usage`.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from hpctl.errors import EXIT_AWS, EXIT_FAILED, EXIT_USAGE, HpctlError, one_line

# Seconds to wait for an answer of the API server (a followed log stream waits as long as it lasts).
REQUEST_TIMEOUT = 30


def same_endpoint(endpoint: str, server: str, tls_server_name: str | None) -> bool:
    """Whether a kubeconfig cluster (its server, and tls-server-name for a forwarded port) is the EKS endpoint.
    Host names compare without case."""
    hosts = {str(h).lower() for h in (urlparse(server).hostname, tls_server_name) if h}
    return (urlparse(endpoint).hostname or "").lower() in hosts


def eks_endpoint(desc: dict[str, Any], clients: Any) -> tuple[str, str] | None:
    """The EKS cluster name and API endpoint of a described HyperPod cluster (None for a Slurm cluster)."""
    eks_arn = desc.get("Orchestrator", {}).get("Eks", {}).get("ClusterArn")
    if not eks_arn:
        return None
    eks_name = eks_arn.rsplit("/", 1)[-1]
    return eks_name, clients("eks").describe_cluster(name=eks_name)["cluster"].get("endpoint", "")


def connect(context: str | None, desc: dict[str, Any], clients: Any) -> Any:
    """An ApiClient for the kube context (default: the current one) of the HyperPod cluster ``desc``."""
    try:
        from kubernetes import config
    except ImportError:
        raise HpctlError("hpctl jobs needs the kubernetes package (pyproject.toml pins it): pip install it with "
                         "-c requirements.lock", EXIT_USAGE) from None

    # The client reads KUBECONFIG once, when it is imported (kubernetes/config/kube_config.py:
    # KUBE_CONFIG_DEFAULT_LOCATION); it is read here at each call instead, with kubectl's default.
    files = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    try:
        api = config.new_client_from_config(config_file=files, context=context, persist_config=False)
    except (config.ConfigException, OSError) as error:
        raise HpctlError(f"no usable kube context {context or '(current)'}: {one_line(str(error))}; write one with "
                         "hpctl kubeconfig, or pass --kube-context", EXIT_USAGE) from None
    except Exception as error:  # the exec plugin (aws eks get-token) failed
        raise HpctlError(f"cannot get a token for the kube context {context or '(current)'}: "
                         f"{one_line(str(error))}", EXIT_AWS) from None
    found = eks_endpoint(desc, clients)
    if found is not None:
        eks_name, endpoint = found
        server = str(api.configuration.host or "")
        if not same_endpoint(endpoint, server, getattr(api.configuration, "tls_server_name", None)):
            raise HpctlError(f"the kube context {context or '(current)'} points at {server or 'no server'}, not the "
                             f"EKS cluster {eks_name} ({endpoint}): pass --kube-context, or write one with hpctl "
                             "kubeconfig", EXIT_USAGE)
    return api


def api_error(error: Exception, what: str) -> HpctlError:
    """One line and an exit code for a failed call to the API server: its Status message (the client's V1Status
    model: code, reason, message), an unreachable endpoint, or a refusal."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(error, ApiException):
        import json

        message, reason = "", str(error.reason or "")
        try:
            status = json.loads(error.body or "{}")
            message, reason = str(status.get("message") or ""), str(status.get("reason") or reason)
        except (TypeError, ValueError):
            message = str(error.body or "")
        code = error.status or 0
        if code in (401, 403):
            return HpctlError(f"the Kubernetes API refused {what} ({code} {reason}): {one_line(message)}; check the "
                              "EKS access entry of your role (eks.namespace_admins)", EXIT_AWS)
        if code == 409:
            return HpctlError(f"{what}: {one_line(message) or 'already exists'}", EXIT_FAILED)
        return HpctlError(f"{what} failed ({code} {reason}): {one_line(message)}", EXIT_AWS)
    return HpctlError(f"cannot reach the Kubernetes API for {what}: {one_line(str(error))}; is the EKS endpoint "
                      "reachable from here?", EXIT_AWS)


def is_not_found(error: Exception) -> bool:
    from kubernetes.client.exceptions import ApiException

    return isinstance(error, ApiException) and error.status == 404
