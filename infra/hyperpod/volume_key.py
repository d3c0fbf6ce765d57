"""The customer managed KMS key of the HyperPod instance groups' EBS volumes (root and /opt/sagemaker)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class HyperPodVolumeKey(Construct):
    """A symmetric KMS key, rotated yearly, that encrypts the EBS volumes of the instance groups using it.

    AWS's page "Customer managed AWS KMS key encryption for SageMaker HyperPod"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html) asks for ``kms:CreateGrant`` for the
    execution role, which HyperPod uses to scale groups out, add nodes and patch software; the key policy gives it
    to ``execution_role`` (with the account's IAM statement CDK writes into every key policy). The same page says
    the key policy must not be scoped down with encryption-context conditions (HyperPod passes none), so it has
    none. Unverified: that page's complete list of key-policy actions could not be read here; only
    ``kms:CreateGrant`` is granted, and a first deploy with a customer managed key is the check.

    A group's key cannot change once the group exists (same page): the replacement guard records it per group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        execution_role: iam.IRole,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
            description=f"EBS volumes of the SageMaker HyperPod cluster {cluster_name}",
        )
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="HyperPodExecutionRoleCreatesGrants",
            principals=[execution_role],
            actions=["kms:CreateGrant"],
            resources=["*"],
        ))
        self.key_id = self.key.key_id
