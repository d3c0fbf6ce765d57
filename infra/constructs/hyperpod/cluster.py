"""The AWS::SageMaker::Cluster itself: instance groups joined to the EKS cluster, resilience features on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from aws_cdk import CfnOutput, CfnTag, Fn
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IDependable

from infra.config import SAGEMAKER_TAG_KEY, InstanceGroupConfig, instance_groups_have_subnets
from infra.errors import ConfigError


class HyperPodCluster(Construct):
    """A SageMaker HyperPod cluster orchestrated by an EKS cluster.

    ``instance_groups`` are ``InstanceGroupConfig`` values: the validated group struct the config file uses
    too (build one in code with keyword arguments), so the group fields and their checks exist once.
    Every instance group becomes a ``ClusterInstanceGroup`` with its type, count, threads per
    core, one EBS volume (mounted at /opt/sagemaker), deep health checks, optional training plan,
    Kubernetes labels and taints, and Spot capacity (``CapacityRequirements``) and ``MinInstanceCount`` when
    the group asks for them, as well as a custom image (``ImageId``), a scheduled rolling software update
    (``ScheduledUpdateConfig``) and automatic patching (``AutoPatchConfig``). A group whose
    ``volume_encryption`` is customer_managed has its root and
    /opt/sagemaker volumes encrypted with ``volume_kms_key_id`` (``HyperPodVolumeKey``); the others use AWS's
    key. ``VpcConfig`` lists the HyperPod subnets and the EFA security group; when there is more than one
    HyperPod subnet each group is pinned to its AZ's subnet with ``OverrideVpcConfig``. Node recovery
    (Automatic by default), node provisioning mode (Continuous by default) and managed tiered checkpointing
    (``tiered_checkpointing_memory_percent``, the share of each node's memory; None writes no
    ``TieredStorageConfig``) are props. With ``autoscaling_role_arn`` (see ``HyperPodAutoscalingRole``) the
    cluster's Karpenter autoscaling is enabled with that role as ``ClusterRole``. ``depends_on`` (the
    dependencies chart, the uploaded lifecycle scripts) is made an explicit dependency of the cluster.

    The construct ID of the L1 resource never changes with config, and neither do create-only
    properties for routine changes (counts, adding or removing groups): see ``infra.guards.replacement``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        hyperpod_cluster_name: str,
        instance_groups: Sequence[InstanceGroupConfig],
        eks_cluster_arn: str,
        execution_role_arn: str,
        subnet_ids_by_az: Mapping[str, str],
        security_group_ids: Sequence[str],
        lifecycle_s3_uri: str,
        on_create_script: str = "on_create.sh",
        node_recovery: Literal["Automatic", "None"] = "Automatic",
        node_provisioning_mode: Literal["Continuous"] | None = "Continuous",
        volume_kms_key_id: str | None = None,
        tiered_checkpointing_memory_percent: int | None = None,
        autoscaling_role_arn: str | None = None,
        depends_on: Sequence[IDependable] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        if not instance_groups:
            raise ConfigError("instance_groups", [], "a HyperPod cluster needs at least one instance group")
        instance_groups_have_subnets(instance_groups, subnet_ids_by_az)
        keyed = [g.name for g in instance_groups if g.volume_encryption == "customer_managed"]
        if keyed and volume_kms_key_id is None:
            raise ConfigError("volume_kms_key_id", None, f"groups {keyed} ask for a customer managed volume key")
        pin_groups = len(subnet_ids_by_az) > 1
        self.cfn_cluster = sagemaker.CfnCluster(
            self,
            "Cluster",
            cluster_name=hyperpod_cluster_name,
            # AWS's setups tag every cluster SageMaker=true, and AWS managed policies condition on it: the
            # training operator's AmazonSageMakerHyperPodTrainingOperatorAccess allows DescribeClusterNode only on
            # clusters with aws:ResourceTag/SageMaker = true ("tag your HyperPod cluster with the key-value pair
            # SageMaker:true. Otherwise, the installation will fail",
            # https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator-install.html;
            # awslabs/awsome-distributed-training@0edaf15:.../modules/hyperpod_cluster/main.tf, tags).
            tags=[CfnTag(key=SAGEMAKER_TAG_KEY, value="true")],
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=eks_cluster_arn)
            ),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=list(security_group_ids), subnets=list(subnet_ids_by_az.values())
            ),
            node_recovery=node_recovery,
            node_provisioning_mode=node_provisioning_mode,
            tiered_storage_config=None if tiered_checkpointing_memory_percent is None
            else sagemaker.CfnCluster.TieredStorageConfigProperty(
                mode="Enable", instance_memory_allocation_percentage=tiered_checkpointing_memory_percent),
            # Names and values: AWS::SageMaker::Cluster ClusterAutoScalingConfig (cfn-lint's schema) and botocore's
            # CreateCluster; neither is create-only, so turning autoscaling on updates the cluster in place.
            auto_scaling=sagemaker.CfnCluster.ClusterAutoScalingConfigProperty(
                mode="Enable", auto_scaler_type="Karpenter") if autoscaling_role_arn else None,
            cluster_role=autoscaling_role_arn,
            instance_groups=[
                self._group(group, execution_role_arn, lifecycle_s3_uri, on_create_script,
                            subnet_ids_by_az[group.az_id] if pin_groups else None, security_group_ids,
                            volume_kms_key_id if group.volume_encryption == "customer_managed" else None)
                for group in instance_groups
            ],
        )
        for dependency in depends_on:
            self.cfn_cluster.node.add_dependency(dependency)

        self.hyperpod_cluster_arn = self.cfn_cluster.attr_cluster_arn
        self.hyperpod_cluster_name = hyperpod_cluster_name
        # The cluster id is the last segment of the ARN: arn:...:cluster/<id>.
        self.hyperpod_cluster_id = Fn.select(1, Fn.split("/", self.hyperpod_cluster_arn))
        self.lifecycle_log_group = Fn.join("", ["/aws/sagemaker/Clusters/", hyperpod_cluster_name, "/",
                                                self.hyperpod_cluster_id])
        CfnOutput(self, "ClusterNameOutput", value=hyperpod_cluster_name, description="HyperPod cluster name")
        CfnOutput(self, "ClusterArnOutput", value=self.hyperpod_cluster_arn, description="HyperPod cluster ARN")
        CfnOutput(self, "ClusterIdOutput", value=self.hyperpod_cluster_id, description="HyperPod cluster id")
        CfnOutput(self, "LifecycleLogGroup", value=self.lifecycle_log_group,
                  description="CloudWatch log group of the lifecycle scripts (streams LifeCycleConfig/<group>/<id>)")
        CfnOutput(self, "SsmTargetFormat",
                  value=Fn.join("", ["sagemaker-cluster:", self.hyperpod_cluster_id,
                                     "_<instance-group>-<instance-id>"]),
                  description="SSM target of a node: aws ssm start-session --target <this, filled in>")

    @staticmethod
    def _group(
        group: InstanceGroupConfig,
        execution_role_arn: str,
        lifecycle_s3_uri: str,
        on_create: str,
        pinned_subnet: str | None,
        security_group_ids: Sequence[str],
        volume_key: str | None,
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        kubernetes = None
        if group.labels or group.taints:
            kubernetes = sagemaker.CfnCluster.ClusterKubernetesConfigProperty(
                labels=dict(group.labels) or None,
                taints=[
                    sagemaker.CfnCluster.ClusterKubernetesTaintProperty(key=t.key, value=t.value, effect=t.effect)
                    for t in group.taints
                ] or None,
            )
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            # A flexible group names its types in InstanceRequirements instead (the two are mutually exclusive).
            instance_type=None if group.fallback_instance_types else group.instance_type,
            instance_requirements=sagemaker.CfnCluster.InstanceRequirementsProperty(
                instance_types=list(group.instance_types)) if group.fallback_instance_types else None,
            instance_count=group.instance_count,
            execution_role=execution_role_arn,
            threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=lifecycle_s3_uri, on_create=on_create
            ),
            instance_storage_configs=[
                sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                        volume_size_in_gb=group.ebs_volume_gb, volume_kms_key_id=volume_key
                    )
                ),
                # RootVolume true: the same key for the root volume, whose size HyperPod decides (botocore's
                # ClusterEbsVolumeConfig.RootVolume).
                *([sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                    ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                        root_volume=True, volume_kms_key_id=volume_key))] if volume_key else []),
            ],
            capacity_requirements=sagemaker.CfnCluster.ClusterCapacityRequirementsProperty(spot={})
            if group.capacity == "spot" else None,
            min_instance_count=group.min_instance_count,
            on_start_deep_health_checks=list(group.deep_health_checks) or None,
            training_plan_arn=group.training_plan_arn,
            override_vpc_config=(
                sagemaker.CfnCluster.VpcConfigProperty(
                    security_group_ids=list(security_group_ids), subnets=[pinned_subnet]
                )
                if pinned_subnet
                else None
            ),
            kubernetes_config=kubernetes,
            # Image, scheduled rolling updates, automatic patching: absent unless the group sets them.
            image_id=group.image_id,
            scheduled_update_config=_scheduled_update(group),
            auto_patch_config=(sagemaker.CfnCluster.AutoPatchConfigProperty(patching_strategy=group.auto_patch)
                               if group.auto_patch else None),
        )


def _scheduled_update(group: InstanceGroupConfig) -> sagemaker.CfnCluster.ScheduledUpdateConfigProperty | None:
    """The group's ScheduledUpdateConfig, from the same DeploymentConfig ``hpctl update-software`` sends."""
    scheduled = group.rolling_update.scheduled_update_config() if group.rolling_update else None
    if scheduled is None:
        return None
    deployment = scheduled["DeploymentConfig"]
    batch = deployment["RollingUpdatePolicy"]["MaximumBatchSize"]
    return sagemaker.CfnCluster.ScheduledUpdateConfigProperty(
        schedule_expression=scheduled["ScheduleExpression"],
        deployment_config=sagemaker.CfnCluster.DeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnCluster.RollingUpdatePolicyProperty(
                maximum_batch_size=sagemaker.CfnCluster.CapacitySizeConfigProperty(
                    type=batch["Type"], value=batch["Value"])
            ),
            wait_interval_in_seconds=deployment["WaitIntervalInSeconds"],
            auto_rollback_configuration=[
                sagemaker.CfnCluster.AlarmDetailsProperty(alarm_name=a["AlarmName"])
                for a in deployment.get("AutoRollbackConfiguration", [])
            ] or None,
        ),
    )
