"""The inference operator in the all-features synth agrees with AWS's Terraform module and migration script,
statement by statement, and installs nothing twice."""

from __future__ import annotations

import json
from typing import Any

from infra.constructs.addons import KEDA_ACTIONS, TLS_BUCKET_STATEMENTS, lb_controller_statements
from infra.facts import addons as facts


def _one(resources: dict[str, dict[str, Any]], **properties: Any) -> tuple[str, dict[str, Any]]:
    found = [(k, r) for k, r in resources.items()
             if all(r["Properties"].get(p) == v for p, v in properties.items())]
    assert len(found) == 1, properties
    return found[0]


def _role(synth, description: str) -> tuple[str, dict[str, Any]]:
    return _one(synth.resources("hyperpod", "AWS::IAM::Role"), Description=description)


def _trust_subjects(role: dict[str, Any], resources: dict[str, Any]) -> list[tuple[str, str]]:
    """(operator, conditions) of each web-identity statement (conditions keyed by the issuer: aws-cdk-lib's CfnJson
    resource holds them), with the aud condition checked."""
    found = []
    for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
        if statement["Action"] != "sts:AssumeRoleWithWebIdentity":
            continue
        ((operator, conditions),) = statement["Condition"].items()
        conditions = resources[conditions["Fn::GetAtt"][0]]["Properties"]["Value"]
        text = json.dumps(conditions)
        assert ":aud" in text and "sts.amazonaws.com" in text
        found.append((operator, conditions))
    return found


def _resources(synth) -> dict[str, Any]:
    return synth.template("hyperpod")["Resources"]


def _services(role: dict[str, Any]) -> set[str]:
    return {s["Principal"]["Service"] for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
            if "Service" in s.get("Principal", {})}


def test_addon_configuration_has_the_keys_of_awss_module(all_features_synth):
    addons = all_features_synth.resources("hyperpod", "AWS::EKS::Addon")
    _, addon = _one(addons, AddonName="amazon-sagemaker-hyperpod-inference")
    text = json.dumps(addon["Properties"]["ConfigurationValues"])
    for key in ("executionRoleArn", "tlsCertificateS3Bucket", "hyperpodClusterArn",
                "jumpstartGatedModelDownloadRoleArn", "alb", "serviceAccount", "keda", "irsa", "roleArn"):
        assert f'\\"{key}\\"' in text, key
    names = [a["Properties"]["AddonName"] for a in addons.values()]
    for name in ("cert-manager", "aws-mountpoint-s3-csi-driver", "metrics-server",
                 "amazon-sagemaker-hyperpod-inference"):
        assert names.count(name) == 1, name


def test_addon_waits_for_cert_manager_and_the_s3_driver(all_features_synth):
    resources = all_features_synth.template("hyperpod")["Resources"]
    key, addon = _one(all_features_synth.resources("hyperpod", "AWS::EKS::Addon"),
                      AddonName="amazon-sagemaker-hyperpod-inference")
    depends = set(addon.get("DependsOn", []))
    kinds = {resources[d]["Type"] for d in depends}
    assert "Custom::HyperPodReadiness" in kinds  # cert-manager's Deployments available
    s3_key, _ = _one(all_features_synth.resources("hyperpod", "AWS::EKS::Addon"),
                     AddonName="aws-mountpoint-s3-csi-driver")
    assert s3_key in depends


def test_execution_role_is_named_trusted_and_granted_as_aws_documents(all_features_synth):
    _, role = _role(all_features_synth, "HyperPod inference operator execution role")
    name = json.dumps(role["Properties"]["RoleName"])
    assert name.startswith(f'{{"Fn::Join": ["", ["{facts.INFERENCE_EXECUTION_ROLE_PREFIX}-')
    assert _services(role) == {"sagemaker.amazonaws.com"}
    ((operator, conditions),) = _trust_subjects(role, _resources(all_features_synth))
    assert operator == "StringEquals"
    assert "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-controller-manager" in \
        json.dumps(conditions)
    assert "AmazonSageMakerHyperPodInferenceAccess" in json.dumps(role["Properties"]["ManagedPolicyArns"])
    policies = all_features_synth.resources("hyperpod", "AWS::IAM::Policy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if s.get("Sid", "").startswith("TLSBucket")]
    assert [(s["Sid"], s["Action"] if isinstance(s["Action"], list) else [s["Action"]], "Condition" in s)
            for s in statements] == [(sid, actions, cond) for sid, actions, cond in TLS_BUCKET_STATEMENTS]
    for statement in statements:
        assert "TlsCertificates" in json.dumps(statement["Resource"]) and "/*" in json.dumps(statement["Resource"])


def test_gated_model_role_matches_awss_module(all_features_synth):
    _, role = _role(all_features_synth, "HyperPod inference: gated JumpStart model downloads")
    assert _services(role) == {"sagemaker.amazonaws.com"}
    ((operator, conditions),) = _trust_subjects(role, _resources(all_features_synth))
    assert operator == "StringLike"
    assert "system:serviceaccount:*:hyperpod-inference-service-account*" in json.dumps(conditions)
    assert "AmazonSageMakerHyperPodGatedModelAccess" in json.dumps(role["Properties"]["ManagedPolicyArns"])


def test_lb_controller_and_keda_roles_grant_awss_statements(all_features_synth):
    _, lb = _role(all_features_synth, "HyperPod inference: AWS Load Balancer Controller")
    assert not _services(lb)
    subjects = _trust_subjects(lb, _resources(all_features_synth))
    assert "hyperpod-inference-system:aws-load-balancer-controller" in json.dumps(subjects)
    (policy,) = lb["Properties"]["Policies"]
    granted = policy["PolicyDocument"]["Statement"]

    def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        """Each (action, resource, condition) granted: aws-cdk-lib merges statements that differ only in actions."""
        def listed(value: Any) -> list[Any]:
            return value if isinstance(value, list) else [value]
        return {(a, r, json.dumps(s.get("Condition"), sort_keys=True))
                for s in statements for a in listed(s["Action"]) for r in listed(s["Resource"])}
    assert all(s["Effect"] == "Allow" for s in granted)
    assert grants(granted) == grants(lb_controller_statements())
    assert len(lb_controller_statements()) == 16
    _, keda = _role(all_features_synth, "HyperPod inference: KEDA operator (reads metrics)")
    subjects = _trust_subjects(keda, _resources(all_features_synth))
    assert "hyperpod-inference-system:keda-operator" in json.dumps(subjects)
    (policy,) = keda["Properties"]["Policies"]
    metrics, prometheus = policy["PolicyDocument"]["Statement"]
    assert sorted(metrics["Action"] + prometheus["Action"]) == sorted(KEDA_ACTIONS)
    assert metrics["Resource"] == "*" and all(a.startswith("cloudwatch:") for a in metrics["Action"])
    assert ":workspace/*" in json.dumps(prometheus["Resource"])  # narrower than AWS's "*"


def test_tls_bucket_has_the_lifecycle_buckets_protections(all_features_synth):
    buckets = all_features_synth.resources("hyperpod", "AWS::S3::Bucket")
    (tls,) = [b for k, b in buckets.items() if k.startswith("InferenceOperatorTlsCertificates")]
    (lifecycle,) = [b for k, b in buckets.items() if k.startswith("LifecycleScriptsBucket")]
    for prop in ("BucketEncryption", "PublicAccessBlockConfiguration", "VersioningConfiguration"):
        assert tls["Properties"][prop] == lifecycle["Properties"][prop], prop
    assert tls["Properties"]["LoggingConfiguration"]["LogFilePrefix"] == "tls-cert-logs/"
    assert tls["Properties"]["LoggingConfiguration"]["DestinationBucketName"] == \
        lifecycle["Properties"]["LoggingConfiguration"]["DestinationBucketName"]
    policies = all_features_synth.resources("hyperpod", "AWS::S3::BucketPolicy")
    assert any("aws:SecureTransport" in json.dumps(p) and "InferenceOperatorTlsCertificates" in json.dumps(p)
               for p in policies.values())


def test_oidc_provider_is_the_clusters_issuer(all_features_synth):
    (provider,) = all_features_synth.resources("hyperpod", "AWS::IAM::OIDCProvider").values()
    assert provider["Properties"]["ClientIdList"] == ["sts.amazonaws.com"]
    assert "OpenIdConnectIssuerUrl" in json.dumps(provider["Properties"]["Url"])


def test_default_config_has_no_inference_operator(default_synth):
    addons = default_synth.resources("hyperpod", "AWS::EKS::Addon")
    assert not [a for a in addons.values() if a["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"]
    assert not default_synth.resources("hyperpod", "AWS::IAM::OIDCProvider")
