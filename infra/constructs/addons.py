"""EKS add-ons for training on the HyperPod nodes: the HyperPod training operator (with cert-manager) and the
Mountpoint for Amazon S3 CSI driver, each controller on its own EKS Pod Identity role."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Aws, CfnJson, Names, RemovalPolicy, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IDependable

from infra import facts
from infra.constructs.addon import EksAddon
from infra.constructs.common import acknowledge
from infra.constructs.helm_release import HelmInstaller
from infra.constructs.hyperpod.lifecycle import noncurrent_versions_rule, protected_bucket, send_events_to_eventbridge
from infra.constructs.readiness import Readiness
from infra.errors import ConfigError
from infra.facts import addons as addon_facts
from infra.facts.addons import CERT_MANAGER, INFERENCE_OPERATOR, METRICS_SERVER, S3_CSI, TRAINING_OPERATOR

# The operator's service account and the managed policy of its role: AWS's Terraform module,
# awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
# 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_training_operator/main.tf.
TRAINING_OPERATOR_POLICY = "AmazonSageMakerHyperPodTrainingOperatorAccess"
# cert-manager's pods (controller, webhook, cainjector) tolerate every taint, so they run on tainted HyperPod
# nodes too: the configuration values of AWS's module, awslabs/awsome-distributed-training@0edaf15:
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_cluster/cert_manager.tf.
_TOLERATE_ALL = [{"operator": "Exists", "effect": effect} for effect in ("NoSchedule", "NoExecute", "PreferNoSchedule")]
CERT_MANAGER_CONFIGURATION = {
    "replicaCount": 1, "tolerations": _TOLERATE_ALL,
    "webhook": {"replicaCount": 1, "tolerations": _TOLERATE_ALL},
    "cainjector": {"replicaCount": 1, "tolerations": _TOLERATE_ALL},
}
# What Mountpoint needs on a general purpose bucket to list, read, write and (with the allow-delete mount
# option) delete: awslabs/mountpoint-s3@58817cab2fc3020a422d8aa14049a86b296f4498:doc/CONFIGURATION.md,
# "IAM permissions", its least-privilege example.
S3_BUCKET_ACTIONS = ["s3:ListBucket"]
S3_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"]


class TrainingOperator(Construct):
    """The EKS add-on ``amazon-sagemaker-hyperpod-training-operator`` and the cert-manager add-on it needs.

    The operator's controller (``aws-hyperpod/hp-training-operator-controller-manager``) gets a role only EKS
    Pod Identity gives, only to that service account of this cluster, with the AWS managed policy
    ``AmazonSageMakerHyperPodTrainingOperatorAccess`` (what AWS's Terraform module and console attach). With
    ``install_cert_manager`` the EKS add-on ``cert-manager`` is installed first, at ``cert_manager_version``
    (default: the version AWS's Terraform module pins, ``infra.facts.addons.CERT_MANAGER.version``; None for EKS's
    default); pass False when the cluster already has cert-manager or another construct installs it, and give
    ``wait_for_cert_manager`` what the operator then waits for. Changing the version of a deployed add-on is an
    update in place (AddonVersion is not among the create-only properties of cfn-lint's AWS::EKS::Addon schema).
    The EKS Pod Identity agent must be on the cluster (``EksControlPlane`` installs it). The add-ons need running
    nodes: create this after the HyperPod cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster,
                 install_cert_manager: bool = True, readiness_installer: HelmInstaller | None = None,
                 cert_manager_version: str | None = CERT_MANAGER.version) -> None:
        super().__init__(scope, construct_id)
        cluster_name = eks_cluster.cluster_name
        self.cert_manager: EksAddon | None = None
        if install_cert_manager:
            self.cert_manager = EksAddon(self, "CertManager", addon=CERT_MANAGER, eks_cluster_name=cluster_name,
                                         version=cert_manager_version, configuration=CERT_MANAGER_CONFIGURATION)
        # Its webhook certificates come from cert-manager: with an installer to check it, after cert-manager's
        # Deployments are available (AWS's module, cert_manager.tf's wait_for_cert_manager), else after its add-on.
        self.cert_manager_ready: Readiness | None = None
        cert_manager: IDependable | None = None
        if self.cert_manager is not None:
            if readiness_installer is not None:
                self.cert_manager_ready = self.cert_manager.wait_until_ready(readiness_installer)
            cert_manager = self.cert_manager_ready or self.cert_manager.addon
        self.operator = EksAddon(
            self, "Addon", addon=TRAINING_OPERATOR, eks_cluster_name=cluster_name, role_id="ControllerRole",
            role_description="HyperPod training operator controller (EKS Pod Identity)",
            after=[cert_manager] if cert_manager is not None else [],
        )
        assert self.operator.role is not None and self.operator.association is not None
        self.role = self.operator.role
        self.association = self.operator.association
        self.addon = self.operator.addon
        self.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(TRAINING_OPERATOR_POLICY))
        acknowledge(self.role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                               f"{TRAINING_OPERATOR_POLICY}]",
                    "AWS maintains this policy for the training operator's controller as the operator gains "
                    "features; AWS's Terraform module and console install attach the same policy")

    def wait_for_cert_manager(self, cert_manager: IDependable) -> None:
        """Create the operator after ``cert_manager`` (another construct's add-on, or its readiness check): its
        webhook certificates come from cert-manager."""
        self.addon.node.add_dependency(cert_manager)


class S3CsiDriver(Construct):
    """The EKS add-on ``aws-mountpoint-s3-csi-driver`` on a Pod Identity role that reaches only ``bucket_arns``.

    The driver (``kube-system/s3-csi-driver-sa``, driver-level credentials) may list each bucket and get, put,
    abort multipart uploads of and delete its objects: Mountpoint's documented least-privilege set. Deletion
    still needs the ``allow-delete`` mount option on the volume. Buckets encrypted with SSE-KMS also need
    ``kms:Decrypt``/``kms:GenerateDataKey`` on their key, which is not granted. Volumes are provisioned
    statically (a PersistentVolume naming the bucket; the driver creates no buckets). The EKS Pod Identity agent
    must be on the cluster. The add-on needs running nodes: create it after the HyperPod cluster.
    """

    def __init__(self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster,
                 bucket_arns: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        if not bucket_arns:
            raise ConfigError("bucket_arns", list(bucket_arns), "S3CsiDriver needs at least one bucket ARN")
        self.driver = EksAddon(
            self, "Addon", addon=S3_CSI, eks_cluster_name=eks_cluster.cluster_name, role_id="DriverRole",
            role_description="Mountpoint for Amazon S3 CSI driver (EKS Pod Identity): the configured buckets only",
        )
        assert self.driver.role is not None and self.driver.association is not None
        self.role = self.driver.role
        self.association = self.driver.association
        self.addon = self.driver.addon
        objects = [f"{arn}/*" for arn in bucket_arns]
        self.policy = iam.Policy(self, "DriverPolicy", roles=[self.role], statements=[
            iam.PolicyStatement(sid="MountpointBuckets", actions=S3_BUCKET_ACTIONS, resources=list(bucket_arns)),
            iam.PolicyStatement(sid="MountpointObjects", actions=S3_OBJECT_ACTIONS, resources=objects),
        ])
        for resource in objects:
            acknowledge(self.policy, f"AwsSolutions-IAM5[Resource::{resource}]",
                        "every object of a bucket the config lists for mounting: a volume shows the whole bucket")
        # The association needs the policy in place before the driver first calls S3.
        self.addon.node.add_dependency(self.policy)


# The inference operator's IAM, statement by statement from AWS's sources (``_INF`` below): the managed policies of
# the execution and gated-model roles, KEDA's read-only metrics statement, and the load balancer controller's policy
# (infra/facts/inference_lb_controller_policy.json).
_INF = ("awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/"
        "7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules/hyperpod_inference_operator")
INFERENCE_OPERATOR_POLICY = "AmazonSageMakerHyperPodInferenceAccess"  # ${_INF}/iam_roles.tf line 39
GATED_MODEL_POLICY = "AmazonSageMakerHyperPodGatedModelAccess"  # ${_INF}/iam_roles.tf line 131
KEDA_ACTIONS = ["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"]  # iam_roles.tf 79-87
# The TLS bucket statements AWS's migration to the add-on puts on the execution role (aws/sagemaker-hyperpod-cli@
# a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/charts/inference-operator/migration/
# helm_to_addon.sh lines 459-498, inline policy TLSBucketsAccess), on this bucket's objects only.
TLS_BUCKET_STATEMENTS = (
    ("TLSBucketDeleteObjectsPermission", ["s3:DeleteObject"], True),
    ("TLSBucketGetObjectAccess", ["s3:GetObject"], False),
    ("TLSBucketPutObjectAccess", ["s3:PutObject", "s3:PutObjectTagging"], True),
)
# metrics-server tolerates every taint: ${_INF}/main.tf lines 44-50.
METRICS_SERVER_CONFIGURATION = {"tolerations": _TOLERATE_ALL}
OIDC_AUDIENCE = "sts.amazonaws.com"  # ${_INF}/main.tf line 18 and the roles' aud conditions


def lb_controller_statements() -> list[dict[str, Any]]:
    """The load balancer controller's statements as AWS's module writes them."""
    data = json.loads(LB_CONTROLLER_POLICY.read_text(encoding="utf-8"))
    return list(data["Statement"])


LB_CONTROLLER_POLICY = Path(facts.__file__).parent / "inference_lb_controller_policy.json"


class InferenceOperator(Construct):
    """The EKS add-on ``amazon-sagemaker-hyperpod-inference`` with its IAM roles, its TLS certificate bucket and
    the add-ons it needs.

    As AWS's Terraform module builds it (``modules/hyperpod_inference_operator``), the roles are IAM roles for
    service accounts, trusted through the cluster's IAM OIDC provider (``oidc_provider``; created here from
    ``oidc_issuer_url`` when not given):

    - the execution role, named ``SageMakerHyperPodInference-...`` (the add-on refuses another name), trusted to
      SageMaker and to ``hyperpod-inference-system/hyperpod-inference-controller-manager``, with the AWS managed
      policy ``AmazonSageMakerHyperPodInferenceAccess`` and the TLS bucket statements of AWS's migration script;
    - the gated JumpStart model role, trusted to SageMaker and to model service accounts
      ``hyperpod-inference-service-account*``, with ``AmazonSageMakerHyperPodGatedModelAccess``;
    - the load balancer controller's role (``aws-load-balancer-controller``) with AWS's policy for it;
    - KEDA's role (``keda-operator``) reading CloudWatch and Amazon Managed Prometheus metrics.

    The TLS bucket has the lifecycle bucket's protections (``protected_bucket``), logging to ``access_logs`` (or to
    a log bucket of its own). ``cert_manager``: what the add-on waits for when another construct installs
    cert-manager (the training operator); else this one installs it (``CertManager``). ``after``: the S3 CSI
    driver's add-on, which AWS's module installs first. ``metrics_server``: also install the metrics-server add-on.
    The add-ons need running nodes: create this after the HyperPod cluster.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, eks_cluster: eks.ICluster, hyperpod_cluster_arn: str,
        oidc_issuer_url: str | None = None, oidc_provider: iam.IOidcProvider | None = None,
        access_logs: s3.IBucket | None = None, removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        cert_manager: IDependable | None = None, readiness_installer: HelmInstaller | None = None,
        after: Sequence[IDependable] = (), metrics_server: bool = True, addon_version: str | None = None,
        object_lock: bool = False, event_notifications: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        cluster_name = eks_cluster.cluster_name
        if oidc_provider is None:
            if oidc_issuer_url is None:
                raise ConfigError("oidc_issuer_url", None, "InferenceOperator needs the cluster's OIDC issuer URL "
                                  "or an oidc_provider")
            # No thumbprint: IAM then uses the issuer's certificate authority (aws-cdk-lib's OidcProviderNativeProps,
            # "thumbprints ... This property is optional").
            oidc_provider = iam.OidcProviderNative(self, "OidcProvider", url=oidc_issuer_url,
                                                   client_ids=[OIDC_AUDIENCE])
        self.oidc_provider = oidc_provider
        issuer = oidc_provider.oidc_provider_issuer

        def irsa(construct_id: str, subject: str, like: bool) -> iam.FederatedPrincipal:
            conditions = CfnJson(self, construct_id, value={f"{issuer}:aud": OIDC_AUDIENCE,
                                                            f"{issuer}:sub": f"system:serviceaccount:{subject}"})
            return iam.FederatedPrincipal(oidc_provider.oidc_provider_arn,
                                          {"StringLike" if like else "StringEquals": conditions},
                                          "sts:AssumeRoleWithWebIdentity")

        ns = addon_facts.INFERENCE_NAMESPACE
        # The TLS certificate bucket (${_INF}/tls_s3_bucket.tf: encrypted, public access blocked, TLS only, logged).
        if access_logs is None:
            own_logs = s3.Bucket(self, "TlsAccessLogs", encryption=s3.BucketEncryption.S3_MANAGED,
                                 block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
                                 object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
                                 lifecycle_rules=[noncurrent_versions_rule()],
                                 removal_policy=removal_policy,
                                 auto_delete_objects=removal_policy == RemovalPolicy.DESTROY)
            if event_notifications:
                send_events_to_eventbridge(own_logs)
            acknowledge(own_logs, "AwsSolutions-S1", "This bucket receives the TLS bucket's server access logs; "
                                                     "logging it to itself would loop.")
            access_logs = own_logs
        self.tls_bucket = protected_bucket(self, "TlsCertificates", access_logs=access_logs,
                                           access_logs_prefix="tls-cert-logs/", removal_policy=removal_policy,
                                           object_lock=object_lock, event_notifications=event_notifications)

        self.execution_role = iam.Role(
            self, "ExecutionRole",
            role_name=f"{addon_facts.INFERENCE_EXECUTION_ROLE_PREFIX}-{Aws.REGION}-"
                      f"{Names.unique_resource_name(self, max_length=20)}",
            assumed_by=iam.CompositePrincipal(
                iam.ServicePrincipal("sagemaker.amazonaws.com"),
                irsa("ControllerTrust", f"{ns}:{addon_facts.INFERENCE_CONTROLLER_SERVICE_ACCOUNT}", like=False)),
            description="HyperPod inference operator execution role",
        )
        self.execution_role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(INFERENCE_OPERATOR_POLICY))
        objects = self.tls_bucket.arn_for_objects("*")
        for sid, actions, same_account in TLS_BUCKET_STATEMENTS:
            self.execution_role.add_to_policy(iam.PolicyStatement(
                sid=sid, actions=actions, resources=[objects],
                conditions={"StringEquals": {"aws:ResourceAccount": "${aws:PrincipalAccount}"}}
                if same_account else None))
        self.gated_model_role = iam.Role(
            self, "GatedModelRole",
            assumed_by=iam.CompositePrincipal(
                iam.ServicePrincipal("sagemaker.amazonaws.com"),
                irsa("GatedModelTrust", f"*:{addon_facts.INFERENCE_MODEL_SERVICE_ACCOUNT_PREFIX}*", like=True)),
            description="HyperPod inference: gated JumpStart model downloads",
        )
        self.gated_model_role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(GATED_MODEL_POLICY))
        self.lb_controller_role = iam.Role(
            self, "LoadBalancerControllerRole",
            assumed_by=irsa("LoadBalancerControllerTrust",
                            f"{ns}:{addon_facts.INFERENCE_LB_CONTROLLER_SERVICE_ACCOUNT}", like=False),
            description="HyperPod inference: AWS Load Balancer Controller",
            inline_policies={"LoadBalancerController": iam.PolicyDocument.from_json(
                {"Version": "2012-10-17", "Statement": lb_controller_statements()})},
        )
        self.keda_role = iam.Role(
            self, "KedaRole",
            assumed_by=irsa("KedaTrust", f"{ns}:{addon_facts.INFERENCE_KEDA_SERVICE_ACCOUNT}", like=False),
            description="HyperPod inference: KEDA operator (reads metrics)",
            inline_policies={"Keda": iam.PolicyDocument(statements=[
                iam.PolicyStatement(actions=[a for a in KEDA_ACTIONS if a.startswith("cloudwatch:")],
                                    resources=["*"]),
                # Narrower than AWS's module (Resource "*"): the Prometheus queries act on a workspace, so only
                # this account's workspaces in this region.
                iam.PolicyStatement(actions=[a for a in KEDA_ACTIONS if a.startswith("aps:")],
                                    resources=[Stack.of(self).format_arn(service="aps", resource="workspace",
                                                                         resource_name="*")])])},
        )
        self._acknowledge()

        self.cert_manager: EksAddon | None = None
        if cert_manager is None:
            self.cert_manager = EksAddon(self, "CertManager", addon=CERT_MANAGER, eks_cluster_name=cluster_name,
                                         version=CERT_MANAGER.version, configuration=CERT_MANAGER_CONFIGURATION)
            ready = self.cert_manager.wait_until_ready(readiness_installer) if readiness_installer else None
            cert_manager = ready or self.cert_manager.addon
        # What another operator waits for when this construct installs cert-manager; None when it does not.
        self.cert_manager_ready: IDependable | None = cert_manager if self.cert_manager is not None else None
        # The add-on's configuration: the keys and shape of AWS's module (${_INF}/main.tf lines 59-84).
        self.operator = EksAddon(
            self, "Addon", addon=INFERENCE_OPERATOR, eks_cluster_name=cluster_name, version=addon_version,
            configuration={
                "executionRoleArn": self.execution_role.role_arn,
                "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
                "hyperpodClusterArn": hyperpod_cluster_arn,
                "jumpstartGatedModelDownloadRoleArn": self.gated_model_role.role_arn,
                "alb": {"enabled": True, "serviceAccount": {"create": True,
                                                            "roleArn": self.lb_controller_role.role_arn}},
                "keda": {"enabled": True, "auth": {"aws": {"irsa": {"enabled": True,
                                                                    "roleArn": self.keda_role.role_arn}}}},
            },
            after=[cert_manager, *after],
        )
        self.addon = self.operator.addon
        # The roles' policies are in place before the operator first calls AWS.
        for role in (self.execution_role, self.gated_model_role, self.lb_controller_role, self.keda_role):
            self.addon.node.add_dependency(role)
        self.metrics_server: EksAddon | None = None
        if metrics_server:
            self.metrics_server = EksAddon(self, "MetricsServer", addon=METRICS_SERVER,
                                           eks_cluster_name=cluster_name, configuration=METRICS_SERVER_CONFIGURATION)

    def _acknowledge(self) -> None:
        for role, policy in ((self.execution_role, INFERENCE_OPERATOR_POLICY),
                             (self.gated_model_role, GATED_MODEL_POLICY)):
            acknowledge(role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]",
                        f"AWS maintains {policy} for the inference operator; AWS's Terraform module attaches it")
        acknowledge(self.execution_role, f"AwsSolutions-IAM5[Resource::<{_logical(self.tls_bucket)}.Arn>/*]",
                    "the operator writes and removes certificate objects of its own TLS bucket, whose keys it chooses")
        acknowledge(self.keda_role, "AwsSolutions-IAM5[Resource::*]",
                    "CloudWatch GetMetricData/ListMetrics take no resource; AWS's module grants these read-only "
                    "metric actions on *")
        stack = Stack.of(self)
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        partition = "<AWS::Partition>" if Token.is_unresolved(stack.partition) else stack.partition
        acknowledge(self.keda_role,
                    f"AwsSolutions-IAM5[Resource::arn:{partition}:aps:{region}:<AWS::AccountId>:workspace/*]",
                    "KEDA queries whichever Amazon Managed Prometheus workspace a scaler names, in this account and "
                    "region only (AWS's module grants the same read actions on *)")
        for finding in _lb_controller_findings():
            acknowledge(self.lb_controller_role, f"AwsSolutions-IAM5[{finding}]",
                        "AWS's policy for the load balancer controller, statement by statement: the load balancers, "
                        "target groups and security groups it creates do not exist before it names them, and its "
                        "writes are conditioned on the elbv2.k8s.aws/cluster tag")


def _logical(construct: Construct) -> str:
    return Stack.of(construct).get_logical_id(construct.node.default_child)  # type: ignore[arg-type]


def _lb_controller_findings() -> list[str]:
    """The cdk-nag wildcard findings of AWS's load balancer controller policy: each wildcard resource."""
    found: list[str] = []
    for statement in lb_controller_statements():
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in resources:
            if "*" in resource:
                finding = f"Resource::{resource}"
                if finding not in found:
                    found.append(finding)
    return found
