"""The one composition of the product: config mapped to construct props, and the constructs wired together.

The app (``stacks/app_builder.py``, a stack per component) and ``HyperPodOnEks`` (everything in one construct)
both call ``compose``; only ``Placement`` differs. Construct IDs are fixed here, so a component keeps its
logical IDs whichever form builds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import Annotations, CfnOutput, CfnResource, RemovalPolicy, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from infra.config import AppConfig, eks_cluster_name, require_network
from infra.constructs.addon import workload_check
from infra.constructs.addons import InferenceOperator, S3CsiDriver, TrainingOperator
from infra.constructs.common import data_removal_policy, retention
from infra.constructs.eks import EksControlPlane
from infra.constructs.function_placement import functions_under, place_functions_in_vpc
from infra.constructs.helm_release import ChartSource, HelmInstaller, HelmRelease
from infra.constructs.hyperpod.autoscaling import HyperPodAutoscalingRole, KarpenterNodePools
from infra.constructs.hyperpod.cluster import HyperPodCluster
from infra.constructs.hyperpod.dependencies_chart import HyperPodDependenciesChart
from infra.constructs.hyperpod.execution_role import HyperPodExecutionRole
from infra.constructs.hyperpod.lifecycle import LIFECYCLE_PREFIX, LifecycleScripts
from infra.constructs.hyperpod.volume_key import HyperPodVolumeKey
from infra.constructs.logs_key import LogsKey, limit_grants_to_aws_services
from infra.constructs.network import HyperPodNetwork
from infra.constructs.observability import HyperPodObservability
from infra.constructs.readiness import Readiness, ReadinessCheck
from infra.constructs.storage import (
    STORAGE_CHART_DIR,
    STORAGE_RELEASE_NAME,
    STORAGE_RELEASE_NAMESPACE,
    FsxCsiDriver,
    SharedFileSystem,
)
from infra.constructs.task_governance import HyperPodTaskGovernance
from infra.errors import ConfigError
from infra.facts import addons
from infra.facts.names import HYPERPOD_CLUSTER_NAME_LABEL
from infra.guards.control_tower import met_only_with_access_logs_bucket


@dataclass(frozen=True)
class Placement:
    """The scope each component is built in: one stack each in the app, one construct in HyperPodOnEks."""

    network: Construct
    eks: Construct
    hyperpod: Construct
    observability: Construct | None = None
    storage: Construct | None = None

    @classmethod
    def together(cls, scope: Construct) -> Placement:
        return cls(network=scope, eks=scope, hyperpod=scope, observability=scope, storage=scope)

    def scopes(self) -> list[Construct]:
        """Each distinct scope once, in creation order."""
        found: list[Construct] = []
        for scope in (self.network, self.eks, self.hyperpod, self.observability, self.storage):
            if scope is not None and not any(scope is seen for seen in found):
                found.append(scope)
        return found


@dataclass(frozen=True)
class Existing:
    """Resources a consumer brings instead of having them created (each replaces what would be created)."""

    vpc: ec2.IVpc | None = None
    control_plane_subnets: Sequence[ec2.ISubnet] = ()
    hyperpod_subnets: Mapping[str, ec2.ISubnet] | None = None
    security_group: ec2.ISecurityGroup | None = None
    eks_cluster: eks.ICluster | None = None
    eks_cluster_security_group: ec2.ISecurityGroup | None = None
    lifecycle_bucket: s3.IBucket | None = None
    execution_role: iam.IRole | None = None
    secrets_key: kms.IKey | None = None

    def check(self, config: AppConfig) -> None:
        """Refuse combinations with two answers to one question, naming the key."""
        if self.eks_cluster is not None and self.secrets_key is not None:
            raise ConfigError("eks", None, "secrets_key applies to a cluster created here, not to eks_cluster")
        if self.eks_cluster is not None and self.eks_cluster_security_group is None:
            raise ConfigError("eks", None, "eks_cluster needs eks_cluster_security_group (the chart installer "
                              "reaches the API server through it)")
        if self.vpc is None:
            require_network(config, "a VPC created or adopted by ID (or pass vpc and its subnets as constructs)")
        elif config.network is not None and config.network.existing_vpc_id:
            raise ConfigError("network.existing_vpc_id", config.network.existing_vpc_id,
                              "give either an existing vpc construct or network.existing_vpc_id, not both")
        if self.execution_role is not None and config.hyperpod.permissions_boundary_arn:
            raise ConfigError("hyperpod.permissions_boundary_arn", config.hyperpod.permissions_boundary_arn,
                              "applies to an execution role created here, not to execution_role")


@dataclass(frozen=True)
class SharedStorage:
    """The FSx for Lustre file system, its CSI driver, and the release that puts its volume and claim on EKS."""

    file_system: SharedFileSystem
    csi_driver: FsxCsiDriver
    installer: HelmInstaller
    volume_release: HelmRelease


@dataclass(frozen=True)
class HyperPodParts:
    """Every component built, as typed attributes a consumer can extend."""

    network: HyperPodNetwork
    eks_control_plane: EksControlPlane | None
    eks_cluster: eks.ICluster
    lifecycle: LifecycleScripts
    execution_role: HyperPodExecutionRole
    dependencies_chart: HyperPodDependenciesChart
    hyperpod_cluster: HyperPodCluster
    autoscaling_role: HyperPodAutoscalingRole | None = None
    node_pools: KarpenterNodePools | None = None
    observability: HyperPodObservability | None = None
    storage: SharedStorage | None = None
    volume_key: HyperPodVolumeKey | None = None
    task_governance: HyperPodTaskGovernance | None = None
    training_operator: TrainingOperator | None = None
    s3_csi_driver: S3CsiDriver | None = None
    inference_operator: InferenceOperator | None = None
    nodes_ready: Readiness | None = None
    scopes: list[Construct] = field(default_factory=list)
    logs_keys: list[LogsKey] = field(default_factory=list)


def storage_az_id(config: AppConfig, network: HyperPodNetwork) -> str:
    """The AZ ID of the file system: the configured one, else the first HyperPod subnet's."""
    return config.storage.fsx_lustre.az_id or next(iter(network.hyperpod_subnets))


def compose(
    config: AppConfig, placement: Placement, *, scripts_dir: Path, existing: Existing | None = None,
) -> HyperPodParts:
    """Build the components of ``config`` in ``placement``'s scopes, wired in creation order.

    The HyperPod cluster waits for the dependencies chart and the uploaded scripts. What needs running nodes
    (observability, storage, the add-ons) waits for a HyperPod node and the Pod Identity agent (``_nodes_ready``),
    and what needs another add-on waits until that add-on is ACTIVE and its workloads are available. Tags
    (``project`` plus ``config.tags``) and ``config.permissions_boundary_arn`` reach everything built, including
    the stack-level functions aws-cdk-lib adds for these constructs.
    """
    existing = existing or Existing()
    existing.check(config)
    removal = data_removal_policy(config.destroy_data_on_delete)
    log_retention = retention(config.eks.log_retention_days)

    network = _network(placement.network, config, existing, removal)
    control_plane, eks_cluster, api_security_group = _control_plane(placement.eks, config, network, existing,
                                                                    removal, log_retention)
    core = _hyperpod(placement.hyperpod, config, network, eks_cluster, api_security_group, existing, scripts_dir,
                     removal, log_retention)
    hyperpod_cluster, installer = core.hyperpod_cluster, core.dependencies_chart.installer
    nodes_ready = _nodes_ready(placement.hyperpod, config, installer, hyperpod_cluster)

    def after_nodes(later: Construct) -> None:
        """``later`` needs running HyperPod nodes: in the same stack a resource dependency, across stacks the app
        orders the stacks (``stacks/app_builder.py``), and the HyperPod stack ends with the wait for nodes."""
        if Stack.of(later) is Stack.of(hyperpod_cluster):
            later.node.add_dependency(nodes_ready or hyperpod_cluster.cfn_cluster)

    observability = _observability(placement, config, eks_cluster, existing, removal, log_retention)
    if observability is not None:
        after_nodes(observability)
    storage = None
    if config.storage.fsx_lustre.enabled and placement.storage is not None:
        storage = _add_storage(placement.storage, config, network, eks_cluster, api_security_group,
                               log_retention=log_retention, removal_policy=removal,
                               eks_cluster_name_literal=_literal_eks_cluster_name(config, existing),
                               wait=nodes_ready is not None)
        after_nodes(storage.csi_driver)
        after_nodes(storage.volume_release)
    task_governance, training_operator, s3_csi_driver = _add_addons(
        placement.hyperpod, config, eks_cluster, hyperpod_cluster, installer if nodes_ready else None)
    for addon in (task_governance, training_operator, s3_csi_driver):
        if addon is not None:
            after_nodes(addon)
    _order_addons(control_plane, task_governance, training_operator, s3_csi_driver)
    inference_operator = _add_inference_operator(placement.hyperpod, config, eks_cluster, hyperpod_cluster,
                                                 installer if nodes_ready else None, core.lifecycle,
                                                 training_operator, s3_csi_driver, removal)
    if inference_operator is not None:
        after_nodes(inference_operator)

    scopes = placement.scopes()
    logs_keys = _apply_cross_cutting(config, scopes, removal, network)
    return HyperPodParts(
        network=network, eks_control_plane=control_plane, eks_cluster=eks_cluster, lifecycle=core.lifecycle,
        execution_role=core.execution_role, dependencies_chart=core.dependencies_chart,
        hyperpod_cluster=hyperpod_cluster, autoscaling_role=core.autoscaling_role, node_pools=core.node_pools,
        observability=observability, storage=storage, volume_key=core.volume_key, task_governance=task_governance,
        training_operator=training_operator, s3_csi_driver=s3_csi_driver, nodes_ready=nodes_ready, scopes=scopes,
        logs_keys=logs_keys,
        inference_operator=inference_operator,
    )


def _literal_eks_cluster_name(config: AppConfig, existing: Existing) -> str | None:
    """The EKS cluster's name as a string when it is created here (the config fixes it), else None."""
    return eks_cluster_name(config) if existing.eks_cluster is None else None


def _control_plane(
    scope: Construct, config: AppConfig, network: HyperPodNetwork, existing: Existing, removal: RemovalPolicy,
    log_retention: logs.RetentionDays,
) -> tuple[EksControlPlane | None, eks.ICluster, ec2.ISecurityGroup]:
    """The EKS control plane created here, or the one brought along; with the group the API server's clients
    reach it through."""
    if existing.eks_cluster is not None:
        assert existing.eks_cluster_security_group is not None  # Existing.check
        return None, existing.eks_cluster, existing.eks_cluster_security_group
    e = config.eks
    control_plane = EksControlPlane(
        scope, "ControlPlane", eks_cluster_name=eks_cluster_name(config), vpc=network.vpc,
        subnets=network.control_plane_subnets, security_group=network.security_group,
        kubernetes_version=e.version,
        endpoint_access=eks.EndpointAccess.PRIVATE if e.endpoint == "private"
        else eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*[str(c) for c in e.public_access_cidrs]),
        authentication_mode=e.authentication_mode, admin_principal_arns=e.admin_principal_arns,
        namespace_admins={grant.principal_arn: grant.namespaces for grant in e.namespace_admins},
        addon_versions={str(k): v for k, v in e.addon_versions.items()}, log_retention=log_retention,
        secrets_key=existing.secrets_key, removal_policy=removal,
    )
    eks_cluster: eks.ICluster = control_plane.eks_cluster  # type: ignore[assignment]  # jsii stubs: Cluster lacks an ICluster member
    return control_plane, eks_cluster, network.security_group


@dataclass(frozen=True)
class _HyperPodCore:
    lifecycle: LifecycleScripts
    execution_role: HyperPodExecutionRole
    dependencies_chart: HyperPodDependenciesChart
    hyperpod_cluster: HyperPodCluster
    volume_key: HyperPodVolumeKey | None
    autoscaling_role: HyperPodAutoscalingRole | None
    node_pools: KarpenterNodePools | None


def _hyperpod(
    scope: Construct, config: AppConfig, network: HyperPodNetwork, eks_cluster: eks.ICluster,
    api_security_group: ec2.ISecurityGroup, existing: Existing, scripts_dir: Path, removal: RemovalPolicy,
    log_retention: logs.RetentionDays,
) -> _HyperPodCore:
    """The lifecycle scripts, the execution role, the dependencies chart, the HyperPod cluster after all three, and
    with autoscaling its role and node pools."""
    hp = config.hyperpod
    # The file system is mounted with the Lustre client, so the lifecycle script installs it when storage is on.
    options = hp.lifecycle.model_copy(update={"fsx_lustre_client": True}) if config.storage.fsx_lustre.enabled \
        else hp.lifecycle
    lifecycle = LifecycleScripts(
        scope, "LifecycleScripts", hyperpod_cluster_name=hp.cluster_name, scripts_dir=scripts_dir,
        on_create=hp.on_create_script, options=options, bucket=existing.lifecycle_bucket,
        log_retention=log_retention, removal_policy=removal,
        allow_paths_outside_project=hp.allow_paths_outside_project,
        object_lock=config.compliance == "control_tower", event_notifications=config.compliance == "control_tower",
        access_logs=s3.Bucket.from_bucket_name(scope, "AccessLogsBucket", config.access_logs_bucket)
        if config.access_logs_bucket else None,
    )
    if config.compliance == "control_tower" and lifecycle.access_log_bucket is not None:
        _warn_of_own_log_bucket(config, lifecycle.access_log_bucket)
    subnets = {az: subnet.subnet_id for az, subnet in network.hyperpod_subnets.items()}
    security_groups = [network.security_group.security_group_id]
    role = HyperPodExecutionRole(
        scope, "ExecutionRole", eks_cluster_arn=eks_cluster.cluster_arn, vpc_id=network.vpc.vpc_id,
        subnet_ids=list(subnets.values()), security_group_ids=security_groups,
        lifecycle_bucket_arn=lifecycle.bucket.bucket_arn, lifecycle_prefix=LIFECYCLE_PREFIX,
        permissions_boundary_arn=hp.permissions_boundary_arn, role=existing.execution_role,
    )
    chart = HyperPodDependenciesChart(
        scope, "DependenciesChart", eks_cluster=eks_cluster, chart=hp.dependencies_chart, vpc=network.vpc,
        subnets=network.control_plane_subnets, eks_cluster_security_group=api_security_group,
        log_retention=log_retention, removal_policy=removal,
        eks_cluster_name=_literal_eks_cluster_name(config, existing),
        allow_paths_outside_project=hp.allow_paths_outside_project,
        instance_types=[t for g in hp.instance_groups for t in g.instance_types],
        log_and_trace_waiter=config.compliance == "control_tower",
    )
    # Each group with its volume encryption resolved; the key exists only when a group uses it.
    groups = [g.model_copy(update={"volume_encryption": hp.group_volume_encryption(g)}) for g in hp.instance_groups]
    volume_key = HyperPodVolumeKey(scope, "VolumeKey", hyperpod_cluster_name=hp.cluster_name, execution_role=role.role,
                                   removal_policy=removal) \
        if any(g.volume_encryption == "customer_managed" for g in groups) else None
    if volume_key is not None and role.policy is not None:  # a role brought along brings its own permissions
        role.policy.add_statements(volume_key.execution_role_statement)
    tiered = hp.tiered_checkpointing
    # Karpenter autoscaling: the role exists before the cluster names it; the node pools need the cluster.
    autoscaling_role = HyperPodAutoscalingRole(scope, "AutoscalingRole") if hp.autoscaling.enabled else None
    hyperpod_cluster = HyperPodCluster(
        scope, "HyperPod", hyperpod_cluster_name=hp.cluster_name, instance_groups=groups,
        volume_kms_key_id=volume_key.key_id if volume_key else None,
        tiered_checkpointing_memory_percent=tiered.memory_percent if tiered.enabled else None,
        on_create_script=hp.on_create_script, node_recovery=hp.node_recovery,
        node_provisioning_mode=hp.node_provisioning_mode, eks_cluster_arn=eks_cluster.cluster_arn,
        execution_role_arn=role.role.role_arn, subnet_ids_by_az=subnets, security_group_ids=security_groups,
        lifecycle_s3_uri=lifecycle.source_s3_uri,
        autoscaling_role_arn=autoscaling_role.role.role_arn if autoscaling_role else None,
        # HyperPod validates the execution role's permissions when it creates the cluster: the role's inline
        # policy must exist by then, not only the role (CloudFormation creates them as separate resources).
        depends_on=[chart.release, lifecycle.deployment, *([role.policy] if role.policy else [])],
    )
    node_pools = None
    if hp.autoscaling.enabled:
        autoscaled = [g for g in groups if g.name in hp.autoscaling.instance_groups]
        node_pools = KarpenterNodePools(scope, "KarpenterNodePools", installer=chart.installer,
                                        instance_groups=autoscaled, hyperpod_cluster=hyperpod_cluster)
    return _HyperPodCore(lifecycle=lifecycle, execution_role=role, dependencies_chart=chart,
                         hyperpod_cluster=hyperpod_cluster, volume_key=volume_key,
                         autoscaling_role=autoscaling_role, node_pools=node_pools)


def needs_nodes(config: AppConfig) -> list[str]:
    """The config keys of the features whose pods need a running HyperPod node (AWS's module lists the same
    features as "Features that require waiting for nodes", awslabs/awsome-distributed-training@0edaf152:
    1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/main.tf lines 45-52)."""
    a = config.addons
    switches = {
        "observability": config.observability.any_enabled,
        "storage.fsx_lustre": config.storage.fsx_lustre.enabled,
        "addons.task_governance": a.task_governance.enabled,
        "addons.training_operator": a.training_operator.enabled,
        "addons.s3_csi": a.s3_csi.enabled,
    }
    return [key for key, on in switches.items() if on]


def nodes_to_wait_for(config: AppConfig) -> int:
    """How many nodes the instance groups ask for that can be expected during the deployment: not Karpenter's
    (they start at 0 and scale on demand), not spot capacity (there may be none), not a training plan's (its
    capacity starts at the plan's start time)."""
    autoscaled = set(config.hyperpod.autoscaling.instance_groups) if config.hyperpod.autoscaling.enabled else set()
    return sum(g.instance_count for g in config.hyperpod.instance_groups
               if g.name not in autoscaled and g.capacity == "on_demand" and g.training_plan_arn is None)


def _nodes_ready(
    scope: Construct, config: AppConfig, installer: HelmInstaller, hyperpod_cluster: HyperPodCluster,
) -> Readiness | None:
    """A wait, after the HyperPod cluster, for one of its nodes and the Pod Identity agent on it, when anything
    needs them; the wait of AWS's module (scripts/wait-for-hyperpod-nodes.sh: a node labelled
    sagemaker.amazonaws.com/cluster-name=<cluster>, then the agent's pods).

    A node running deep health checks counts: it is in the cluster meanwhile, labelled
    sagemaker.amazonaws.com/deep-health-check-status=InProgress ("The node is running deep health checks",
    https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).

    None, with a note in the synth output that says what is not waited for, when nothing needs nodes or when the
    instance groups ask for none (every node comes from Karpenter, or every count is 0): a wait for a node nobody
    asked for would hold the stack until it fails. Whatever needs nodes is then created once the cluster is, and
    its add-ons report DEGRADED until a node joins.
    """
    features = needs_nodes(config)
    if not features:
        return None
    why = ("hyperpod.wait_for_nodes is false" if not config.hyperpod.wait_for_nodes else
           "no instance group asks for an on-demand node outside Karpenter and training plans"
           if nodes_to_wait_for(config) == 0 else None)
    if why is not None:
        Annotations.of(scope).add_info(
            f"{', '.join(features)}: not waiting for HyperPod nodes, as {why}; their add-ons stay DEGRADED until a "
            "node joins")
        return None
    selector = f"{HYPERPOD_CLUSTER_NAME_LABEL}={config.hyperpod.cluster_name}"
    ready = Readiness(scope, "NodesReady", installer=installer, what="HyperPod nodes", checks=[
        ReadinessCheck.nodes(selector, minimum=1),
        *(workload_check(w) for w in addons.POD_IDENTITY_AGENT.workloads),
    ])
    ready.node.add_dependency(hyperpod_cluster.cfn_cluster)
    return ready


def _observability(
    placement: Placement, config: AppConfig, eks_cluster: eks.ICluster, existing: Existing, removal: RemovalPolicy,
    log_retention: logs.RetentionDays,
) -> HyperPodObservability | None:
    if not config.observability.any_enabled or placement.observability is None:
        return None
    hp = config.hyperpod
    obs_scope = placement.observability
    # The EKS cluster's name as the config gives it (a brought cluster's own), not a reference to the EKS stack: the
    # add-ons' ClusterName is create-only, and deployed stacks carry the literal name. Its ARN likewise, in a stack
    # of its own.
    cluster_name = existing.eks_cluster.cluster_name if existing.eks_cluster is not None else eks_cluster_name(config)
    if Stack.of(obs_scope) is Stack.of(placement.eks) or existing.eks_cluster is not None:
        cluster_arn = eks_cluster.cluster_arn
    else:
        cluster_arn = Stack.of(obs_scope).format_arn(service="eks", resource="cluster", resource_name=cluster_name)
    o = config.observability
    return HyperPodObservability(
        obs_scope, "Observability", name=hp.cluster_name, eks_cluster_name=cluster_name,
        eks_cluster_arn=cluster_arn, hyperpod_cluster_name=hp.cluster_name,
        container_insights=o.container_insights, prometheus=o.prometheus if o.prometheus.enabled else None,
        grafana=o.grafana if o.grafana.enabled else None, alerts=o.alerts if o.alerts.enabled else None,
        dashboard=o.dashboard, log_retention=log_retention, removal_policy=removal,
    )


def _network(scope: Construct, config: AppConfig, existing: Existing, removal: RemovalPolicy) -> HyperPodNetwork:
    if existing.vpc is not None:
        return HyperPodNetwork(
            scope, "Network", vpc=existing.vpc, control_plane_subnets=existing.control_plane_subnets,
            hyperpod_subnets=existing.hyperpod_subnets, security_group=existing.security_group,
            removal_policy=removal,
        )
    n = require_network(config, "a VPC created or adopted by ID")
    return HyperPodNetwork(
        scope, "Network", vpc_cidr=str(n.vpc_cidr), control_plane_az_ids=n.control_plane_az_ids,
        hyperpod_subnet_cidrs={s.az_id: str(s.cidr) for s in n.hyperpod_subnets if s.cidr is not None},
        nat_gateways=n.nat_gateways, s3_endpoint_policy=n.s3_endpoint_policy,
        flow_logs_retention=retention(n.flow_logs_retention_days), existing_vpc_id=n.existing_vpc_id,
        control_plane_subnet_ids=n.control_plane_subnet_ids,
        hyperpod_subnet_ids={s.az_id: s.subnet_id for s in n.hyperpod_subnets if s.subnet_id is not None},
        security_group=existing.security_group, node_egress=n.node_egress, interface_endpoints=n.interface_endpoints,
        removal_policy=removal,
    )


def _add_addons(
    scope: Construct, config: AppConfig, eks_cluster: eks.ICluster, hyperpod_cluster: HyperPodCluster,
    readiness_installer: HelmInstaller | None,
) -> tuple[HyperPodTaskGovernance | None, TrainingOperator | None, S3CsiDriver | None]:
    """The add-ons of ``config.addons``, in the HyperPod scope (docs/design.md says why). Task governance's policy
    and quotas take the cluster's ARN, whose ID part AWS assigns, so another stack would have to import it."""
    addons_config = config.addons
    task_governance = None
    governance = addons_config.task_governance
    if governance.enabled:
        task_governance = HyperPodTaskGovernance(
            scope, "TaskGovernance", eks_cluster_name=eks_cluster.cluster_name,
            hyperpod_cluster_arn=hyperpod_cluster.hyperpod_cluster_arn, name=config.hyperpod.cluster_name,
            teams=governance.teams, priority_classes=governance.priority_classes, fair_share=governance.fair_share,
            idle_resource_sharing=governance.idle_resource_sharing, addon_version=governance.addon_version,
            readiness_installer=readiness_installer,
        )
    training_operator = None
    if addons_config.training_operator.enabled:
        # cert-manager comes as an EKS add-on; the config refuses the chart's cert-manager with it (AppConfig).
        # One cert-manager for both operators, installed by addons.cert_manager_installer()'s construct: its logical
        # ID follows that construct and must not move once installed (AddonsConfig.cert_manager_owner).
        training_operator = TrainingOperator(
            scope, "TrainingOperator", eks_cluster=eks_cluster, readiness_installer=readiness_installer,
            install_cert_manager=addons_config.cert_manager_installer() == "training_operator")
    s3_csi_driver = None
    if addons_config.s3_csi.enabled:
        s3_csi_driver = S3CsiDriver(scope, "S3CsiDriver", eks_cluster=eks_cluster,
                                    bucket_arns=addons_config.s3_csi.bucket_arns)
    return task_governance, training_operator, s3_csi_driver


def _add_inference_operator(
    scope: Construct, config: AppConfig, eks_cluster: eks.ICluster, hyperpod_cluster: HyperPodCluster,
    readiness_installer: HelmInstaller | None, lifecycle: LifecycleScripts, training_operator: TrainingOperator | None,
    s3_csi_driver: S3CsiDriver | None, removal: RemovalPolicy,
) -> InferenceOperator | None:
    """The inference operator, sharing the training operator's cert-manager and the one S3 CSI driver (the config
    refuses the operator without ``addons.s3_csi``). Its IAM OIDC provider takes the EKS cluster's issuer URL, a
    reference to the EKS stack (docs/safety.md says what switching it off then takes)."""
    inference = config.addons.inference_operator
    if not inference.enabled:
        return None
    assert s3_csi_driver is not None  # AddonsConfig refuses the operator without the driver
    cert_manager = None
    if training_operator is not None and training_operator.cert_manager is not None:
        cert_manager = training_operator.cert_manager_ready or training_operator.cert_manager.addon
    if not isinstance(eks_cluster, eks.Cluster):
        raise ConfigError("addons.inference_operator.enabled", True,
                          "needs the OIDC issuer of an EKS cluster created here; with an existing eks_cluster, build "
                          "InferenceOperator yourself and pass its oidc_provider")
    operator = InferenceOperator(
        scope, "InferenceOperator", eks_cluster=eks_cluster, hyperpod_cluster_arn=hyperpod_cluster.hyperpod_cluster_arn,
        oidc_issuer_url=eks_cluster.cluster_open_id_connect_issuer_url, access_logs=lifecycle.access_logs,
        removal_policy=removal, cert_manager=cert_manager, readiness_installer=readiness_installer,
        after=[s3_csi_driver.addon], metrics_server=inference.metrics_server, addon_version=inference.addon_version,
        object_lock=config.compliance == "control_tower", event_notifications=config.compliance == "control_tower",
    )
    if training_operator is not None and operator.cert_manager_ready is not None:
        training_operator.wait_for_cert_manager(operator.cert_manager_ready)
    return operator


def _order_addons(control_plane: EksControlPlane | None, task_governance: HyperPodTaskGovernance | None,
                  training_operator: TrainingOperator | None, s3_csi_driver: S3CsiDriver | None) -> None:
    """AWS's module installs the training operator after task governance (awslabs/awsome-distributed-training@
    0edaf15:.../hyperpod-eks-tf/main.tf, depends_on module.task_governance), and every Pod Identity add-on after
    the Pod Identity agent (the install page's prerequisite). Across stacks the stack order already does it."""
    if control_plane is not None:
        pod_identity_agent = control_plane.addons[addons.POD_IDENTITY_AGENT.name]
        for addon in (training_operator, s3_csi_driver):
            if addon is not None and Stack.of(addon) is Stack.of(pod_identity_agent):
                addon.node.add_dependency(pod_identity_agent)
    if training_operator is not None and task_governance is not None:
        training_operator.addon.node.add_dependency(task_governance.addon)


def _add_storage(
    scope: Construct, config: AppConfig, network: HyperPodNetwork, eks_cluster: eks.ICluster,
    api_security_group: ec2.ISecurityGroup, *, log_retention: logs.RetentionDays, removal_policy: RemovalPolicy,
    eks_cluster_name_literal: str | None, wait: bool,
) -> SharedStorage:
    fsx = config.storage.fsx_lustre
    file_system = SharedFileSystem(
        scope, "SharedFileSystem", subnet=network.hyperpod_subnets[storage_az_id(config, network)],
        security_group=network.security_group, capacity_gib=fsx.capacity_gib,
        throughput_per_tib=fsx.throughput_per_tib, automatic_backup_retention_days=fsx.automatic_backup_retention_days,
        data_repository_s3_uri=fsx.data_repository_s3_uri,
        data_repository_export_deletions=fsx.data_repository_export_deletions, file_system_path=fsx.file_system_path,
        namespace=fsx.namespace, claim_name=fsx.pvc_name,
        # FSx has its own switch: checkpoints outlive the cluster unless it is turned off (docs/safety.md).
        removal_policy=RemovalPolicy.RETAIN if fsx.retain_on_delete else RemovalPolicy.DESTROY,
    )
    csi_driver = FsxCsiDriver(scope, "FsxCsiDriver", eks_cluster=eks_cluster, addon_version=fsx.csi_driver_version)
    installer = HelmInstaller(
        scope, "ChartInstaller", eks_cluster=eks_cluster, vpc=network.vpc, subnets=network.control_plane_subnets,
        eks_cluster_security_group=api_security_group, purpose="shared storage chart installer",
        installs="the shared storage Helm chart", log_retention=log_retention,
        removal_policy=removal_policy, eks_cluster_name=eks_cluster_name_literal,
        log_and_trace_waiter=config.compliance == "control_tower",
    )
    release = HelmRelease(
        scope, "SharedStorageRelease", installer=installer, release_name=STORAGE_RELEASE_NAME,
        namespace=STORAGE_RELEASE_NAMESPACE, chart=ChartSource.local(scope, "StorageChart", STORAGE_CHART_DIR),
        values=file_system.volume_values(),
    )
    # Pods mount through the driver: the claim is installed once the driver is ACTIVE and its controller available
    # (AWS's module waits for the controller before its StorageClass, modules/fsx_lustre/main.tf), with the
    # installer that installs the claim; when nothing waits for nodes (no node to run the controller), after the
    # add-on resource.
    release.node.add_dependency(csi_driver.driver.wait_until_ready(installer) if wait else csi_driver.addon)
    if file_system.data_repository is not None:
        release.node.add_dependency(file_system.data_repository)
    CfnOutput(scope, "PersistentVolumeClaim", value=f"{fsx.namespace}/{fsx.pvc_name}",
              description="namespace/name of the claim that mounts the shared file system")
    return SharedStorage(file_system=file_system, csi_driver=csi_driver, installer=installer, volume_release=release)


def _warn_of_own_log_bucket(config: AppConfig, log_bucket: s3.IBucket) -> None:
    """``compliance: control_tower`` without ``access_logs_bucket``: the app's own log bucket fails the controls S3's
    rules for a log destination keep it from meeting (infra/guards/control_tower.py), which an account enforcing
    them refuses at deploy. Said at synth, since `make lint` leaves those controls out for this config."""
    unmet = ", ".join(control.control_id for control in met_only_with_access_logs_bucket(config))
    if unmet:
        Annotations.of(log_bucket).add_warning_v2(
            "hyperpod:controlTowerOwnAccessLogBucket",
            f"compliance: control_tower: this access log bucket fails {unmet} (S3 refuses a KMS-encrypted or "
            "locked server access log destination); an account that enforces them refuses it at deploy: set "
            "access_logs_bucket to an existing log bucket (docs/safety.md)")


def _apply_cross_cutting(config: AppConfig, scopes: Sequence[Construct], removal: RemovalPolicy,
                         network: HyperPodNetwork) -> list[LogsKey]:
    """What reaches everything built in each scope: with ``compliance: control_tower`` its Lambda functions in the
    VPC (``place_functions_in_vpc``; first, so that what it adds is protected, tagged and bounded too), the logs
    key, the permissions boundary and the tags."""
    tags = {"project": config.project, **config.tags}
    logs_keys = []
    reached_by_scope = [_with_stack_singletons(scope, auto_delete=config.destroy_data_on_delete) for scope in scopes]
    if config.compliance == "control_tower":
        for scope, reached in zip(scopes, reached_by_scope, strict=True):
            if functions_under(reached):  # a stack without functions gets no subnet parameters or dependency
                place_functions_in_vpc(scope, reached, vpc=network.vpc,
                                       subnet_ids=network.deploy_time_subnet_ids(scope))
    for scope, reached in zip(scopes, reached_by_scope, strict=True):
        logs_key = _protect_keys_and_logs(scope, reached, config.project, removal)
        if logs_key is not None:  # built in scope: the tags and the boundary below reach it
            logs_keys.append(logs_key)
        if config.permissions_boundary_arn:
            boundary = iam.ManagedPolicy.from_managed_policy_arn(scope, "PermissionsBoundary",
                                                                 config.permissions_boundary_arn)
            for construct in reached:
                iam.PermissionsBoundary.of(construct).apply(boundary)
        for construct in reached:
            for key, value in tags.items():
                Tags.of(construct).add(key, value)
            _tag_plain_resources(construct, tags)
    return logs_keys


def _protect_keys_and_logs(scope: Construct, reached: Sequence[IConstruct], project: str,
                           removal: RemovalPolicy) -> LogsKey | None:
    """Every log group built in ``scope`` gets the scope's logs key (one that names a key of its own keeps it),
    and every KMS key built denies grants that are not for AWS resources (``limit_grants_to_aws_services``): the
    AWS Control Tower controls CT.CLOUDWATCH.PR.3 and CT.KMS.PR.3 (infra/guards/control_tower.py). A key a consumer
    brings is not built here and is left as it is.

    One key per scope, so per stack in the app: CT.CLOUDWATCH.PR.3's rule accepts as ``KmsKeyId`` only a string or
    a ``Ref``/``Fn::GetAtt`` of a key in the same template (cdklabs/cdk-validator-cfnguard 0.0.62 rules/control-
    tower/cfn-guard/cloudwatch/ct-cloudwatch-pr-3.guard: ``check_local_references``), so a key shared across
    stacks through ``Fn::ImportValue`` fails the check. ``KmsKeyId`` of a log group is updated without interruption
    (CloudFormation's AWS::Logs::LogGroup reference, read as c2hans/aws-docs@9a3d9b40:docs/AWSCloudFormation/latest/
    TemplateReference/aws-resource-logs-loggroup.md: "Update requires: No interruption"), as is a key policy.
    """
    found = [node for construct in reached for node in construct.node.find_all()]
    groups = [node for node in found if isinstance(node, logs.CfnLogGroup) and node.kms_key_id is None]
    keys = [node for node in found if isinstance(node, kms.Key)]
    logs_key = None
    if groups:
        logs_key = LogsKey(scope, "LogsKey", project=project, removal_policy=removal)
        keys.append(logs_key.key)
        for group in groups:
            group.kms_key_id = logs_key.key_arn
    for key in keys:
        limit_grants_to_aws_services(key)
    return logs_key


# Resource types built as a plain CfnResource, which has no tag manager, so Tags.of passes them by: how each
# type's template takes its tags. Each is "taggable" with "tagUpdatable" and has no Tags among its
# createOnlyProperties in the CloudFormation resource schemas of cfn-lint 1.58.0, so tagging a deployed one
# updates it in place.
#   AWS::IAM::Role, AWS::Lambda::Function (Tags: an array of Key/Value): the role and function of aws-cdk-lib's
#     CustomResourceProvider (aws-cdk-lib 2.275.0 core/lib/custom-resource-provider/custom-resource-provider-base.js),
#     e.g. the S3 auto-delete provider of a bucket with autoDeleteObjects;
#   AWS::SSM::Parameter (Tags: an object): aws-eks-v2's KubectlReadyBarrier (aws-eks-v2/lib/cluster.js);
#   AWS::SageMaker::ComputeQuota (an array): infra/constructs/task_governance.py's team quotas (no L1 class in 2.275.0).
_PLAIN_TAG_SHAPES: dict[str, str] = {
    "AWS::IAM::Role": "list",
    "AWS::Lambda::Function": "list",
    "AWS::SSM::Parameter": "map",
    "AWS::SageMaker::ComputeQuota": "list",
}


def _tag_plain_resources(construct: IConstruct, tags: Mapping[str, str]) -> None:
    """Give ``tags`` to the plain CfnResources under ``construct`` whose type takes tags (Tags.of cannot).

    One walk of the tree per scope; a resource's type is asked of jsii only for plain CfnResources."""
    ordered = sorted(tags.items())  # in key order, as aws-cdk-lib's TagManager renders them
    by_shape = {"map": dict(ordered), "list": [{"Key": k, "Value": v} for k, v in ordered]}
    for node in construct.node.find_all():
        if type(node) is CfnResource and (shape := _PLAIN_TAG_SHAPES.get(node.cfn_resource_type)):
            node.add_property_override("Tags", by_shape[shape])


# aws-cdk-lib puts the functions of BucketDeployment and AwsCustomResource, and the S3 auto-delete provider of a
# bucket with autoDeleteObjects, at stack level, outside the construct that asked for them; a construct that is
# not a stack reaches them here. They are singletons: one function serves every construct of the stack that asks
# for it. The auto-delete provider is reached only when this composition's buckets use it (destroy_data_on_delete);
# other providers of a consumer's stack (e.g. its VPC's Custom::VpcRestrictDefaultSG...) are never ours. CfnJson's
# provider serves the inference operator's trust conditions (infra/constructs/addons.py); a consumer's own CfnJson
# in the same stack shares it.
_STACK_SINGLETON_PREFIXES = ("Custom::CDKBucketDeployment", "AWS679f53fac002430cb0da5b7982bd2287",
                             "AWSCDKCfnUtilsProviderCustomResourceProvider")
# aws-cdk-lib 2.275.0 aws-s3/lib/mixins/bucket.js: AutoDeleteObjectsProvider.getOrCreateProvider(scope,
# "Custom::S3AutoDeleteObjects", ...), and custom-resource-handlers/dist/aws-s3/auto-delete-objects-provider.
# generated.js gives it the id `${uniqueid}CustomResourceProvider` at the stack's root.
_AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"


def _with_stack_singletons(scope: Construct, *, auto_delete: bool) -> list[IConstruct]:
    if isinstance(scope, Stack):
        return [scope]
    return [scope, *(c for c in Stack.of(scope).node.children
                     if c.node.id.startswith(_STACK_SINGLETON_PREFIXES)
                     or (auto_delete and c.node.id == _AUTO_DELETE_PROVIDER))]
