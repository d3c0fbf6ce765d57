"""HyperPodChecks: a cdk-nag 3.x rule pack for what AwsSolutions does not check on HyperPod on EKS.

Apply it beside AwsSolutions::

    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    Validations.of(app).add_plugins(HyperPodChecks(app))

Each rule reads the resource's properties from the synthesized template, i.e. exactly what CloudFormation
receives (escape-hatch overrides included); CDK runs validation plugins after it has written the cloud
assembly, so the templates are there. ``validate_scope`` works on an app that has been synthesized.

Rules (IDs ``HyperPod-<suffix>``; a finding list names the offending item, e.g. ``HyperPod-SM2[gpu-workers]``):

========  ======================================================================================
EKS1      EKS API endpoint public without a CIDR allow-list, or with a prefix shorter than /8 in it
          (0.0.0.0/0, ::/0, or the halves 0.0.0.0/1 and 128.0.0.0/1)
EKS2      EKS control-plane logging lacks one of api, audit, authenticator, controllerManager, scheduler
EKS3      EKS secrets not encrypted with a KMS key (EncryptionConfig with resource ``secrets``)
SM1       HyperPod lifecycle SourceS3Uri not readable by the group's execution role: the bucket is not a
          ``sagemaker-`` name and no policy on the role (in the same template) grants s3:GetObject on
          the OnCreate script. Best effort on tokens: a bucket name that is an unresolvable token, or a
          role/policy in another stack, counts as not proven and fires (acknowledge it with the reason)
SM2      InstanceConnectivity deep health check on a group of fewer than 2 instances
SM3      NodeRecovery is not Automatic (acknowledge when manual recovery is intended)
SM4      accelerated group (ml.p*, ml.g*, ml.trn*, ml.inf*, the families of infra.facts.instances; for a
          flexible group, any of its types) without OnStartDeepHealthChecks
EC2-1     security group ingress from 0.0.0.0/0 or ::/0
EC2-2     all-traffic egress to 0.0.0.0/0 or ::/0 on an EFA group (one with a self-referencing
          all-traffic rule); AWS warns it can break EFA health checks
IAM1     IAM identity policy statement with Action ``*`` or ``<service>:*``
AMP1     Amazon Managed Service for Prometheus workspace without a customer-managed key (KmsKeyArn)
========  ======================================================================================

Acknowledge one finding on one resource with ``infra.constructs.common.acknowledge(scope, finding, reason,
pack=NAG_PACK_NAME)`` (``infra.facts.names``).
"""

from __future__ import annotations

import builtins
import fnmatch
import ipaddress
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import CfnResource, Stack, Stage
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance
from constructs import IConstruct

from infra.config import MIN_PUBLIC_ACCESS_PREFIX
from infra.facts.instances import is_accelerated
from infra.facts.intrinsics import render
from infra.facts.names import NAG_PACK_NAME

Properties = dict[str, Any]
Template = dict[str, Any]
RuleResult = NagRuleCompliance | list[str]
RuleFunction = Callable[[Properties, Template, str], RuleResult]

CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
OPEN_CIDRS = {"0.0.0.0/0", "::/0"}
IAM_IDENTITY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role", "AWS::IAM::User",
                      "AWS::IAM::Group")

OK = NagRuleCompliance.COMPLIANT
BAD = NagRuleCompliance.NON_COMPLIANT


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _refers_to(value: Any, logical_id: str) -> bool:
    return value in ({"Ref": logical_id}, {"Fn::GetAtt": [logical_id, "GroupId"]}, {"Fn::GetAtt": [logical_id, "Arn"]})


# --- EKS -----------------------------------------------------------------------------------------------------


def eks_endpoint_restricted(props: Properties, template: Template, logical_id: str) -> RuleResult:
    vpc = props.get("ResourcesVpcConfig") or {}
    if vpc.get("EndpointPublicAccess", True) in (False, "false"):  # CloudFormation's default is public
        return OK
    cidrs = [render(c) for c in _listify(vpc.get("PublicAccessCidrs"))]
    return OK if cidrs and not any(_too_wide(c) for c in cidrs) else BAD


def _too_wide(cidr: str) -> bool:
    """0.0.0.0/0 and anything as wide: a list of /1s covers the internet as surely as one /0."""
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen < MIN_PUBLIC_ACCESS_PREFIX
    except ValueError:  # a token rendered as text: nothing to judge
        return False


def eks_control_plane_logging(props: Properties, template: Template, logical_id: str) -> RuleResult:
    logging = ((props.get("Logging") or {}).get("ClusterLogging") or {}).get("EnabledTypes") or []
    enabled = {entry.get("Type") for entry in logging if isinstance(entry, dict)}
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in enabled]
    return missing or OK


def eks_secrets_encrypted(props: Properties, template: Template, logical_id: str) -> RuleResult:
    for config in _listify(props.get("EncryptionConfig")):
        if "secrets" in _listify(config.get("Resources")) and (config.get("Provider") or {}).get("KeyArn"):
            return OK
    return BAD


# --- SageMaker HyperPod -------------------------------------------------------------------------------------


def _groups(props: Properties) -> list[dict[str, Any]]:
    return [g for g in _listify(props.get("InstanceGroups")) if isinstance(g, dict)]


def _group_name(group: dict[str, Any]) -> str:
    return render(group.get("InstanceGroupName", "?"))


def _count(group: dict[str, Any]) -> int | None:
    value = group.get("InstanceCount")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _bucket_and_key(uri: Any) -> tuple[Any, str] | None:
    """(bucket, key prefix) of an ``s3://`` URI; the bucket stays a CloudFormation value when it is a token."""
    if isinstance(uri, dict) and set(uri) == {"Fn::Join"} and uri["Fn::Join"][0] == "":
        parts = uri["Fn::Join"][1]
        if len(parts) >= 2 and parts[0] == "s3://" and isinstance(parts[1], dict):
            return parts[1], "".join(render(p) for p in parts[2:]).lstrip("/")
    text = render(uri)
    if not text.startswith("s3://"):
        return None
    bucket, _, key = text[len("s3://"):].partition("/")
    return bucket, key


def _bucket_name(bucket: Any, template: Template) -> str:
    if isinstance(bucket, dict) and set(bucket) == {"Ref"}:
        resource = template.get("Resources", {}).get(bucket["Ref"], {})
        if resource.get("Type") == "AWS::S3::Bucket" and "BucketName" in resource.get("Properties", {}):
            return render(resource["Properties"]["BucketName"])
    return render(bucket)


def _role_policies(role_id: str, template: Template) -> Iterator[dict[str, Any]]:
    """Policy documents attached to the role ``role_id`` within this template."""
    resources = template.get("Resources", {})
    role = resources.get(role_id, {})
    for policy in _listify(role.get("Properties", {}).get("Policies")):
        yield policy.get("PolicyDocument") or {}
    managed_arns = _listify(role.get("Properties", {}).get("ManagedPolicyArns"))
    managed = [arn.get("Ref") for arn in managed_arns if isinstance(arn, dict)]
    for logical_id, resource in resources.items():
        if resource.get("Type") not in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            continue
        attached = {"Ref": role_id} in _listify(resource.get("Properties", {}).get("Roles"))
        if attached or logical_id in managed:
            yield resource.get("Properties", {}).get("PolicyDocument") or {}


def _normalise_s3_arn(text: str, bucket_id: str | None) -> str:
    """``arn:<partition>:s3:::name/key`` and ``<Bucket.Arn>/key`` -> ``s3:::name/key`` for comparison."""
    if bucket_id:
        text = text.replace(f"<{bucket_id}.Arn>", f"s3:::<{bucket_id}>")
    if text.startswith("arn:") and ":s3:::" in text:
        text = "s3:::" + text.split(":s3:::", 1)[1]
    return text


def _grants_get_object(document: dict[str, Any], target: str, bucket_id: str | None) -> bool:
    for statement in _listify(document.get("Statement")):
        if statement.get("Effect") != "Allow":
            continue
        actions = [a.lower() for a in _listify(statement.get("Action")) if isinstance(a, str)]
        if not any(fnmatch.fnmatchcase("s3:getobject", a) for a in actions):
            continue
        for resource in _listify(statement.get("Resource")):
            pattern = _normalise_s3_arn(render(resource), bucket_id)
            if pattern == "*" or fnmatch.fnmatchcase(target, pattern):
                return True
    return False


def hyperpod_lifecycle_readable(props: Properties, template: Template, logical_id: str) -> RuleResult:
    findings: list[str] = []
    for group in _groups(props):
        lifecycle = group.get("LifeCycleConfig") or {}
        parsed = _bucket_and_key(lifecycle.get("SourceS3Uri"))
        if parsed is None:
            findings.append(_group_name(group))
            continue
        bucket, prefix = parsed
        if _bucket_name(bucket, template).startswith("sagemaker-"):
            continue
        bucket_id = bucket["Ref"] if isinstance(bucket, dict) and set(bucket) == {"Ref"} else None
        target = f"s3:::{render(bucket)}/{prefix.rstrip('/')}/{render(lifecycle.get('OnCreate', ''))}"
        role = group.get("ExecutionRole")
        role_id = role["Fn::GetAtt"][0] if isinstance(role, dict) and "Fn::GetAtt" in role else None
        if role_id and any(_grants_get_object(d, target, bucket_id) for d in _role_policies(role_id, template)):
            continue
        findings.append(_group_name(group))
    return findings or OK


def hyperpod_connectivity_group_size(props: Properties, template: Template, logical_id: str) -> RuleResult:
    findings = [
        _group_name(g) for g in _groups(props)
        if "InstanceConnectivity" in _listify(g.get("OnStartDeepHealthChecks")) and (_count(g) or 0) < 2
    ]
    return findings or OK


def hyperpod_node_recovery(props: Properties, template: Template, logical_id: str) -> RuleResult:
    return OK if props.get("NodeRecovery") == "Automatic" else BAD


def _instance_types(group: dict[str, Any]) -> list[str]:
    """A group's instance type, or every type of a flexible group (InstanceRequirements.InstanceTypes)."""
    if "InstanceType" in group:
        return [render(group["InstanceType"])]
    return [render(t) for t in _listify((group.get("InstanceRequirements") or {}).get("InstanceTypes"))]


def hyperpod_accelerated_deep_health_checks(props: Properties, template: Template, logical_id: str) -> RuleResult:
    findings = [
        _group_name(g) for g in _groups(props)
        if any(is_accelerated(t) for t in _instance_types(g)) and not g.get("OnStartDeepHealthChecks")
    ]
    return findings or OK


# --- EC2 security groups ------------------------------------------------------------------------------------


def _open(rule: dict[str, Any]) -> bool:
    return rule.get("CidrIp") in OPEN_CIDRS or rule.get("CidrIpv6") in OPEN_CIDRS


def _all_traffic(rule: dict[str, Any]) -> bool:
    return str(rule.get("IpProtocol")) in ("-1", "all")


def security_group_no_open_ingress(props: Properties, template: Template, logical_id: str) -> RuleResult:
    rules = _listify(props.get("SecurityGroupIngress")) if "SecurityGroupIngress" in props else [props]
    return BAD if any(_open(r) for r in rules if isinstance(r, dict)) else OK


def efa_group_no_open_egress(props: Properties, template: Template, logical_id: str) -> RuleResult:
    """All rules of the group: inline ones and standalone Ingress/Egress resources in this template."""
    inline_in = [(r, "SourceSecurityGroupId") for r in _listify(props.get("SecurityGroupIngress"))]
    inline_out = [(r, "DestinationSecurityGroupId") for r in _listify(props.get("SecurityGroupEgress"))]
    standalone: list[tuple[dict[str, Any], str]] = []
    for resource in template.get("Resources", {}).values():
        kind = resource.get("Type")
        rule = resource.get("Properties", {})
        if kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress") and _refers_to(
            rule.get("GroupId"), logical_id
        ):
            peer = "SourceSecurityGroupId" if kind.endswith("Ingress") else "DestinationSecurityGroupId"
            standalone.append((rule, peer))
    rules = [(r, peer) for r, peer in [*inline_in, *inline_out, *standalone] if isinstance(r, dict)]
    is_efa = any(_all_traffic(r) and _refers_to(r.get(peer), logical_id) for r, peer in rules)
    egress = [r for r, peer in [*inline_out, *standalone] if peer == "DestinationSecurityGroupId"]
    if is_efa and any(_all_traffic(r) and _open(r) for r in egress if isinstance(r, dict)):
        return BAD
    return OK


# --- IAM and AMP --------------------------------------------------------------------------------------------


def _identity_documents(props: Properties) -> Iterator[dict[str, Any]]:
    if "PolicyDocument" in props:
        yield props["PolicyDocument"] or {}
    for policy in _listify(props.get("Policies")):
        if isinstance(policy, dict):
            yield policy.get("PolicyDocument") or {}


def iam_no_wildcard_action(props: Properties, template: Template, logical_id: str) -> RuleResult:
    findings: list[str] = []
    for document in _identity_documents(props):
        for statement in _listify(document.get("Statement")):
            if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                continue
            for action in _listify(statement.get("Action")):
                if isinstance(action, str) and (action == "*" or action.endswith(":*")) and action not in findings:
                    findings.append(action)
    return findings or OK


def amp_workspace_customer_key(props: Properties, template: Template, logical_id: str) -> RuleResult:
    return OK if props.get("KmsKeyArn") else BAD


@dataclass(frozen=True)
class Rule:
    suffix: str
    resource_types: tuple[str, ...]
    info: str
    explanation: str
    check: RuleFunction


RULES: tuple[Rule, ...] = (
    Rule("EKS1", ("AWS::EKS::Cluster",),
         "The EKS API endpoint is public without a CIDR allow-list (or the list holds a prefix shorter than /8).",
         "Keep the endpoint private, or public_and_private with public_access_cidrs naming your networks.",
         eks_endpoint_restricted),
    Rule("EKS2", ("AWS::EKS::Cluster",),
         "The EKS cluster does not send all five control-plane log types to CloudWatch.",
         "api, audit, authenticator, controllerManager and scheduler logs are needed for incident analysis.",
         eks_control_plane_logging),
    Rule("EKS3", ("AWS::EKS::Cluster",),
         "Kubernetes secrets of the EKS cluster are not encrypted with a KMS key.",
         "Envelope encryption of secrets with a customer-managed key limits who can read them from etcd.",
         eks_secrets_encrypted),
    Rule("SM1", ("AWS::SageMaker::Cluster",),
         "The group's lifecycle SourceS3Uri is not provably readable by its execution role.",
         "Nodes fail with an opaque error when they cannot read the scripts: use a sagemaker-* bucket (the "
         "managed instance policy reads those) or grant s3:GetObject on the prefix to the execution role.",
         hyperpod_lifecycle_readable),
    Rule("SM2", ("AWS::SageMaker::Cluster",),
         "InstanceConnectivity deep health checks on an instance group of fewer than 2 instances.",
         "The connectivity check tests instances against each other and needs at least two.",
         hyperpod_connectivity_group_size),
    Rule("SM3", ("AWS::SageMaker::Cluster",),
         "HyperPod NodeRecovery is not Automatic.",
         "With automatic recovery HyperPod replaces or reboots faulty nodes; turn it off only on purpose.",
         hyperpod_node_recovery),
    Rule("SM4", ("AWS::SageMaker::Cluster",),
         "An accelerated instance group (ml.p*, ml.g*, ml.trn*, ml.inf*) has no on-start deep health checks.",
         "Deep health checks catch faulty GPUs/accelerators and links before jobs land on them.",
         hyperpod_accelerated_deep_health_checks),
    Rule("EC2-1", ("AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress"),
         "A security group allows ingress from 0.0.0.0/0 or ::/0.",
         "Nothing in this architecture serves the internet; open ingress exposes nodes and endpoints.",
         security_group_no_open_ingress),
    Rule("EC2-2", ("AWS::EC2::SecurityGroup",),
         "The EFA security group allows all-traffic egress to 0.0.0.0/0.",
         "AWS warns that an all-traffic 0.0.0.0/0 egress rule can break EFA health checks; allow HTTPS instead.",
         efa_group_no_open_egress),
    Rule("IAM1", IAM_IDENTITY_TYPES,
         "An IAM statement allows every action ('*' or '<service>:*').",
         "Name the actions the principal needs; a service wildcard also grants actions added later.",
         iam_no_wildcard_action),
    Rule("AMP1", ("AWS::APS::Workspace",),
         "The Amazon Managed Service for Prometheus workspace is not encrypted with a customer-managed key.",
         "Set KmsKeyArn so that metric data is encrypted under a key this account controls and audits.",
         amp_workspace_customer_key),
)

_RULES_BY_TYPE: dict[str, list[Rule]] = {}
for _rule in RULES:
    for _type in _rule.resource_types:
        _RULES_BY_TYPE.setdefault(_type, []).append(_rule)


class TemplateNotSynthesized(RuntimeError):
    """The pack needs the synthesized template of the resource's stack."""


@jsii.implements(IApplyRule)
class _Finding:
    """A rule's outcome on one resource, in the shape cdk-nag's ``applyRule`` expects (IApplyRule).

    The rule has already run in Python (``outcome``); cdk-nag calls ``rule`` back, checks acknowledgments and
    records the violation. Compliant resources never cross into jsii, which keeps the pack fast.
    """

    def __init__(self, rule: Rule, node: CfnResource, outcome: RuleResult | Exception) -> None:
        self._rule = rule
        self._node = node
        self._outcome = outcome

    @builtins.property
    def explanation(self) -> str:
        return self._rule.explanation

    @builtins.property
    def info(self) -> str:
        return self._rule.info

    @builtins.property
    def level(self) -> NagMessageLevel:
        return NagMessageLevel.ERROR

    @builtins.property
    def node(self) -> CfnResource:
        return self._node

    @builtins.property
    def rule_suffix_override(self) -> str:
        return self._rule.suffix

    def rule(self, node: CfnResource) -> RuleResult:
        if isinstance(self._outcome, Exception):
            raise self._outcome  # cdk-nag reports "Rule threw an error" on this resource, as for its own rules
        return self._outcome


def _outcomes(rules: list[Rule], properties: Properties, template: Template,
              logical_id: str) -> list[tuple[Rule, RuleResult | Exception]]:
    """The rules' outcomes on one resource, compliant and not-applicable ones left out."""
    found: list[tuple[Rule, RuleResult | Exception]] = []
    for rule in rules:
        try:
            outcome: RuleResult | Exception = rule.check(properties, template, logical_id)
        except Exception as error:  # noqa: BLE001 - reported on the resource, like cdk-nag's own rules
            outcome = error
        if outcome not in (NagRuleCompliance.COMPLIANT, NagRuleCompliance.NOT_APPLICABLE, []):
            found.append((rule, outcome))
    return found


@dataclass(frozen=True)
class _TemplateOutcomes:
    """Every rule run once over every resource of one synthesized template: what was found, by logical ID, and
    the resource types with a finding (a resource of another type needs no more questions to jsii)."""

    by_logical_id: dict[str, list[tuple[Rule, RuleResult | Exception]]]
    types: frozenset[str]

    @classmethod
    def of(cls, template: Template) -> _TemplateOutcomes:
        by_logical_id: dict[str, list[tuple[Rule, RuleResult | Exception]]] = {}
        types: set[str] = set()
        resources = template.get("Resources")
        for logical_id, resource in (resources.items() if isinstance(resources, dict) else ()):
            cfn_type = resource.get("Type") if isinstance(resource, dict) else None
            rules = _RULES_BY_TYPE.get(cfn_type) if isinstance(cfn_type, str) else None
            if not rules:
                continue
            properties = resource.get("Properties")
            found = _outcomes(rules, properties if isinstance(properties, dict) else {}, template, logical_id)
            if found:
                by_logical_id[logical_id] = found
                types.add(cfn_type)  # type: ignore[arg-type]
        return cls(by_logical_id, frozenset(types))


_TYPE_OF_CLASS: dict[type, str | None] = {}


def _resource_type(node: CfnResource) -> str:
    """The node's CloudFormation type. A generated L1 class (CfnBucket, ...) names its one type in the class
    constant CFN_RESOURCE_TYPE_NAME: read through jsii once per class, not once per resource. A bare CfnResource
    (or a subclass without the constant) carries its own."""
    cls = type(node)
    if cls not in _TYPE_OF_CLASS:
        _TYPE_OF_CLASS[cls] = None if cls is CfnResource else getattr(cls, "CFN_RESOURCE_TYPE_NAME", None)
    return _TYPE_OF_CLASS[cls] or node.cfn_resource_type


class HyperPodChecks(NagPack):
    """The HyperPod rule pack (see the module docstring for the rules).

    cdk-nag walks the construct tree and calls ``_check_resource`` for every CfnResource, each call a round trip
    between Node.js and Python. The rules run over each stack's synthesized template once, in Python, when the
    first resource of that stack whose type has rules is visited; a visit then asks jsii only what it must: the
    resource's stack when its type has rules, and its logical ID when a resource of its type in that template
    has a finding.
    """

    def __init__(self, scope: IConstruct | None = None, *, verbose: bool | None = None) -> None:
        super().__init__(scope, verbose=verbose)
        self._pack_name = NAG_PACK_NAME
        self._outcomes: dict[str, _TemplateOutcomes] = {}  # per template file and version: one pass per synth
        # Each stack's template file, asked of jsii once per stack rather than once per resource.
        self._template_paths: dict[Stack, Path] = {}

    @builtins.property
    def name(self) -> str:
        return NAG_PACK_NAME

    def _check_resource(self, node: CfnResource) -> None:
        cfn_type = _resource_type(node)
        if cfn_type not in _RULES_BY_TYPE:
            return
        stack = Stack.of(node)
        outcomes = self._template_outcomes(stack)
        if cfn_type not in outcomes.types:
            return
        for rule, outcome in outcomes.by_logical_id.get(stack.resolve(node.logical_id), ()):
            # IApplyRule's stub declares settable attributes; cdk-nag only reads them, properties suffice.
            self._apply_rule(_Finding(rule, node, outcome))  # type: ignore[arg-type]

    def _template_outcomes(self, stack: Stack) -> _TemplateOutcomes:
        path = self._template_paths.get(stack)
        if path is None:
            stage = Stage.of(stack)
            if stage is None:
                raise TemplateNotSynthesized(f"{stack.node.path} is not in an App or Stage")
            path = self._template_paths[stack] = Path(stage.outdir) / stack.template_file
        if not path.is_file():
            raise TemplateNotSynthesized(f"{path} does not exist: apply HyperPodChecks as a validation "
                                         "plugin (Validations.of(app).add_plugins) or synthesize first")
        key = f"{path}@{path.stat().st_mtime_ns}"  # a later synth into the same outdir is read again
        if key not in self._outcomes:
            self._outcomes[key] = _TemplateOutcomes.of(json.loads(path.read_text()))
        return self._outcomes[key]
