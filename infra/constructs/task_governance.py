"""HyperPod task governance: the EKS add-on, the cluster's scheduler policy and a compute quota per team."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnResource
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from infra.config import PriorityClass, TeamConfig, compute_quota_name
from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge
from infra.constructs.helm_release import HelmInstaller
from infra.constructs.readiness import Readiness
from infra.facts.addons import TASK_GOVERNANCE

# aws-cdk-lib 2.275 has no L1 class for it (CfnComputeQuota arrived in 2.276.0 per its API reference,
# https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_sagemaker.CfnComputeQuota.ResourceSharingConfigProperty.md).
COMPUTE_QUOTA_TYPE = "AWS::SageMaker::ComputeQuota"


# aws-cdk-lib's template validation (its bundled @aws/cloudformation-validate 1.12.1) knows neither type; cfn-lint's
# schemas do, and tests/stacks/test_task_governance.py checks the properties against botocore's SageMaker model.
_UNKNOWN_TO_CDK_VALIDATE = ("aws-cdk-lib 2.275's bundled CloudFormation validator predates this SageMaker resource "
                            "type; cfn-lint's schema has it and the tests check it against botocore's model")


def _enabled(on: bool) -> str:
    return "Enabled" if on else "Disabled"


class HyperPodTaskGovernance(Construct):
    """The ``amazon-sagemaker-hyperpod-taskgovernance`` add-on (Kueue underneath), an
    ``AWS::SageMaker::ClusterSchedulerConfig`` named ``name`` for the HyperPod cluster, and an
    ``AWS::SageMaker::ComputeQuota`` per team, named ``<name>-<team>``; HyperPod task governance puts each
    team's tasks in the namespace ``hyperpod-ns-<team>``.

    The add-on needs running nodes: create this after the HyperPod cluster has one (``Readiness``). With
    ``readiness_installer`` the policy and the quotas wait until EKS reports the add-on ACTIVE and Kueue's
    controller is available, as AWS's Terraform module makes its quotas wait for Kueue; without it they wait for
    the add-on resource only.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        eks_cluster_name: str,
        hyperpod_cluster_arn: str,
        name: str,
        teams: Sequence[TeamConfig] = (),
        priority_classes: Sequence[PriorityClass] = (),
        fair_share: bool = True,
        idle_resource_sharing: bool = True,
        addon_version: str | None = None,
        readiness_installer: HelmInstaller | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # No IAM role: AWS's Terraform module installs the add-on without a pod identity association
        # (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
        # 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/task_governance/main.tf).
        # resolve_conflicts OVERWRITE as AWS's module does (resolve_conflicts_on_create/update = "OVERWRITE").
        self.kueue = EksAddon(self, "Addon", addon=TASK_GOVERNANCE, eks_cluster_name=eks_cluster_name,
                              version=addon_version)
        self.addon = self.kueue.addon
        # The policy and the quotas need Kueue's controller: with an installer to check it, after its Deployment is
        # available (AWS's module, task_governance/main.tf's wait_for_kueue_webhook), else after the add-on.
        self.kueue_ready: Readiness | None = (
            self.kueue.wait_until_ready(readiness_installer) if readiness_installer is not None else None)
        self.scheduler_config = sagemaker.CfnClusterSchedulerConfig(
            self, "SchedulerConfig",
            name=name,
            cluster_arn=hyperpod_cluster_arn,
            scheduler_config=sagemaker.CfnClusterSchedulerConfig.SchedulerConfigProperty(
                fair_share=_enabled(fair_share),
                idle_resource_sharing=_enabled(idle_resource_sharing),
                priority_classes=[
                    sagemaker.CfnClusterSchedulerConfig.PriorityClassProperty(name=c.name, weight=c.weight)
                    for c in priority_classes
                ],
            ),
        )
        self.scheduler_config.node.add_dependency(self.kueue_ready or self.addon)
        acknowledge(self.scheduler_config, "F3006", _UNKNOWN_TO_CDK_VALIDATE, pack="CloudFormation-Validate")
        self.quotas: dict[str, CfnResource] = {}
        for team in teams:
            sharing: dict[str, object] = {"Strategy": team.borrowing.strategy}
            if team.borrowing.limit_percent is not None:
                sharing["BorrowLimit"] = team.borrowing.limit_percent
            # The construct ID follows the team's name, not its list position: reordering replaces nothing.
            quota = CfnResource(self, f"Team-{team.name}", type=COMPUTE_QUOTA_TYPE, properties={
                "Name": compute_quota_name(name, team.name),
                "ClusterArn": hyperpod_cluster_arn,
                "ComputeQuotaConfig": {
                    "ComputeQuotaResources": [
                        {"InstanceType": team.quota.instance_type, "Count": team.quota.count},
                    ],
                    "ResourceSharingConfig": sharing,
                    "PreemptTeamTasks": team.preempt_team_tasks,
                },
                "ComputeQuotaTarget": {"TeamName": team.name, "FairShareWeight": team.fair_share_weight},
            })
            quota.node.add_dependency(self.scheduler_config)
            acknowledge(quota, "F3006", _UNKNOWN_TO_CDK_VALIDATE, pack="CloudFormation-Validate")
            self.quotas[team.name] = quota
