"""The customer managed KMS key of every log group the product creates, and the grant limit on every key."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# The actions AWS's page "Encrypt log data in CloudWatch Logs using AWS Key Management Service"
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html, read as
# c2hans/aws-docs@63cf41d6:docs/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.md) gives both the CloudWatch Logs
# service principal (step 2) and the principals that read and write encrypted log data (step 3): kms:Encrypt,
# kms:Decrypt, kms:ReEncrypt*, kms:GenerateDataKey*, kms:Describe*. Here kms:Describe* is written kms:DescribeKey,
# its one action on a key (the other, kms:DescribeCustomKeyStores, acts on no key), and left out of the service
# principal's statement: that statement holds only with the encryption context of a log group, which a DescribeKey
# request does not carry (parliament 1.6.4's IAM data, run by tests/safety/test_iam_parliament.py: "Unknown
# condition kms:EncryptionContext:aws:logs:arn for action kms:DescribeKey"), so it granted nothing there.
CRYPTO_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"]
LOGS_KEY_ACTIONS = [*CRYPTO_ACTIONS, "kms:DescribeKey"]


class LogsKey(Construct):
    """One symmetric KMS key, rotated yearly, that encrypts every CloudWatch Logs log group of the product.

    Its key policy follows AWS's CloudWatch Logs encryption page (``LOGS_KEY_ACTIONS``): beside CDK's account
    statement, the service principal ``logs.<region>.<url suffix>`` may use the key only for log groups of this
    account and region (``ArnLike`` on ``kms:EncryptionContext:aws:logs:arn`` = ``arn:<partition>:logs:<region>:
    <account>:*``, the page's "limits the use of the AWS KMS key to the specified account" form), and principals of
    this account may use it only through CloudWatch Logs in this region (``kms:ViaService`` =
    ``logs.<region>.<url suffix>``, as the page's step 3 asks for the roles that write or read encrypted log data:
    the Lambda functions' roles, the flow logs' role, the CloudWatch agent, operators reading logs). The page's
    step 3 names roles one by one; here every principal of the account (``kms:CallerAccount``) is let through
    CloudWatch Logs only, so a role that writes logs needs no statement of its own.

    The log groups get the key from ``infra.composition`` (every ``AWS::Logs::LogGroup`` it builds). The key takes
    ``removal_policy``, RETAIN unless ``destroy_data_on_delete`` is set, as the log groups do: logs it encrypted
    cannot be read without it (same page: "If you revoke CloudWatch Logs access to an associated key or delete an
    associated KMS key, your encrypted data in CloudWatch Logs can no longer be retrieved").
    """

    def __init__(self, scope: Construct, construct_id: str, *, project: str, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.key = kms.Key(self, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                           description=f"CloudWatch Logs log groups of {project}")
        logs_service = f"logs.{stack.region}.{stack.url_suffix}"
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchLogsOfThisAccount",
            principals=[iam.ServicePrincipal(logs_service)],
            actions=CRYPTO_ACTIONS,
            resources=["*"],
            conditions={"ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:*",
            }},
        ))
        self.key.add_to_resource_policy(iam.PolicyStatement(
            sid="ThisAccountThroughCloudWatchLogs",
            principals=[iam.AnyPrincipal()],
            actions=LOGS_KEY_ACTIONS,
            resources=["*"],
            conditions={"StringEquals": {"kms:CallerAccount": stack.account, "kms:ViaService": logs_service}},
        ))
        # checkov's CKV_AWS_33 flags any Allow to Principal "*"; this one is held to the account and to CloudWatch
        # Logs by its two conditions. Acknowledged on this key alone, in the resource's metadata as checkov reads it.
        cfn_key: kms.CfnKey = self.key.node.default_child  # type: ignore[assignment]
        cfn_key.add_metadata("checkov", {"skip": [{
            "id": "CKV_AWS_33",
            "comment": "The Principal '*' statement holds only with kms:CallerAccount (this account) and "
                       "kms:ViaService (CloudWatch Logs of this region), as AWS's CloudWatch Logs encryption page "
                       "asks for the principals that read or write encrypted log data.",
        }]})
        self.key_arn = self.key.key_arn


def limit_grants_to_aws_services(key: kms.Key) -> None:
    """Deny ``kms:CreateGrant`` on ``key`` unless the grant is for an AWS resource or an AWS service asks.

    The statement AWS Control Tower's proactive control CT.KMS.PR.3 looks for (cdklabs/cdk-validator-cfnguard
    0.0.62 rules/control-tower/cfn-guard/keymanagementservice/ct-kms-pr-3.guard: Effect Deny, Action
    ``kms:CreateGrant``, Principal ``*``, Resource ``*``, and only ``BoolIfExists`` with both
    ``kms:GrantIsForAWSResource`` and ``aws:PrincipalIsAWSService`` "false"). The services that use this product's
    keys create their grants for AWS resources (EKS for secrets, SageMaker for HyperPod volumes, FSx, Amazon
    Managed Service for Prometheus), which the deny lets through; nothing of the product creates a grant itself.
    """
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="GrantsOnlyForAwsResources",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["kms:CreateGrant"],
        resources=["*"],
        conditions={"BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}},
    ))
