"""HyperPodChecks: every rule fires on a failing fixture and stays quiet on a passing one.

All fixtures are small stacks of L1 resources in ONE app, synthesized once with the pack as a validation
plugin; the tests read the validation report, exactly as `cdk synth` would produce it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import CfnResource, Fn, Stack, Stage, Validations

from infra.constructs.common import acknowledge
from infra.facts.names import NAG_PACK_NAME
from infra.guards.nag_pack import RULES, HyperPodChecks
from tests.conftest import new_app

Builder = Callable[[Stack], None]

ALL_LOG_TYPES = [{"Type": t} for t in ("api", "audit", "authenticator", "controllerManager", "scheduler")]


def eks(stack: Stack, *, vpc: dict[str, Any] | None = None, logs: list[dict[str, str]] | None = None,
        encrypted: bool = True) -> CfnResource:
    props: dict[str, Any] = {
        "RoleArn": "arn:aws:iam::111122223333:role/eks",
        "ResourcesVpcConfig": {"SubnetIds": ["subnet-1", "subnet-2"], "EndpointPublicAccess": False,
                               "EndpointPrivateAccess": True, **(vpc or {})},
        "Logging": {"ClusterLogging": {"EnabledTypes": ALL_LOG_TYPES if logs is None else logs}},
    }
    if encrypted:
        props["EncryptionConfig"] = [{"Provider": {"KeyArn": "arn:aws:kms:us-west-2:111122223333:key/k"},
                                      "Resources": ["secrets"]}]
    return CfnResource(stack, "Cluster", type="AWS::EKS::Cluster", properties=props)


def hyperpod(stack: Stack, *, bucket_name: str = "sagemaker-scripts", group: dict[str, Any] | None = None,
             cluster: dict[str, Any] | None = None, grant: str | None = None) -> CfnResource:
    """A HyperPod cluster whose lifecycle bucket and execution role live in the same template."""
    bucket = CfnResource(stack, "Bucket", type="AWS::S3::Bucket", properties={"BucketName": bucket_name})
    role = CfnResource(stack, "Role", type="AWS::IAM::Role", properties={"AssumeRolePolicyDocument": {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
                       "Action": "sts:AssumeRole"}]}})
    if grant is not None:
        CfnResource(stack, "Policy", type="AWS::IAM::Policy", properties={
            "PolicyName": "read-scripts", "Roles": [role.ref],
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Action": "s3:GetObject",
                "Resource": Fn.join("", [bucket.get_att("Arn").to_string(), grant])}]}})
    instance_group = {
        "InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 2,
        "ExecutionRole": role.get_att("Arn").to_string(),
        "LifeCycleConfig": {"SourceS3Uri": f"s3://{bucket.ref}/lifecycle/", "OnCreate": "on_create.sh"},
        "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
        **(group or {}),
    }
    return CfnResource(stack, "HyperPod", type="AWS::SageMaker::Cluster", properties={
        "ClusterName": "hp", "NodeRecovery": "Automatic",
        "Orchestrator": {"Eks": {"ClusterArn": "arn:aws:eks:us-west-2:111122223333:cluster/c"}},
        "InstanceGroups": [{k: v for k, v in instance_group.items() if v is not None}],
        **(cluster or {}),
    })


def security_group(stack: Stack, *, ingress: list[dict[str, Any]] | None = None,
                   egress: list[dict[str, Any]] | None = None, efa: bool = False) -> CfnResource:
    group = CfnResource(stack, "Group", type="AWS::EC2::SecurityGroup", properties={
        "GroupDescription": "fixture", "VpcId": "vpc-1",
        "SecurityGroupIngress": ingress or [], "SecurityGroupEgress": egress or []})
    if efa:  # as aws-cdk-lib writes a self-referencing rule: a separate resource
        group_id = group.get_att("GroupId").to_string()
        CfnResource(stack, "SelfIngress", type="AWS::EC2::SecurityGroupIngress", properties={
            "GroupId": group_id, "SourceSecurityGroupId": group_id, "IpProtocol": "-1"})
    return group


def identity_policy(stack: Stack, actions: list[str], *, inline_role: bool = False) -> None:
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
    if inline_role:
        CfnResource(stack, "Role", type="AWS::IAM::Role", properties={
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []},
            "Policies": [{"PolicyName": "inline", "PolicyDocument": document}]})
    else:
        CfnResource(stack, "Policy", type="AWS::IAM::Policy", properties={
            "PolicyName": "p", "Roles": ["r"], "PolicyDocument": document})


def workspace(stack: Stack, *, key: bool) -> None:
    props = {"Alias": "w", **({"KmsKeyArn": "arn:aws:kms:us-west-2:111122223333:key/k"} if key else {})}
    CfnResource(stack, "Workspace", type="AWS::APS::Workspace", properties=props)


OPEN = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0"}
ALL_OUT = {"IpProtocol": "-1", "CidrIp": "0.0.0.0/0"}
HTTPS_OUT = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0"}

# rule -> (failing fixtures with the finding each must produce, passing fixtures)
CASES: dict[str, tuple[dict[str, tuple[Builder, str]], dict[str, Builder]]] = {
    "EKS1": (
        {"open-cidr": (lambda s: eks(s, vpc={"EndpointPublicAccess": True, "PublicAccessCidrs": ["0.0.0.0/0"]}),
                       "HyperPod-EKS1"),
         "halves": (lambda s: eks(s, vpc={"EndpointPublicAccess": True,
                                          "PublicAccessCidrs": ["0.0.0.0/1", "128.0.0.0/1"]}), "HyperPod-EKS1"),
         "no-cidrs": (lambda s: eks(s, vpc={"EndpointPublicAccess": True}), "HyperPod-EKS1"),
         "public-by-default": (lambda s: eks(s, vpc={"EndpointPublicAccess": None}), "HyperPod-EKS1")},
        {"private": lambda s: eks(s),
         "allow-list": lambda s: eks(s, vpc={"EndpointPublicAccess": True, "PublicAccessCidrs": ["203.0.113.0/24"]}),
         "a-slash-8": lambda s: eks(s, vpc={"EndpointPublicAccess": True, "PublicAccessCidrs": ["11.0.0.0/8"]})},
    ),
    "EKS2": (
        {"no-scheduler": (lambda s: eks(s, logs=ALL_LOG_TYPES[:4]), "HyperPod-EKS2[scheduler]")},
        {"all-five": lambda s: eks(s)},
    ),
    "EKS3": (
        {"unencrypted": (lambda s: eks(s, encrypted=False), "HyperPod-EKS3")},
        {"encrypted": lambda s: eks(s)},
    ),
    "SM1": (
        {"plain-bucket": (lambda s: hyperpod(s, bucket_name="team-scripts"), "HyperPod-SM1[workers]"),
         "grant-elsewhere": (lambda s: hyperpod(s, bucket_name="team-scripts", grant="/other/*"),
                             "HyperPod-SM1[workers]")},
        {"sagemaker-bucket": lambda s: hyperpod(s),
         "explicit-grant": lambda s: hyperpod(s, bucket_name="team-scripts", grant="/lifecycle/*")},
    ),
    "SM2": (
        {"single-node": (lambda s: hyperpod(s, group={"InstanceCount": 1}), "HyperPod-SM2[workers]")},
        {"two-nodes": lambda s: hyperpod(s),
         "single-node-stress-only": lambda s: hyperpod(s, group={"InstanceCount": 1,
                                                                 "OnStartDeepHealthChecks": ["InstanceStress"]})},
    ),
    "SM3": (
        {"manual-recovery": (lambda s: hyperpod(s, cluster={"NodeRecovery": "None"}), "HyperPod-SM3")},
        {"automatic": lambda s: hyperpod(s)},
    ),
    "SM4": (
        {"gpu-unchecked": (lambda s: hyperpod(s, group={"InstanceType": "ml.p5.48xlarge",
                                                        "OnStartDeepHealthChecks": None}), "HyperPod-SM4[workers]"),
         "trainium-unchecked": (lambda s: hyperpod(s, group={"InstanceType": "ml.trn1.32xlarge",
                                                             "OnStartDeepHealthChecks": []}), "HyperPod-SM4[workers]"),
         # A flexible group that may fall back to a GPU type.
         "flexible-gpu-fallback-unchecked": (lambda s: hyperpod(s, group={
             "InstanceType": None, "InstanceRequirements": {"InstanceTypes": ["ml.m5.2xlarge", "ml.g5.8xlarge"]},
             "OnStartDeepHealthChecks": None}), "HyperPod-SM4[workers]")},
        {"gpu-checked": lambda s: hyperpod(s),
         "cpu-unchecked": lambda s: hyperpod(s, group={"InstanceType": "ml.m5.2xlarge",
                                                       "OnStartDeepHealthChecks": None}),
         "flexible-cpu-unchecked": lambda s: hyperpod(s, group={
             "InstanceType": None, "InstanceRequirements": {"InstanceTypes": ["ml.m5.2xlarge", "ml.c5.xlarge"]},
             "OnStartDeepHealthChecks": None})},
    ),
    "EC2-1": (
        {"inline": (lambda s: security_group(s, ingress=[OPEN]), "HyperPod-EC2-1"),
         "standalone": (lambda s: CfnResource(s, "Ingress", type="AWS::EC2::SecurityGroupIngress", properties={
             "GroupId": "sg-1", "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "CidrIp": "0.0.0.0/0"}),
             "HyperPod-EC2-1"),
         "ipv6": (lambda s: security_group(s, ingress=[{"IpProtocol": "-1", "CidrIpv6": "::/0"}]), "HyperPod-EC2-1")},
        {"private-range": lambda s: security_group(s, ingress=[{**OPEN, "CidrIp": "10.0.0.0/8"}])},
    ),
    "EC2-2": (
        {"efa-all-out": (lambda s: security_group(s, egress=[ALL_OUT], efa=True), "HyperPod-EC2-2")},
        {"efa-https-out": lambda s: security_group(s, egress=[HTTPS_OUT], efa=True),
         "plain-all-out": lambda s: security_group(s, egress=[ALL_OUT])},
    ),
    "IAM1": (
        {"service-wildcard": (lambda s: identity_policy(s, ["s3:GetObject", "s3:*"]), "HyperPod-IAM1[s3:*]"),
         "star-inline": (lambda s: identity_policy(s, ["*"], inline_role=True), "HyperPod-IAM1[*]")},
        {"named-actions": lambda s: identity_policy(s, ["s3:GetObject", "s3:Get*"])},
    ),
    "AMP1": (
        {"aws-owned-key": (lambda s: workspace(s, key=False), "HyperPod-AMP1")},
        {"customer-key": lambda s: workspace(s, key=True)},
    ),
}

ACKNOWLEDGED_REASON = "Fixture: manual recovery chosen so that operators inspect faulty nodes first."


def _stack_name(rule: str, outcome: str, case: str) -> str:
    return f"{rule}-{outcome}-{case}"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    outdir = tmp_path_factory.mktemp("nag-fixtures")
    # Report findings instead of raising, so that one synth covers every fixture.
    app = new_app(outdir=str(outdir), context={"@aws-cdk/core:failSynthOnValidationErrors": False})
    for rule, (failing, passing) in CASES.items():
        for case, (build, _finding) in failing.items():
            build(Stack(app, _stack_name(rule, "fail", case)))
        for case, build in passing.items():
            build(Stack(app, _stack_name(rule, "pass", case)))
    acknowledged = Stack(app, "acknowledged")
    cluster = hyperpod(acknowledged, cluster={"NodeRecovery": "None"})
    acknowledge(cluster, "HyperPod-SM3", ACKNOWLEDGED_REASON, pack=NAG_PACK_NAME)
    Validations.of(app).add_plugins(HyperPodChecks(app))
    app.synth()
    data = json.loads((Path(outdir) / "validation-report.json").read_text())
    (plugin,) = [p for p in data["pluginReports"] if p["pluginName"] == NAG_PACK_NAME]
    return dict(plugin)


def _findings(report: dict[str, Any], key: str = "violations") -> set[tuple[str, str]]:
    """(rule ID, stack name) of every finding in the report."""
    return {
        (violation["ruleName"], resource["constructPath"].split("/")[0])
        for violation in report.get(key, [])
        for resource in violation.get("violatingResources", violation.get("violatingConstructs", []))
    }


def test_every_rule_has_fixtures():
    assert {rule.suffix for rule in RULES} == set(CASES)


FAILING = [(rule, case, finding) for rule, (failing, _) in CASES.items() for case, (_, finding) in failing.items()]
PASSING = [(rule, case) for rule, (_, passing) in CASES.items() for case in passing]


@pytest.mark.parametrize(("rule", "case", "finding"), FAILING, ids=[f"{r}-{c}" for r, c, _ in FAILING])
def test_rule_fires_on_failing_fixture_and_nothing_else_does(report, rule, case, finding):
    stack = _stack_name(rule, "fail", case)
    assert {name for name, where in _findings(report) if where == stack} == {finding}


@pytest.mark.parametrize(("rule", "case"), PASSING, ids=[f"{r}-{c}" for r, c in PASSING])
def test_rule_is_quiet_on_passing_fixture(report, rule, case):
    stack = _stack_name(rule, "pass", case)
    assert [name for name, where in _findings(report) if where == stack] == []


def test_failing_findings_are_errors(report):
    assert report["conclusion"] == "failure"
    assert {v["severity"] for v in report["violations"]} == {"error"}


def test_acknowledged_finding_is_reported_as_suppressed_with_its_reason(report):
    assert ("HyperPod-SM3", "acknowledged") not in _findings(report)
    (suppressed,) = [s for s in report["suppressedViolations"] if s["acknowledgedId"].endswith("HyperPod-SM3")]
    assert suppressed["reason"] == ACKNOWLEDGED_REASON
    assert [c["constructPath"] for c in suppressed["violatingConstructs"]] == ["acknowledged/HyperPod"]


def test_default_app_passes_the_pack(default_synth):
    """validate_scope re-runs the pack on the synthesized default app: zero unacknowledged findings."""
    root = Stage.of(default_synth.app.network)
    result = HyperPodChecks().validate_scope(root)
    # validate_scope ignores acknowledgments: the one finding it may return is EC2-2 on the EFA group, which the
    # default (AWS's all-egress rule) acknowledges; the synthesized report below must then show nothing.
    assert [(v.rule_name, [r.construct_path for r in v.violating_resources]) for v in result.violations] == [
        ("HyperPod-EC2-2", [f"{default_synth.config.project}-network/Network/EfaSecurityGroup/Resource"])]
    report = json.loads((default_synth.outdir / "validation-report.json").read_text())
    assert not [p for p in report["pluginReports"] if p["pluginName"] == NAG_PACK_NAME and p["violations"]]


@pytest.mark.parametrize("variant", ["variant_synth", "byo_synth"])
def test_other_variants_have_no_finding_in_their_report(request, variant):
    """app_builder registers the pack, so each synth's report would list its unacknowledged findings."""
    report = json.loads((request.getfixturevalue(variant).outdir / "validation-report.json").read_text())
    assert [p["violations"] for p in report["pluginReports"] if p["pluginName"] == NAG_PACK_NAME] in ([], [[]])
