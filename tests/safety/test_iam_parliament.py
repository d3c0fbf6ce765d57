"""Every IAM policy document in the default synth, analysed with parliament (duo-labs): no findings.

CloudFormation intrinsics are rendered first to placeholder values of the right shape (an S3 bucket's
``Fn::GetAtt Arn`` becomes ``arn:aws:s3:::<bucket>``, ``AWS::Region`` becomes ``us-west-2``, an import is
followed to the exporting stack's output), so that parliament can match actions against resource ARNs.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

with warnings.catch_warnings():  # parliament imports pkg_resources, which setuptools marks deprecated
    warnings.simplefilter("ignore")
    import parliament

ACCOUNT, REGION, PARTITION = "111122223333", "us-west-2", "aws"
PSEUDO = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": PARTITION,
          "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "stack", "AWS::NoValue": ""}

# Findings this project accepts: (parliament issue, logical ID or resource type) -> reason. Each listed once.
ALLOWED: dict[tuple[str, str], str] = {
    ("RESOURCE_STAR", "AWS::KMS::Key"):
        "In a key policy, Resource '*' means the key itself: it is the only value KMS accepts there.",
    ("RESOURCE_STAR", "NetworkS3Endpoint635CABAC"):
        "The S3 gateway endpoint policy allows Resource '*' only with the condition aws:ResourceAccount = this "
        "account (statement ThisAccountBuckets); parliament does not weigh conditions.",
    ("RESOURCE_MISMATCH", "CustomCDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756CServiceRoleDefaultPolicy88902FDF"):
        "aws-cdk-lib's BucketDeployment grants its s3:GetObject*/s3:List* action groups on the two buckets; "
        "the wildcard also names access-point and access-grants actions that need other resource types, and "
        "those simply do not apply to a bucket ARN (never broader).",
    ("RESOURCE_STAR", "DependenciesChartRoleDefaultPolicyA5C70FD2"):
        "Lambda's VPC attachment actions (ec2 ENI create/delete/assign) act on an ENI that does not exist before "
        "the call, as in AWSLambdaVPCAccessExecutionRole.",
    ("RESOURCE_STAR", "ChartInstallerRoleDefaultPolicy8CD4F7B5"):
        "The storage stack's chart installer (FSx storage class and claim) attaches to the VPC like the "
        "dependencies chart's: the same Lambda ENI actions on an ENI that does not exist before the call.",
    ("UNKNOWN_ACTION", "AutoscalingRole64F95C72"):
        "sagemaker:BatchAddClusterNodes and BatchDeleteClusterNodes are newer than parliament's action list; both "
        "are operations of botocore's sagemaker model and the actions of AWS's Karpenter role "
        "(awslabs/awsome-distributed-training@0edaf15: modules/sagemaker_iam_role/main.tf, karpenter_policy).",
    ("UNKNOWN_ACTION", "ExecutionRolePolicy79A7F477"):
        "sagemaker:AttachClusterNodeNetworkInterface is newer than parliament's action list; it is an operation of "
        "botocore 1.44.8's sagemaker model and the call aws-node makes on HyperPod nodes since "
        "https://github.com/aws/amazon-vpc-cni-k8s/pull/3874 (execution_role.py, VpcCniHyperPodAttachEni).",
    ("MISMATCHED_TYPE", "LogsKeyFE4C4A83"):
        "The logs key's CloudWatch Logs statement uses ArnLike on kms:EncryptionContext:aws:logs:arn, as AWS's "
        "CloudWatch Logs encryption page writes it (infra/constructs/logs_key.py); parliament types every "
        "encryption-context key as a string.",
    ("RESOURCE_STAR", "InferenceOperatorLoadBalancerControllerRoleB25F872A"):
        "AWS's policy for the inference operator's load balancer controller, statement by statement "
        "(awslabs/awsome-distributed-training@0edaf15: modules/hyperpod_inference_operator/iam_roles.tf): it "
        "creates security groups, load balancers and target groups that do not exist before the call; the writes "
        "on them are conditioned on the elbv2.k8s.aws/cluster tag.",
    ("UNKNOWN_ACTION", "InferenceOperatorLoadBalancerControllerRoleB25F872A"):
        "Actions of AWS's load balancer controller policy newer than parliament's action list (e.g. "
        "elasticloadbalancing:ModifyIpPools), as AWS's module writes them (iam_roles.tf lines 134-381).",
    ("UNKNOWN_CONDITION_FOR_ACTION", "InferenceOperatorLoadBalancerControllerRoleB25F872A"):
        "AWS's load balancer controller policy conditions AddTags on elasticloadbalancing:CreateAction, a key "
        "newer than parliament's list, as AWS's module writes it (iam_roles.tf lines 338-357).",
    ("RESOURCE_STAR", "ObservabilityGrafanaWorkspacePolicy9801C29F"):
        "Grafana's CloudWatch data source reads alarms, insight rules and Logs Insights queries across the "
        "account; these read actions take no narrower resource in practice, as in AmazonGrafanaCloudWatchAccess.",
}

# Resource types whose Ref is an ARN.
REF_IS_ARN = {"AWS::IAM::ManagedPolicy", "AWS::SNS::Topic", "AWS::StepFunctions::StateMachine"}


def _arn(resource_type: str, name: str) -> str:
    service = resource_type.split("::")[1].lower()
    return {
        "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
        "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
        "AWS::IAM::ManagedPolicy": f"arn:{PARTITION}:iam::{ACCOUNT}:policy/{name}",
        "AWS::KMS::Key": f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/{name}",
        "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}",
        "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:{name}:*",
        "AWS::EKS::Cluster": f"arn:{PARTITION}:eks:{REGION}:{ACCOUNT}:cluster/{name}",
        "AWS::SageMaker::Cluster": f"arn:{PARTITION}:sagemaker:{REGION}:{ACCOUNT}:cluster/{name}",
        "AWS::APS::Workspace": f"arn:{PARTITION}:aps:{REGION}:{ACCOUNT}:workspace/ws-{name}",
        "AWS::SNS::Topic": f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{name}",
        "AWS::StepFunctions::StateMachine": f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
        "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
        "AWS::Events::Rule": f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:rule/{name}",
        "AWS::EC2::VPC": f"arn:{PARTITION}:ec2:{REGION}:{ACCOUNT}:vpc/{name}",
        "AWS::FSx::FileSystem": f"arn:{PARTITION}:fsx:{REGION}:{ACCOUNT}:file-system/fs-{name}",
    }.get(resource_type, f"arn:{PARTITION}:{service}:{REGION}:{ACCOUNT}:{name}")


class Renderer:
    """Renders CloudFormation values of one template (imports followed across ``templates``) to strings."""

    def __init__(self, template: dict[str, Any], templates: dict[str, dict[str, Any]]) -> None:
        self.template = template
        self.templates = templates

    def resource_type(self, logical_id: str) -> str:
        return str(self.template.get("Resources", {}).get(logical_id, {}).get("Type", "AWS::Unknown::Thing"))

    def ref(self, name: str) -> str:
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.template.get("Parameters", {}):
            return f"param-{name.lower()}"
        kind = self.resource_type(name)
        return _arn(kind, name.lower()) if kind in REF_IS_ARN else name.lower()

    def get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.resource_type(logical_id)
        # FSx names its ARN attribute ResourceARN (aws-cdk-lib CfnFileSystem.attr_resource_arn).
        if attribute in ("Arn", "ResourceARN") or attribute.endswith(".Arn"):
            return _arn(kind, logical_id.lower())
        return f"{logical_id.lower()}-{attribute.lower()}"

    def import_value(self, export: Any) -> str:
        name = self.render(export)
        for template in self.templates.values():
            for output in template.get("Outputs", {}).values():
                if self.render_in(template, output.get("Export", {}).get("Name")) == name:
                    return self.render_in(template, output["Value"])
        return f"imported-{name.lower()}"

    def render_in(self, template: dict[str, Any], value: Any) -> str:
        return Renderer(template, self.templates).render(value) if value is not None else ""

    def render(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.render(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self.ref(argument)
            if key == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(logical_id, attribute)
            if key == "Fn::Join":
                return argument[0].join(str(self.render(p)) for p in argument[1])
            if key == "Fn::Sub":
                text, variables = (argument, {}) if isinstance(argument, str) else argument
                for name, replacement in variables.items():
                    text = text.replace("${" + name + "}", str(self.render(replacement)))
                while "${" in text:
                    start = text.index("${")
                    end = text.index("}", start)
                    name = text[start + 2:end]
                    logical_id, _, attribute = name.partition(".")
                    text = text[:start] + (self.get_att(logical_id, attribute) if attribute else self.ref(name)) \
                        + text[end + 1:]
                return text
            if key == "Fn::Select":
                return self.render(argument[1])[int(argument[0])]
            if key == "Fn::Split":
                return str(self.render(argument[1])).split(argument[0])
            if key == "Fn::ImportValue":
                return self.import_value(argument)
            if key == "Fn::If":
                return self.render(argument[1])
        return {k: self.render(v) for k, v in value.items()}


def policy_documents(templates: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(stack, logical ID, kind of document, rendered document) of every IAM policy in the templates."""
    for stack, template in templates.items():
        renderer = Renderer(template, templates)
        for logical_id, resource in template.get("Resources", {}).items():
            properties = resource.get("Properties", {})
            for key in ("PolicyDocument", "KeyPolicy"):
                if key in properties:
                    yield stack, logical_id, resource["Type"], renderer.render(properties[key])
            for policy in properties.get("Policies", []) if isinstance(properties.get("Policies"), list) else []:
                yield stack, logical_id, f"{resource['Type']} inline", renderer.render(policy["PolicyDocument"])


def _findings(document: dict[str, Any]) -> list[str]:
    policy = parliament.analyze_policy_string(json.dumps(document))
    return [f"{f.issue}: {f.detail}" for f in policy.findings]


def test_renderer_produces_arns_parliament_can_match():
    template = {"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}
    rendered = Renderer(template, {"t": template}).render(
        {"Fn::Join": ["", [{"Fn::GetAtt": ["B", "Arn"]}, "/", {"Ref": "AWS::Region"}, "/*"]]})
    assert rendered == "arn:aws:s3:::b/us-west-2/*"
    bad = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Fn::GetAtt": ["B", "Arn"]}}]}
    assert any("RESOURCE_MISMATCH" in f for f in _findings(Renderer(template, {}).render(bad)))


# The variant adds what the default leaves off (e.g. the S3 gateway endpoint's policy); all-features the roles and
# key policies of every optional feature (autoscaling, add-ons, task governance, volume key, FSx).
POLICY_VARIANTS = ["default_synth", "variant_synth", "all_features_synth"]


def _documents(synth) -> list[tuple[str, str, str, dict]]:
    found = list(policy_documents(synth.templates))
    assert len(found) >= 5, "expected the execution role, the handlers' roles and the bucket/key policies"
    return found


def _sorted_findings(documents) -> tuple[dict[str, list[str]], set[tuple[str, str]]]:
    """Parliament's findings on ``documents``: those not in ALLOWED by policy, and the ALLOWED entries that matched."""
    unexpected: dict[str, list[str]] = {}
    seen_allowed: set[tuple[str, str]] = set()
    for stack, logical_id, kind, document in documents:
        for finding in _findings(document):
            issue = finding.split(":", 1)[0]
            allowed = {(issue, logical_id), (issue, kind)} & set(ALLOWED)
            if allowed:
                seen_allowed |= allowed
                continue
            unexpected.setdefault(f"{stack}/{logical_id} ({kind})", []).append(finding)
    return unexpected, seen_allowed


@pytest.mark.parametrize("variant", POLICY_VARIANTS)
def test_no_intrinsic_is_left_unrendered(request, variant):
    for stack, logical_id, _kind, document in _documents(request.getfixturevalue(variant)):
        text = json.dumps(document)
        assert "Fn::" not in text and '"Ref"' not in text, (stack, logical_id, text[:500])


@pytest.mark.parametrize("variant", POLICY_VARIANTS)
def test_parliament_has_no_finding_on_any_policy(request, variant):
    unexpected, _ = _sorted_findings(_documents(request.getfixturevalue(variant)))
    assert unexpected == {}


def test_every_allowed_finding_still_occurs(all_features_synth):
    """all-features.yaml has every policy the allowed findings are about (it turns every feature on)."""
    _, seen_allowed = _sorted_findings(_documents(all_features_synth))
    assert seen_allowed == set(ALLOWED), "an allowed finding no longer occurs: remove it from ALLOWED"
