"""Validation of custom resources against the CRDs of the pinned dependencies chart, as the API server would with
`kubectl apply --validate=strict`: unknown fields are refused, not pruned.

The CRDs are stored in tests/contract/pinned (SOURCE.json names the commit and each file's blob id). Their
openAPIV3Schema is a Kubernetes structural schema; jsonschema reads it once three Kubernetes extensions are spelled
out as JSON Schema (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/
#specifying-a-structural-schema): ``x-kubernetes-int-or-string`` is an integer or a string,
``x-kubernetes-preserve-unknown-fields`` keeps unknown fields, ``nullable`` allows null. Every other object with
``properties`` and no ``additionalProperties`` refuses unknown fields. ``metadata`` is the API server's to check; the
schema's own (``type: object``) is kept. The pinned CRDs carry no CEL rules (``x-kubernetes-validations``): a test
says so, since this validator would not run them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CHART = (Path(__file__).parent / "pinned" / "sagemaker-hyperpod-cli" / "helm_chart" / "HyperPodHelmChart" / "charts"
         / "inference-operator" / "config" / "crd")
INFERENCE_CRDS = {
    "JumpStartModel": CHART / "inference.sagemaker.aws.amazon.com_jumpstartmodels.yaml",
    "InferenceEndpointConfig": CHART / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml",
}


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as JSON Schema, with unknown fields refused wherever Kubernetes would prune them."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _strict(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_strict(sub) for sub in value]
        elif not key.startswith("x-kubernetes-") and key not in ("nullable", "format"):
            out[key] = value
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("anyOf", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if "properties" in schema and "additionalProperties" not in schema \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if schema.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


@cache
def crd(kind: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(INFERENCE_CRDS[kind].read_text())
    return document


@cache
def _validators(kind: str) -> dict[str, jsonschema.protocols.Validator]:
    """apiVersion -> the validator of that served version of ``kind``'s CRD."""
    spec = crd(kind)["spec"]
    group = spec["group"]
    validators: dict[str, jsonschema.protocols.Validator] = {}
    for version in spec["versions"]:
        if version.get("served"):
            schema = _strict(version["schema"]["openAPIV3Schema"])
            schema["properties"]["metadata"] = {"type": "object"}
            validators[f"{group}/{version['name']}"] = jsonschema.Draft7Validator(schema)
    return validators


def stored_version(kind: str) -> str:
    """The apiVersion the CRD stores (the one a manifest should be written in)."""
    spec = crd(kind)["spec"]
    (name,) = [v["name"] for v in spec["versions"] if v.get("storage")]
    return f"{spec['group']}/{name}"


def errors(document: dict[str, Any]) -> list[str]:
    """Why the API server would refuse ``document`` (a JumpStartModel or InferenceEndpointConfig); [] if it would not.
    Each error names the field's path."""
    kind = document.get("kind")
    if kind not in INFERENCE_CRDS:
        return [f"kind {kind!r} is not one of the stored CRDs ({', '.join(INFERENCE_CRDS)})"]
    validators = _validators(kind)
    validator = validators.get(document.get("apiVersion", ""))
    if validator is None:
        return [f"apiVersion {document.get('apiVersion')!r} is not served by the {kind} CRD ({', '.join(validators)})"]
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                  for e in validator.iter_errors(document))
