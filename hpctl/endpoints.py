"""The HyperPod inference operator's endpoints on the cluster: JumpStartModel and InferenceEndpointConfig objects,
read and deleted with the same Kubernetes client as `hpctl jobs` (hpctl/jobs.py Cluster), and the SageMaker endpoint
each registers, described and invoked with boto3. `hpctl endpoints` (hpctl/commands/endpoints.py) prints them.

The fields read are those of the CRDs at the pinned chart commit (aws/sagemaker-hyperpod-cli@
a00b22d17ea928a6e39a43bd2efdafe01b1005ea: helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/, stored in
tests/contract/pinned): the SageMaker endpoint's name is spec.sageMakerEndpoint.name of a JumpStartModel and
spec.endpointName of an InferenceEndpointConfig (an empty name registers none), and status.state (DeploymentPending
... DeletionComplete), status.endpoints.sagemaker {state, endpointArn}, status.conditions and status.selector are
the operator's report. Invoking follows AWS's own CLI (aws/sagemaker-hyperpod-cli@
011ca927123e02b35a399935bbb3ab1905fe33c7: src/sagemaker/hyperpod/cli/commands/inference.py custom_invoke): the
SageMaker endpoint must be InService (DescribeEndpoint's EndpointStatus), then sagemaker-runtime InvokeEndpoint.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from botocore.exceptions import ClientError

from hpctl.errors import EXIT_AWS, HpctlError, UsageError
from hpctl.examples import ENDPOINT_CONFIG_KIND, INFERENCE_API, INFERENCE_GROUP, INFERENCE_VERSION, JUMPSTART_KIND
from hpctl.jobs import Cluster, JobKind, age, find_object, team_of

GROUP, VERSION, API_VERSION = INFERENCE_GROUP, INFERENCE_VERSION, INFERENCE_API
# JobKind's pod label is not used for these kinds: an endpoint's pods are found by its status.selector. The plurals
# are the CRDs' spec.names.plural.
JUMPSTART = JobKind(JUMPSTART_KIND, GROUP, VERSION, "jumpstartmodels", "")
ENDPOINT_CONFIG = JobKind(ENDPOINT_CONFIG_KIND, GROUP, VERSION, "inferenceendpointconfigs", "")
KINDS = {k.kind: k for k in (JUMPSTART, ENDPOINT_CONFIG)}
# DescribeEndpoint's EndpointStatus when the endpoint takes requests (botocore's sagemaker model, EndpointStatus).
IN_SERVICE = "InService"
JSON_CONTENT_TYPE = "application/json"


def sagemaker_endpoint_name(obj: dict[str, Any]) -> str | None:
    """The SageMaker endpoint ``obj`` registers, or None when its spec leaves the name empty."""
    spec = obj.get("spec") or {}
    name = (spec.get("sageMakerEndpoint") or {}).get("name") if obj.get("kind") == JUMPSTART.kind \
        else spec.get("endpointName")
    return str(name) if name else None


def model_of(obj: dict[str, Any]) -> str | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == JUMPSTART.kind:
        return (spec.get("model") or {}).get("modelId")
    source = (spec.get("modelSourceConfig") or {}).get("modelSourceType")
    return f"{spec.get('modelName')} ({source})" if source else spec.get("modelName")


def placement_of(obj: dict[str, Any]) -> str | None:
    """Where its pods go: the instance type, the fallback list, or "node affinity" (the CRDs' three forms)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == JUMPSTART.kind:
        return (spec.get("server") or {}).get("instanceType")
    if spec.get("instanceTypes"):
        return ",".join(spec["instanceTypes"])
    return spec.get("instanceType") or ("node affinity" if spec.get("nodeAffinity") else None)


def _sagemaker_status(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(((obj.get("status") or {}).get("endpoints") or {}).get("sagemaker") or {})


def record(obj: dict[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
    """One endpoint as `endpoints list` shows it."""
    metadata = obj["metadata"]
    ns = str(metadata.get("namespace") or "")
    registered = _sagemaker_status(obj)
    return {
        "name": metadata.get("name"),
        "kind": obj.get("kind"),
        "namespace": ns,
        "team": team_of(ns),
        "model": model_of(obj),
        "instance_type": placement_of(obj),
        "state": (obj.get("status") or {}).get("state") or "Pending",
        "sagemaker_endpoint": sagemaker_endpoint_name(obj),
        "sagemaker_state": registered.get("state"),
        "sagemaker_endpoint_arn": registered.get("endpointArn") or None,
        "created": metadata.get("creationTimestamp"),
        "age": age(metadata.get("creationTimestamp"), now),
    }


def list_records(cluster: Cluster, where: list[str] | None) -> list[dict[str, Any]]:
    """Every endpoint of both kinds in ``where`` (None: every namespace); none where the CRDs are missing."""
    found = [obj for kind in KINDS.values() for ns in (where or [None]) for obj in cluster.list_jobs(kind, ns)]
    return sorted((record(obj) for obj in found), key=lambda r: (r["namespace"], r["name"], r["kind"]))


def find(cluster: Cluster, name: str, where: list[str] | None, kind: str | None = None) -> tuple[JobKind, dict]:
    kinds = [KINDS[kind]] if kind else list(KINDS.values())
    return find_object(cluster, name, where, kinds, kind or "endpoint", "hpctl endpoints list")


def describe_sagemaker_endpoint(sm: Any, name: str) -> dict[str, Any] | None:
    """DescribeEndpoint of ``name``; None when SageMaker has no such endpoint. botocore's sagemaker model lists no
    error for DescribeEndpoint; SageMaker answers a missing endpoint with ValidationException "Could not find
    endpoint ..." (the message is not in the model: matched loosely, unverified here)."""
    try:
        return dict(sm.describe_endpoint(EndpointName=name))
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ValidationException" and \
                "could not find" in str(error.response.get("Error", {}).get("Message", "")).lower():
            return None
        raise


def payload(body: str, content_type: str) -> bytes:
    """The request body: ``body`` itself or, as ``@PATH``, that file's bytes; with a JSON content type it must be
    JSON (AWS's CLI refuses it otherwise), and is sent as written."""
    if body.startswith("@"):
        path = body[1:]
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise UsageError(f"--body @{path}: cannot read it ({error.strerror})") from None
    else:
        data = body.encode("utf-8")
    if content_type.split(";")[0].strip().lower() == JSON_CONTENT_TYPE:
        try:
            json.loads(data)
        except (ValueError, UnicodeDecodeError) as error:
            raise UsageError(f"--body is not JSON ({error}), and --content-type is {content_type}") from None
    return data


def ready_endpoint(obj: dict[str, Any], sm: Any) -> str:
    """The SageMaker endpoint of ``obj`` when it takes requests; HpctlError saying why not otherwise."""
    kind, name = obj.get("kind"), obj["metadata"]["name"]
    endpoint = sagemaker_endpoint_name(obj)
    if endpoint is None:
        field = "spec.sageMakerEndpoint.name" if kind == JUMPSTART.kind else "spec.endpointName"
        raise HpctlError(f"{kind} {name} registers no SageMaker endpoint ({field} is empty): set it, or call its "
                         "pods from inside the cluster", EXIT_AWS)
    described = describe_sagemaker_endpoint(sm, endpoint)
    state = (obj.get("status") or {}).get("state") or "Pending"
    if described is None:
        raise HpctlError(f"SageMaker endpoint {endpoint} of {kind} {name} is not registered yet ({kind} state "
                         f"{state}): see hpctl endpoints describe {name}", EXIT_AWS)
    status = described.get("EndpointStatus")
    if status != IN_SERVICE:
        reason = f": {described['FailureReason']}" if described.get("FailureReason") else ""
        raise HpctlError(f"SageMaker endpoint {endpoint} of {kind} {name} is {status}, not {IN_SERVICE}{reason}",
                         EXIT_AWS)
    return endpoint


def invoke(runtime: Any, endpoint: str, data: bytes, content_type: str) -> tuple[str | None, bytes]:
    """InvokeEndpoint: the response's content type and body."""
    response = runtime.invoke_endpoint(EndpointName=endpoint, Body=data, ContentType=content_type)
    return response.get("ContentType"), response["Body"].read()
