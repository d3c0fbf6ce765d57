"""Lifecycle scripts: the bucket HyperPod reads them from, their upload, and the synth-time checks on them."""

from __future__ import annotations

import os
from pathlib import Path

from aws_cdk import Annotations, Aws, Duration, FeatureFlags, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from infra.config import LifecycleOptions, refuse_links_leaving, script_key_problem
from infra.constructs.common import acknowledge, nag_name
from infra.constructs.hyperpod.lifecycle_render import render_lifecycle_env
from infra.errors import ConfigError

LIFECYCLE_PREFIX = "lifecycle"
CONFIG_FILE_NAME = "lifecycle_config.env"
# How long an overwritten or deleted object version is kept in either bucket (the scripts' history; the access
# logs are written once and never overwritten, so there it clears only what a person deleted).
NONCURRENT_VERSION_DAYS = 90


def check_lifecycle_dir(directory: Path, on_create: str, *, allow_paths_outside_project: bool = False) -> Path:
    """Refuse, at synth, a scripts directory HyperPod would fail on with an opaque node error, or one holding a
    symbolic link that leads out of it (``refuse_links_leaving``: its target would be uploaded to the bucket every
    node reads)."""
    key = "hyperpod.lifecycle_scripts_dir"
    if not directory.is_dir():
        raise ConfigError(key, str(directory), "no such directory")
    if (problem := script_key_problem(on_create)) is not None:
        raise ConfigError("hyperpod.on_create_script", on_create, problem)
    refuse_links_leaving(key, directory, allowed=allow_paths_outside_project)
    script = directory / on_create
    if not script.is_file():
        raise ConfigError("hyperpod.on_create_script", on_create, f"not found in {directory}")
    if not os.access(script, os.X_OK):
        raise ConfigError("hyperpod.on_create_script", str(script), "not executable (chmod +x it)")
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.suffix in {".sh", ".env", ""} and b"\r\n" in path.read_bytes():
            raise ConfigError(key, str(path), f"{path.name} has CRLF line endings; convert it to LF")
    return script


def protected_bucket(scope: Construct, construct_id: str, *, access_logs: s3.IBucket, access_logs_prefix: str,
                     removal_policy: RemovalPolicy, bucket_name: str | None = None, object_lock: bool = False,
                     event_notifications: bool = False) -> s3.Bucket:
    """A bucket with this product's protections (the lifecycle bucket's, and any other bucket that holds what the
    cluster reads): SSE-KMS under the account's AWS managed key for S3 with a Bucket Key, public access blocked, TLS
    only, versioned with noncurrent versions expiring (``noncurrent_versions_rule``), server access logs to
    ``access_logs`` under ``access_logs_prefix``; its objects deleted with it when ``removal_policy`` is DESTROY.
    ``object_lock`` turns S3 Object Lock on (no default retention), ``event_notifications`` sends its events to
    Amazon EventBridge (both for ``compliance: control_tower``)."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        bucket_name=bucket_name,
        # The AWS managed key: SSEAlgorithm aws:kms without a key ID (aws-cdk-lib BucketEncryption.KMS_MANAGED).
        encryption=s3.BucketEncryption.KMS_MANAGED,
        bucket_key_enabled=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        versioned=True,
        object_lock_enabled=object_lock or None,
        lifecycle_rules=[noncurrent_versions_rule()],
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=access_logs_prefix,
        removal_policy=removal_policy,
        auto_delete_objects=removal_policy == RemovalPolicy.DESTROY,
    )
    if not isinstance(access_logs, s3.Bucket):
        # aws-cdk-lib 2.275.0 (aws-s3/lib/bucket.js) warns that it cannot write an imported destination's policy;
        # an existing log bucket's owner admits S3's log delivery (docs/safety.md, access_logs_bucket).
        Annotations.of(bucket).acknowledge_warning(
            "@aws-cdk/aws-s3:accessLogsPolicyNotAdded",
            "The access log bucket is an existing one whose own policy admits logging.s3.amazonaws.com.")
    if event_notifications:
        send_events_to_eventbridge(bucket)
    return bucket


def send_events_to_eventbridge(bucket: s3.Bucket) -> None:
    """CloudFormation's own property, not aws-cdk-lib's event_bridge_enabled (which adds a notifications function
    outside the VPC)."""
    cfn_bucket: s3.CfnBucket = bucket.node.default_child  # type: ignore[assignment]
    cfn_bucket.add_property_override("NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True)


def lifecycle_bucket_name(hyperpod_cluster_name: str) -> str:
    """``sagemaker-<cluster>-<stack>-<account>-<region>``: ``<stack>`` is the first block of the stack's UUID.

    The managed instance policy reads only ``sagemaker-*`` buckets, so the name cannot be left to CloudFormation
    entirely; the stack's UUID makes it differ per stack creation, so a bucket kept by an earlier
    ``cdk destroy`` never blocks the next deploy with AlreadyExists. AWS::StackId is
    ``arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<uuid>``
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/pseudo-parameter-reference.html); its first
    UUID block is 8 hex digits. Lengths: 9 + 16 + 8 + 12 + at most 14 (region) + 4 dashes = 63, S3's maximum
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
    """
    stack_uuid = Fn.select(2, Fn.split("/", Aws.STACK_ID))
    return Fn.join("-", ["sagemaker", hyperpod_cluster_name.lower()[:16], Fn.select(0, Fn.split("-", stack_uuid)),
                         Aws.ACCOUNT_ID, Aws.REGION])


def noncurrent_versions_rule() -> s3.LifecycleRule:
    """Noncurrent object versions expire after NONCURRENT_VERSION_DAYS; unfinished multipart uploads after 7 days."""
    return s3.LifecycleRule(id="NoncurrentVersions",
                            noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
                            abort_incomplete_multipart_upload_after=Duration.days(7))


class LifecycleScripts(Construct):
    """A `sagemaker-` bucket holding the lifecycle scripts of this repository under ``lifecycle/``.

    The bucket is named by ``lifecycle_bucket_name`` (the managed instance policy reads only ``sagemaker-*``
    buckets; the execution role is also granted read of the prefix explicitly), encrypted with SSE-KMS under the
    account's AWS managed key for S3 (``aws/s3``, so readers in the account need no key statement of their own),
    versioned with noncurrent versions expiring after ``NONCURRENT_VERSION_DAYS``, TLS-only, with public access
    blocked and server access logs in a second bucket. That log bucket has the same protections but SSE-S3,
    no Object Lock and no access logging of its own, as S3 requires of a server access log destination (see
    ``AccessLogs`` below). ``object_lock`` turns S3 Object Lock on for the scripts' bucket (no default retention)
    and ``event_notifications`` sends both buckets' events to Amazon EventBridge (``compliance: control_tower``).
    With ``removal_policy`` DESTROY both buckets are emptied of every object version before CloudFormation
    deletes them (aws-cdk-lib's ``auto_delete_objects``), else a versioned bucket ends DELETE_FAILED.
    The scripts directory is checked at synth (``check_lifecycle_dir``; a symbolic link in it that leads out of it
    is refused unless ``allow_paths_outside_project``) and uploaded at deploy time with the rendered
    ``lifecycle_config.env`` beside them; nothing is fetched from the internet.

    Pass ``bucket`` to use an existing bucket instead of creating one, and ``access_logs`` to send the server
    access logs to an existing bucket instead of a log bucket made here (``access_logs_bucket`` in the config).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        hyperpod_cluster_name: str,
        scripts_dir: Path,
        on_create: str,
        options: LifecycleOptions,
        bucket: s3.IBucket | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        allow_paths_outside_project: bool = False,
        object_lock: bool = False,
        event_notifications: bool = False,
        access_logs: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        scripts_dir = scripts_dir.resolve()  # the packaged copy is a link to the repository's scripts
        check_lifecycle_dir(scripts_dir, on_create, allow_paths_outside_project=allow_paths_outside_project)
        self.on_create = on_create
        self.access_log_bucket: s3.Bucket | None = None
        # aws-cdk-lib's handler lists object versions and delete markers, denies s3:PutObject (server access
        # log delivery included) and deletes them all (aws/aws-cdk@3681826a:packages/@aws-cdk/
        # custom-resource-handlers/lib/aws-s3/auto-delete-objects-handler/index.ts).
        disposable = removal_policy == RemovalPolicy.DESTROY
        # Where the server access logs of the buckets made here go: ``access_logs`` when given (nothing is changed
        # on it: its owner admits S3's log delivery), else a log bucket made below.
        self.access_logs: s3.IBucket | None = access_logs
        if bucket is None and access_logs is None:
            # A server access log destination must use SSE-S3, must not have Object Lock and should not log
            # itself ("The destination bucket must use Amazon S3 managed keys (SSE-S3)", "S3 buckets that have S3
            # Object Lock enabled can't be used as destination buckets for server access logs", "Your destination
            # bucket should not have server access logging enabled": https://docs.aws.amazon.com/AmazonS3/latest/
            # userguide/enable-server-access-logging.html, read as c2hans/aws-docs@9a3d9b40). S3 delivers through
            # the bucket policy aws-cdk-lib writes for logging.s3.amazonaws.com
            # (@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy in cdk.json), not an ACL.
            self.access_log_bucket = s3.Bucket(
                self,
                "AccessLogs",
                encryption=s3.BucketEncryption.S3_MANAGED,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                versioned=True,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
                lifecycle_rules=[noncurrent_versions_rule()],
                removal_policy=removal_policy,
                auto_delete_objects=disposable,
            )
            acknowledge(
                self.access_log_bucket, "AwsSolutions-S1",
                "This bucket receives the lifecycle bucket's server access logs; logging it to itself would loop.",
            )
            self.access_logs = self.access_log_bucket
        if bucket is None:
            assert self.access_logs is not None
            bucket = protected_bucket(self, "Bucket", bucket_name=lifecycle_bucket_name(hyperpod_cluster_name),
                                      access_logs=self.access_logs, access_logs_prefix="lifecycle-bucket/",
                                      removal_policy=removal_policy, object_lock=object_lock,
                                      event_notifications=event_notifications)
            if event_notifications and self.access_log_bucket is not None:
                send_events_to_eventbridge(self.access_log_bucket)
        self.bucket = bucket
        # The upload function logs to a group of ours, created before it, with the stacks' retention and
        # removal policy. Without it, Lambda creates /aws/lambda/<function> on the first upload, and the
        # group that the flag @aws-cdk/aws-lambda:useCdkManagedLogGroup adds under that name (2 years'
        # retention, nothing ordering the upload after it) can then fail with "already exists"
        # (aws-cdk-lib 2.275.0 cx-api/FEATURE_FLAGS.md, and the synthesized template).
        self.log_group = logs.LogGroup(self, "UploadLogs", retention=log_retention, removal_policy=removal_policy)
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Upload",
            destination_bucket=bucket,
            destination_key_prefix=f"{LIFECYCLE_PREFIX}/",
            sources=[
                s3deploy.Source.asset(str(scripts_dir), exclude=["*.md", "*.example", ".*"]),
                s3deploy.Source.data(CONFIG_FILE_NAME, render_lifecycle_env(options)),
            ],
            prune=True,
            retain_on_delete=removal_policy == RemovalPolicy.RETAIN,
            log_group=self.log_group,
        )
        self._acknowledge_deployment_handler(bucket)
        self.source_s3_uri = f"s3://{bucket.bucket_name}/{LIFECYCLE_PREFIX}/"
        self.prefix_arn = bucket.arn_for_objects(f"{LIFECYCLE_PREFIX}/*")

    def _acknowledge_deployment_handler(self, bucket: s3.IBucket) -> None:
        """Findings on the upload function aws-cdk-lib's BucketDeployment creates (its code, not ours)."""
        stack = Stack.of(self)
        handler = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        acknowledge(handler, "AwsSolutions-L1",
                    "BucketDeployment's handler runtime is set by aws-cdk-lib and moves with library upgrades.")
        role = self.deployment.handler_role
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "BucketDeployment's handler uses the basic execution policy only to write its own logs.",
        )
        for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*"):
            acknowledge(role, f"AwsSolutions-IAM5[Action::{action}]",
                        "aws-cdk-lib's grantRead/grantWrite action groups, limited to the asset bucket object "
                        "and the lifecycle bucket.")
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
        literal = FeatureFlags.of(stack).is_enabled("@aws-cdk/core:enablePartitionLiterals")
        partition = RegionInfo.get(region).partition if literal and not region.startswith("<") else "<AWS::Partition>"
        acknowledge(role, f"AwsSolutions-IAM5[Resource::arn:{partition}:s3:::cdk-hnb659fds-assets-{account}-"
                          f"{region}/*]",
                    "The scripts' zip is a CDK asset whose object key is a content hash.")
        acknowledge(role, f"AwsSolutions-IAM5[Resource::{nag_name(self, bucket.bucket_arn)}/*]",
                    "The upload writes and prunes the lifecycle scripts, whose names come from the repository.")
