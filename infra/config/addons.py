"""The `addons` section: EKS add-ons of the HyperPod cluster that are off by default, installed once its nodes run.

``training_operator``: the HyperPod training operator with cert-manager. ``s3_csi``: the Mountpoint for Amazon
S3 CSI driver, reaching the listed buckets only. ``task_governance``: the HyperPod task governance add-on, the
cluster's scheduler policy and one compute quota per team. Bounds and patterns are the SageMaker API's
(botocore's sagemaker model, the same values as cfn-lint's AWS::SageMaker::ComputeQuota and
AWS::SageMaker::ClusterSchedulerConfig schemas) unless a comment says otherwise. The checks against the
instance groups are in ``infra.config.app`` (they need the hyperpod section).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from infra.config.base import StrictModel, refusal
from infra.facts import addons

# The EKS add-ons each key installs: their one declaration is infra/facts/addons.py.
TRAINING_OPERATOR_ADDON = addons.TRAINING_OPERATOR.name
CERT_MANAGER_ADDON = addons.CERT_MANAGER.name
S3_CSI_ADDON = addons.S3_CSI.name
INFERENCE_OPERATOR_ADDON = addons.INFERENCE_OPERATOR.name
METRICS_SERVER_ADDON = addons.METRICS_SERVER.name

# A general purpose bucket's ARN: Mountpoint's IAM example grants s3:ListBucket on exactly this form
# (awslabs/mountpoint-s3@58817cab2fc3020a422d8aa14049a86b296f4498:doc/CONFIGURATION.md, "IAM permissions").
# Directory buckets (s3express) take other actions and are not offered here.
S3_BUCKET_NAME = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
S3_BUCKET_ARN = rf"^arn:aws[a-z-]*:s3:::{S3_BUCKET_NAME}$"


TASK_GOVERNANCE_ADDON = addons.TASK_GOVERNANCE.name

# HyperPod task governance creates one Kubernetes namespace per team, "hyperpod-ns-<TeamName>" (cfn-lint's
# AWS::SageMaker::ComputeQuota schema, ComputeQuotaTarget.TeamName description).
TEAM_NAMESPACE_PREFIX = "hyperpod-ns-"
# A namespace is an RFC 1123 label of at most 63 characters
# (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
MAX_NAMESPACE_LENGTH = 63

# botocore sagemaker model: ComputeQuotaTargetTeamName and PriorityClass.Name (the same pattern).
_TEAM_OR_CLASS_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?$"
TeamName = Annotated[str, Field(pattern=_TEAM_OR_CLASS_NAME)]

# botocore sagemaker model: PriorityClassList max 10, PriorityWeight and FairShareWeight 0-100.
MAX_PRIORITY_CLASSES = 10


# Name of a compute quota or scheduler config (botocore sagemaker model, EntityName): at most 63 characters.
MAX_ENTITY_NAME_LENGTH = 63


def team_namespace(team: str) -> str:
    """The Kubernetes namespace HyperPod task governance makes for ``team``."""
    return TEAM_NAMESPACE_PREFIX + team


def compute_quota_name(cluster_name: str, team: str) -> str:
    """The name of ``team``'s compute quota: the HyperPod cluster's name, then the team's."""
    return f"{cluster_name}-{team}"


class PriorityClass(StrictModel):
    """A task priority of the scheduler policy (SchedulerConfig.PriorityClasses): higher weight runs first."""

    name: TeamName
    weight: StrictInt = Field(ge=0, le=100)


class TeamQuota(StrictModel):
    """Whole instances of one type reserved for the team (ComputeQuotaResources: InstanceType + Count)."""

    instance_type: str
    # ComputeQuotaResourceConfig.Count: 0 to 10000000 in the API; 0 is a team that only borrows.
    count: StrictInt = Field(ge=0, le=10_000_000)


class TeamBorrowing(StrictModel):
    """How the team shares idle compute (ResourceSharingConfig)."""

    # Lend: lends its idle quota; DontLend: neither lends nor borrows; LendAndBorrow: both
    # (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceSharingConfig.html).
    strategy: Literal["LendAndBorrow", "Lend", "DontLend"] = "LendAndBorrow"
    # BorrowLimit: percent of idle compute the team may borrow. The model admits 0-10000, AWS documents
    # "1 - 500 percent", default 50 (same page): the documented range is taken. None leaves AWS's default.
    limit_percent: StrictInt | None = Field(default=None, ge=1, le=500)

    @model_validator(mode="after")
    def _limit_needs_borrowing(self) -> TeamBorrowing:
        if self.limit_percent is not None and self.strategy != "LendAndBorrow":
            raise refusal("limit_percent", self.limit_percent,
                          f"a borrow limit applies only to strategy LendAndBorrow, strategy is {self.strategy}")
        return self


class TeamConfig(StrictModel):
    """One team: a compute quota (AWS::SageMaker::ComputeQuota) and its namespace hyperpod-ns-<name>."""

    # ComputeQuotaTarget.TeamName; create-only, so a rename replaces the team's quota (it holds no data).
    name: TeamName
    quota: TeamQuota
    # ComputeQuotaTarget.FairShareWeight: the team's share of idle compute when the policy's fair_share is on.
    fair_share_weight: StrictInt = Field(default=0, ge=0, le=100)
    borrowing: TeamBorrowing = TeamBorrowing()
    # ComputeQuotaConfig.PreemptTeamTasks: whether the team's higher-priority tasks preempt its own lower ones.
    preempt_team_tasks: Literal["LowerPriority", "Never"] = "LowerPriority"

    @field_validator("name")
    @classmethod
    def _namespace_fits(cls, value: str) -> str:
        namespace = team_namespace(value)
        if len(namespace) > MAX_NAMESPACE_LENGTH:
            raise refusal("", None, f"its namespace {namespace} is longer than Kubernetes' {MAX_NAMESPACE_LENGTH} "
                                     f"characters; use at most {MAX_NAMESPACE_LENGTH - len(TEAM_NAMESPACE_PREFIX)}")
        return value


def _refuse_repeat(names: list[str], key: str, reason: str) -> None:
    """Refuse the first name listed again, under ``key`` formatted with its position."""
    for i, name in enumerate(names):
        if name in names[:i]:
            raise refusal(key.format(i), name, reason)


class TaskGovernanceConfig(StrictModel):
    """HyperPod task governance: the add-on, the cluster's scheduler policy and one quota per team."""

    enabled: bool = False
    # None lets EKS pick its default build for the cluster's Kubernetes version.
    addon_version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+$")] | None = None
    # SchedulerConfig.FairShare: idle compute goes to borrowing teams by their fair_share_weight (off: first come,
    # first served) (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-policies.html).
    fair_share: bool = True
    # SchedulerConfig.IdleResourceSharing: whether teams may borrow idle compute at all.
    idle_resource_sharing: bool = True
    priority_classes: list[PriorityClass] = Field(default=[], max_length=MAX_PRIORITY_CLASSES)
    teams: list[TeamConfig] = []

    @field_validator("priority_classes")
    @classmethod
    def _distinct_classes(cls, classes: list[PriorityClass]) -> list[PriorityClass]:
        _refuse_repeat([c.name for c in classes], "{}.name", "priority class listed twice")
        return classes

    @field_validator("teams")
    @classmethod
    def _distinct_teams(cls, teams: list[TeamConfig]) -> list[TeamConfig]:
        _refuse_repeat([t.name for t in teams], "{}.name", "team listed twice (a team has one quota)")
        return teams


class TrainingOperatorConfig(StrictModel):
    """The HyperPod training operator (EKS add-on amazon-sagemaker-hyperpod-training-operator) and cert-manager."""

    enabled: bool = False


class S3CsiConfig(StrictModel):
    """The Mountpoint for Amazon S3 CSI driver (EKS add-on aws-mountpoint-s3-csi-driver), reaching these buckets."""

    enabled: bool = False
    bucket_arns: list[Annotated[str, Field(max_length=2048)]] = []

    @field_validator("bucket_arns")
    @classmethod
    def _arns(cls, value: list[str]) -> list[str]:
        for i, arn in enumerate(value):
            if not re.match(S3_BUCKET_ARN, arn):
                raise refusal(str(i), arn, "not the ARN of a general purpose S3 bucket (arn:aws:s3:::bucket-name, "
                                           "no object path)")
        _refuse_repeat(value, "{}", "listed twice")
        return value

    @model_validator(mode="after")
    def _buckets(self) -> S3CsiConfig:
        if self.enabled and not self.bucket_arns:
            raise refusal("bucket_arns", None, "list the buckets the driver may mount (its role reaches only them)")
        return self


class InferenceOperatorConfig(StrictModel):
    """The HyperPod inference operator (EKS add-on amazon-sagemaker-hyperpod-inference): its IAM roles, its TLS
    certificate bucket, and the add-ons it needs (cert-manager, shared with the training operator; the S3 CSI
    driver of ``addons.s3_csi``; metrics-server)."""

    enabled: bool = False
    # None lets EKS pick its default build for the cluster's Kubernetes version.
    addon_version: Annotated[str, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+-eksbuild\.[0-9]+$")] | None = None
    # AWS's module: enable_metrics_server, "optional for HPIO" (off: the cluster already runs metrics-server).
    metrics_server: bool = True


# "The training operator works only with version v1.3.0-eksbuild.1 or higher" of task governance
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator-troubleshooting.html).
MIN_GOVERNANCE_VERSION_WITH_TRAINING_OPERATOR = (1, 3, 0)


CertManagerOwner = Literal["training_operator", "inference_operator"]


class AddonsConfig(StrictModel):
    training_operator: TrainingOperatorConfig = TrainingOperatorConfig()
    task_governance: TaskGovernanceConfig = TaskGovernanceConfig()
    s3_csi: S3CsiConfig = S3CsiConfig()
    inference_operator: InferenceOperatorConfig = InferenceOperatorConfig()
    # Which operator's construct installs the one cert-manager add-on both need; null: the training operator when
    # it is on, else the inference operator. The add-on's logical ID follows its installer, and an installed
    # add-on cannot move (CloudFormation creates the new one first, and EKS refuses a second add-on of one name):
    # to turn the training operator on where the inference operator installed cert-manager, or the training
    # operator off beside the inference operator, name the operator that installed it (the replacement guard
    # refuses the move and says which).
    cert_manager_owner: CertManagerOwner | None = None

    @model_validator(mode="after")
    def _cert_manager_owner_on(self) -> AddonsConfig:
        owner = self.cert_manager_owner
        if owner is not None and not getattr(self, owner).enabled:
            raise refusal("cert_manager_owner", owner, f"addons.{owner} is off, so it installs no cert-manager")
        return self

    def cert_manager_installer(self) -> CertManagerOwner | None:
        """The operator whose construct installs cert-manager (cert_manager_owner), None when neither is on."""
        if self.cert_manager_owner is not None:
            return self.cert_manager_owner
        if self.training_operator.enabled:
            return "training_operator"
        return "inference_operator" if self.inference_operator.enabled else None

    @model_validator(mode="after")
    def _inference_needs_s3_csi(self) -> AddonsConfig:
        # AWS's module installs the S3 CSI add-on with the operator, "required for HPIO" (awslabs/awsome-distributed-
        # training@0edaf15:.../modules/hyperpod_inference_operator/variables.tf), on a role reading every bucket;
        # here the one driver of addons.s3_csi is shared, reaching only its listed buckets.
        if self.inference_operator.enabled and not self.s3_csi.enabled:
            raise refusal("inference_operator.enabled", True,
                          "the inference operator needs the S3 CSI driver: turn on addons.s3_csi and list its buckets")
        return self

    @model_validator(mode="after")
    def _governance_recent_enough_for_the_operator(self) -> AddonsConfig:
        version = self.task_governance.addon_version
        if self.training_operator.enabled and self.task_governance.enabled and version is not None:
            release = tuple(int(n) for n in version[1:].split("-")[0].split("."))
            if release < MIN_GOVERNANCE_VERSION_WITH_TRAINING_OPERATOR:
                raise refusal("task_governance.addon_version", version,
                              "the training operator works only with task governance v1.3.0-eksbuild.1 or later")
        return self

    def eks_addons(self) -> list[str]:
        """The EKS add-ons this section installs, in install order (cert-manager, once, before either operator)."""
        names = []
        if self.cert_manager_installer() is not None:
            names.append(CERT_MANAGER_ADDON)
        if self.training_operator.enabled:
            names.append(TRAINING_OPERATOR_ADDON)
        if self.s3_csi.enabled:
            names.append(S3_CSI_ADDON)
        if self.task_governance.enabled:
            names.append(TASK_GOVERNANCE_ADDON)
        if self.inference_operator.enabled:
            names.append(INFERENCE_OPERATOR_ADDON)
            if self.inference_operator.metrics_server:
                names.append(METRICS_SERVER_ADDON)
        return names
