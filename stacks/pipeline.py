"""The delivery pipeline of a fleet: one CDK Pipelines ``CodePipeline``, one stage per cluster in the fleet's order.

Each stage is the app itself, ``build_app`` on that cluster's config in a ``Stage`` pinned to the cluster's
account and region. Around its deploy:

- before: a CodeBuild step runs ``hpctl guard`` (preflight's replacement check, synth's engine
  ``infra.guards.replacement.findings``) against the templates CloudFormation holds for that environment's stacks
  (``cloudformation:GetTemplate``), under the target account's CDK lookup role (``infra.facts.names``: read-only,
  made by ``cdk bootstrap``, assumable by the pipeline's account after ``cdk bootstrap --trust``). A refusal fails
  the step, and the stage's deploy does not start.
- then, when the cluster's config acknowledges something the guard would otherwise refuse (a group removal, a
  replacement listed in acknowledge_replacement, autoscaling turned off), a manual approval that names each
  acknowledgement. The pipeline's
  shape is fixed at synth: the approval is there because the config says so, and the guard step runs first.
- after: a CodeBuild step runs the whole read-only ``hpctl preflight`` under the same role. Its replacement check
  now compares the deployed templates with the synthesized ones: it passes only when what CloudFormation holds is
  what this run synthesized, which is the deployed state the next run's guard reads. No lock file is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from aws_cdk import App, CfnResource, Environment, Names, Stack, Stage, pipelines
from aws_cdk import aws_codecommit as codecommit
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from infra.config import AppConfig
from infra.config.fleet import Fleet, FleetStage
from infra.constructs.common import acknowledge
from infra.facts.intrinsics import render
from stacks.app_builder import build_app

# Where `make pipeline` writes the pipeline's cloud assembly; the synth step's output.
PIPELINE_OUT = "cdk.out.pipeline"
# The profile the guard and preflight steps read the target account with (botocore: a profile with role_arn and
# credential_source EcsContainer assumes the role with the container's credentials, botocore/credentials.py
# CanonicalNameCredentialSourcer; CodeBuild gives its role's credentials through the container credentials endpoint,
# unverified against CodeBuild's documentation here).
TARGET_PROFILE = "fleet-target"


def approvals(config: AppConfig) -> list[str]:
    """What the config acknowledges that the guard would refuse without it: each needs a person's approval."""
    hyperpod = config.hyperpod
    needed = []
    if hyperpod.acknowledge_group_removal:
        needed.append(f"hyperpod.acknowledge_group_removal {', '.join(hyperpod.acknowledge_group_removal)}: "
                      "the nodes of these groups are terminated")
    for acknowledgement in config.acknowledge_replacement:
        needed.append(f"acknowledge_replacement {acknowledgement.resource} {acknowledgement.field}: the resource is "
                      "replaced" + (" and its data deleted" if acknowledgement.deletes_data else ""))
    if hyperpod.autoscaling.acknowledge_disable:
        needed.append("hyperpod.autoscaling.acknowledge_disable: autoscaling is turned off")
    return needed


class ClusterStage(Stage):
    """One cluster of the fleet: the app's stacks, built by the app's own builder, with the app's logical IDs."""

    def __init__(self, scope: Construct, stage: FleetStage) -> None:
        super().__init__(scope, stage.cluster.name,
                         env=Environment(account=stage.cluster.account, region=stage.cluster.region))
        self.app = build_app(self, stage.config, nag=False)
        _keep_the_apps_rule_ids(self)


# aws-cdk-lib names the rule of a security group that admits another group (here the EFA group admitting itself)
# after the peer's unique ID, ``from <unique ID>:<ports>`` (aws-ec2 SecurityGroup.addIngressRule), and a unique ID
# covers the whole construct path, the stage's name included. In a stage those rules would get logical IDs the
# app's `cdk deploy` never gave them, and CloudFormation would create each rule anew beside the deployed one
# (refused: the rule exists) when a cluster deployed from a laptop moves into the pipeline or a stage is renamed.
_PEER_RULE = re.compile(r"^(from|to) (?P<peer>[A-Za-z0-9]+):(?P<rest>.*)$")


def _keep_the_apps_rule_ids(stage: Stage) -> None:
    """Give each such rule the logical ID the app gives it: the same path without the stage, in a mirror app that
    is never synthesized (unique and logical IDs depend only on the construct path)."""
    groups = {Names.unique_id(c): c for c in stage.node.find_all() if isinstance(c, ec2.SecurityGroup)}
    mirror = App()

    def mirrored(construct: IConstruct) -> Construct:
        node: Construct = mirror
        for scope in construct.node.scopes[2:]:  # below the App and the stage: the stack, then the constructs
            existing = node.node.try_find_child(scope.node.id)
            node = existing if isinstance(existing, Construct) else (
                Stack(node, scope.node.id) if isinstance(scope, Stack) else Construct(node, scope.node.id))
        return node

    for rule in stage.node.find_all():
        if not isinstance(rule, ec2.CfnSecurityGroupIngress | ec2.CfnSecurityGroupEgress):
            continue
        match = _PEER_RULE.match(rule.node.id)
        if match is None or match["peer"] not in groups:
            continue
        peer = Names.unique_id(mirrored(groups[match["peer"]]))
        twin = CfnResource(mirrored(rule.node.scope), f"{match[1]} {peer}:{match['rest']}",  # type: ignore[arg-type]
                           type=rule.cfn_resource_type)
        rule.override_logical_id(Stack.of(twin).get_logical_id(twin))


@dataclass(frozen=True)
class FleetPipeline:
    stack: Stack
    pipeline: pipelines.CodePipeline
    stages: list[ClusterStage]


def _source(scope: Construct, fleet: Fleet) -> pipelines.CodePipelineSource:
    chosen = fleet.pipeline.source
    if chosen.connection is not None:
        return pipelines.CodePipelineSource.connection(
            chosen.connection.repository, chosen.connection.branch, connection_arn=chosen.connection.connection_arn)
    if chosen.codecommit is not None:
        repository = codecommit.Repository.from_repository_name(scope, "SourceRepository", chosen.codecommit.repository)
        return pipelines.CodePipelineSource.code_commit(repository, chosen.codecommit.branch)
    assert chosen.s3 is not None  # PipelineSource refuses anything but exactly one
    bucket = s3.Bucket.from_bucket_name(scope, "SourceBucket", chosen.s3.bucket)
    return pipelines.CodePipelineSource.s3(bucket, chosen.s3.key)


# The guard and preflight steps install the Python package only (no Node.js: hpctl never imports aws-cdk-lib).
INSTALL = ["make .venv/.python-installed"]


def _target_step(step_id: str, stage: FleetStage, source: pipelines.CodePipelineSource,
                 synth: pipelines.ShellStep, command: str) -> pipelines.CodeBuildStep:
    """A CodeBuild step that runs an hpctl command against the stage's environment under its lookup role."""
    role = stage.lookup_role_arn
    return pipelines.CodeBuildStep(
        step_id,
        input=source,
        additional_inputs={PIPELINE_OUT: synth},
        install_commands=INSTALL,
        commands=[
            "mkdir -p ~/.aws",
            f"printf '[profile {TARGET_PROFILE}]\\nrole_arn = {role}\\ncredential_source = EcsContainer\\n'"
            " >> ~/.aws/config",
            f".venv/bin/python -m hpctl {command} --config {stage.config_path} --region {stage.cluster.region} "
            f"--profile {TARGET_PROFILE} --cdk-out {PIPELINE_OUT}/{stage.assembly}",
        ],
        # sts:AssumeRole on the one role: the action the lookup role's trust policy allows its trusted accounts
        # (bootstrap-template.yaml above); the IAM action of STS's AssumeRole operation (botocore sts/2011-06-15).
        role_policy_statements=[iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[role])],
    )


# The wildcards of the policies aws-cdk-lib's CodePipeline writes for its own roles (none is configurable there):
# each finding that matches one of these is acknowledged on its own policy with the reason; any other wildcard,
# one a later aws-cdk-lib adds or one of ours, is not, and fails the synth.
# The partition as a token, or literal (with a feature flag of cdk.json).
_ARN = r"Resource::arn:(<AWS::Partition>|aws[a-z-]*)"
_CDK_WILDCARDS = (
    (r"Action::s3:(GetObject|GetBucket|List|DeleteObject|Abort|PutObject)\*",
     "aws-cdk-lib's bucket grant (grantRead/grantReadWrite) on the pipeline's artifact or replication bucket only"),
    (r"Action::kms:(GenerateDataKey|ReEncrypt)\*",
     "aws-cdk-lib's key grant for the artifact buckets' encryption (cross_account_keys)"),
    (r"Resource::<PipelineArtifactsBucket[A-Z0-9]+\.Arn>/\*", "the objects of the pipeline's own artifact bucket"),
    # The replication bucket's physical name is <pipeline stack>-support-<region and hash> (aws-cdk-lib names it).
    (_ARN + r":s3:::[a-z0-9-]+-support-[a-z0-9]+/\*",
     "the objects of the cross-region support stack's replication bucket (artifacts for a stage in another region)"),
    (_ARN + r":logs:[a-z0-9-]+:\d{12}:log-group:/aws/codebuild/<[A-Za-z0-9]+>:\*",
     "the log streams of this CodeBuild project's own log group"),
    (_ARN + r":codebuild:[a-z0-9-]+:\d{12}:report-group/<[A-Za-z0-9]+>-\*",
     "the test report groups of this CodeBuild project only"),
    (_ARN + r":logs:[a-z0-9-]+:\d{12}:log-group:/aws/codebuild/\*",
     "the log groups of the asset-publishing CodeBuild projects, which CDK Pipelines names at synth per asset"),
    (_ARN + r":codebuild:[a-z0-9-]+:\d{12}:report-group/\*",
     "the report groups of the asset-publishing CodeBuild projects, which CDK Pipelines names at synth per asset"),
    (r"Resource::arn:\*:iam::\d{12}:role/\*",
     "only roles tagged aws-cdk:bootstrap-role deploy, file-publishing or image-publishing (the statement's "
     "iam:ResourceTag condition): the CDK bootstrap roles the pipeline deploys and publishes through"),
    (r"Resource::\*",
     "actions aws-cdk-lib's CodePipeline grants on '*': cloudformation:DescribeStacks and s3:ListBucket for the "
     "self-mutation's cdk deploy, codebuild:StartBuild/BatchGetBuilds/StopBuild for the asset actions, and KMS use "
     "of the replication buckets' keys in other regions, whose ARNs the pipeline stack cannot reference"),
)
# The actions a statement on Resource '*' may hold for the finding above to be acknowledged: a '*' statement with
# any other action (a later aws-cdk-lib's, or ours) stays a finding and fails the synth.
_STAR_RESOURCE_ACTIONS = re.compile(
    r"cloudformation:DescribeStacks|s3:ListBucket|codebuild:(StartBuild|BatchGetBuilds|StopBuild)"
    r"|kms:(Decrypt|DescribeKey|Encrypt|ReEncrypt\*|GenerateDataKey\*)")


def _star_resource_actions(policy: iam.CfnPolicy) -> set[str]:
    """The actions of ``policy``'s statements whose Resource is '*'."""
    document = Stack.of(policy).resolve(policy.policy_document)
    actions: set[str] = set()
    for statement in document.get("Statement", []):
        resources = statement.get("Resource", [])
        if "*" in (resources if isinstance(resources, list) else [resources]):
            listed = statement.get("Action", [])
            actions.update(listed if isinstance(listed, list) else [listed])
    return actions


def _policies(stacks: list[Stack]) -> Iterator[iam.CfnPolicy]:
    for stack in stacks:
        for child in stack.node.find_all():
            if isinstance(child, iam.CfnPolicy):
                yield child


def _wildcards(policy: iam.CfnPolicy) -> Iterator[str]:
    """The IAM5 finding IDs cdk-nag gives the wildcards of ``policy``'s statements (Action:: and Resource::)."""
    document = Stack.of(policy).resolve(policy.policy_document)
    for statement in document.get("Statement", []):
        for kind, field in (("Action", "Action"), ("Resource", "Resource")):
            values = statement.get(field, [])
            for value in values if isinstance(values, list) else [values]:
                text = render(value)
                if "*" in text:
                    yield f"{kind}::{text}"


def _harden_cdk_pipelines(stacks: list[Stack]) -> None:
    """Acknowledge the nag findings of what aws-cdk-lib's CodePipeline writes (each on its own resource), and
    version its buckets."""
    for policy in _policies(stacks):
        for finding in sorted(set(_wildcards(policy))):
            reason = next((why for pattern, why in _CDK_WILDCARDS if re.fullmatch(pattern, finding)), None)
            if finding == "Resource::*" and not all(_STAR_RESOURCE_ACTIONS.fullmatch(a)
                                                    for a in _star_resource_actions(policy)):
                reason = None
            if reason is not None:
                acknowledge(policy, f"AwsSolutions-IAM5[{finding}]", reason)
    for stack in stacks:
        for child in stack.node.find_all():
            if isinstance(child, s3.CfnBucket):
                # Versioned (checkov CKV_AWS_21): an artifact overwritten by a later run stays recoverable.
                child.versioning_configuration = s3.CfnBucket.VersioningConfigurationProperty(status="Enabled")
                acknowledge(child, "AwsSolutions-S1",
                            "holds only pipeline artifacts, written and read by the pipeline's own roles (the "
                            "bucket policy CDK Pipelines writes); CloudTrail records their API calls")


def _support_stacks(scope: Construct) -> list[Stack]:
    """The cross-region support stacks aws-cdk-lib's CodePipeline adds beside the pipeline stack (one per other
    region a stage deploys to: ``cross-region-stack-<account>:<region>``)."""
    return [child for child in scope.node.children
            if isinstance(child, Stack) and child.node.id.startswith("cross-region-stack-")]


def build_pipeline(scope: Construct, fleet: Fleet, fleet_file: str) -> FleetPipeline:
    """The pipeline stack of ``fleet`` (read from ``fleet_file``, a path relative to the repository's root)."""
    settings = fleet.pipeline
    stack = Stack(scope, settings.name, stack_name=settings.name,
                  env=Environment(account=settings.account, region=settings.region),
                  description="HyperPod on EKS: the fleet's delivery pipeline (CDK Pipelines)")
    source = _source(stack, fleet)
    synth = pipelines.ShellStep("Synth", input=source, commands=[f"make pipeline FLEET={fleet_file}"],
                                primary_output_directory=PIPELINE_OUT)
    pipeline = pipelines.CodePipeline(
        stack, "Pipeline", pipeline_name=settings.name, synth=synth,
        # Encrypted artifact buckets are what a cross-account deploy needs (cross_account_keys, aws-cdk-lib pipelines).
        cross_account_keys=True, enable_key_rotation=True,
    )
    stages = []
    for stage in fleet.stages:
        cluster_stage = ClusterStage(scope, stage)
        if cluster_stage.artifact_id != stage.assembly:  # where the steps look for its templates
            raise AssertionError(f"stage {cluster_stage.artifact_id} is not at {stage.assembly}")
        name = stage.cluster.name
        guard = _target_step(f"Guard-{name}", stage, source, synth, "guard")
        pre: list[pipelines.Step] = [guard]
        needed = approvals(stage.config)
        if needed:
            approval = pipelines.ManualApprovalStep(
                f"Approve-{name}", comment=f"{name} ({stage.cluster.account} {stage.cluster.region}): "
                                           + "; ".join(needed))
            approval.add_step_dependency(guard)
            pre.append(approval)
        post = _target_step(f"Preflight-{name}", stage, source, synth, "preflight")
        pipeline.add_stage(cluster_stage, pre=pre, post=[post])
        stages.append(cluster_stage)
    pipeline.build_pipeline()  # the CodePipeline, its roles and the support stacks exist from here
    _harden_cdk_pipelines([stack, *_support_stacks(scope)])
    return FleetPipeline(stack=stack, pipeline=pipeline, stages=stages)
