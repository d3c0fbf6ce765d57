"""The fake Kubernetes API server of the hpctl tests (jobs, endpoints, monitoring): the kubernetes client's own REST
layer against a server on 127.0.0.1, a kubeconfig pointing at it, and the SageMaker and EKS stubs of the HyperPod
cluster whose EKS endpoint it is. Its `fake` and `kubeconfig` fixtures are registered in conftest.py.

The fake server answers with the shapes of the Kubernetes API: lists are {"apiVersion", "kind": "<Kind>List",
"metadata", "items"} (kubernetes/api@10b39a39:core/v1/types.go PodList, EventList), errors a Status object
(kind Status, status Failure, reason, message, code: the client's V1Status model).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from hpctl_testkit import CLUSTER, REGION, cluster_description, stubbed

EKS_NAME = "hp-eks"
EKS_ARN = f"arn:aws:eks:{REGION}:123456789012:cluster/{EKS_NAME}"


class FakeApiServer:
    """Routes (method, path) to (status, body); records each request (method, path, query, body, headers)."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], tuple[int, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                server.requests.append({"method": self.command, "path": url.path, "query": parse_qs(url.query),
                                        "body": body, "authorization": self.headers.get("Authorization")})
                status, answer = server.routes.get((self.command, url.path), (404, not_found(url.path)))
                data = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def on(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.routes[(method, path)] = (status, body)

    def sent(self, method: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.requests if method is None or r["method"] == method]


def not_found(what: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": f"{what} not found",
            "reason": "NotFound", "code": 404}


def listing(kind: str, items: list[dict[str, Any]], api_version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": f"{kind}List", "metadata": {"resourceVersion": "7"}, "items": items}


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    yield server
    server.close()


@pytest.fixture
def kubeconfig(fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig whose current context is the fake server, with a static token."""
    path = tmp_path / "kube" / "config"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hp",
        "clusters": [{"name": "hp", "cluster": {"server": fake.url}}],
        "users": [{"name": "me", "user": {"token": "k8s-aws-v1.test-token"}}],
        "contexts": [{"name": "hp", "context": {"cluster": "hp", "user": "me"}},
                     {"name": "other", "context": {"cluster": "elsewhere", "user": "me"}}],
    }) + "", encoding="utf-8")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def aws_clients(endpoint: str) -> dict[str, Any]:
    return aws_clients_and_stub(endpoint)[0]


def aws_clients_and_stub(endpoint: str) -> tuple[dict[str, Any], Any]:
    """SageMaker and EKS stubbed: the HyperPod cluster's EKS cluster, whose endpoint is ``endpoint``; and the
    SageMaker Stubber, for more answers."""
    sm, sm_stub = stubbed("sagemaker")
    sm_stub.add_response("describe_cluster", cluster_description(Orchestrator={"Eks": {"ClusterArn": EKS_ARN}}),
                         {"ClusterName": CLUSTER})
    eks, eks_stub = stubbed("eks")
    eks_stub.add_response("describe_cluster", {"cluster": {"name": EKS_NAME, "arn": EKS_ARN, "endpoint": endpoint}},
                          {"name": EKS_NAME})
    return {"sagemaker": sm, "eks": eks}, sm_stub
