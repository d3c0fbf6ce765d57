"""The whole document, AppConfig: its top-level keys, the checks that span sections, and loading it from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from infra.config.addons import MAX_ENTITY_NAME_LENGTH, S3_BUCKET_NAME, AddonsConfig, compute_quota_name
from infra.config.base import StrictModel, config_error, refusal, refusing
from infra.config.eks import EksConfig
from infra.config.fields import MAX_CONFIG_TAGS, SAGEMAKER_TAG_KEY, AccountId, PolicyArn, TagKey, TagValue
from infra.config.hyperpod import HyperPodConfig, instance_groups_have_subnets
from infra.config.network import NetworkConfig, az_id_prefix
from infra.config.observability import ObservabilityConfig
from infra.config.pod_slots import require_pod_slots
from infra.config.storage import StorageConfig
from infra.config_file import read_config_document
from infra.errors import ConfigError
from infra.facts.addons import INFERENCE_OPERATOR_REGIONS
from infra.facts.aws_lists import partition_of, sagemaker_regions
from infra.facts.ip_plan import ips_per_node, subnet_capacity

# The field an acknowledgement names when the resource leaves the templates (CloudFormation deletes it) rather than
# having a create-only property change (infra/guards/replacement.py reports both).
REMOVED_FIELD = "removed"


class ReplacementAcknowledgement(StrictModel):
    """One deployed resource and one create-only field whose change, replacing the resource, the user accepts.

    ``resource`` and ``field`` are written as the replacement guard's refusal names them
    (``<stack>/<logical ID>``; a create-only property path such as ``SubnetIds`` or ``VpcConfig/Subnets``, or
    ``removed`` for a resource that leaves the templates). ``deletes_data`` is the second, separate
    acknowledgement that replacing it deletes data (a file system not kept on replacement, its files and
    backups): the guard refuses such a replacement without it.
    """

    resource: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,127}/[A-Za-z][A-Za-z0-9]{0,254}$")]
    field: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]*(/[A-Za-z][A-Za-z0-9]*)*$", max_length=256)]
    deletes_data: bool = False

    @property
    def names(self) -> tuple[str, str]:
        return self.resource, self.field


# At most this many acknowledgements: a replacement is one deliberate change, not a routine one.
MAX_REPLACEMENT_ACKNOWLEDGEMENTS = 20


class AppConfig(StrictModel):
    project: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,39}$")]
    account: AccountId | None = None
    region: str
    # Required by the app's stacks and hpctl. Left out only when a consumer passes its VPC and subnets to
    # HyperPodOnEks as constructs, so the config need not describe a network it does not create.
    network: NetworkConfig | None = None
    eks: EksConfig = EksConfig()
    hyperpod: HyperPodConfig
    observability: ObservabilityConfig = ObservabilityConfig()
    storage: StorageConfig = StorageConfig()
    addons: AddonsConfig = AddonsConfig()
    # A permissions boundary applied to every IAM role the stacks create (e.g. an organisation's guard rail).
    permissions_boundary_arn: PolicyArn | None = None
    # Remove data-bearing resources (buckets, log groups, keys) on cdk destroy instead of retaining them.
    destroy_data_on_delete: bool = False
    # CloudFormation termination protection on the stacks that hold state (EKS, HyperPod, storage,
    # observability): a stack delete is refused until this is false and deployed.
    termination_protection: bool = True
    tags: dict[TagKey, TagValue] = Field(default={}, max_length=MAX_CONFIG_TAGS)
    # Replacements of deployed resources the next deploy may make, each one resource and one field; refused when
    # left over from a deploy already recorded in the lock (infra/guards/replacement.py, docs/safety.md).
    acknowledge_replacement: list[ReplacementAcknowledgement] = Field(
        default=[], max_length=MAX_REPLACEMENT_ACKNOWLEDGEMENTS)

    @field_validator("acknowledge_replacement")
    @classmethod
    def _one_acknowledgement_per_field(
        cls, acknowledgements: list[ReplacementAcknowledgement],
    ) -> list[ReplacementAcknowledgement]:
        seen: set[tuple[str, str]] = set()
        for i, acknowledgement in enumerate(acknowledgements):
            if acknowledgement.names in seen:
                raise refusal(f"{i}", "/".join(acknowledgement.names), "acknowledged twice; keep one entry")
            seen.add(acknowledgement.names)
        return acknowledgements

    # control_tower: also meet the AWS Control Tower proactive controls that cost more than the defaults
    # (infra/guards/control_tower.py lists each, with what meets it; docs/safety.md renders the list).
    compliance: Literal["control_tower"] | None = None
    # An existing bucket (this account and region) that receives the server access logs of the buckets the app
    # creates, in place of a log bucket of the app's own: what an account whose Control Tower controls refuse any
    # access-log destination the app could create (CT.S3.PR.2, .9, .10; docs/safety.md) names. It must admit S3's
    # log delivery (logging.s3.amazonaws.com) in its own policy; the app does not change it.
    access_logs_bucket: Annotated[str, Field(pattern=rf"^{S3_BUCKET_NAME}$")] | None = None

    @field_validator("tags")
    @classmethod
    def _sagemaker_tag_is_the_apps(cls, tags: dict[str, str]) -> dict[str, str]:
        if SAGEMAKER_TAG_KEY in tags:
            raise refusal(SAGEMAKER_TAG_KEY, tags[SAGEMAKER_TAG_KEY],
                          "the app tags the HyperPod cluster SageMaker=true itself, and the observability workspaces "
                          "and add-on (AWS managed policies such as the training operator's and the observability "
                          "admin's require it); remove the tag")
        return tags

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if value not in sagemaker_regions():
            raise refusal("", None, f"{value} is not a region where SageMaker is available (per botocore)")
        return value

    @model_validator(mode="after")
    def _team_quotas_fit_groups(self) -> AppConfig:
        governance = self.addons.task_governance
        if not governance.enabled:
            return self
        # The add-on needs Kubernetes 1.30 or later ("you will need Kubernetes version 1.30 or greater",
        # https://awslabs.github.io/ai-on-sagemaker-hyperpod/docs/add-ons/Task%20Governance/Task%20Governance%20for%20Training):
        # every version eks.version accepts is (SUPPORTED_K8S_VERSIONS starts at 1.32).
        # The most instances of each type the groups can hold: a flexible group may run all of its nodes on
        # any one of its types.
        instances: dict[str, int] = {}
        for group in self.hyperpod.instance_groups:
            for instance_type in group.instance_types:
                instances[instance_type] = instances.get(instance_type, 0) + group.instance_count
        reserved: dict[str, int] = {}
        for i, team in enumerate(governance.teams):
            key = f"addons.task_governance.teams.{i}"
            name = compute_quota_name(self.hyperpod.cluster_name, team.name)
            if len(name) > MAX_ENTITY_NAME_LENGTH:
                raise refusal(f"{key}.name", team.name,
                              f"the team's quota is named {name}, longer than the API's {MAX_ENTITY_NAME_LENGTH} "
                              "characters; use a shorter team or cluster name")
            kind = team.quota.instance_type
            if kind not in instances:
                raise refusal(f"{key}.quota.instance_type", kind,
                              f"no instance group of that type (have: {', '.join(sorted(instances))})")
            reserved[kind] = reserved.get(kind, 0) + team.quota.count
            if reserved[kind] > instances[kind]:
                raise refusal(f"{key}.quota.count", team.quota.count,
                              f"the teams' quotas of {kind} add up to {reserved[kind]}, more than the "
                              f"{instances[kind]} instances of that type in hyperpod.instance_groups")
        return self

    @model_validator(mode="after")
    def _governed_endpoint(self) -> AppConfig:
        # CT.EKS.PR.1 (cdklabs/cdk-validator-cfnguard 0.0.62 rules/control-tower/cfn-guard/eks/ct-eks-pr-1.guard)
        # fails an EKS cluster whose API endpoint is public.
        if self.compliance == "control_tower" and self.eks.endpoint != "private":
            raise refusal("eks.endpoint", self.eks.endpoint,
                          "compliance: control_tower needs a private endpoint (Control Tower's CT.EKS.PR.1)")
        return self

    @model_validator(mode="after")
    def _one_cert_manager(self) -> AppConfig:
        # The training operator add-on comes with cert-manager as an EKS add-on; the dependencies chart can
        # install it too (its cert-manager subchart, off by default in its values.yaml at the pinned commit:
        # aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart).
        # Two installs would fight over the same CRDs and webhook.
        chart_values = self.hyperpod.dependencies_chart.values.get("cert-manager")
        operator = "addons.training_operator" if self.addons.training_operator.enabled else \
            "addons.inference_operator" if self.addons.inference_operator.enabled else None
        if operator and isinstance(chart_values, dict) and chart_values.get("enabled"):
            raise refusal("hyperpod.dependencies_chart.values.cert-manager.enabled", True,
                          f"{operator} installs cert-manager as an EKS add-on; leave it off in the chart")
        return self

    @model_validator(mode="after")
    def _one_inference_operator(self) -> AppConfig:
        # The dependencies chart carries the operator as its subchart hyperpod-inference-operator, on with
        # inferenceOperators.enabled (false in its values.yaml; aws/sagemaker-hyperpod-cli@
        # a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/Chart.yaml and values.yaml). The add-on
        # replaces it: AWS's migration removes the Helm release before it creates the add-on
        # (charts/inference-operator/migration/helm_to_addon.sh).
        if not self.addons.inference_operator.enabled:
            return self
        chart_values = self.hyperpod.dependencies_chart.values.get("inferenceOperators")
        if isinstance(chart_values, dict) and chart_values.get("enabled"):
            raise refusal("hyperpod.dependencies_chart.values.inferenceOperators.enabled", True,
                          "addons.inference_operator installs the operator as an EKS add-on; leave it off in the chart")
        if self.region not in INFERENCE_OPERATOR_REGIONS:
            raise refusal("addons.inference_operator.enabled", True,
                          f"the operator's images are not published in {self.region} (has: "
                          f"{', '.join(sorted(INFERENCE_OPERATOR_REGIONS))})")
        return self

    def _own_region_arn(self, key: str, arn: str) -> None:
        """Refuse the ARN of a resource in another partition or region than the cluster's.

        A training plan is reserved capacity in an Availability Zone ("Reserved Capacity blocks, each defined by
        ... Availability Zone",
        https://docs.aws.amazon.com/sagemaker/latest/dg/reserve-capacity-with-training-plans.html), so only a plan
        of the cluster's region can hold its nodes; a statement that CreateCluster refuses another region's plan was
        not found (our rule, from that page).
        """
        _, partition, _, region, _ = arn.split(":", 4)
        expected = partition_of(self.region)
        if partition != expected or region != self.region:
            raise refusal(key, arn, f"must be in the cluster's region {self.region} (partition {expected}), "
                                    f"not {region or 'no region'} ({partition})")

    @model_validator(mode="after")
    def _own_partition(self) -> AppConfig:
        """IAM principals, policies and buckets a template of this region names are of its partition: an ARN
        holds its partition (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html), and IAM and
        S3 are separate in each one."""
        expected = partition_of(self.region)
        arns = [("permissions_boundary_arn", self.permissions_boundary_arn),
                ("hyperpod.permissions_boundary_arn", self.hyperpod.permissions_boundary_arn)]
        arns += [(f"eks.admin_principal_arns.{i}", a) for i, a in enumerate(self.eks.admin_principal_arns)]
        arns += [(f"eks.namespace_admins.{i}.principal_arn", a.principal_arn)
                 for i, a in enumerate(self.eks.namespace_admins)]
        arns += [(f"addons.s3_csi.bucket_arns.{i}", a) for i, a in enumerate(self.addons.s3_csi.bucket_arns)]
        for key, arn in arns:
            if arn is not None and arn.split(":")[1] != expected:
                raise refusal(key, arn, f"an ARN of partition {arn.split(':')[1]}; region {self.region} is in "
                                        f"partition {expected}")
        return self

    @model_validator(mode="after")
    def _pods_fit_nodes(self) -> AppConfig:
        with refusing():
            require_pod_slots(self)
        return self

    @model_validator(mode="after")
    def _cross_checks(self) -> AppConfig:
        prefix = az_id_prefix(self.region)
        network, groups = self.network, self.hyperpod.instance_groups
        az_keys = []
        if network is not None:
            az_keys += [(f"network.control_plane_az_ids.{i}", az) for i, az in enumerate(network.control_plane_az_ids)]
            az_keys += [(f"network.hyperpod_subnets.{i}.az_id", s.az_id)
                        for i, s in enumerate(network.hyperpod_subnets)]
        az_keys += [(f"hyperpod.instance_groups.{i}.az_id", g.az_id) for i, g in enumerate(groups)]
        for i, group in enumerate(groups):
            if group.training_plan_arn is not None:
                self._own_region_arn(f"hyperpod.instance_groups.{i}.training_plan_arn", group.training_plan_arn)
        for key, az in az_keys:
            if not az.startswith(prefix + "-az"):
                raise refusal(key, az, f"not an AZ ID of region {self.region} (expected {prefix}-azN)")
        if network is None:
            return self  # the subnets are constructs: HyperPodCluster checks the groups' AZ IDs against them
        subnets = {s.az_id: s for s in network.hyperpod_subnets}
        with refusing():
            instance_groups_have_subnets(groups, subnets, groups_key="hyperpod.instance_groups",
                                         subnets_key="network.hyperpod_subnets")
        fsx = self.storage.fsx_lustre
        if fsx.az_id is not None and fsx.az_id not in subnets:
            raise refusal("storage.fsx_lustre.az_id", fsx.az_id,
                          f"no entry in network.hyperpod_subnets for it (have: {', '.join(subnets)})")
        for i, subnet in enumerate(network.hyperpod_subnets):
            if subnet.cidr is None:
                continue
            in_subnet = [g for g in groups if g.az_id == subnet.az_id]
            needed = sum(g.instance_count * ips_per_node(g.instance_types) for g in in_subnet)
            available = subnet_capacity(subnet.cidr)
            if needed > available:
                detail = ", ".join(
                    f"{g.name}: {g.instance_count} x {ips_per_node(g.instance_types)}" for g in in_subnet
                )
                raise refusal(f"network.hyperpod_subnets.{i}.cidr", str(subnet.cidr),
                              f"the instance groups in {subnet.az_id} need {needed} IPs ({detail}) but the subnet "
                              f"has {available} usable; use a larger CIDR")
        return self


def parse_config(data: Any, source: str = "<config>") -> AppConfig:
    """Validate a decoded YAML document into an AppConfig or raise one ConfigError naming every bad key."""
    if not isinstance(data, dict):
        raise ConfigError("<root>", type(data).__name__, "must be a YAML mapping", source=source)
    try:
        return AppConfig.model_validate(data)
    except ValidationError as error:
        raise config_error(error, source) from None


def require_network(config: AppConfig, user: str) -> NetworkConfig:
    """The config's network section, or a one-line refusal naming who needs it."""
    if config.network is None:
        raise ConfigError("network", None, f"required by {user}; only HyperPodOnEks given an existing vpc "
                          "construct can do without it")
    return config.network


def eks_cluster_name(config: AppConfig) -> str:
    """The name this product gives the EKS cluster it creates: ``<project>-eks``."""
    return f"{config.project}-eks"


def load_config(path: str | Path) -> AppConfig:
    """Read and validate a YAML config file (read safely: see infra.config_file)."""
    return parse_config(read_config_document(Path(path)), source=str(path))
