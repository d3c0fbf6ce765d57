"""The `eks` section: Kubernetes version, API endpoint access, access entries, control-plane logs, add-on versions."""

from __future__ import annotations

import ipaddress
import re
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from infra.config.base import StrictModel, refusal
from infra.config.fields import IamArn, RetentionDays
from infra.config.storage import CLUSTER_NAMESPACES
from infra.facts.addons import addon_namespaces

# Kubernetes versions SageMaker HyperPod supports for EKS orchestration: "SageMaker HyperPod supports Kubernetes
# versions 1.30, 1.31, 1.32, 1.33, 1.34, and 1.35"
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html, read as
# c2hans/aws-docs@07f049df: docs/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.md).
HYPERPOD_K8S_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
# Amazon EKS's release calendar, (end of standard support, end of extended support), UTC
# (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, read as c2hans/aws-docs@0cf87289:
# docs/eks/latest/userguide/kubernetes-versions.md). "On the end of extended support date, you can no longer create
# new Amazon EKS clusters with the unsupported version"; 1.30 is past it and no longer in the calendar.
EKS_SUPPORT_ENDS: dict[str, tuple[date, date]] = {
    "1.31": (date(2025, 11, 26), date(2026, 11, 26)),
    "1.32": (date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": (date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": (date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": (date(2027, 3, 27), date(2028, 3, 27)),
    "1.36": (date(2027, 8, 2), date(2028, 8, 2)),
}
# The day the two pages above were read: the versions both support then. Support that ends later is not seen here
# until the tables are read again; `hpctl preflight` (k8s-version: eks:DescribeClusterVersions) asks EKS on the day.
CALENDAR_READ = date(2026, 12, 3)
SUPPORTED_K8S_VERSIONS = tuple(v for v in HYPERPOD_K8S_VERSIONS
                               if v in EKS_SUPPORT_ENDS and EKS_SUPPORT_ENDS[v][1] > CALENDAR_READ)

# The shortest prefix accepted in eks.public_access_cidrs: 0.0.0.0/1 + 128.0.0.0/1 is the internet too, so
# "not 0.0.0.0/0" is not enough. A /8 is already 16.7 million addresses; nothing shorter names "our networks".
MIN_PUBLIC_ACCESS_PREFIX = 8


# Namespaces where admin amounts to cluster admin: the cluster's own (kube-system runs the control plane's add-ons
# and holds their service accounts, whose Pod Identity roles a namespace admin could then use) and the add-ons'
# (infra/facts/addons.py). "default" holds nothing of the cluster's and stays allowed.
SYSTEM_NAMESPACES = (CLUSTER_NAMESPACES - {"default"}) | addon_namespaces()


class NamespaceAdmin(StrictModel):
    principal_arn: IamArn
    namespaces: list[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]] = Field(
        min_length=1)

    @field_validator("namespaces")
    @classmethod
    def _not_system(cls, namespaces: list[str]) -> list[str]:
        for i, namespace in enumerate(namespaces):
            if namespace in SYSTEM_NAMESPACES:
                raise refusal(str(i), namespace, "admin of a system or add-on namespace can act with its service "
                                                 "accounts' roles, which amounts to cluster admin; list the "
                                                 "principal in eks.admin_principal_arns if that is meant")
        return namespaces


class EksConfig(StrictModel):
    version: str = "1.33"
    endpoint: Literal["private", "public_and_private"] = "private"
    # "Public endpoint access CIDR ranges per cluster: 40", not adjustable (Amazon EKS service quotas,
    # https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html, read in its docs.amazonaws.cn copy).
    public_access_cidrs: list[ipaddress.IPv4Network] = Field(default=[], max_length=40)
    admin_principal_arns: list[IamArn] = []
    # Principals that administer only some namespaces (data scientists): AmazonEKSAdminPolicy with namespace
    # scope, as in aws-cdk-lib's AccessPolicy documentation
    # (https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_eks_v2.AccessPolicyNameOptions.html).
    namespace_admins: list[NamespaceAdmin] = []
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] = "API"
    log_retention_days: RetentionDays = 365
    # Add-on versions; an add-on not listed gets EKS's default for the Kubernetes version, as in AWS's HyperPod
    # Terraform module (awslabs/awsome-distributed-training@0edaf152:.../modules/eks_cluster/main.tf sets no
    # addon_version). A pinned build may not exist for every Kubernetes version: `hpctl preflight` checks it.
    addon_versions: dict[Literal["vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"], str] = {}

    @model_validator(mode="after")
    def _one_access_entry_per_principal(self) -> EksConfig:
        principals = list(self.admin_principal_arns) + [g.principal_arn for g in self.namespace_admins]
        twice = sorted({p for p in principals if principals.count(p) > 1})
        if twice:
            raise refusal("namespace_admins", twice[0],
                          "a principal gets one access entry: list it once, as a cluster or a namespace admin")
        return self

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise refusal("", None, f"write the Kubernetes version as a quoted string, e.g. \"1.33\", got {value}")
        if value not in SUPPORTED_K8S_VERSIONS:
            if value in HYPERPOD_K8S_VERSIONS:
                reason = ("Amazon EKS no longer creates clusters of Kubernetes " + str(value)[:20]
                          + " (past its end of extended support)")
            else:
                reason = f"Kubernetes {str(value)[:20]} is not supported by SageMaker HyperPod"
            raise refusal("", None, f"{reason}; supported: {', '.join(SUPPORTED_K8S_VERSIONS)}")
        return value

    @field_validator("addon_versions")
    @classmethod
    def _vpc_cni_version(cls, value: dict[str, str]) -> dict[str, str]:
        cni = value.get("vpc-cni")
        if cni is not None:
            match = re.match(r"^v([0-9]+)\.([0-9]+)\.([0-9]+)", cni)
            if not match or tuple(int(g) for g in match.groups()) < (1, 18, 3):
                raise refusal("vpc-cni", None, f"HyperPod needs the VPC CNI v1.18.3 or later, got {cni}")
        return value

    @model_validator(mode="after")
    def _endpoint(self) -> EksConfig:
        if self.endpoint == "public_and_private":
            if not self.public_access_cidrs:
                raise refusal("public_access_cidrs", [],
                              "required and non-empty when eks.endpoint is public_and_private")
            for i, cidr in enumerate(self.public_access_cidrs):
                if cidr.prefixlen < MIN_PUBLIC_ACCESS_PREFIX:
                    raise refusal(f"public_access_cidrs.{i}", str(cidr),
                                  f"prefixes shorter than /{MIN_PUBLIC_ACCESS_PREFIX} open the API server to much of "
                                  "the internet (0.0.0.0/0 included); list your networks")
        elif self.public_access_cidrs:
            raise refusal("public_access_cidrs", [str(c) for c in self.public_access_cidrs],
                          "only used when eks.endpoint is public_and_private")
        return self
