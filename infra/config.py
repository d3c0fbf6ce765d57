"""The typed, validated configuration every stack reads: one YAML file -> one frozen AppConfig."""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from infra.config_file import read_config_document
from infra.errors import ConfigError
from infra.ip_plan import ips_per_instance, subnet_capacity

# Kubernetes versions SageMaker HyperPod supports for EKS orchestration
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html).
SUPPORTED_K8S_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")

# CloudWatch Logs accepts only these retention periods (days -> aws_logs.RetentionDays member).
RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}

# The HyperPod dependencies chart's default commit (see ChartConfig.revision for what it is).
DEPENDENCIES_CHART_REVISION = "a00b22d17ea928a6e39a43bd2efdafe01b1005ea"

# The shortest prefix accepted in eks.public_access_cidrs: 0.0.0.0/1 + 128.0.0.0/1 is the internet too, so
# "not 0.0.0.0/0" is not enough. A /8 is already 16.7 million addresses; nothing shorter names "our networks".
MIN_PUBLIC_ACCESS_PREFIX = 8

# Service limit on instance groups per cluster (SageMaker HyperPod quotas).
MAX_INSTANCE_GROUPS = 20

_AZ_ID = re.compile(r"^[a-z]{2,}[0-9]+-az[0-9]+$")
_DIRECTIONS = {
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
    "central": "c",
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
}


def az_id_prefix(region: str) -> str:
    """The prefix AWS uses for the AZ IDs of a region: us-west-2 -> usw2, ap-northeast-1 -> apne1."""
    parts = region.split("-")
    number = parts[-1]
    words = parts[:-1]
    head = words[0]
    middle = "".join(_DIRECTIONS.get(w, w[0]) for w in words[1:])
    return f"{head}{middle}{number}"


@cache
def _sagemaker_model() -> Any:
    """botocore's SageMaker service model: the API's own enums, patterns and ranges."""
    import botocore.session

    return botocore.session.get_session().get_service_model("sagemaker")


def cluster_instance_types() -> frozenset[str]:
    """Every instance type HyperPod accepts, as listed by the installed botocore release."""
    return frozenset(_sagemaker_model().shape_for("ClusterInstanceType").enum)


@cache
def sagemaker_regions() -> frozenset[str]:
    import botocore.session

    session = botocore.session.get_session()
    regions: set[str] = set()
    for partition in session.get_available_partitions():
        regions.update(session.get_available_regions("sagemaker", partition_name=partition))
    return frozenset(regions)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


Name63 = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")]
AzId = Annotated[str, Field(pattern=_AZ_ID.pattern)]


def _retention_days(value: int) -> int:
    if value not in RETENTION_DAYS:
        raise PydanticCustomError(
            "retention", "{v} days is not a CloudWatch Logs retention; use one of {ok}",
            {"v": value, "ok": sorted(RETENTION_DAYS)},
        )
    return value


RetentionDays = Annotated[StrictInt, AfterValidator(_retention_days)]


def _whole_number(value: Any) -> Any:
    # pydantic's lax mode reads YAML `true` as 1 and 2.0 as 2; where a number is expected either is a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("int_type", "expected a whole number, got {v}", {"v": value})
    return value


# For Literal numbers, which pydantic cannot validate strictly.
WholeNumber = BeforeValidator(_whole_number)

# Kubernetes label and taint syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/,
# "Syntax and character set"): a key is an optional DNS-subdomain prefix of at most 253 characters and "/",
# then a name of 1-63 characters, alphanumeric at both ends with "-", "_", "." between; a value is empty or
# 1-63 characters of the same form.
_K8S_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _k8s_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if "/" in value and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise PydanticCustomError("k8s_key", "the prefix before '/' must be a DNS subdomain of at most 253 "
                                  "characters (lower case, digits, '-', '.'), got {v}", {"v": value})
    if not _K8S_NAME.match(name):
        raise PydanticCustomError("k8s_key", "not a Kubernetes key: the name must be 1-63 characters, "
                                  "alphanumeric at both ends with '-', '_' or '.' between, got {v}", {"v": value})
    return value


def _k8s_value(value: str) -> str:
    if value and not _K8S_NAME.match(value):
        raise PydanticCustomError("k8s_value", "not a Kubernetes label value: empty or 1-63 characters, "
                                  "alphanumeric at both ends with '-', '_' or '.' between, got {v}", {"v": value})
    return value


K8sKey = Annotated[str, AfterValidator(_k8s_key)]
K8sValue = Annotated[str, AfterValidator(_k8s_value)]


# Tags as the CloudFormation resource schemas take them (cfn-lint's AWS::SageMaker::Cluster schema, Tag):
# key 1-128 and value 0-256 characters of Unicode letters, digits, whitespace and _ . : / = + - @, and
# neither may start with "aws:", which AWS reserves.
def _tag_text(value: str) -> str:
    if value.lower().startswith("aws:"):
        raise PydanticCustomError("tag", "the aws: prefix is reserved for AWS, got {v}", {"v": value})
    bad = [c for c in value if not (unicodedata.category(c)[0] in "LNZ" or c in "_.:/=+-@")]
    if bad:
        raise PydanticCustomError("tag", "tags take letters, digits, spaces and _ . : / = + - @ only, got {c!r}",
                                  {"c": bad[0]})
    return value


TagKey = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_tag_text)]
TagValue = Annotated[str, Field(max_length=256), AfterValidator(_tag_text)]

# Helm chart versions must be SemVer 2 (Helm maintainers in https://github.com/helm/helm/issues/9728; "Helm
# uses SemVer 2", https://helm.sh/docs/v2/chart_best_practices/conventions). An exact version, not a range,
# so every deploy installs the same chart. Regular expression from https://semver.org/.
_SEMVER = (r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
           r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
           r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
ExactVersion = Annotated[str, Field(pattern=_SEMVER)]


def path_escapes(value: str) -> bool:
    """True when a relative path from the config could lead outside the project: absolute, ~ or '..'."""
    path = Path(value)
    return path.is_absolute() or value.startswith("~") or ".." in path.parts
IamArn = Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:[\w+=,.@/:-]+$")]


class HyperPodSubnet(_Strict):
    """One large private subnet for HyperPod nodes in one Availability Zone ID."""

    az_id: AzId
    cidr: ipaddress.IPv4Network | None = None
    subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$")


class NetworkConfig(_Strict):
    vpc_cidr: ipaddress.IPv4Network = ipaddress.IPv4Network("10.192.0.0/16")
    control_plane_az_ids: list[AzId] = Field(min_length=2)
    nat_gateways: Literal["per_az", "single"] = "per_az"
    hyperpod_subnets: list[HyperPodSubnet] = Field(min_length=1)
    # Interface endpoints for closed networks (ec2, ecr, sts, logs, ssm, eks-auth, sagemaker, ...).
    interface_endpoints: bool = False
    # Egress of the nodes' security group beyond the group itself. "all" is AWS's rule (its security group
    # template, aws/sagemaker-hyperpod-cluster-setup@b920fcf4:eks/cloudformation/security-group-template.yaml,
    # InternetCommunicationRuleEgress); "https_only" keeps TCP 443 alone, which breaks anything else a job
    # reaches outside the group (other FSx or database security groups, non-HTTPS endpoints).
    node_egress: Literal["all", "https_only"] = "all"
    # The S3 gateway endpoint's policy. "open" is AWS's setup (no policy); "this_account" limits it to this
    # account's buckets plus the AWS-owned package and image-layer buckets: public datasets and other accounts'
    # buckets are then unreachable through it.
    s3_endpoint_policy: Literal["open", "this_account"] = "open"
    flow_logs_retention_days: RetentionDays = 365
    # Bring your own VPC: set existing_vpc_id, control_plane_subnet_ids and a subnet_id per HyperPod subnet.
    existing_vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    control_plane_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = []

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr_size(cls, value: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if not 16 <= value.prefixlen <= 24:
            raise PydanticCustomError("cidr", "VPC CIDR must be between /16 and /24, got {v}", {"v": str(value)})
        if not value.is_private:
            raise PydanticCustomError("cidr", "VPC CIDR {v} is not a private range", {"v": str(value)})
        return value

    @field_validator("control_plane_az_ids")
    @classmethod
    def _distinct_control_plane_azs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise PydanticCustomError("dup", "AZ IDs must be distinct, got {v}", {"v": value})
        return value

    @model_validator(mode="after")
    def _subnets(self) -> NetworkConfig:
        byo = self.existing_vpc_id is not None
        seen: set[str] = set()
        for i, subnet in enumerate(self.hyperpod_subnets):
            where = f"hyperpod_subnets.{i}"
            if subnet.az_id in seen:
                raise ConfigError(f"network.{where}.az_id", subnet.az_id, "one HyperPod subnet per AZ ID")
            seen.add(subnet.az_id)
            if byo and subnet.subnet_id is None:
                raise ConfigError(f"network.{where}.subnet_id", None, "required with network.existing_vpc_id")
            if not byo and subnet.subnet_id is not None:
                raise ConfigError(
                    f"network.{where}.subnet_id", subnet.subnet_id, "only allowed with network.existing_vpc_id"
                )
            if not byo and subnet.cidr is None:
                raise ConfigError(f"network.{where}.cidr", None, "required when the VPC is created")
        if byo and len(self.control_plane_subnet_ids) < 2:
            raise ConfigError(
                "network.control_plane_subnet_ids",
                self.control_plane_subnet_ids,
                "at least 2 subnets in different AZs are required with network.existing_vpc_id",
            )
        if not byo and self.control_plane_subnet_ids:
            raise ConfigError(
                "network.control_plane_subnet_ids",
                self.control_plane_subnet_ids,
                "only allowed with network.existing_vpc_id",
            )
        if not byo:
            self._check_cidrs()
        return self

    def _check_cidrs(self) -> None:
        placed: list[tuple[str, ipaddress.IPv4Network]] = [("network.vpc_cidr", self.vpc_cidr)]
        for i, subnet in enumerate(self.hyperpod_subnets):
            assert subnet.cidr is not None
            key = f"network.hyperpod_subnets.{i}.cidr"
            if not 16 <= subnet.cidr.prefixlen <= 28:
                raise ConfigError(key, str(subnet.cidr), "a secondary VPC CIDR must be between /16 and /28")
            if not _same_private_family(self.vpc_cidr, subnet.cidr):
                raise ConfigError(
                    key,
                    str(subnet.cidr),
                    f"a secondary CIDR must come from the same private range as the VPC CIDR {self.vpc_cidr} "
                    "or from 100.64.0.0/10",
                )
            for other_key, other in placed:
                if subnet.cidr.overlaps(other):
                    raise ConfigError(key, str(subnet.cidr), f"overlaps {other_key} ({other})")
            placed.append((key, subnet.cidr))

    def control_plane_layout(self) -> list[tuple[str, ipaddress.IPv4Network, ipaddress.IPv4Network]]:
        """(az_id, private CIDR, public CIDR) per control-plane AZ, carved from vpc_cidr.

        The VPC CIDR is split into 2^k equal blocks (2^k > number of AZs): the first blocks become the
        private subnets, the last block is split again into the small public subnets for NAT gateways.
        """
        count = len(self.control_plane_az_ids)
        split = math.ceil(math.log2(count + 1))
        blocks = list(self.vpc_cidr.subnets(prefixlen_diff=split))
        public_split = max(1, math.ceil(math.log2(count)))
        publics = list(blocks[-1].subnets(prefixlen_diff=public_split))
        return [(az, blocks[i], publics[i]) for i, az in enumerate(self.control_plane_az_ids)]


def _same_private_family(primary: ipaddress.IPv4Network, secondary: ipaddress.IPv4Network) -> bool:
    families = [ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    if secondary.subnet_of(ipaddress.IPv4Network("100.64.0.0/10")):
        return True
    return any(primary.subnet_of(f) and secondary.subnet_of(f) for f in families)


class NamespaceAdmin(_Strict):
    principal_arn: IamArn
    namespaces: list[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)]] = Field(
        min_length=1)


class EksConfig(_Strict):
    version: str = "1.33"
    endpoint: Literal["private", "public_and_private"] = "private"
    public_access_cidrs: list[ipaddress.IPv4Network] = []
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
            raise ConfigError("eks.namespace_admins", twice[0],
                              "a principal gets one access entry: list it once, as a cluster or a namespace admin")
        return self

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if isinstance(value, float):
            raise PydanticCustomError(
                "k8s_version", "write the Kubernetes version as a quoted string, e.g. \"1.33\", got {v}", {"v": value}
            )
        if value not in SUPPORTED_K8S_VERSIONS:
            raise PydanticCustomError(
                "k8s_version",
                "Kubernetes {v} is not supported by SageMaker HyperPod; supported: {s}",
                {"v": value, "s": ", ".join(SUPPORTED_K8S_VERSIONS)},
            )
        return value

    @field_validator("addon_versions")
    @classmethod
    def _vpc_cni_version(cls, value: dict[str, str]) -> dict[str, str]:
        cni = value.get("vpc-cni")
        if cni is not None:
            match = re.match(r"^v(\d+)\.(\d+)\.(\d+)", cni)
            if not match or tuple(int(g) for g in match.groups()) < (1, 18, 3):
                raise PydanticCustomError(
                    "cni", "HyperPod needs the VPC CNI v1.18.3 or later, got {v}", {"v": cni}
                )
        return value

    @model_validator(mode="after")
    def _endpoint(self) -> EksConfig:
        if self.endpoint == "public_and_private":
            if not self.public_access_cidrs:
                raise ConfigError(
                    "eks.public_access_cidrs", [], "required and non-empty when eks.endpoint is public_and_private"
                )
            for i, cidr in enumerate(self.public_access_cidrs):
                if cidr.prefixlen < MIN_PUBLIC_ACCESS_PREFIX:
                    raise ConfigError(
                        f"eks.public_access_cidrs.{i}", str(cidr),
                        f"prefixes shorter than /{MIN_PUBLIC_ACCESS_PREFIX} open the API server to much of the "
                        "internet (0.0.0.0/0 included); list your networks",
                    )
        elif self.public_access_cidrs:
            raise ConfigError(
                "eks.public_access_cidrs",
                [str(c) for c in self.public_access_cidrs],
                "only used when eks.endpoint is public_and_private",
            )
        return self


DeepHealthCheck = Literal["InstanceStress", "InstanceConnectivity"]


class Taint(_Strict):
    key: K8sKey
    value: K8sValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class InstanceGroupConfig(_Strict):
    name: Name63
    instance_type: str
    instance_count: StrictInt = Field(ge=0, le=6758)
    az_id: AzId
    threads_per_core: Annotated[Literal[1, 2], WholeNumber] = 1
    ebs_volume_gb: StrictInt = Field(default=500, ge=1, le=16384)
    deep_health_checks: list[DeepHealthCheck] = []
    training_plan_arn: str | None = Field(
        default=None, pattern=r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*$"
    )
    labels: dict[K8sKey, K8sValue] = {}
    taints: list[Taint] = []

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if not value.startswith("ml."):
            raise PydanticCustomError(
                "instance_type",
                "HyperPod instance types start with 'ml.' (e.g. ml.{v}), got {v}",
                {"v": value},
            )
        known = cluster_instance_types()
        if value not in known:
            raise PydanticCustomError(
                "instance_type",
                "{v} is not a HyperPod instance type in this botocore release ({n} known, e.g. ml.g5.8xlarge)",
                {"v": value, "n": len(known)},
            )
        return value

    @field_validator("deep_health_checks")
    @classmethod
    def _distinct_checks(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise PydanticCustomError("dup", "listed twice: {v}", {"v": value})
        return value

    @model_validator(mode="after")
    def _connectivity(self) -> InstanceGroupConfig:
        if "InstanceConnectivity" in self.deep_health_checks and self.instance_count < 2:
            raise PydanticCustomError(
                "deep_health_checks",
                "InstanceConnectivity needs at least 2 instances in the group, instance_count is {n}",
                {"n": self.instance_count},
            )
        return self


class ChartConfig(_Strict):
    """Where the HyperPod dependencies Helm chart comes from at deploy time."""

    source: Literal["git", "oci", "local"] = "git"
    git_repository: str = Field(
        default="https://github.com/aws/sagemaker-hyperpod-cli", pattern=r"^https://github\.com/[\w.-]+/[\w.-]+$"
    )
    # A full commit SHA: branches and tags move, a commit does not. Default: aws/sagemaker-hyperpod-cli main at
    # a00b22d1 (2026-06-19, "Bump inference operator helm chart version to 2.2.2"), the last commit on main that
    # touches helm_chart/HyperPodHelmChart in the copy read on 2026-12-02 (main was then at 011ca927).
    revision: str = Field(default=DEPENDENCIES_CHART_REVISION, pattern=r"^[0-9a-f]{40}$")
    chart_path: str = "helm_chart/HyperPodHelmChart"
    oci_uri: str | None = Field(default=None, pattern=r"^oci://[\w./:-]+$")
    version: ExactVersion | None = None
    local_path: str | None = None
    values: dict[str, Any] = {}

    @model_validator(mode="after")
    def _source(self) -> ChartConfig:
        if self.source == "oci" and (self.oci_uri is None or self.version is None):
            raise ConfigError(
                "hyperpod.dependencies_chart", self.oci_uri, "source oci needs oci_uri and a pinned version"
            )
        if self.source == "local":
            if self.local_path is None:
                raise ConfigError("hyperpod.dependencies_chart.local_path", None, "required with source local")
            if not (Path(self.local_path) / "Chart.yaml").is_file():
                raise ConfigError(
                    "hyperpod.dependencies_chart.local_path", self.local_path, "no Chart.yaml in that directory"
                )
        return self


class LifecycleOptions(_Strict):
    """Settings written to lifecycle_config.env next to on_create.sh (see lifecycle_scripts/README.md)."""

    containerd_on_opt_sagemaker: bool = True
    fsx_lustre_client: bool = False
    secondary_volume_wait_seconds: StrictInt = Field(default=300, ge=10, le=3600)

    def render(self) -> str:
        values = {
            "CONTAINERD_ON_OPT_SAGEMAKER": self.containerd_on_opt_sagemaker,
            "ENABLE_FSX_LUSTRE_CLIENT": self.fsx_lustre_client,
            "SECONDARY_VOLUME_WAIT_SECONDS": self.secondary_volume_wait_seconds,
        }
        lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()]
        return "# Written by the HyperPod stack; read by on_create.sh.\n" + "\n".join(lines) + "\n"


class HyperPodConfig(_Strict):
    cluster_name: Name63
    instance_groups: list[InstanceGroupConfig] = Field(min_length=1, max_length=MAX_INSTANCE_GROUPS)
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    node_provisioning_mode: Literal["Continuous"] | None = "Continuous"
    lifecycle_scripts_dir: str = "lifecycle_scripts"
    # CloudFormation takes at most 128 characters (LifeCycleConfig.OnCreate in the AWS::SageMaker::Cluster schema).
    on_create_script: str = Field(default="on_create.sh", min_length=1, max_length=128)
    lifecycle: LifecycleOptions = LifecycleOptions()
    dependencies_chart: ChartConfig = ChartConfig()
    permissions_boundary_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:policy/.+$")
    # Synth compares the create-only fields with config/locks/<project>.lock.json (the last deployed state,
    # see infra/hyperpod/lock.py); a change that replaces the cluster is refused unless this is true.
    allow_cluster_replacement: bool = False
    # Instance groups (deployed with nodes) that this config removes or renames: their nodes are terminated.
    acknowledge_group_removal: list[Name63] = []
    # lifecycle_scripts_dir and dependencies_chart.local_path / chart_path must stay inside the project
    # (relative, no "..") unless this is true.
    allow_paths_outside_project: bool = False

    @field_validator("instance_groups")
    @classmethod
    def _unique_names(cls, groups: list[InstanceGroupConfig]) -> list[InstanceGroupConfig]:
        names = [g.name for g in groups]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise PydanticCustomError("dup", "instance group names must be unique, repeated: {d}", {"d": dups})
        return groups

    @model_validator(mode="after")
    def _paths_inside_project(self) -> HyperPodConfig:
        chart = self.dependencies_chart
        paths = [("hyperpod.lifecycle_scripts_dir", self.lifecycle_scripts_dir),
                 ("hyperpod.dependencies_chart.chart_path", chart.chart_path),
                 ("hyperpod.dependencies_chart.local_path", chart.local_path)]
        for key, value in paths:
            if value is not None and path_escapes(value) and not self.allow_paths_outside_project:
                raise ConfigError(
                    key, value,
                    "leads outside the project (absolute, ~ or '..'); use a path inside it, or set "
                    "hyperpod.allow_paths_outside_project: true",
                )
        return self

    @model_validator(mode="after")
    def _acknowledged_groups_are_gone(self) -> HyperPodConfig:
        # An acknowledgment left behind must not let a later removal of a group of that name pass silently.
        present = {g.name for g in self.instance_groups}
        for i, name in enumerate(self.acknowledge_group_removal):
            if name in present:
                raise ConfigError(
                    f"hyperpod.acknowledge_group_removal.{i}", name,
                    "the group is still in hyperpod.instance_groups; remove the acknowledgment",
                )
        return self


# The metric families of the amazon-sagemaker-hyperpod-observability add-on and the levels each accepts, as AWS's
# Terraform module documents them (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:
# 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/README.md, "Advanced Observability Metrics
# Configuration", and .../modules/observability/eks_addon.tf for the keys). "custom" is the family AWS's
# module sets from its `cluster_metric_level`; "inference" is always BASIC there (no other level documented).


class _MetricFamily(_Strict):
    # Every AWS setup read sends 30 s. Its bounds are in the add-on's configuration schema, which was not found
    # published (unverified here); `hpctl preflight` (addon-config) checks it against the schema EKS serves.
    scrape_interval: int = Field(default=30, ge=1)


class BasicOrAdvanced(_MetricFamily):
    level: Literal["BASIC", "ADVANCED"] = "BASIC"


class DisabledOrAdvanced(_MetricFamily):
    level: Literal["DISABLED", "ADVANCED"] = "DISABLED"


class BasicOnly(_MetricFamily):
    level: Literal["BASIC"] = "BASIC"


class ObservabilityAddonMetrics(_Strict):
    """One entry per metric family of the HyperPod observability add-on; defaults are AWS's module defaults."""

    training: BasicOrAdvanced = BasicOrAdvanced()
    inference: BasicOnly = BasicOnly()
    task_governance: DisabledOrAdvanced = DisabledOrAdvanced()
    scaling: DisabledOrAdvanced = DisabledOrAdvanced()
    custom: BasicOrAdvanced = BasicOrAdvanced()
    node: BasicOrAdvanced = BasicOrAdvanced()
    accelerated_compute: BasicOrAdvanced = BasicOrAdvanced()
    network: DisabledOrAdvanced = DisabledOrAdvanced()


class PrometheusConfig(_Strict):
    """Amazon Managed Service for Prometheus and the HyperPod observability add-on that writes to it."""

    enabled: bool = True
    metrics: ObservabilityAddonMetrics = ObservabilityAddonMetrics()
    # The add-on's `logging.enabled`: it creates log groups and ships every container's logs to CloudWatch
    # (AWS's module default is false; Container Insights already ships container logs when it is on).
    logging: bool = False
    log_retention_days: RetentionDays = 365


class GrafanaNetworkAccess(_Strict):
    """Who may reach the workspace: prefix lists of allowed source CIDRs and/or interface VPC endpoints.

    AWS::Grafana::Workspace NetworkAccessControl takes up to 5 of each (cfn-lint's bundled schema); with it set,
    requests from anywhere else are refused.
    """

    prefix_list_ids: list[Annotated[str, Field(pattern=r"^pl-[0-9a-f]{8,17}$")]] = Field(default=[], max_length=5)
    vpce_ids: list[Annotated[str, Field(pattern=r"^vpce-[0-9a-f]{8,17}$")]] = Field(default=[], max_length=5)

    @model_validator(mode="after")
    def _something_allowed(self) -> GrafanaNetworkAccess:
        if not self.prefix_list_ids and not self.vpce_ids:
            raise ConfigError("observability.grafana.network_access", {},
                              "name prefix_list_ids or vpce_ids; with neither nobody could reach the workspace")
        return self


# An S3 prefix: s3://<bucket>/ or s3://<bucket>/<key prefix>/ (ending in "/").
S3_PREFIX_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(?:[^\s]*/)?$"


class GrafanaConfig(_Strict):
    """Amazon Managed Grafana; users sign in through IAM Identity Center (AWS_SSO) or SAML."""

    enabled: bool = True
    authentication: Literal["AWS_SSO", "SAML"] = "AWS_SSO"
    # IAM Identity Center user / group IDs made Grafana admins (AWS_SSO only).
    admin_user_ids: list[Annotated[str, Field(min_length=1, max_length=47)]] = []
    admin_group_ids: list[Annotated[str, Field(min_length=1, max_length=47)]] = []
    # null: the workspace is reachable from any network (sign-in still required).
    network_access: GrafanaNetworkAccess | None = None
    # AWS's HyperPod data sources, dashboards and alert rules, provisioned into the workspace at deploy time
    # (infra/grafana_content.py); the HyperPod observability add-on does not create them.
    provision_dashboards: bool = True
    # Where the provisioner reads AWS's pinned dashboard files when github is unreachable: an s3://bucket/prefix/
    # holding the same files under the same relative paths (their SHA-256 is checked either way).
    dashboards_s3_source: Annotated[str, Field(pattern=S3_PREFIX_PATTERN)] | None = None

    @model_validator(mode="after")
    def _admins(self) -> GrafanaConfig:
        if self.authentication != "AWS_SSO" and (self.admin_user_ids or self.admin_group_ids):
            raise ConfigError(
                "observability.grafana.admin_user_ids", None,
                "admin assignments need authentication AWS_SSO; with SAML map admins in the SAML assertion",
            )
        if self.network_access is not None and self.provision_dashboards:
            # The provisioner's function runs outside the VPC: a workspace closed to other networks refuses it.
            raise ConfigError(
                "observability.grafana.provision_dashboards", True,
                "cannot reach a workspace limited by network_access; set provision_dashboards: false",
            )
        return self


class AlertsConfig(_Strict):
    """HyperPod cluster events (EventBridge) at the chosen levels, to an encrypted SNS topic."""

    enabled: bool = True
    levels: list[Literal["Info", "Warn", "Error"]] = Field(default=["Error"], min_length=1)
    email: Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")] | None = None


class ObservabilityConfig(_Strict):
    container_insights: bool = True
    prometheus: PrometheusConfig = PrometheusConfig()
    grafana: GrafanaConfig = GrafanaConfig()
    alerts: AlertsConfig = AlertsConfig()
    dashboard: bool = True

    @property
    def any_enabled(self) -> bool:
        """Whether any observability piece is on: the one definition of when anything is built for it."""
        return (self.container_insights or self.prometheus.enabled or self.grafana.enabled or self.alerts.enabled
                or self.dashboard)

    @model_validator(mode="after")
    def _grafana_needs_prometheus(self) -> ObservabilityConfig:
        if self.grafana.enabled and not self.prometheus.enabled:
            raise ConfigError(
                "observability.grafana.enabled", True,
                "Grafana's dashboards read the Prometheus workspace; enable observability.prometheus or "
                "disable Grafana",
            )
        return self


# Namespaces every EKS cluster with HyperPod already has (the last one is created by HyperPod's chart).
CLUSTER_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "aws-hyperpod"})

S3Uri = Annotated[str, Field(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")]


class FsxLustreConfig(_Strict):
    """A shared FSx for Lustre file system (PERSISTENT_2) for datasets and checkpoints."""

    enabled: bool = False
    # PERSISTENT_2 takes 1200 GiB or a multiple of 2400 GiB.
    capacity_gib: StrictInt = Field(default=1200, ge=1200, le=2_400_000)
    throughput_per_tib: Annotated[Literal[125, 250, 500, 1000], WholeNumber] = 250
    # The AZ ID of the HyperPod subnet to place it in; default: the first HyperPod subnet.
    az_id: AzId | None = None
    # Optional S3 data repository association: s3://bucket/prefix linked at file_system_path.
    data_repository_s3_uri: S3Uri | None = None
    # With the association, deleting a file on FSx also deletes its object in S3 only when this is true.
    data_repository_export_deletions: bool = False
    # Daily automatic backups kept this many days (FSx allows 0-90; 0 turns them off). FSx does not back up a
    # file system linked to S3, so with data_repository_s3_uri write 0: S3 then holds the durable copy.
    automatic_backup_retention_days: int = Field(default=7, ge=0, le=90)
    file_system_path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9_./-]*$")] = "/data"
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)] = "training"
    pvc_name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)] = "fsx-claim"
    # Keep the file system when the stack is deleted (checkpoints outlive the cluster).
    retain_on_delete: bool = True
    # Version of the EKS add-on aws-fsx-csi-driver; null lets EKS pick its default for the Kubernetes version.
    csi_driver_version: Annotated[str, Field(pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")] | None = None

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        if value in CLUSTER_NAMESPACES:
            raise PydanticCustomError(
                "fsx_namespace",
                "{v} already exists on every cluster; the storage chart creates its namespace, use another "
                "(e.g. training)",
                {"v": value},
            )
        return value

    @model_validator(mode="after")
    def _data_repository(self) -> FsxLustreConfig:
        if self.data_repository_s3_uri and self.automatic_backup_retention_days:
            raise ConfigError(
                "storage.fsx_lustre.automatic_backup_retention_days", self.automatic_backup_retention_days,
                "FSx for Lustre does not back up a file system linked to S3 (data_repository_s3_uri); write 0",
            )
        if self.data_repository_export_deletions and not self.data_repository_s3_uri:
            raise ConfigError("storage.fsx_lustre.data_repository_export_deletions", True,
                              "only used with data_repository_s3_uri")
        return self

    @field_validator("capacity_gib")
    @classmethod
    def _capacity_step(cls, value: int) -> int:
        if value != 1200 and value % 2400 != 0:
            raise PydanticCustomError(
                "fsx_capacity", "PERSISTENT_2 capacity is 1200 GiB or a multiple of 2400 GiB, got {v}", {"v": value}
            )
        return value


class StorageConfig(_Strict):
    fsx_lustre: FsxLustreConfig = FsxLustreConfig()


class AppConfig(_Strict):
    project: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,39}$")]
    account: Annotated[str, Field(pattern=r"^\d{12}$")] | None = None
    region: str
    network: NetworkConfig
    eks: EksConfig = EksConfig()
    hyperpod: HyperPodConfig
    observability: ObservabilityConfig = ObservabilityConfig()
    storage: StorageConfig = StorageConfig()
    # A permissions boundary applied to every IAM role the stacks create (e.g. an organisation's guard rail).
    permissions_boundary_arn: str | None = Field(default=None, pattern=r"^arn:aws[a-z-]*:iam::\d{12}:policy/.+$")
    # Remove data-bearing resources (buckets, log groups, keys) on cdk destroy instead of retaining them.
    destroy_data_on_delete: bool = False
    # CloudFormation termination protection on the stacks that hold state (EKS, HyperPod, storage,
    # observability): a stack delete is refused until this is false and deployed.
    termination_protection: bool = True
    tags: dict[TagKey, TagValue] = {}

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value not in sagemaker_regions():
            raise PydanticCustomError(
                "region", "{v} is not a region where SageMaker is available (per botocore)", {"v": value}
            )
        return value

    @model_validator(mode="after")
    def _cross_checks(self) -> AppConfig:
        prefix = az_id_prefix(self.region)
        network, groups = self.network, self.hyperpod.instance_groups
        az_keys = [(f"network.control_plane_az_ids.{i}", az) for i, az in enumerate(network.control_plane_az_ids)]
        az_keys += [(f"network.hyperpod_subnets.{i}.az_id", s.az_id) for i, s in enumerate(network.hyperpod_subnets)]
        az_keys += [(f"hyperpod.instance_groups.{i}.az_id", g.az_id) for i, g in enumerate(groups)]
        for key, az in az_keys:
            if not az.startswith(prefix + "-az"):
                raise ConfigError(key, az, f"not an AZ ID of region {self.region} (expected {prefix}-azN)")
        subnets = {s.az_id: s for s in self.network.hyperpod_subnets}
        for i, group in enumerate(self.hyperpod.instance_groups):
            if group.az_id not in subnets:
                raise ConfigError(
                    f"hyperpod.instance_groups.{i}.az_id",
                    group.az_id,
                    f"no entry in network.hyperpod_subnets for it (have: {', '.join(subnets)})",
                )
        fsx = self.storage.fsx_lustre
        if fsx.az_id is not None and fsx.az_id not in subnets:
            raise ConfigError(
                "storage.fsx_lustre.az_id", fsx.az_id,
                f"no entry in network.hyperpod_subnets for it (have: {', '.join(subnets)})",
            )
        for i, subnet in enumerate(self.network.hyperpod_subnets):
            if subnet.cidr is None:
                continue
            groups = [g for g in self.hyperpod.instance_groups if g.az_id == subnet.az_id]
            needed = sum(g.instance_count * ips_per_instance(g.instance_type) for g in groups)
            available = subnet_capacity(subnet.cidr)
            if needed > available:
                detail = ", ".join(
                    f"{g.name}: {g.instance_count} x {ips_per_instance(g.instance_type)}" for g in groups
                )
                raise ConfigError(
                    f"network.hyperpod_subnets.{i}.cidr",
                    str(subnet.cidr),
                    f"the instance groups in {subnet.az_id} need {needed} IPs ({detail}) but the subnet has "
                    f"{available} usable; use a larger CIDR",
                )
        return self

    @property
    def create_only_fingerprint(self) -> dict[str, dict[str, Any]]:
        """Create-only fields of each instance group: changing one replaces the HyperPod cluster."""
        subnets = {s.az_id: s for s in self.network.hyperpod_subnets}
        return {
            g.name: {
                "instance_type": g.instance_type,
                "threads_per_core": g.threads_per_core,
                "az_id": g.az_id,
                "subnet": str(subnets[g.az_id].cidr or subnets[g.az_id].subnet_id),
            }
            for g in self.hyperpod.instance_groups
        }


def eks_cluster_name(config: AppConfig) -> str:
    """The name this product gives the EKS cluster it creates: ``<project>-eks``."""
    return f"{config.project}-eks"


def _format_location(loc: tuple[Any, ...]) -> str:
    # A key from the file may hold anything, line breaks included: quote the odd ones so the message stays
    # on one line and shows exactly what was written.
    parts = [str(p) if str(p).isprintable() and str(p).strip() == str(p) and str(p) else repr(p) for p in loc]
    return ".".join(parts) or "<root>"


def _describe(error: dict[str, Any]) -> str:
    key = _format_location(tuple(p for p in error["loc"] if not str(p).startswith("function-")))
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return f"{key}: unknown key (check the spelling; value {value!r})"
    if kind == "missing":
        return f"{key}: required key is missing"
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if isinstance(value, dict | list) and any(isinstance(v, dict | list) for v in value):
        return f"{key}: {message}"
    if str(value) in message:
        return f"{key}: {message}"
    return f"{key}: {message} (got {value!r})"


def parse_config(data: Any, source: str = "<config>") -> AppConfig:
    """Validate a decoded YAML document into an AppConfig or raise one ConfigError naming every bad key."""
    if not isinstance(data, dict):
        raise ConfigError("<root>", type(data).__name__, f"{source} must be a YAML mapping")
    try:
        return AppConfig.model_validate(data)
    except ConfigError as error:
        raise error.within(source) from None
    except ValidationError as error:
        problems = []
        for item in error.errors():
            ctx_error = (item.get("ctx") or {}).get("error")
            if isinstance(ctx_error, ConfigError):
                problems.append(ctx_error.detail)
            else:
                problems.append(_describe(dict(item)))
        raise ConfigError.many(source, problems) from None


def load_config(path: str | Path) -> AppConfig:
    """Read and validate a YAML config file (read safely: see infra.config_file)."""
    return parse_config(read_config_document(Path(path)), source=str(path))
