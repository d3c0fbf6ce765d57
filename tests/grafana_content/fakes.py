"""Fakes for the Grafana provisioner tests: a stateful Grafana HTTP API, file downloads, and the grafana API
through botocore's Stubber (response shapes from botocore's grafana model)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.stub import Stubber

REGION = "us-west-2"
WORKSPACE = "g-0123456789"
ENDPOINT = f"{WORKSPACE}.grafana-workspace.{REGION}.amazonaws.com"
PROMETHEUS_URL = f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/ws-11111111-2222-3333-4444-555555555555"
ACCOUNT_NAME = "hyperpod-content-provisioner"
SOURCE = "https://files.example.com/pinned/"
TOKEN_KEY = "glsa_test_token"  # noqa: S105 - a fake token

# Test content written for these tests (not AWS's files): two dashboards and a rules file in the same shape.
FILES: dict[str, bytes] = {
    # Data source references as AWS's dashboards write them: a hidden variable listing the Prometheus data
    # sources, panels and queries pointing at it, and a CloudWatch panel.
    "dashboards/gpu.json": json.dumps({
        "title": "GPU", "uid": "upstream", "id": 54,
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "hide": 2},
                                {"name": "cloudwatch", "type": "datasource", "query": "cloudwatch", "hide": 2}]},
        "panels": [{"id": 1, "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "targets": [{"datasource": {"type": "prometheus", "uid": "${datasource}"}, "expr": "up"}]},
                   {"id": 2, "datasource": {"type": "cloudwatch", "uid": "${cloudwatch}"}},
                   {"id": 3, "datasource": {"type": "datasource", "uid": "grafana"}}],
    }).encode(),
    "dashboards/wrapped.json": json.dumps({"dashboard": {"title": "Wrapped", "panels": []}}).encode(),
    "rules/alert-rules.yaml": b"""groups:
  - name: sagemaker_hyperpod_alerts
    rules:
      - alert: GPUHighTemperature
        expr: DCGM_FI_DEV_GPU_TEMP > 80
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: 'GPU Temperature Above 80C'
          description: 'GPU {{ $labels.gpu }} is {{ $value }}\xc2\xb0C, it''s hot.'

      - alert: GPUXidError
        expr: DCGM_FI_DEV_XID_ERRORS > 0
        labels:
          severity: critical
        annotations:
          summary: "XID error"
""",
}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content(files: dict[str, bytes] = FILES, source: str = SOURCE) -> str:
    return json.dumps({
        "source": source,
        "dashboards": [{"uid": "hp-gpu", "path": "dashboards/gpu.json", "sha256": digest(files["dashboards/gpu.json"])},
                       {"uid": "hp-wrapped", "path": "dashboards/wrapped.json",
                        "sha256": digest(files["dashboards/wrapped.json"])}],
        "alertRules": {"path": "rules/alert-rules.yaml", "sha256": digest(files["rules/alert-rules.yaml"])},
    })


def properties(**overrides: Any) -> dict[str, Any]:
    return {"ServiceToken": "arn:aws:lambda:us-west-2:111122223333:function:x", "WorkspaceId": WORKSPACE,
            "WorkspaceEndpoint": ENDPOINT, "Region": REGION, "PrometheusUrl": PROMETHEUS_URL,
            "ServiceAccountName": ACCOUNT_NAME, "Content": content(), **overrides}


def event(request_type: str = "Create", **props: Any) -> dict[str, Any]:
    body = {"RequestType": request_type, "RequestId": "r-1", "LogicalResourceId": "GrafanaContent",
            "ResourceProperties": properties(**props)}
    if request_type != "Create":
        body["PhysicalResourceId"] = f"{WORKSPACE}/{ACCOUNT_NAME}"
    return body


class Context:
    def __init__(self, remaining_ms: int = 300_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass
class FakeWeb:
    """Downloads from SOURCE and a Grafana that keeps its objects, answering as Grafana's HTTP API does."""

    files: dict[str, bytes] = field(default_factory=lambda: dict(FILES))
    data_sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # Answers given instead of the normal ones, per (method, url): one for every call, or a list used up in turn.
    fail: dict[tuple[str, str], Any] = field(default_factory=dict)

    def __call__(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
                 timeout: float) -> tuple[int, bytes]:
        assert 0 < timeout <= 30, timeout
        self.calls.append((method, url))
        self.headers.append(dict(headers))
        failure = self.fail.get((method, url))
        if isinstance(failure, list):
            failure = failure.pop(0) if failure else None
        if isinstance(failure, BaseException):
            raise failure
        if failure is not None:
            return failure
        if url.startswith(SOURCE):
            path = url.removeprefix(SOURCE)
            return (200, self.files[path]) if path in self.files else (404, b"not found")
        assert url.startswith(f"https://{ENDPOINT}/"), url
        assert headers["Authorization"] == f"Bearer {TOKEN_KEY}"
        return self.grafana(method, url.removeprefix(f"https://{ENDPOINT}"), json.loads(body) if body else None)

    def grafana(self, method: str, path: str, payload: Any) -> tuple[int, bytes]:
        ok = (200, b"{}")
        if path.startswith("/api/datasources/uid/"):
            uid = path.rsplit("/", 1)[1]
            if uid not in self.data_sources:
                return 404, b'{"message":"Data source not found"}'
            if method == "PUT":
                assert payload["uid"] == uid
                self.data_sources[uid] = payload
            return ok
        if (method, path) == ("POST", "/api/datasources"):
            if any(s["name"] == payload["name"] for s in self.data_sources.values()):
                return 409, b'{"message":"data source with the same name already exists"}'
            self.data_sources[payload["uid"]] = payload
            return ok
        if path.startswith("/api/folders/") and method == "GET":
            return ok if path.rsplit("/", 1)[1] in self.folders else (404, b"{}")
        if (method, path) == ("POST", "/api/folders"):
            self.folders[payload["uid"]] = payload
            return ok
        if (method, path) == ("POST", "/api/dashboards/db"):
            assert payload["overwrite"] is True
            self.dashboards[payload["dashboard"]["uid"]] = payload["dashboard"]
            return ok
        if path.startswith("/api/v1/provisioning/alert-rules/") and method == "PUT":
            uid = path.rsplit("/", 1)[1]
            if uid not in self.rules:
                return 404, b"{}"
            self.rules[uid] = payload
            return ok
        if (method, path) == ("POST", "/api/v1/provisioning/alert-rules"):
            assert payload["folderUID"] in self.folders, "rules need their folder first"
            self.rules[payload["uid"]] = payload
            return 201, b"{}"
        raise AssertionError(f"unexpected Grafana call {method} {path}")

    def grafana_calls(self) -> list[tuple[str, str]]:
        return [(m, u) for m, u in self.calls if not u.startswith(SOURCE)]


def grafana_client() -> tuple[Any, Stubber]:
    client = boto3.client("grafana", region_name=REGION)
    return client, Stubber(client)


def workspace(version: str = "10.4", status: str = "ACTIVE") -> dict[str, Any]:
    """DescribeWorkspace's answer (WorkspaceDescription's required members, botocore's grafana model)."""
    return {"workspace": {"id": WORKSPACE, "status": status, "endpoint": ENDPOINT, "grafanaVersion": version,
                          "dataSources": [], "authentication": {"providers": ["AWS_SSO"]}, "created": 0,
                          "modified": 0}}


def expect_alerting(stubber: Stubber, configuration: str, version: str = "10.4") -> None:
    """The workspace's Grafana version is asked first, then its configuration (alerting on or off)."""
    stubber.add_response("describe_workspace", workspace(version), {"workspaceId": WORKSPACE})
    stubber.add_response("describe_workspace_configuration", {"configuration": configuration},
                         {"workspaceId": WORKSPACE})


def expect_token(stubber: Stubber, *, existing_account: bool) -> None:
    """List the service accounts, create one if absent, create a token; the token's deletion is expected last."""
    accounts = [{"id": "7", "name": ACCOUNT_NAME, "isDisabled": "false", "grafanaRole": "ADMIN"}] \
        if existing_account else [{"id": "3", "name": "someone-else", "isDisabled": "false", "grafanaRole": "VIEWER"}]
    stubber.add_response("list_workspace_service_accounts", {"serviceAccounts": accounts, "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE})
    if not existing_account:
        stubber.add_response("create_workspace_service_account",
                             {"id": "7", "name": ACCOUNT_NAME, "grafanaRole": "ADMIN", "workspaceId": WORKSPACE},
                             {"workspaceId": WORKSPACE, "name": ACCOUNT_NAME, "grafanaRole": "ADMIN"})
    stubber.add_response(
        "create_workspace_service_account_token",
        {"serviceAccountToken": {"id": "tok-1", "name": "t", "key": TOKEN_KEY}, "serviceAccountId": "7",
         "workspaceId": WORKSPACE},
        None,
    )


def expect_token_deleted(stubber: Stubber) -> None:
    stubber.add_response("delete_workspace_service_account_token", {"serviceAccountId": "7", "tokenId": "tok-1",
                                                                    "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE, "serviceAccountId": "7", "tokenId": "tok-1"})
