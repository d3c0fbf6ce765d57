"""The readiness waiter's handler against a fake kubectl (process.run) and a stubbed EKS: each check passes, keeps
waiting, and fails with one line; the deadline; Update and Delete."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from infra.runtime.chart_installer.handler import process, readiness
from infra.runtime.common.errors import DeployError

from .fakes import CLUSTER, FAKE_KUBECTL, REGION, FakeAws

HYPERPOD = "demo"
NODES = f"sagemaker.amazonaws.com/cluster-name={HYPERPOD}"
AGENT = "app.kubernetes.io/name=eks-pod-identity-agent"


class Context:
    def __init__(self, seconds: float = 180) -> None:
        self.millis = int(seconds * 1000)

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


@dataclass
class FakeKubectl:
    """Stands in for process.run: answers ``kubectl get <what> ... --output json`` from ``objects``, keyed by
    ``nodes``, ``endpointslices`` or ``<kind>/<name>``; a missing key is NotFound, a tuple is (exit, out, err)."""

    objects: dict[str, Any] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, args: Sequence[str], env: Any, timeout: float) -> subprocess.CompletedProcess[str]:
        args = list(args)
        assert args[0] == FAKE_KUBECTL and args[1] == "get"
        assert "--output" in args and args[args.index("--output") + 1] == "json"
        assert "--request-timeout=20s" in args and "--kubeconfig" in args
        assert timeout > 0
        self.calls.append(args)
        key = args[2] if args[2] in ("nodes", "endpointslices") else f"{args[2]}/{args[3]}"
        answer = self.objects.get(key)
        if answer is None:
            return subprocess.CompletedProcess(args, 1, "", f'Error from server (NotFound): {key} not found\n')
        if isinstance(answer, tuple):
            return subprocess.CompletedProcess(args, *answer)
        return subprocess.CompletedProcess(args, 0, json.dumps(answer), "")

    def kinds(self) -> list[str]:
        return [call[2] for call in self.calls]


@pytest.fixture
def kubectl(monkeypatch: pytest.MonkeyPatch) -> FakeKubectl:
    fake = FakeKubectl()
    monkeypatch.setattr(process, "run", fake)
    return fake


def node(ready: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": "hyperpod-i-0123"}, "status": {"conditions": [
        {"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]}}


def daemonset(desired: int, ready: int) -> dict[str, Any]:
    return {"spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "eks-pod-identity-agent"}}},
            "status": {"desiredNumberScheduled": desired, "numberReady": ready}}


def deployment(available: str, replicas: int, message: str = "") -> dict[str, Any]:
    condition = {"type": "Available", "status": available, **({"message": message} if message else {})}
    return {"spec": {"replicas": 1},
            "status": {"availableReplicas": replicas, "conditions": [{"type": "Progressing", "status": "True"},
                                                                    condition]}}


def slices(*ready: bool | None) -> dict[str, Any]:
    endpoints = [{"addresses": ["10.1.2.3"], "conditions": {} if flag is None else {"ready": flag}} for flag in ready]
    return {"items": [{"addressType": "IPv4", "endpoints": endpoints}]}


CHECKS = {
    "nodes": {"kind": "nodes", "selector": NODES, "minimum": 1},
    "daemonset": {"kind": "daemonset", "namespace": "kube-system", "name": "eks-pod-identity-agent"},
    "deployment": {"kind": "deployment", "namespace": "kueue-system", "name": "kueue-controller-manager"},
    "endpoints": {"kind": "endpoints", "namespace": "kueue-system", "service": "kueue-webhook-service"},
    "addon": {"kind": "addon", "name": "cert-manager"},
}


def properties(*checks: dict[str, Any], what: str = "HyperPod nodes", timeout: int = 35 * 60) -> dict[str, Any]:
    return {"ServiceToken": "arn:aws:lambda:us-west-2:111122223333:function:provider", "ClusterName": CLUSTER,
            "Region": REGION, "What": what, "TimeoutSeconds": str(timeout), "Checks": json.dumps(list(checks))}


def waiting(props: dict[str, Any], *, seconds_left: float = 600, request: str = "Create") -> dict[str, Any]:
    """The event the framework gives isComplete: the request with onEvent's Data (the recorded deadline)."""
    return {"RequestType": request, "RequestId": "r-1", "LogicalResourceId": "HyperPodNodesReady",
            "PhysicalResourceId": "readiness/HyperPodNodesReady", "ResourceType": readiness_type(),
            "ResourceProperties": props, "Data": {"Deadline": str(int(time.time() + seconds_left))}}


def readiness_type() -> str:
    return "Custom::HyperPodReadiness"


def check(props: dict[str, Any], aws: FakeAws, **kwargs: Any) -> dict[str, Any]:
    """One isComplete call; the cluster is described for kubectl checks only (a wait for add-ons needs none)."""
    if any(entry["kind"] != "addon" for entry in json.loads(props["Checks"])):
        aws.cluster_exists()
    return readiness.is_complete(waiting(props, **kwargs), Context())


def addon(aws: FakeAws, status: str, *issues: dict[str, Any]) -> None:
    aws.eks_stub.add_response(
        "describe_addon",
        {"addon": {"addonName": "cert-manager", "clusterName": CLUSTER, "status": status,
                   "health": {"issues": list(issues)}}},
        {"clusterName": CLUSTER, "addonName": "cert-manager"},
    )


# --- onEvent -------------------------------------------------------------------------------------


def test_create_records_when_the_wait_ends_and_checks_nothing_yet() -> None:
    before = int(time.time())
    answer = readiness.on_event({"RequestType": "Create", "LogicalResourceId": "HyperPodNodesReady",
                                 "ResourceProperties": properties(CHECKS["nodes"], timeout=2100)}, Context())
    after = int(time.time())
    assert answer["PhysicalResourceId"] == "readiness/HyperPodNodesReady"
    assert before + 2100 <= int(answer["Data"]["Deadline"]) <= after + 2100


@pytest.mark.parametrize("request_type", ["Update", "Delete"])
def test_update_and_delete_succeed_at_once_without_touching_anything(request_type: str) -> None:
    event = waiting(properties(CHECKS["nodes"]), request=request_type)
    # The hermetic fixture makes kubectl and every AWS client fail: none is reached.
    assert readiness.on_event(event, Context()) == {"PhysicalResourceId": "readiness/HyperPodNodesReady"}
    assert readiness.is_complete(event, Context()) == {"IsComplete": True}


@pytest.mark.parametrize(("change", "message"), [
    ({"TimeoutSeconds": "0"}, "TimeoutSeconds='0' must be 1 to 3000"),
    ({"TimeoutSeconds": "3601"}, "TimeoutSeconds='3601' must be 1 to 3000"),
    ({"Checks": "[]"}, "Checks must be a non-empty JSON list"),
    ({"Checks": json.dumps([{"kind": "pods"}])}, "Checks[0]={'kind': 'pods'} needs a kind"),
    ({"Checks": json.dumps([{"kind": "daemonset", "namespace": "Kube System", "name": "x"}])},
     "Checks[0].namespace='Kube System' is missing or malformed"),
    ({"Checks": json.dumps([{"kind": "nodes", "selector": NODES, "minimum": 0}])}, "Checks[0].minimum=0"),
    ({"What": ""}, "property What=''"),
])
def test_malformed_properties_fail_the_create_with_one_line(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DeployError) as raised:
        readiness.on_event({"RequestType": "Create", "ResourceProperties": {**properties(CHECKS["nodes"]), **change}},
                           Context())
    assert message in str(raised.value) and "\n" not in str(raised.value)


# --- each check: passes, keeps waiting, fails after the deadline -------------------------------------------------


def test_nodes_pass_once_enough_are_ready(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("True"), node("False")]}
    assert check(properties(CHECKS["nodes"]), aws) == {"IsComplete": True}
    call = kubectl.calls[0]
    assert call[call.index("--selector") + 1] == NODES


def test_nodes_keep_waiting_while_too_few_are_ready(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("True"), node("Unknown")]}
    assert check(properties({**CHECKS["nodes"], "minimum": 2}), aws) == {"IsComplete": False}


def test_nodes_fail_after_the_deadline_with_one_line_naming_the_selector(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": []}
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["nodes"]), aws, seconds_left=-1)
    assert str(raised.value) == (
        f"HyperPod nodes not ready within 35 min: 0 of at least 1 nodes labelled {NODES} Ready (0 registered) "
        f"(kubectl get nodes -l {NODES})")


def test_a_description_names_the_nodes(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("False")]}
    with pytest.raises(DeployError, match=r"0 of at least 1 HyperPod nodes of demo Ready \(1 registered\)"):
        check(properties({**CHECKS["nodes"], "description": "HyperPod nodes of demo"}), aws, seconds_left=-1)


@pytest.mark.parametrize("state", [daemonset(2, 2), daemonset(2, 1)])
def test_a_daemonset_passes_with_a_ready_pod_even_while_a_node_is_in_repair(
    kubectl: FakeKubectl, aws: FakeAws, state: dict[str, Any]
) -> None:
    kubectl.objects["daemonset/eks-pod-identity-agent"] = state
    assert check(properties(CHECKS["daemonset"]), aws) == {"IsComplete": True}


@pytest.mark.parametrize("state", [daemonset(2, 0), daemonset(0, 0), None])
def test_a_daemonset_keeps_waiting_while_no_pod_is_ready_none_wanted_or_absent(
    kubectl: FakeKubectl, aws: FakeAws, state: dict[str, Any] | None
) -> None:
    if state is not None:
        kubectl.objects["daemonset/eks-pod-identity-agent"] = state
    assert check(properties(CHECKS["daemonset"]), aws) == {"IsComplete": False}


def test_a_daemonset_fails_after_the_deadline_saying_how_many_pods_and_how_to_look(
    kubectl: FakeKubectl, aws: FakeAws
) -> None:
    kubectl.objects["daemonset/eks-pod-identity-agent"] = daemonset(2, 0)
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["daemonset"], what="Pod Identity agent", timeout=300), aws, seconds_left=-1)
    assert str(raised.value) == ("Pod Identity agent not ready within 5 min: kube-system/eks-pod-identity-agent: "
                                 f"0 of 2 pods ready, at least 1 needed (kubectl -n kube-system get pods -l {AGENT})")


def test_a_deployment_passes_when_available_with_a_replica(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["deployment/kueue-controller-manager"] = deployment("True", 1)
    assert check(properties(CHECKS["deployment"]), aws) == {"IsComplete": True}


@pytest.mark.parametrize("state", [deployment("False", 0), deployment("True", 0), None])
def test_a_deployment_keeps_waiting_until_available(
    kubectl: FakeKubectl, aws: FakeAws, state: dict[str, Any] | None
) -> None:
    if state is not None:
        kubectl.objects["deployment/kueue-controller-manager"] = state
    assert check(properties(CHECKS["deployment"]), aws) == {"IsComplete": False}


def test_a_deployment_fails_after_the_deadline_with_its_condition(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["deployment/kueue-controller-manager"] = deployment(
        "False", 0, "Deployment does not have minimum availability.")
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["deployment"], what="Kueue"), aws, seconds_left=-1)
    assert str(raised.value) == (
        "Kueue not ready within 35 min: Deployment kueue-system/kueue-controller-manager: 0 of 1 replicas "
        "available, Available=False: Deployment does not have minimum availability. "
        "(kubectl -n kueue-system describe deployment kueue-controller-manager)")


@pytest.mark.parametrize("ready", [True, None])  # EndpointConditions.ready: nil is to be read as true
def test_a_service_passes_with_a_ready_endpoint(kubectl: FakeKubectl, aws: FakeAws, ready: bool | None) -> None:
    kubectl.objects["endpointslices"] = slices(False, ready)
    assert check(properties(CHECKS["endpoints"]), aws) == {"IsComplete": True}
    call = kubectl.calls[0]
    assert call[call.index("--selector") + 1] == "kubernetes.io/service-name=kueue-webhook-service"
    assert call[call.index("--namespace") + 1] == "kueue-system"


def test_a_service_keeps_waiting_and_then_fails_without_a_ready_endpoint(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["endpointslices"] = slices(False)
    assert check(properties(CHECKS["endpoints"]), aws) == {"IsComplete": False}
    kubectl.objects["endpointslices"] = {"items": []}
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["endpoints"], what="Kueue webhook"), aws, seconds_left=-1)
    assert str(raised.value) == (
        "Kueue webhook not ready within 35 min: Service kueue-system/kueue-webhook-service: 0 ready endpoint "
        "addresses (kubectl -n kueue-system get endpointslices -l kubernetes.io/service-name=kueue-webhook-service)")


def test_an_active_addon_passes(aws: FakeAws) -> None:
    addon(aws, "ACTIVE")
    assert check(properties(CHECKS["addon"], what="cert-manager"), aws) == {"IsComplete": True}


@pytest.mark.parametrize("status", ["CREATING", "UPDATING", "DEGRADED"])
def test_an_addon_on_its_way_keeps_waiting(aws: FakeAws, status: str) -> None:
    addon(aws, status, {"code": "InsufficientNumberOfReplicas", "message": "no nodes", "resourceIds": ["cm"]})
    assert check(properties(CHECKS["addon"], what="cert-manager"), aws) == {"IsComplete": False}


def test_a_degraded_addon_fails_after_the_deadline_with_its_health_issues(aws: FakeAws) -> None:
    addon(aws, "DEGRADED", {"code": "InsufficientNumberOfReplicas",
                            "message": "The add-on is unhealthy because it doesn't have the desired number of\n"
                                       "replicas.", "resourceIds": ["cert-manager/cert-manager-webhook"]})
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["addon"], what="cert-manager"), aws, seconds_left=-1)
    assert str(raised.value) == (
        "cert-manager not ready within 35 min: EKS add-on cert-manager is DEGRADED: InsufficientNumberOfReplicas: "
        "The add-on is unhealthy because it doesn't have the desired number of replicas. "
        "(cert-manager/cert-manager-webhook) (aws eks describe-addon --cluster-name hyperpod-eks --addon-name "
        "cert-manager)")


@pytest.mark.parametrize("status", ["CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED", "DELETING"])
def test_a_failed_addon_fails_at_once_with_its_health_issues(aws: FakeAws, status: str) -> None:
    addon(aws, status, {"code": "ConfigurationConflict", "message": "Conflicts found when trying to apply."})
    with pytest.raises(readiness.NeverReadyError) as raised:
        check(properties(CHECKS["addon"], what="cert-manager"), aws, seconds_left=3000)
    assert str(raised.value) == (
        f"cert-manager cannot become ready: EKS add-on cert-manager is {status}: ConfigurationConflict: Conflicts "
        "found when trying to apply. (aws eks describe-addon --cluster-name hyperpod-eks --addon-name cert-manager)")


def test_a_missing_addon_fails_at_once(aws: FakeAws) -> None:
    aws.eks_stub.add_client_error("describe_addon", service_error_code="ResourceNotFoundException",
                                  service_message="No addon: cert-manager found in cluster", http_status_code=404)
    with pytest.raises(readiness.NeverReadyError, match="cert-manager is not installed on hyperpod-eks"):
        check(properties(CHECKS["addon"], what="cert-manager"), aws)


def test_an_aws_error_waits_and_at_the_deadline_becomes_one_line(aws: FakeAws) -> None:
    """AccessDenied while a new IAM statement propagates, or throttling: not ready this pass, not a failure."""
    for _ in range(2):
        aws.eks_stub.add_client_error("describe_addon", service_error_code="AccessDeniedException",
                                      service_message="not authorized\nto perform eks:DescribeAddon",
                                      http_status_code=403)
    assert check(properties(CHECKS["addon"], what="cert-manager"), aws) == {"IsComplete": False}
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["addon"], what="cert-manager"), aws, seconds_left=-1)
    message = str(raised.value)
    assert message.startswith("cert-manager not ready within 35 min: addon cert-manager: An error occurred "
                              "(AccessDeniedException) when calling the DescribeAddon operation: not authorized")
    assert "\n" not in message


# --- order, kubectl failures, the invocation's own time ---------------------------------------------------------


def test_checks_run_in_order_and_stop_at_the_first_not_ready(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("True")]}
    kubectl.objects["daemonset/eks-pod-identity-agent"] = daemonset(1, 0)
    props = properties(CHECKS["nodes"], CHECKS["daemonset"], CHECKS["deployment"])
    assert check(props, aws) == {"IsComplete": False}
    assert kubectl.kinds() == ["nodes", "daemonset"]
    kubectl.objects["daemonset/eks-pod-identity-agent"] = daemonset(1, 1)
    kubectl.objects["deployment/kueue-controller-manager"] = deployment("True", 1)
    kubectl.calls.clear()
    assert check(props, aws) == {"IsComplete": True}
    assert kubectl.kinds() == ["nodes", "daemonset", "deployment"]


def test_a_kubectl_failure_is_waited_on_and_reported_at_the_deadline(kubectl: FakeKubectl, aws: FakeAws) -> None:
    forbidden = (1, "", 'Error from server (Forbidden): nodes is forbidden: User "arn:aws:sts::1:assumed-role/x"\n')
    kubectl.objects["nodes"] = forbidden
    assert check(properties(CHECKS["nodes"]), aws) == {"IsComplete": False}
    with pytest.raises(DeployError) as raised:
        check(properties(CHECKS["nodes"]), aws, seconds_left=-1)
    assert str(raised.value).startswith("HyperPod nodes not ready within 35 min: kubectl get nodes --selector "
                                        f"{NODES} failed: Error from server (Forbidden)")


def test_ready_at_the_last_check_after_the_deadline_still_succeeds(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("True")]}
    assert check(properties(CHECKS["nodes"]), aws, seconds_left=-60) == {"IsComplete": True}


def test_a_call_without_time_left_for_kubectl_is_not_yet_ready(kubectl: FakeKubectl, aws: FakeAws) -> None:
    kubectl.objects["nodes"] = {"items": [node("True")]}
    aws.cluster_exists()
    event = waiting(properties(CHECKS["nodes"]))
    assert readiness.is_complete(event, Context(readiness.CHECK_MARGIN_SECONDS + 1)) == {"IsComplete": False}
    assert kubectl.calls == []


def test_a_wait_without_its_recorded_deadline_fails(aws: FakeAws) -> None:
    event = waiting(properties(CHECKS["nodes"]))
    event["Data"] = {}
    with pytest.raises(DeployError, match="no Deadline"):
        readiness.is_complete(event, Context())
