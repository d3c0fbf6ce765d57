"""Waiting until what a HyperPod feature needs on the cluster is ready: the two user functions of aws-cdk-lib's
asynchronous custom resource ``Provider`` (``on_event`` and ``is_complete``), for ``Custom::HyperPodReadiness``.

Why a wait is needed: CloudFormation waits only on CloudFormation resources. With ``Continuous`` provisioning the
HyperPod cluster resource completes before any node exists ("The cluster becomes operational once cluster-level
resources are ready", botocore 1.44.8 sagemaker UpdateClusterRequest.NodeProvisioningMode), and CloudFormation's
EKS add-on handler is reported to take DEGRADED as success (hashicorp/terraform-provider-aws#44669; not verified
in the handler's source). AWS's own Terraform waits instead
(awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1,
1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf): scripts/wait-for-hyperpod-nodes.sh
lists ``kubectl get nodes -l sagemaker.amazonaws.com/cluster-name=<name>`` every 30 s, 60 times, then waits 300 s
for the pods labelled ``app.kubernetes.io/name=eks-pod-identity-agent`` in kube-system; modules/hyperpod_cluster/
cert_manager.tf waits for the Available condition of three cert-manager Deployments; modules/task_governance/
main.tf for the Deployment kueue-system/kueue-controller-manager before the compute quotas.

The protocol (aws-cdk-lib 2.275.0 custom-resources/lib/provider-framework/runtime/framework.js): ``on_event`` answers
the CloudFormation request; for a Create it checks the properties and records when the wait ends, as epoch
seconds in ``Data.Deadline`` (the framework hands ``Data`` to every ``is_complete`` call). Update and Delete
answer at once: a wait has nothing to change or undo. ``is_complete`` is called every query interval; it checks
once (``check_all``) and answers ``{"IsComplete": true}`` when every check passes, ``{"IsComplete": false}`` (no
``Data``: the framework refuses it then) to be called again, or raises a one-line error: at once when a check can
never pass (an add-on that failed), or on the first call after the recorded deadline. The framework's own
``totalTimeout`` lies beyond that call, so the reason CloudFormation shows is ours, never the framework's
"Operation timed out" (the time limits and why: infra/constructs/readiness.py).

ResourceProperties (strings): ``ClusterName``, ``Region``, ``What`` (a short phrase naming what is waited for, the
start of every failure), ``TimeoutSeconds``, ``Checks``: a JSON list, tested in order, of

- ``{"kind": "nodes", "selector": <label selector>, "minimum": <n>, "description": <phrase>}``: at least ``minimum``
  nodes matching ``selector`` have the condition Ready=True;
- ``{"kind": "daemonset", "namespace": ..., "name": ...}``: desiredNumberScheduled >= 1 and numberReady >= 1;
- ``{"kind": "deployment", "namespace": ..., "name": ...}``: the Available condition is True and
  availableReplicas >= 1;
- ``{"kind": "endpoints", "namespace": ..., "service": ...}``: an EndpointSlice of the Service has a ready
  address (a webhook behind the Service answers);
- ``{"kind": "addon", "name": ...}``: the EKS add-on is ACTIVE; CREATE_FAILED, UPDATE_FAILED, DELETING and
  DELETE_FAILED fail at once, with its health issues; CREATING, UPDATING and DEGRADED keep waiting.

Kubernetes is read with ``kubectl get -o json`` as the installer reads it (``cluster.kubectl``: a fresh token, the
invocation's deadline), each request bounded by kubectl's ``--request-timeout``. A kubectl failure other than
NotFound (no route yet, an access entry not yet effective) is not final: it is reported as the state of that
check and waited on like any other. Field names: kubernetes/api@10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2
apps/v1/types.go (DaemonSetStatus.desiredNumberScheduled, numberReady; DeploymentStatus.availableReplicas;
DeploymentAvailable = "Available"), core/v1/types.go (NodeReady = "Ready", ConditionTrue = "True"; core/v1
Endpoints "is deprecated in v1.33+. Use discoveryv1.EndpointSlice"), discovery/v1/types.go
(EndpointConditions.ready: "A nil value should be interpreted as true") and well_known_labels.go
(``kubernetes.io/service-name``). DescribeAddon's response: botocore 1.44.8's EKS model (Addon.status, one of
CREATING, ACTIVE, CREATE_FAILED, UPDATING, DELETING, DELETE_FAILED, DEGRADED, UPDATE_FAILED; Addon.health.issues
of {code, message, resourceIds}).
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ...common.deadline import Deadline
from ...common.errors import DeadlineExceededError, DeployError, reports_failures
from . import aws_clients
from .cluster import REQUEST_TIMEOUT, Cluster, KubectlError, describe_cluster, json_answer, kubectl
from .process import helm_env, log
from .properties import CLUSTER_NAME, NAMESPACE, REGION

# The check function's time limit (Readiness sets it from here): one pass of at most a few kubectl requests
# (each at most 20 s, cluster.REQUEST_TIMEOUT) and EKS calls.
CHECK_FUNCTION_TIMEOUT_SECONDS = 3 * 60
# Kept back from the check function's limit for answering; a request is not started with less than this.
CHECK_MARGIN_SECONDS = 15
MIN_REQUEST_SECONDS = 5
# The longest wait a resource may ask for (Readiness refuses more: its provider's total timeout is fixed).
MAX_TIMEOUT_SECONDS = 50 * 60
KINDS = ("nodes", "daemonset", "deployment", "endpoints", "addon")
# A label selector: comma-separated key=value, key!=value, key or !key (no set-based terms).
SELECTOR = re.compile(r"^!?[A-Za-z0-9./_-]+((!?=)[A-Za-z0-9._-]*)?(,!?[A-Za-z0-9./_-]+((!?=)[A-Za-z0-9._-]*)?)*$")
OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
ADDON_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9-_]*$")  # botocore EKS model: DescribeAddonRequest.addonName
# DescribeAddon's statuses (botocore 1.44.8, shape AddonStatus): ACTIVE passes, these fail at once, the others wait.
ADDON_ACTIVE = "ACTIVE"
ADDON_FINAL = frozenset({"CREATE_FAILED", "UPDATE_FAILED", "DELETING", "DELETE_FAILED"})
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # kubernetes/api discovery/v1/well_known_labels.go


class NeverReadyError(DeployError):
    """A check that can no longer pass by waiting (an add-on that failed): the wait ends at once."""


@dataclass(frozen=True)
class Check:
    """One thing to wait for, as the ``Checks`` property lists it."""

    kind: str
    namespace: str = ""
    name: str = ""
    selector: str = ""
    minimum: int = 1
    description: str = ""

    def to_property(self) -> dict[str, Any]:
        """This check as one entry of the ``Checks`` property (what ``_check`` reads back)."""
        if self.kind == "nodes":
            return {"kind": "nodes", "selector": self.selector, "minimum": self.minimum,
                    **({"description": self.description} if self.description else {})}
        if self.kind == "endpoints":
            return {"kind": "endpoints", "namespace": self.namespace, "service": self.name}
        if self.kind == "addon":
            return {"kind": "addon", "name": self.name}
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


@dataclass(frozen=True)
class Request:
    cluster_name: str
    region: str
    what: str
    timeout_seconds: int
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class Status:
    """What one check saw: ``ready``, and in ``detail`` what it saw and the command that shows it."""

    ready: bool
    detail: str


# --- properties ----------------------------------------------------------------------------------


def _text(props: Mapping[str, Any], name: str, pattern: re.Pattern[str] | None = None) -> str:
    value = props.get(name)
    if not isinstance(value, str) or not value.strip() or (pattern is not None and not pattern.match(value)):
        raise DeployError(f"property {name}={value!r} is missing or malformed")
    return value.strip()


def _check(raw: Any, index: int) -> Check:
    where = f"Checks[{index}]"
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        raise DeployError(f"{where}={raw!r} needs a kind, one of {', '.join(KINDS)}")
    kind = str(raw["kind"])
    fields = {"nodes": ("selector",), "daemonset": ("namespace", "name"), "deployment": ("namespace", "name"),
              "endpoints": ("namespace", "service"), "addon": ("name",)}[kind]
    patterns = {"selector": SELECTOR, "namespace": NAMESPACE, "name": ADDON_NAME if kind == "addon" else OBJECT_NAME,
                "service": OBJECT_NAME}
    values = {}
    for field_name in fields:
        value = raw.get(field_name)
        if not isinstance(value, str) or not patterns[field_name].match(value):
            raise DeployError(f"{where}.{field_name}={value!r} is missing or malformed")
        values[field_name] = value
    minimum = raw.get("minimum", 1)
    if kind == "nodes" and (not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 1):
        raise DeployError(f"{where}.minimum={minimum!r} must be a whole number of at least 1")
    return Check(kind=kind, namespace=values.get("namespace", ""), name=values.get("name", values.get("service", "")),
                 selector=values.get("selector", ""), minimum=minimum if kind == "nodes" else 1,
                 description=str(raw.get("description") or ""))


def parse_request(props: Mapping[str, Any]) -> Request:
    raw_timeout = props.get("TimeoutSeconds")
    try:
        timeout = int(str(raw_timeout))
    except ValueError:
        timeout = 0
    if not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
        raise DeployError(f"property TimeoutSeconds={raw_timeout!r} must be 1 to {MAX_TIMEOUT_SECONDS}")
    try:
        raw_checks = json.loads(props["Checks"]) if isinstance(props.get("Checks"), str) else None
    except ValueError:
        raw_checks = None
    if not isinstance(raw_checks, list) or not raw_checks:
        raise DeployError("property Checks must be a non-empty JSON list")
    return Request(
        cluster_name=_text(props, "ClusterName", CLUSTER_NAME),
        region=_text(props, "Region", REGION),
        what=_text(props, "What"),
        timeout_seconds=timeout,
        checks=tuple(_check(raw, index) for index, raw in enumerate(raw_checks)),
    )


# --- the checks ----------------------------------------------------------------------------------


class Probe:
    """Reads the cluster for the checks of one pass: kubectl within the invocation's deadline, and EKS. The cluster
    is described on the first kubectl request only: a wait for add-ons alone needs no DescribeCluster."""

    def __init__(self, request: Request, workdir: Path, deadline: Deadline) -> None:
        self.request = request
        self.workdir = workdir
        self.deadline = deadline

    @functools.cached_property
    def cluster(self) -> Cluster:
        return describe_cluster(self.request.cluster_name, self.request.region)

    def get(self, args: Sequence[str]) -> dict[str, Any] | None:
        """``kubectl get <args> -o json``: the object or list, None when the object does not exist (NotFound).
        Any other failure is ``KubectlError``, which the pass reports as not ready."""
        result = kubectl(self.cluster, self.workdir, helm_env(self.workdir), self.deadline,
                         ["get", *args, "--output", "json", REQUEST_TIMEOUT])
        return json_answer(result, f"get {' '.join(args)}")


def _condition(item: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    conditions = (item.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def _match_labels(selector: Any) -> str:
    labels = (selector or {}).get("matchLabels") or {}
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def check_nodes(probe: Probe, check: Check) -> Status:
    listed = probe.get(["nodes", "--selector", check.selector]) or {}
    items = [item for item in listed.get("items") or [] if isinstance(item, dict)]
    ready = sum(1 for item in items if _condition(item, "Ready").get("status") == "True")
    described = check.description or f"nodes labelled {check.selector}"
    return Status(ready >= check.minimum,
                  f"{ready} of at least {check.minimum} {described} Ready ({len(items)} registered) "
                  f"(kubectl get nodes -l {check.selector})")


def check_daemonset(probe: Probe, check: Check) -> Status:
    where = f"{check.namespace}/{check.name}"
    daemonset = probe.get(["daemonset", check.name, "--namespace", check.namespace])
    if daemonset is None:
        return Status(False, f"DaemonSet {where} does not exist yet "
                             f"(kubectl -n {check.namespace} get daemonset {check.name})")
    status = daemonset.get("status") or {}
    desired, ready = int(status.get("desiredNumberScheduled") or 0), int(status.get("numberReady") or 0)
    if desired < 1:
        return Status(False, f"{where}: no node runs its pods yet (0 scheduled) "
                             f"(kubectl -n {check.namespace} describe daemonset {check.name})")
    labels = _match_labels((daemonset.get("spec") or {}).get("selector"))
    look = f"kubectl -n {check.namespace} get pods -l {labels}" if labels else \
        f"kubectl -n {check.namespace} describe daemonset {check.name}"
    # At least ``minimum`` (1) pods ready, not all: what needs the DaemonSet (an add-on needing the Pod Identity
    # agent) needs it on a node, and on a deployed cluster a node in repair would otherwise hold every upgrade.
    return Status(ready >= check.minimum, f"{where}: {ready} of {desired} pods ready, at least {check.minimum} "
                                          f"needed ({look})")


def check_deployment(probe: Probe, check: Check) -> Status:
    where = f"{check.namespace}/{check.name}"
    look = f"kubectl -n {check.namespace} describe deployment {check.name}"
    deployment = probe.get(["deployment", check.name, "--namespace", check.namespace])
    if deployment is None:
        return Status(False, f"Deployment {where} does not exist yet ({look})")
    available = _condition(deployment, "Available")
    replicas = int((deployment.get("status") or {}).get("availableReplicas") or 0)
    wanted = (deployment.get("spec") or {}).get("replicas", 1)
    message = f": {available['message']}" if available.get("message") else ""
    return Status(available.get("status") == "True" and replicas >= 1,
                  f"Deployment {where}: {replicas} of {wanted} replicas available, Available="
                  f"{available.get('status', 'unknown')}{message} ({look})")


def check_endpoints(probe: Probe, check: Check) -> Status:
    where = f"{check.namespace}/{check.name}"
    selector = f"{SERVICE_NAME_LABEL}={check.name}"
    slices = probe.get(["endpointslices", "--namespace", check.namespace, "--selector", selector]) or {}
    ready = 0
    for endpoint_slice in slices.get("items") or []:
        for endpoint in (endpoint_slice or {}).get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is not False:
                ready += len(endpoint.get("addresses") or [])
    return Status(ready >= 1, f"Service {where}: {ready} ready endpoint addresses "
                              f"(kubectl -n {check.namespace} get endpointslices -l {selector})")


def _issues(addon: Mapping[str, Any]) -> str:
    issues = ((addon.get("health") or {}).get("issues")) or []
    if not issues:
        return "no health issues reported"
    return "; ".join(f"{issue.get('code', '?')}: {issue.get('message', '')}"
                     + (f" ({', '.join(issue['resourceIds'][:3])})" if issue.get("resourceIds") else "")
                     for issue in issues[:5])


def check_addon(probe: Probe, check: Check) -> Status:
    cluster = probe.request.cluster_name
    look = f"aws eks describe-addon --cluster-name {cluster} --addon-name {check.name}"
    try:
        addon = aws_clients.client("eks", probe.request.region).describe_addon(
            clusterName=cluster, addonName=check.name)["addon"]
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise NeverReadyError(f"EKS add-on {check.name} is not installed on {cluster}: the readiness resource "
                                  f"must depend on it ({look})") from None
        raise
    status = str(addon.get("status"))
    detail = f"EKS add-on {check.name} is {status}: {_issues(addon)} ({look})"
    if status in ADDON_FINAL:
        raise NeverReadyError(detail)
    return Status(status == ADDON_ACTIVE, detail)


CHECKS: dict[str, Callable[[Probe, Check], Status]] = {
    "nodes": check_nodes, "daemonset": check_daemonset, "deployment": check_deployment,
    "endpoints": check_endpoints, "addon": check_addon,
}


def check_all(probe: Probe) -> Status:
    """Every check once, in order, up to the first that is not ready: that one's status, else a ready one. A
    check that kubectl could not read, that an AWS call failed for other than a missing resource, or that the
    invocation had no time left for, is not ready this pass (the deadline ends the wait)."""
    for check in probe.request.checks:
        try:
            status = CHECKS[check.kind](probe, check)
        except (KubectlError, DeadlineExceededError) as error:
            status = Status(False, str(error))
        except ClientError as error:  # throttling, or AccessDenied while a new IAM statement propagates
            status = Status(False, f"{check.kind} {check.name or check.selector}: {error}")
        except BotoCoreError as error:  # no route to the endpoint this time
            status = Status(False, f"{check.kind} {check.name or check.selector}: {error}")
        log(f"{'ready' if status.ready else 'not ready'}: {status.detail}")
        if not status.ready:
            return status
    return Status(True, f"{len(probe.request.checks)} checks passed")


# --- the two entry points ------------------------------------------------------------------------


def _physical_id(event: Mapping[str, Any]) -> str:
    return str(event.get("PhysicalResourceId") or f"readiness/{event.get('LogicalResourceId', '')}")


@reports_failures
def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The provider's onEvent: a Create records when its wait ends; Update and Delete have nothing to do."""
    request_type = event.get("RequestType")
    log(f"{request_type} request {event.get('RequestId', '')} for {event.get('LogicalResourceId', '')}")
    if request_type == "Create":
        request = parse_request(event.get("ResourceProperties") or {})
        ends = int(time.time()) + request.timeout_seconds
        log(f"waiting for {request.what} until {time.strftime('%H:%M:%S UTC', time.gmtime(ends))}")
        return {"PhysicalResourceId": _physical_id(event), "Data": {"Deadline": str(ends)}}
    if request_type in ("Update", "Delete"):
        return {"PhysicalResourceId": _physical_id(event)}
    raise DeployError(f"unknown RequestType {request_type!r}")


@reports_failures
def is_complete(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The provider's isComplete: one pass of the checks of a Create; the other requests are complete."""
    if event.get("RequestType") != "Create":
        return {"IsComplete": True}
    request = parse_request(event.get("ResourceProperties") or {})
    try:
        ends = int(str((event.get("Data") or {}).get("Deadline")))
    except ValueError:
        raise DeployError("the wait has no Deadline in its Data (onEvent records it)") from None
    deadline = Deadline.of(context, fallback_seconds=CHECK_FUNCTION_TIMEOUT_SECONDS, margin=CHECK_MARGIN_SECONDS,
                           minimum_step=MIN_REQUEST_SECONDS)
    with tempfile.TemporaryDirectory(prefix="readiness-") as tmp:
        try:
            status = check_all(Probe(request, Path(tmp), deadline))
        except NeverReadyError as error:
            raise NeverReadyError(f"{request.what} cannot become ready: {error}") from None
    if status.ready:
        return {"IsComplete": True}
    if time.time() >= ends:
        minutes = request.timeout_seconds / 60
        raise DeployError(f"{request.what} not ready within {minutes:g} min: {status.detail}")
    return {"IsComplete": False}
