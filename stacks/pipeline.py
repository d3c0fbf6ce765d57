"""The delivery pipeline of a fleet: one CDK Pipelines ``CodePipeline``, one stage per cluster in the fleet's order.

Each stage is the app itself, ``build_app`` on that cluster's config in a ``Stage`` pinned to the cluster's
account and region. Around its deploy:

- before: a CodeBuild step runs ``hpctl guard`` (preflight's replacement check, synth's engine
  ``infra.guards.replacement.findings``) against the templates CloudFormation holds for that environment's stacks
  (``cloudformation:GetTemplate``), under the target account's CDK lookup role (``infra.facts.names``: read-only,
  made by ``cdk bootstrap``, assumable by the pipeline's account after ``cdk bootstrap --trust``). A refusal fails the step, and the
  stage's deploy does not start.
- then, when the cluster's config acknowledges something the guard would otherwise refuse (a group removal, a
  cluster replacement, autoscaling turned off), a manual approval that names each acknowledgement. The pipeline's
  shape is fixed at synth: the approval is there because the config says so, and the guard step runs first.
- after: a CodeBuild step runs the whole read-only ``hpctl preflight`` under the same role. Its replacement check
  now compares the deployed templates with the synthesized ones: it passes only when what CloudFormation holds is
  what this run synthesized, which is the deployed state the next run's guard reads. No lock file is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from aws_cdk import Environment, Stack, Stage
from aws_cdk import aws_codecommit as codecommit
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import pipelines
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
    if hyperpod.allow_cluster_replacement:
        needed.append("hyperpod.allow_cluster_replacement: a replacement of the HyperPod cluster (a new cluster, "
                      "every node terminated) is accepted")
    if hyperpod.autoscaling.acknowledge_disable:
        needed.append("hyperpod.autoscaling.acknowledge_disable: autoscaling is turned off")
    return needed


class ClusterStage(Stage):
    """One cluster of the fleet: the app's stacks, built by the app's own builder."""

    def __init__(self, scope: Construct, stage: FleetStage) -> None:
        super().__init__(scope, stage.cluster.name,
                         env=Environment(account=stage.cluster.account, region=stage.cluster.region))
        self.app = build_app(self, stage.config, nag=False)


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
            f"printf '[profile {TARGET_PROFILE}]\\nrole_arn = {role}\\ncredential_source = EcsContainer\\n' >> ~/.aws/config",
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
_CDK_WILDCARDS = (
    (r"Action::s3:(GetObject|GetBucket|List|DeleteObject|Abort|PutObject)\*",
     "aws-cdk-lib's bucket grant (grantRead/grantReadWrite) on the pipeline's artifact or replication bucket only"),
    (r"Action::kms:(GenerateDataKey|ReEncrypt)\*",
     "aws-cdk-lib's key grant for the artifact buckets' encryption (cross_account_keys)"),
    (r"Resource::<PipelineArtifactsBucket[A-Z0-9]+\.Arn>/\*", "the objects of the pipeline's own artifact bucket"),
    # The replication bucket's physical name is <pipeline stack>-support-<region and hash> (aws-cdk-lib names it).
    (r"Resource::arn:<AWS::Partition>:s3:::[a-z0-9-]+-support-[a-z0-9]+/\*",
     "the objects of the cross-region support stack's replication bucket (artifacts for a stage in another region)"),
    (r"Resource::arn:<AWS::Partition>:logs:[a-z0-9-]+:\d{12}:log-group:/aws/codebuild/<[A-Za-z0-9]+>:\*",
     "the log streams of this CodeBuild project's own log group"),
    (r"Resource::arn:<AWS::Partition>:codebuild:[a-z0-9-]+:\d{12}:report-group/<[A-Za-z0-9]+>-\*",
     "the test report groups of this CodeBuild project only"),
    (r"Resource::arn:<AWS::Partition>:logs:[a-z0-9-]+:\d{12}:log-group:/aws/codebuild/\*",
     "the log groups of the asset-publishing CodeBuild projects, which CDK Pipelines names at synth per asset"),
    (r"Resource::arn:<AWS::Partition>:codebuild:[a-z0-9-]+:\d{12}:report-group/\*",
     "the report groups of the asset-publishing CodeBuild projects, which CDK Pipelines names at synth per asset"),
    (r"Resource::arn:\*:iam::\d{12}:role/\*",
     "only roles tagged aws-cdk:bootstrap-role deploy, file-publishing or image-publishing (the statement's "
     "iam:ResourceTag condition): the CDK bootstrap roles the pipeline deploys and publishes through"),
    (r"Resource::\*",
     "actions aws-cdk-lib's CodePipeline grants on '*': cloudformation:DescribeStacks and s3:ListBucket for the "
     "self-mutation's cdk deploy, codebuild:StartBuild/BatchGetBuilds/StopBuild for the asset actions, and KMS use "
     "of the replication buckets' keys in other regions, whose ARNs the pipeline stack cannot reference"),
)


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


def _acknowledge_cdk_pipelines(stacks: list[Stack]) -> None:
    for policy in _policies(stacks):
        for finding in sorted(set(_wildcards(policy))):
            reason = next((why for pattern, why in _CDK_WILDCARDS if re.fullmatch(pattern, finding)), None)
            if reason is not None:
                acknowledge(policy, f"AwsSolutions-IAM5[{finding}]", reason)
    for stack in stacks:
        for child in stack.node.find_all():
            if isinstance(child, s3.CfnBucket):
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
    _acknowledge_cdk_pipelines([stack, *_support_stacks(scope)])
    return FleetPipeline(stack=stack, pipeline=pipeline, stages=stages)
