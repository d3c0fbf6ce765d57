"""The customer managed KMS key of the HyperPod instance groups' EBS volumes (root and /opt/sagemaker)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


class HyperPodVolumeKey(Construct):
    """A symmetric KMS key, rotated yearly, that encrypts the EBS volumes of the instance groups using it.

    AWS's page "Customer managed AWS KMS key encryption for SageMaker HyperPod"
    (https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html, read in the copy
    c2hans/aws-docs@63cf41d:docs/sagemaker/latest/dg/smcluster-cmk.md) gives the key policy: beside the account's
    statement (which CDK writes into every key policy), ``kms:CreateGrant`` for the execution role with
    ``kms:ViaService`` = ``sagemaker.<region>.amazonaws.com`` and ``kms:GrantIsForAWSResource`` true, and
    ``kms:DescribeKey`` for the same role with the same ``kms:ViaService``. HyperPod uses the grants to scale
    groups out, add nodes and patch software. The key policy names the role itself, which is enough for KMS when
    key and role are in one account ("You can use the key policy alone to control access",
    https://docs.aws.amazon.com/kms/latest/developerguide/control-access.html). The page also asks for the two
    actions in the execution role's own policy ("Ensure that the AWS IAM execution role ... has the following
    permissions"), so ``execution_role_statement`` holds them for this key; the caller adds it to the role's
    policy that the cluster depends on (the app does, in ``infra.composition``). The same page says the key
    policy must not be scoped down with encryption-context conditions (HyperPod passes none): it has none.

    A group's key cannot change once the group exists (same page): the replacement guard records it per group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        hyperpod_cluster_name: str,
        execution_role: iam.IRole,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
            description=f"EBS volumes of the SageMaker HyperPod cluster {hyperpod_cluster_name}",
        )
        # In a key policy "*" is this key. The two statements as AWS's page writes them: the Bool condition exists
        # only in grant requests, so DescribeKey has its own statement without it.
        via_sagemaker = {"kms:ViaService": f"sagemaker.{Stack.of(self).region}.amazonaws.com"}
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="HyperPodExecutionRoleCreatesGrants",
            principals=[execution_role],
            actions=["kms:CreateGrant"],
            resources=["*"],
            conditions={"StringEquals": via_sagemaker, "Bool": {"kms:GrantIsForAWSResource": "true"}},
        ))
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="HyperPodExecutionRoleDescribesKey",
            principals=[execution_role],
            actions=["kms:DescribeKey"],
            resources=["*"],
            conditions={"StringEquals": via_sagemaker},
        ))
        # AWS's page gives Resource "*" in the role's policy; this key is the only one the role needs.
        self.execution_role_statement = iam.PolicyStatement(
            sid="HyperPodVolumeKey",
            actions=["kms:CreateGrant", "kms:DescribeKey"],
            resources=[self.key.key_arn],
        )
        self.key_id = self.key.key_id
