"""The custom resource's ResourceProperties, checked and turned into a release and a chart source."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from .deadline import DEFAULT_TIMEOUT_MINUTES, FUNCTION_TIMEOUT_SECONDS, MAX_TIMEOUT_MINUTES
from .errors import ChartInstallerError

COMMIT_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
GITHUB_HOST = "github.com"
# An owner or repository name as the config's git_repository pattern allows them, ASCII only.
GITHUB_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
# Helm's release name rule (DNS-1123 subdomain, at most 53 characters).
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")


@dataclass(frozen=True)
class Release:
    cluster_name: str
    region: str
    namespace: str
    name: str
    timeout_minutes: int
    # helm --wait: wait for the release's workloads to be ready. The HyperPod dependencies chart is installed
    # before any node exists, so its Deployments cannot become ready then: it is installed with Wait "false".
    wait: bool = True
    # (group/version, kind) the API server must serve before the chart is installed (RequiredKinds).
    required_kinds: tuple[tuple[str, str], ...] = ()

    @property
    def physical_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class GitSource:
    archive_url: str
    chart_path: str
    # The SHA-256 of the extracted source tree (charts.tree_digest).
    sha256: str


@dataclass(frozen=True)
class OciSource:
    uri: str
    version: str


@dataclass(frozen=True)
class S3Source:
    bucket: str
    key: str
    chart_path: str


ChartSource = GitSource | OciSource | S3Source


def required(props: Mapping[str, Any], name: str) -> str:
    value = props.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ChartInstallerError(f"property {name} is required")
    return value.strip()


def matching(props: Mapping[str, Any], name: str, pattern: re.Pattern[str], rule: str) -> str:
    value = required(props, name)
    if not pattern.match(value):
        raise ChartInstallerError(f"property {name}={value!r} is invalid: {rule}")
    return value


def parse_release(props: Mapping[str, Any]) -> Release:
    name = matching(props, "ReleaseName", RELEASE_NAME, "a DNS-1123 name of at most 53 characters")
    if len(name) > 53:
        raise ChartInstallerError(f"property ReleaseName={name!r} is longer than 53 characters")
    namespace = matching(props, "Namespace", NAMESPACE, "a DNS-1123 label of at most 63 characters")
    if len(namespace) > 63:
        raise ChartInstallerError(f"property Namespace={namespace!r} is longer than 63 characters")
    return Release(
        cluster_name=matching(props, "ClusterName", CLUSTER_NAME, "an EKS cluster name"),
        region=matching(props, "Region", REGION, "an AWS region such as us-west-2"),
        namespace=namespace,
        name=name,
        timeout_minutes=parse_timeout(props.get("TimeoutMinutes")),
        wait=parse_wait(props.get("Wait", "true")),
        required_kinds=parse_required_kinds(props.get("RequiredKinds")),
    )


# group/version/Kind, e.g. karpenter.sh/v1/NodePool (a DNS subdomain, a version, a Kind name).
REQUIRED_KIND = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/v[0-9]+[a-z0-9]*)/([A-Z][A-Za-z0-9]*)$")


def parse_required_kinds(raw: Any) -> tuple[tuple[str, str], ...]:
    """RequiredKinds: a JSON list of "group/version/Kind" strings (absent: none)."""
    if raw is None or raw == "":
        return ()
    try:
        listed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise ChartInstallerError(f"property RequiredKinds={raw!r} is not a JSON list") from None
    if not isinstance(listed, list):
        raise ChartInstallerError(f"property RequiredKinds={raw!r} is not a JSON list")
    kinds = []
    for item in listed:
        match = REQUIRED_KIND.match(item) if isinstance(item, str) else None
        if match is None:
            raise ChartInstallerError(f"property RequiredKinds has {item!r}: expected group/version/Kind, "
                                      "e.g. karpenter.sh/v1/NodePool")
        kinds.append((match.group(1), match.group(3)))
    return tuple(kinds)


def parse_wait(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    raise ChartInstallerError(f"property Wait={raw!r} must be true or false")


def parse_timeout(raw: Any) -> int:
    if raw is None or str(raw).strip() == "":
        return DEFAULT_TIMEOUT_MINUTES
    try:
        minutes = int(str(raw).strip())
    except ValueError:
        raise ChartInstallerError(f"property TimeoutMinutes={raw!r} is not a whole number") from None
    if not 1 <= minutes <= MAX_TIMEOUT_MINUTES:
        raise ChartInstallerError(
            f"property TimeoutMinutes={minutes} must be between 1 and {MAX_TIMEOUT_MINUTES} "
            f"(the installer stops after {FUNCTION_TIMEOUT_SECONDS // 60} minutes)"
        )
    return minutes


def parse_source(props: Mapping[str, Any]) -> ChartSource:
    kind = required(props, "Source")
    if kind == "git":
        revision = required(props, "GitRevision")
        if not COMMIT_SHA.match(revision):
            raise ChartInstallerError(
                f"property GitRevision={revision!r} must be a full 40-hex commit SHA; "
                "branches, tags and short SHAs are refused so the installed chart cannot drift"
            )
        return GitSource(
            archive_url=github_archive_url(required(props, "GitRepository"), revision.lower()),
            chart_path=relative_path(required(props, "ChartPath"), "ChartPath"),
            sha256=matching(props, "SourceSha256", SHA256, "the SHA-256 of the source tree, 64 lowercase hex "
                            "digits (hyperpod.dependencies_chart.source_sha256)"),
        )
    if kind == "oci":
        uri = required(props, "OciChartUri")
        if not uri.startswith("oci://"):
            raise ChartInstallerError(f"property OciChartUri={uri!r} must start with oci://")
        version = required(props, "ChartVersion")
        if not EXACT_VERSION.match(version):
            raise ChartInstallerError(f"property ChartVersion={version!r} must be an exact version")
        return OciSource(uri=uri, version=version)
    if kind == "s3":
        return S3Source(
            bucket=required(props, "AssetBucket"),
            key=required(props, "AssetKey"),
            chart_path=relative_path(str(props.get("ChartPath") or "."), "ChartPath"),
        )
    raise ChartInstallerError(f"property Source={kind!r} must be one of git, oci, s3")


def relative_path(raw: str, name: str) -> str:
    path = PurePosixPath(raw.strip())
    if path.is_absolute() or ".." in path.parts:
        raise ChartInstallerError(f"property {name}={raw!r} must be a relative path without '..'")
    return str(path)


def github_archive_url(repository: str, revision: str) -> str:
    """GitHub's tarball of the repository at one commit. Only ``https://github.com/<owner>/<repo>``, ASCII, as the
    config allows (``hyperpod.dependencies_chart.git_repository``): the archive URL is GitHub's."""
    shape = f"property GitRepository={repository!r} must look like https://github.com/<owner>/<repo>"
    if not repository.isascii():
        raise ChartInstallerError(f"{shape} in ASCII letters, digits, '.', '_' and '-'")
    url = urlparse(repository)
    parts = [part for part in url.path.split("/") if part]
    if url.scheme != "https" or url.netloc != GITHUB_HOST or url.query or url.fragment or len(parts) != 2:
        raise ChartInstallerError(shape)
    owner, repo = parts[0], parts[1].removesuffix(".git")
    if not (GITHUB_NAME.match(owner) and GITHUB_NAME.match(repo)):
        raise ChartInstallerError(f"{shape} in ASCII letters, digits, '.', '_' and '-'")
    return f"https://{GITHUB_HOST}/{owner}/{repo}/archive/{revision}.tar.gz"


# The properties that name a chart's source; the template the installer was synthesized with lists the sources its
# releases may use, each as these properties, in its environment (CHART_SOURCE_ENV_PREFIX<n>, a JSON object; set
# by HelmInstaller.allow_source).
SOURCE_PROPERTIES = ("Source", "GitRepository", "GitRevision", "ChartPath", "SourceSha256", "OciChartUri",
                     "ChartVersion", "AssetBucket", "AssetKey")
CHART_SOURCE_ENV_PREFIX = "CHART_SOURCE_"


def source_properties(props: Mapping[str, Any]) -> dict[str, str]:
    """The source-naming properties of ``props``, as given."""
    return {name: str(props[name]) for name in SOURCE_PROPERTIES if props.get(name) is not None}


def check_allowed_source(props: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """Refuses a chart source the installer was not synthesized with. Anyone who may invoke the function (or the
    provider framework in front of it) chooses its ResourceProperties; only a change of the function itself, which
    could replace its code as well, changes its environment. So the source, with its pinned revision and digest,
    must be one of those the template put there; a release's name, namespace and values are not pinned."""
    allowed = []
    for name, value in environ.items():
        if name.startswith(CHART_SOURCE_ENV_PREFIX):
            try:
                entry = json.loads(value)
            except ValueError:
                raise ChartInstallerError(f"environment {name} is not a JSON object: deploy the stack again") from None
            allowed.append(entry)
    given = source_properties(props)
    if given not in allowed:
        listed = "; ".join(" ".join(f"{k}={v}" for k, v in entry.items()) for entry in allowed) or "none"
        shown = " ".join(f"{k}={v}" for k, v in given.items()) or "none"
        raise ChartInstallerError(f"chart source {shown} is not one this installer was deployed with ({listed}): "
                                  "refused")


def parse_values(raw: Any, region: str) -> dict[str, Any]:
    """Helm values with ``health-monitoring-agent.region`` set: without it the agent's image
    region falls back to us-east-1 while the cluster has no nodes."""
    if raw is None or raw == "":
        values: Any = {}
    elif isinstance(raw, str):
        try:
            values = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ChartInstallerError(f"property Values is not valid JSON: {error}") from None
    else:
        values = raw
    if not isinstance(values, dict):
        raise ChartInstallerError("property Values must be a JSON object")
    agent = values.get("health-monitoring-agent") or {}
    if not isinstance(agent, dict):
        raise ChartInstallerError("Values.health-monitoring-agent must be an object")
    result: dict[str, Any] = {
        **values,
        "health-monitoring-agent": {**agent, "region": agent.get("region") or region},
    }
    return result


def release_to_delete(props: Mapping[str, Any], physical_id: str) -> Release:
    """The release named by the physical id: after an update renamed the release, CloudFormation
    sends the Delete for the old id, which the properties no longer describe."""
    namespace, _, name = physical_id.partition("/")
    if not (NAMESPACE.match(namespace) and RELEASE_NAME.match(name)):
        return parse_release(props)
    return parse_release({**props, "Namespace": namespace, "ReleaseName": name})
