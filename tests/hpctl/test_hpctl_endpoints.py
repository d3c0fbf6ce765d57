"""hpctl endpoints: the inference operator's JumpStartModel and InferenceEndpointConfig objects through the kubernetes
client against the fake API server of kube_fake.py, and their SageMaker endpoints through Stubber (botocore's
sagemaker and sagemaker-runtime shapes). Every object the fake serves is valid against the CRDs of the pinned chart
(tests/contract/crds.py), status included, so the fields read are the operator's."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.response import StreamingBody
from hpctl_testkit import CLUSTER, REGION, config_data, stubbed
from kube_fake import EKS_ARN, aws_clients_and_stub, listing
from test_hpctl_jobs import T0, TEAM_NS, governed_config

from hpctl import endpoints
from hpctl.commands import terminal
from tests.contract import crds

BUCKET = {"enabled": True, "bucket_arns": ["arn:aws:s3:::models"]}
OPERATOR = {"s3_csi": BUCKET, "inference_operator": {"enabled": True}}
NS = "training"
BASE = f"/apis/{endpoints.GROUP}/{endpoints.VERSION}"
ENDPOINT_ARN = f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/tinyllama-serve"


def endpoint_config(name: str = "tinyllama-serve", ns: str = NS, state: str | None = "DeploymentComplete",
                    registered: str | None = "InService", endpoint_name: str = "tinyllama-serve") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": endpoints.API_VERSION, "kind": "InferenceEndpointConfig",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": T0},
        "spec": {
            "modelName": name, "endpointName": endpoint_name, "instanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"],
            "modelSourceConfig": {"modelSourceType": "s3", "s3Storage": {"bucketName": "models", "region": REGION},
                                  "modelLocation": "tinyllama-1.1b-chat"},
            "worker": {"image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
                       "resources": {"limits": {"nvidia.com/gpu": 1}},
                       "modelInvocationPort": {"containerPort": 8080, "name": "http"},
                       "modelVolumeMount": {"name": "modelmount", "mountPath": "/opt/ml/model"}},
        },
    }
    status: dict[str, Any] = {}
    if state:
        status = {"state": state, "selector": f"app={name}", "conditions": [{
            "type": "DeploymentComplete", "status": "True", "reason": "Deployed", "message": "model is serving",
            "lastTransitionTime": "2026-12-04T10:06:00Z"}],
            "deploymentStatus": {"name": name, "lastUpdated": "2026-12-04T10:06:00Z",
                                 "deploymentObjectOverallState": "DeploymentComplete"}}
    if registered:
        status["endpoints"] = {"sagemaker": {"state": registered, "endpointArn": ENDPOINT_ARN}}
    if status:
        obj["status"] = status
    assert crds.errors(obj) == [], crds.errors(obj)
    return obj


def jumpstart_model(name: str = "deepseek-serve", ns: str = NS) -> dict[str, Any]:
    obj = {
        "apiVersion": endpoints.API_VERSION, "kind": "JumpStartModel",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": T0},
        "spec": {"model": {"modelId": "deepseek-llm-r1-distill-qwen-1-5b", "acceptEula": False},
                 "server": {"instanceType": "ml.g5.8xlarge"}, "sageMakerEndpoint": {"name": name}},
        "status": {"state": "DeploymentInProgress"},
    }
    assert crds.errors(obj) == [], crds.errors(obj)
    return obj


@pytest.fixture
def config(write_config: Any) -> Path:
    data = config_data()
    data["addons"] = OPERATOR
    return write_config(data)


def serve(fake: Any, ns: str, configs: list[dict[str, Any]], models: list[dict[str, Any]]) -> None:
    fake.on("GET", f"{BASE}/namespaces/{ns}/inferenceendpointconfigs",
            listing("InferenceEndpointConfig", configs, endpoints.API_VERSION))
    fake.on("GET", f"{BASE}/namespaces/{ns}/jumpstartmodels", listing("JumpStartModel", models, endpoints.API_VERSION))
    for obj in configs:
        fake.on("GET", f"{BASE}/namespaces/{ns}/inferenceendpointconfigs/{obj['metadata']['name']}", obj)
    for obj in models:
        fake.on("GET", f"{BASE}/namespaces/{ns}/jumpstartmodels/{obj['metadata']['name']}", obj)


def described(status: str, **more: Any) -> dict[str, Any]:
    """DescribeEndpoint's required output members (botocore's sagemaker model), with ``status``."""
    return {"EndpointName": "tinyllama-serve", "EndpointArn": ENDPOINT_ARN, "EndpointConfigName": "tinyllama-serve",
            "EndpointStatus": status, "CreationTime": "2026-12-04T10:05:00Z",
            "LastModifiedTime": "2026-12-04T10:06:00Z", **more}


def test_list_shows_both_kinds_with_model_placement_state_and_sagemaker_endpoint(run, config, fake, kubeconfig):
    serve(fake, NS, [endpoint_config()], [jumpstart_model()])
    clients, _ = aws_clients_and_stub(fake.url)
    code, data = run.json("endpoints", "list", "--namespace", NS, "--config", str(config), clients=clients)
    assert code == 0
    assert [(r["name"], r["kind"], r["model"], r["instance_type"], r["state"], r["sagemaker_endpoint"],
             r["sagemaker_state"]) for r in data] == [
        ("deepseek-serve", "JumpStartModel", "deepseek-llm-r1-distill-qwen-1-5b", "ml.g5.8xlarge",
         "DeploymentInProgress", "deepseek-serve", None),
        ("tinyllama-serve", "InferenceEndpointConfig", "tinyllama-serve (s3)", "ml.g5.8xlarge,ml.g5.12xlarge",
         "DeploymentComplete", "tinyllama-serve", "InService"),
    ]
    assert all(r["authorization"] == "Bearer k8s-aws-v1.test-token" for r in fake.requests)


def test_list_in_a_teams_namespace_and_the_table(run, write_config, fake, kubeconfig):
    config = write_config(governed_config(**OPERATOR))
    serve(fake, TEAM_NS, [endpoint_config(ns=TEAM_NS)], [])
    clients, _ = aws_clients_and_stub(fake.url)
    code, out, err = run("endpoints", "list", "--team", "research", "--config", str(config), clients=clients)
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:4] == ["NAME", "KIND", "TEAM/NAMESPACE", "MODEL"]
    assert row.split()[:3] == ["tinyllama-serve", "InferenceEndpointConfig", "research"]
    assert "tinyllama-serve (InService)" in row
    assert err == f"1 endpoint(s) in {TEAM_NS}\n"


def test_a_cluster_without_the_crds_lists_none(run, config, fake, kubeconfig):
    clients, _ = aws_clients_and_stub(fake.url)  # the fake answers 404 for every path
    code, data = run.json("endpoints", "list", "--namespace", NS, "--config", str(config), clients=clients)
    assert code == 0 and data == []


def test_the_operator_off_is_refused_before_anything_is_sent(run, config_file, fake, kubeconfig):
    for argv in (["list"], ["describe", "x"], ["invoke", "x", "--body", "{}"], ["delete", "x", "--yes"]):
        code, out, err = run("endpoints", *argv, "--config", str(config_file))
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and "addons.inference_operator is off" in err
    assert fake.requests == []


def test_describe_shows_status_pods_events_and_the_sagemaker_endpoint(run, config, fake, kubeconfig):
    serve(fake, NS, [endpoint_config()], [])
    fake.on("GET", f"/api/v1/namespaces/{NS}/pods", listing("Pod", [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "tinyllama-serve-abc", "namespace": NS, "labels": {"app": "tinyllama-serve"}},
        "spec": {"nodeName": "hyperpod-i-0aaa", "containers": [{"name": "worker", "image": "x"}]},
        "status": {"phase": "Running"}}]))
    fake.on("GET", f"/api/v1/namespaces/{NS}/events", listing("Event", [
        {"metadata": {"name": "e1", "namespace": NS}, "involvedObject": {"kind": "Pod", "name": "tinyllama-serve-abc"},
         "type": "Normal", "reason": "Pulled", "message": "image pulled", "lastTimestamp": "2026-12-04T10:03:00Z"}]))
    clients, sm_stub = aws_clients_and_stub(fake.url)
    sm_stub.add_response("describe_endpoint", described("InService"), {"EndpointName": "tinyllama-serve"})
    code, data = run.json("endpoints", "describe", "tinyllama-serve", "--config", str(config), clients=clients)
    assert code == 0
    assert data["sagemaker"] == {"status": "InService", "arn": ENDPOINT_ARN, "failure_reason": None}
    assert data["pods"] == [{"pod": "tinyllama-serve-abc", "node": "hyperpod-i-0aaa", "phase": "Running"}]
    assert [e["reason"] for e in data["events"]] == ["Pulled"]
    assert data["deployment"] == "tinyllama-serve" and data["conditions"][0]["type"] == "DeploymentComplete"
    (pods,) = [r for r in fake.sent("GET") if r["path"].endswith("/pods")]
    assert pods["query"]["labelSelector"] == ["app=tinyllama-serve"]  # the operator's status.selector
    sm_stub.assert_no_pending_responses()


def test_describe_of_an_unknown_name_is_one_line_and_exit_3(run, config, fake, kubeconfig):
    serve(fake, NS, [], [])
    clients, _ = aws_clients_and_stub(fake.url)
    code, out, err = run("endpoints", "describe", "nothing", "--namespace", NS, "--config", str(config),
                         clients=clients)
    assert code == 3 and out == ""
    assert err.count("\n") == 1
    assert "no endpoint 'nothing' in training (JumpStartModel, InferenceEndpointConfig)" in err
    assert "hpctl endpoints list" in err


def _runtime(answer: bytes, body: bytes, content_type: str = "application/json") -> tuple[Any, Any]:
    runtime, stub = stubbed("sagemaker-runtime")
    stub.add_response("invoke_endpoint",
                      {"Body": StreamingBody(io.BytesIO(answer), len(answer)), "ContentType": "application/json"},
                      {"EndpointName": "tinyllama-serve", "Body": body, "ContentType": content_type})
    return runtime, stub


def test_invoke_goes_through_the_in_service_sagemaker_endpoint(run, config, fake, kubeconfig, tmp_path):
    serve(fake, NS, [endpoint_config()], [])
    request = b'{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}'
    (tmp_path / "request.json").write_bytes(request)
    for body in (request.decode(), f"@{tmp_path / 'request.json'}"):
        clients, sm_stub = aws_clients_and_stub(fake.url)
        sm_stub.add_response("describe_endpoint", described("InService"), {"EndpointName": "tinyllama-serve"})
        clients["sagemaker-runtime"], rt_stub = _runtime(b'{"choices": [{"text": "Hello"}]}', request)
        code, out, err = run("endpoints", "invoke", "tinyllama-serve", "--body", body, "--config", str(config),
                             clients=clients)
        assert code == 0, err
        assert out == '{"choices": [{"text": "Hello"}]}\n'
        rt_stub.assert_no_pending_responses()
        sm_stub.assert_no_pending_responses()


@pytest.mark.parametrize(("obj", "answer", "says"), [
    (endpoint_config(registered=None), None,
     "SageMaker endpoint tinyllama-serve of InferenceEndpointConfig tinyllama-serve is not registered yet"),
    (endpoint_config(registered="Creating", state="DeploymentInProgress"), "Creating",
     "SageMaker endpoint tinyllama-serve of InferenceEndpointConfig tinyllama-serve is Creating, not InService"),
    (endpoint_config(registered="Failed", state="DeploymentFailed"), "Failed", "is Failed, not InService: no capacity"),
    (endpoint_config(endpoint_name=""), "skip", "registers no SageMaker endpoint (spec.endpointName is empty)"),
])
def test_invoke_before_the_endpoint_takes_requests_says_why_in_one_line(run, config, fake, kubeconfig, obj, answer,
                                                                         says):
    serve(fake, NS, [obj], [])
    clients, sm_stub = aws_clients_and_stub(fake.url)
    if answer is None:
        sm_stub.add_client_error("describe_endpoint", "ValidationException",
                                 f"Could not find endpoint \"arn:aws:sagemaker:{REGION}:123456789012:endpoint/"
                                 "tinyllama-serve\".", expected_params={"EndpointName": "tinyllama-serve"})
    elif answer != "skip":
        extra = {"FailureReason": "no capacity"} if answer == "Failed" else {}
        sm_stub.add_response("describe_endpoint", described(answer, **extra), {"EndpointName": "tinyllama-serve"})
    clients["sagemaker-runtime"], _ = stubbed("sagemaker-runtime")  # no answer queued: a call would fail the test
    code, out, err = run("endpoints", "invoke", "tinyllama-serve", "--body", "{}", "--config", str(config),
                         clients=clients)
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and says in err, err
    sm_stub.assert_no_pending_responses()


@pytest.mark.parametrize(("argv", "says"), [
    (["--body", "not json"], "--body is not JSON"),
    (["--body", "@/nonexistent/request.json"], "--body @/nonexistent/request.json: cannot read it"),
])
def test_a_bad_body_is_refused_before_anything_is_sent(run, config, fake, kubeconfig, argv, says):
    code, out, err = run("endpoints", "invoke", "tinyllama-serve", *argv, "--config", str(config))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and says in err
    assert fake.requests == []


def test_a_text_body_goes_as_written_with_its_content_type(run, config, fake, kubeconfig):
    serve(fake, NS, [endpoint_config()], [])
    clients, sm_stub = aws_clients_and_stub(fake.url)
    sm_stub.add_response("describe_endpoint", described("InService"), {"EndpointName": "tinyllama-serve"})
    clients["sagemaker-runtime"], rt_stub = _runtime(b"ok", b"not json", "text/plain")
    code, data = run.json("endpoints", "invoke", "tinyllama-serve", "--body", "not json", "--content-type",
                          "text/plain", "--config", str(config), clients=clients)
    assert code == 0
    assert data == {"endpoint": "tinyllama-serve", "content_type": "application/json", "body": "ok"}
    rt_stub.assert_no_pending_responses()


def test_invoke_access_denied_is_one_line_and_exit_3(run, config, fake, kubeconfig):
    serve(fake, NS, [endpoint_config()], [])
    clients, sm_stub = aws_clients_and_stub(fake.url)
    sm_stub.add_client_error("describe_endpoint", "AccessDeniedException", "User is not authorized to perform: "
                             "sagemaker:DescribeEndpoint", expected_params={"EndpointName": "tinyllama-serve"})
    code, out, err = run("endpoints", "invoke", "tinyllama-serve", "--body", "{}", "--config", str(config),
                         clients=clients)
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "sagemaker:DescribeEndpoint" in err


def test_delete_asks_first_and_deletes_the_one_object(run, config, fake, kubeconfig, monkeypatch):
    serve(fake, NS, [endpoint_config()], [])
    path = f"{BASE}/namespaces/{NS}/inferenceendpointconfigs/tinyllama-serve"
    fake.on("DELETE", path, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr(terminal, "_ask", lambda prompt: asked.append(prompt) or "n")
    clients, _ = aws_clients_and_stub(fake.url)
    code, _, err = run("endpoints", "delete", "tinyllama-serve", "--config", str(config), clients=clients)
    assert code == 1 and "aborted" in err and fake.sent("DELETE") == []
    (question,) = asked
    assert "Delete InferenceEndpointConfig training/tinyllama-serve (DeploymentComplete)" in question
    assert "removes SageMaker endpoint tinyllama-serve" in question
    clients, _ = aws_clients_and_stub(fake.url)
    code, out, _ = run("endpoints", "delete", "tinyllama-serve", "--yes", "--config", str(config), clients=clients)
    assert code == 0 and out == "deleted InferenceEndpointConfig training/tinyllama-serve\n"
    (deleted,) = fake.sent("DELETE")
    assert deleted["path"] == path


def test_delete_without_a_terminal_or_yes_is_refused(run, config, fake, kubeconfig, monkeypatch):
    serve(fake, NS, [endpoint_config()], [])
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: False)
    clients, _ = aws_clients_and_stub(fake.url)
    code, _, err = run("endpoints", "delete", "tinyllama-serve", "--config", str(config), clients=clients)
    assert code == 2 and err.count("\n") == 1 and "pass --yes" in err
    assert fake.sent("DELETE") == []


def test_a_name_both_kinds_use_asks_for_the_kind(run, config, fake, kubeconfig):
    serve(fake, NS, [endpoint_config(name="same", endpoint_name="same")], [jumpstart_model(name="same")])
    clients, _ = aws_clients_and_stub(fake.url)
    code, _, err = run("endpoints", "describe", "same", "--namespace", NS, "--config", str(config), clients=clients)
    assert code == 2 and "names several endpoints" in err and "pass --kind" in err


def test_the_fakes_are_the_crds_shapes():
    """The validator refuses what the operator would not write: the fakes above cannot drift from the CRDs."""
    bad = copy.deepcopy(endpoint_config())
    bad["status"]["state"] = "Serving"
    assert any(e.startswith("status.state: 'Serving' is not one of") for e in crds.errors(bad))
    assert json.dumps(jumpstart_model())  # serializable as the API server sends it
    assert CLUSTER and EKS_ARN  # the cluster the stubs describe


@pytest.mark.parametrize("kind", sorted(endpoints.KINDS))
def test_the_kinds_are_the_crds_names(kind: str):
    spec = crds.crd(kind)["spec"]
    assert (spec["group"], spec["names"]["kind"], spec["names"]["plural"]) == (
        endpoints.KINDS[kind].group, kind, endpoints.KINDS[kind].plural)
    assert f"{spec['group']}/{endpoints.VERSION}" == crds.stored_version(kind)
