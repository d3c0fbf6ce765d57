"""Fakes for the chart installer tests: helm, GitHub downloads, EKS and S3; STS presigning is real."""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.response import StreamingBody
from botocore.stub import Stubber

CLUSTER = "hyperpod-eks"
REGION = "us-west-2"
SHA = "0123456789abcdef0123456789abcdef01234567"
CHART_PATH = "helm_chart/HyperPodHelmChart"
REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli"
ARCHIVE_URL = f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{SHA}.tar.gz"
FAKE_HELM = "/fake/bin/helm"
FAKE_KUBECTL = "/fake/bin/kubectl"
CHART_YAML = """apiVersion: v2
name: hyperpod-helm-chart
version: 0.1.0
dependencies:
  - name: cert-manager
    version: "v1.18.2"
    repository: oci://quay.io/jetstack/charts
  - name: health-monitoring-agent
    version: "0.1.0"
    repository: "file://charts/health-monitoring-agent"
"""


def tarball_sha256(**kwargs: Any) -> str:
    """The source tree digest (SourceSha256) of ``github_tarball(**kwargs)``."""
    from infra.runtime.chart_installer.handler import charts

    with tempfile.TemporaryDirectory() as tmp:
        archive = github_tarball(Path(tmp), **kwargs)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(Path(tmp) / "src", filter="data")
        return charts.tree_digest(Path(tmp) / "src" / f"sagemaker-hyperpod-cli-{SHA}")


def git_properties(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "ServiceToken": "arn:aws:lambda:us-west-2:111122223333:function:provider",
        "ClusterName": CLUSTER,
        "Region": REGION,
        "ReleaseName": "hyperpod-dependencies",
        "Namespace": "kube-system",
        "Source": "git",
        "GitRepository": REPOSITORY,
        "GitRevision": SHA,
        "ChartPath": CHART_PATH,
        "SourceSha256": DEFAULT_TARBALL_SHA256,
        "Values": json.dumps({"mpi-operator": {"enabled": True}}),
        "TimeoutMinutes": "10",
    }
    props.update(overrides)
    return {key: value for key, value in props.items() if value is not None}


def cfn_event(request_type: str, props: dict[str, Any], physical_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request_type,
        "RequestId": "request-1",
        "LogicalResourceId": "HyperPodDependencies",
        "StackId": "arn:aws:cloudformation:us-west-2:111122223333:stack/hp/1",
        "ResourceType": "Custom::HelmRelease",
        "ResourceProperties": props,
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    return event


def github_tarball(
    directory: Path,
    chart_yaml: str | None = CHART_YAML,
    extra: Sequence[tarfile.TarInfo] = (),
) -> bytes:
    """A tar.gz laid out like GitHub's archive of the repository at SHA, written in directory."""
    top = f"sagemaker-hyperpod-cli-{SHA}"
    files = {
        f"{top}/README.md": "readme\n",
        f"{top}/{CHART_PATH}/values.yaml": "health-monitoring-agent:\n  enabled: true\n",
        f"{top}/{CHART_PATH}/charts/health-monitoring-agent/Chart.yaml": "apiVersion: v2\nname: hma\n",
    }
    if chart_yaml is not None:
        files[f"{top}/{CHART_PATH}/Chart.yaml"] = chart_yaml
    path = directory / "archive.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        top_info = tarfile.TarInfo(top)
        top_info.type = tarfile.DIRTYPE
        top_info.mode = 0o755
        tar.addfile(top_info)
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        for member in extra:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return path.read_bytes()


def revisions(*statuses: str) -> list[dict[str, Any]]:
    """``helm history --output json`` of a release whose revisions 1, 2, ... have these statuses."""
    return [
        {"revision": number, "updated": "2026-12-02T20:00:00Z", "status": status, "chart": "hyperpod-helm-chart-0.1.0",
         "app_version": "1.16.0", "description": "Upgrade complete"}
        for number, status in enumerate(statuses, start=1)
    ]


@dataclass
class HelmCall:
    args: list[str]
    env: dict[str, str]
    timeout: float
    kubeconfig: dict[str, Any] | None = None
    kubeconfig_mode: int | None = None
    values: dict[str, Any] | None = None
    chart_yaml_present: bool | None = None
    applied: str | None = None

    @property
    def command(self) -> str:
        return "kubectl" if self.args[0] == FAKE_KUBECTL else self.args[1]

    def option(self, name: str) -> str:
        return self.args[self.args.index(name) + 1]


@dataclass
class FakeHelm:
    """Stands in for process.run (helm and kubectl); records every call and what the files it was given held.

    ``results`` overrides a command's (exit code, stdout, stderr), or holds an exception to raise or a function
    returning the triple; ``history``
    is what ``helm history`` prints (None: the release is not installed); ``rendered`` what ``helm template``
    prints."""

    results: dict[str, tuple[int, str, str] | Exception | Callable[[], tuple[int, str, str]]] = field(
        default_factory=dict
    )
    history: list[dict[str, Any]] | None = None
    rendered: str = ""
    calls: list[HelmCall] = field(default_factory=list)

    def __call__(self, args: Sequence[str], env: Any, timeout: float) -> subprocess.CompletedProcess[str]:
        args = list(args)
        assert args[0] in (FAKE_HELM, FAKE_KUBECTL)
        assert timeout > 0
        call = HelmCall(args=args, env=dict(env), timeout=timeout)
        if "--kubeconfig" in args:
            kubeconfig = Path(call.option("--kubeconfig"))
            call.kubeconfig = json.loads(kubeconfig.read_text())
            call.kubeconfig_mode = os.stat(kubeconfig).st_mode & 0o777
        if "--values" in args:
            call.values = json.loads(Path(call.option("--values")).read_text())
        if call.command == "upgrade":
            call.chart_yaml_present = (Path(args[4]) / "Chart.yaml").is_file()
        if call.command == "kubectl" and "--filename" in args:
            call.applied = Path(call.option("--filename")).read_text()
        if call.command == "pull":
            chart = Path(call.option("--untardir")) / "pulled-chart"
            chart.mkdir()
            (chart / "Chart.yaml").write_text("apiVersion: v2\nname: pulled-chart\nversion: 1.2.3\n")
        self.calls.append(call)
        outcome = self.results.get(call.command) or self.default(call)
        if isinstance(outcome, Exception):
            raise outcome
        returncode, stdout, stderr = outcome() if callable(outcome) else outcome
        return subprocess.CompletedProcess(args, returncode, stdout, stderr)

    def default(self, call: HelmCall) -> tuple[int, str, str]:
        if call.command == "status":
            return 0, json.dumps({"name": call.args[2], "version": 3}), ""
        if call.command == "history":
            if self.history is None:
                return 1, "", "Error: release: not found\n"
            return 0, json.dumps(self.history), ""
        if call.command == "template":
            return 0, self.rendered, ""
        return 0, "", ""

    def commands(self) -> list[str]:
        return [call.command for call in self.calls]

    def only(self, command: str) -> HelmCall:
        matches = [call for call in self.calls if call.command == command]
        assert len(matches) == 1, self.commands()
        return matches[0]


@dataclass
class FakeDownloads:
    """Stands in for charts.urlopen; each queued outcome is bytes to serve or an exception."""

    outcomes: list[bytes | Exception] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)

    def serve(self, *outcomes: bytes | Exception) -> None:
        self.outcomes.extend(outcomes)

    def __call__(self, request: Any, timeout: float) -> io.BytesIO:
        assert timeout > 0
        self.urls.append(request.full_url)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return io.BytesIO(outcome)


@functools.cache
def _shared_client(service: str) -> Any:
    """One EKS and one S3 client per process, each stubbed anew by every test's FakeAws: botocore builds a client's
    class from the service model each time one is made (about 20 ms), and a Stubber answers every call before it
    is signed or sent (botocore/stub.py), so the client itself carries nothing from one test to the next."""
    return boto3.client(service, region_name=REGION)


class FakeAws:
    """aws_clients.client replacement: stubbed EKS and S3, a real STS client for presigning."""

    def __init__(self) -> None:
        self.eks = _shared_client("eks")
        self.s3 = _shared_client("s3")
        self.eks_stub = Stubber(self.eks)
        self.s3_stub = Stubber(self.s3)
        self.eks_stub.activate()
        self.s3_stub.activate()

    def client(self, service: str, region: str) -> Any:
        assert region == REGION
        if service == "eks":
            return self.eks
        if service == "s3":
            return self.s3
        assert service == "sts"
        return boto3.client("sts", region_name=region)

    def cluster_exists(self) -> None:
        cluster = {
            "name": CLUSTER,
            "status": "ACTIVE",
            "endpoint": "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
            "certificateAuthority": {"data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
        }
        self.eks_stub.add_response("describe_cluster", {"cluster": cluster}, {"name": CLUSTER})

    def cluster_missing(self) -> None:
        self.eks_stub.add_client_error(
            "describe_cluster",
            service_error_code="ResourceNotFoundException",
            service_message=f"No cluster found for name: {CLUSTER}.",
            http_status_code=404,
            expected_params={"name": CLUSTER},
        )

    def s3_object(self, bucket: str, key: str, data: bytes) -> None:
        body = StreamingBody(io.BytesIO(data), len(data))
        self.s3_stub.add_response(
            "get_object", {"Body": body, "ContentLength": len(data)}, {"Bucket": bucket, "Key": key}
        )

    def verify(self) -> None:
        self.eks_stub.assert_no_pending_responses()
        self.s3_stub.assert_no_pending_responses()

    def close(self) -> None:
        """Takes the Stubbers off the shared clients, for the next test's."""
        self.eks_stub.deactivate()
        self.s3_stub.deactivate()


DEFAULT_TARBALL_SHA256 = tarball_sha256()
