"""The CRD validator (tests/contract/crds.py) refuses what the API server refuses, and accepts AWS's own samples."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.contract import crds

# AWS's InferenceEndpointConfig sample, aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:
# helm_chart/HyperPodHelmChart/charts/inference-operator/config/samples/v1_s3_deepseek15b.yaml, shortened (its
# environment list) and otherwise as written there.
AWS_S3_SAMPLE: dict[str, Any] = {
    "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
    "kind": "InferenceEndpointConfig",
    "metadata": {"name": "deepseeks3", "namespace": "ns-team-a"},
    "spec": {
        "modelName": "deepseeks3",
        "endpointName": "deepseeks3sme",
        "instanceType": "ml.g5.8xlarge",
        "modelSourceConfig": {
            "modelSourceType": "s3",
            "s3Storage": {"bucketName": "model-data-578732889311", "region": "us-west-2"},
            "modelLocation": "deepseek15b",
            "prefetchEnabled": True,
        },
        "worker": {
            "resources": {"limits": {"nvidia.com/gpu": 1},
                          "requests": {"nvidia.com/gpu": 1, "cpu": "25600m", "memory": "102Gi"}},
            "image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.32.0-lmi14.0.0-cu124",
            "modelInvocationPort": {"containerPort": 8080, "name": "http"},
            "modelVolumeMount": {"name": "model-weights", "mountPath": "/opt/ml/model"},
            "environmentVariables": [{"name": "OPTION_ROLLING_BATCH", "value": "vllm"}],
        },
    },
}


def test_aws_sample_is_accepted():
    assert crds.errors(AWS_S3_SAMPLE) == []


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("spec", "bogus"), 1, "spec: Additional properties are not allowed ('bogus' was unexpected)"),
    (("spec", "worker", "modelInvocationPort", "containerPorts"), 8080, "spec.worker.modelInvocationPort: Additional"),
    (("spec", "modelSourceConfig", "modelSourceType"), "gcs", "spec.modelSourceConfig.modelSourceType: 'gcs' is not"),
    (("spec", "replicas"), "2", "spec.replicas: '2' is not of type 'integer'"),
])
def test_unknown_fields_and_bad_values_are_refused(path: tuple[str, ...], value: Any, expected: str):
    document = copy.deepcopy(AWS_S3_SAMPLE)
    *parents, last = path
    node = document
    for key in parents:
        node = node[key]
    node[last] = value
    assert any(e.startswith(expected) for e in crds.errors(document)), crds.errors(document)


def test_missing_required_field_is_refused():
    document = copy.deepcopy(AWS_S3_SAMPLE)
    del document["spec"]["worker"]["image"]
    assert crds.errors(document) == ["spec.worker: 'image' is a required property"]


def test_int_or_string_takes_both():
    document = copy.deepcopy(AWS_S3_SAMPLE)
    document["spec"]["worker"]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    assert crds.errors(document) == []
    document["spec"]["worker"]["resources"]["limits"]["nvidia.com/gpu"] = [1]
    assert crds.errors(document)


def test_unserved_version_and_unknown_kind_are_refused():
    assert crds.errors({**AWS_S3_SAMPLE, "apiVersion": "inference.sagemaker.aws.amazon.com/v2"})[0].startswith(
        "apiVersion 'inference.sagemaker.aws.amazon.com/v2' is not served")
    assert crds.errors({**AWS_S3_SAMPLE, "kind": "ModelDeployment"})[0].startswith("kind 'ModelDeployment'")


@pytest.mark.parametrize("kind", sorted(crds.INFERENCE_CRDS))
def test_the_stored_crds_have_no_rules_this_validator_skips(kind: str):
    """CEL rules would be enforced by the API server but not here; the pinned CRDs have none."""
    assert "x-kubernetes-validations" not in crds.INFERENCE_CRDS[kind].read_text()
    assert crds.stored_version(kind) == "inference.sagemaker.aws.amazon.com/v1"
