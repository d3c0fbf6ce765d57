"""`hpctl kubeconfig`: a kubeconfig entry for the EKS cluster, printed or merged safely into a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from hpctl.errors import UsageError


def default_path() -> Path:
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0]).expanduser()
    return Path("~/.kube/config").expanduser()


def build_entry(
    eks_cluster: dict[str, Any],
    region: str,
    profile: str | None = None,
    alias: str | None = None,
    local_port: int | None = None,
) -> dict[str, Any]:
    """A kubeconfig document with one cluster, user and context (exec auth: `aws eks get-token`).

    With `local_port`, the cluster entry points at https://localhost:PORT (a tunnel the user runs to the
    endpoint) and keeps verifying the endpoint's certificate through `tls-server-name`, the endpoint's
    host name (kubeconfig field: https://kubernetes.io/docs/reference/kubectl/generated/kubectl_config/kubectl_config_set-cluster/).
    It is an entry of its own, so the direct entry of the same cluster stays.
    """
    arn = eks_cluster["arn"]
    cluster: dict[str, Any] = {
        "server": eks_cluster["endpoint"],
        "certificate-authority-data": eks_cluster.get("certificateAuthority", {}).get("data", ""),
    }
    cluster_name = arn
    if local_port is not None:
        cluster_name = f"{arn}@localhost:{local_port}"
        cluster["server"] = f"https://localhost:{local_port}"
        cluster["tls-server-name"] = urlsplit(eks_cluster["endpoint"]).hostname
    name = alias or cluster_name
    exec_spec: dict[str, Any] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": [
            "--region",
            region,
            "eks",
            "get-token",
            "--cluster-name",
            eks_cluster["name"],
            "--output",
            "json",
        ],
        "interactiveMode": "Never",
    }
    if profile:
        exec_spec["env"] = [{"name": "AWS_PROFILE", "value": profile}]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": arn, "user": {"exec": exec_spec}}],
        "contexts": [{"name": name, "context": {"cluster": cluster_name, "user": arn}}],
        "current-context": name,
    }


def _upsert(items: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    kept = [i for i in items if isinstance(i, dict) and i.get("name") != new["name"]]
    return [*kept, new]


def merge(existing: dict[str, Any] | None, entry: dict[str, Any], set_current: bool = True) -> dict[str, Any]:
    """Replace entries of the same name, keep every other cluster, user and context."""
    merged: dict[str, Any] = dict(existing or {})
    merged.setdefault("apiVersion", "v1")
    merged.setdefault("kind", "Config")
    merged.setdefault("preferences", {})
    for key in ("clusters", "users", "contexts"):
        current = merged.get(key) or []
        if not isinstance(current, list):
            raise UsageError(f"the kubeconfig's {key} is a {type(current).__name__}, not a list: left untouched")
        for item in entry[key]:
            current = _upsert(current, item)
        merged[key] = current
    if set_current or not merged.get("current-context"):
        merged["current-context"] = entry["current-context"]
    return merged


def write_merged(path: Path, entry: dict[str, Any], set_current: bool = True) -> None:
    """Merge into `path` atomically (temp file + rename), mode 0600; refuse a non-kubeconfig file."""
    existing: dict[str, Any] | None = None
    if path.is_dir():
        raise UsageError(f"{path} is a directory: pass the kubeconfig file itself")
    if path.exists():
        try:
            existing = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise UsageError(
                f"{path} is not valid YAML, left untouched: {error}".replace("\n", " ")
            ) from None
        if existing is not None and not isinstance(existing, dict):
            raise UsageError(f"{path} is not a kubeconfig mapping, left untouched")
    merged = merge(existing, entry, set_current)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(merged, handle, default_flow_style=False, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, default_flow_style=False, sort_keys=False)
