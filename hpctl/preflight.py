"""`hpctl preflight`: read-only checks to run before `cdk deploy`, each pass / warn / fail with its reason.

A check whose AWS call is refused (e.g. AccessDenied on one API) is reported as `warn` ("could not
check"), so a deploy role without that permission is told rather than blocked. Missing credentials or
an unreachable endpoint stop the whole run (exit 3).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

import yaml
from botocore.exceptions import ClientError
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from hpctl import cluster as api
from hpctl import leftovers
from hpctl.aws import loader
from hpctl.errors import UsageError, describe_aws_error, error_code, is_not_found
from infra.config import (
    DEFAULT_CHART_AGENT_VERSION,
    DEPENDENCIES_CHART_REVISION,
    MIN_AUTOSCALING_AGENT_VERSION,
    agent_image_override,
    eks_cluster_name,
    needed_types,
)
from infra.config.device_plugins import CHART_KEYS, group_plugins
from infra.config.observability_addon import (
    HYPERPOD_OBSERVABILITY_ADDON,
    addon_configuration,
    config_key,
    prometheus_endpoint,
)
from infra.config.pod_slots import budgets
from infra.errors import ConfigError
from infra.facts import aws_lists
from infra.facts.names import STACK_COMPONENTS, STACK_DESCRIPTION_PREFIX
from infra.guards import replacement as engine
from infra.runtime.chart_installer.handler import github_archive_url
from infra.runtime.common.errors import DeployError

PASS, WARN, FAIL = "pass", "warn", "fail"


@dataclass
class Check:
    name: str
    verdict: str
    reason: str


def _could_not(name: str, error: ClientError) -> Check:
    line, _ = describe_aws_error(error)
    return Check(name, WARN, f"could not check: {line}")


def _guard(name: str, fn: Callable[[], list[Check]]) -> list[Check]:
    try:
        return fn()
    except ClientError as error:
        return [_could_not(name, error)]


# --- EKS add-on versions ---------------------------------------------------------------------------


def offered_addon_versions(clients: Any, name: str, k8s: str) -> list[dict[str, Any]]:
    """Every version of one add-on EKS offers for a Kubernetes version (all pages of DescribeAddonVersions)."""
    # Response shape: botocore data/eks/2017-11-01/service-2.json, DescribeAddonVersionsResponse
    # (addons[].addonVersions[] with addonVersion and compatibilities[].{clusterVersion, defaultVersion})
    paginator = clients("eks").get_paginator("describe_addon_versions")
    return [
        v
        for page in paginator.paginate(addonName=name, kubernetesVersion=k8s)
        for addon in page.get("addons", [])
        for v in addon.get("addonVersions", [])
    ]


def default_addon_version(versions: list[dict[str, Any]], k8s: str) -> str | None:
    """The version marked default for this Kubernetes version, if any."""
    for v in versions:
        if any(c.get("clusterVersion") == k8s and c.get("defaultVersion") for c in v.get("compatibilities", [])):
            return str(v["addonVersion"])
    return None


def check_addon_versions(cfg: Any, clients: Any) -> list[Check]:
    """Each pinned add-on version, and some version of each add-on the `addons` section turns on without one
    (installed at EKS's default), is offered for the cluster's Kubernetes version."""
    from infra.config import TASK_GOVERNANCE_ADDON
    from infra.config.addons import INFERENCE_OPERATOR_ADDON
    from infra.facts.addons import CERT_MANAGER

    k8s = cfg.eks.version
    pinned: dict[str, str] = dict(cfg.eks.addon_versions)
    governance = cfg.addons.task_governance
    if governance.enabled and governance.addon_version:
        pinned[TASK_GOVERNANCE_ADDON] = governance.addon_version
    # Either operator brings cert-manager at the version AWS's module pins (infra/facts/addons.py).
    if cfg.addons.cert_manager_installer() is not None and CERT_MANAGER.version:
        pinned[CERT_MANAGER.name] = CERT_MANAGER.version
    inference = cfg.addons.inference_operator
    if inference.enabled and inference.addon_version:
        pinned[INFERENCE_OPERATOR_ADDON] = inference.addon_version
    unpinned = [name for name in cfg.addons.eks_addons() if name not in pinned]
    if not pinned and not unpinned:
        return [Check("addon-versions", PASS, "no add-on version pinned")]
    missing = []
    for name, version in sorted(pinned.items()):
        offered = {v["addonVersion"] for v in offered_addon_versions(clients, name, k8s)}
        if version not in offered:
            missing.append(f"{name} {version}")
    missing += [f"{name} (any version)" for name in unpinned if not offered_addon_versions(clients, name, k8s)]
    if missing:
        return [Check("addon-versions", FAIL, f"not offered for Kubernetes {k8s}: {', '.join(missing)}")]
    listed = ", ".join([f"{n} {v}" for n, v in sorted(pinned.items())] + [f"{n} (EKS default)" for n in unpinned])
    return [Check("addon-versions", PASS, f"offered for Kubernetes {k8s}: {listed}")]


# --- Kubernetes version --------------------------------------------------------------------------


def check_k8s_version(cfg: Any, clients: Any) -> list[Check]:
    """Whether EKS still creates clusters of ``eks.version`` today, and at which rate: the config's list is EKS's
    calendar as read on a day (infra.config.eks), this asks EKS (DescribeClusterVersions; botocore's eks model,
    ClusterVersionInformation.versionStatus UNSUPPORTED | STANDARD_SUPPORT | EXTENDED_SUPPORT)."""
    k8s = cfg.eks.version
    versions = clients("eks").describe_cluster_versions(clusterVersions=[k8s], includeAll=True).get(
        "clusterVersions", [])
    info = next((v for v in versions if v.get("clusterVersion") == k8s), None)
    status = (info or {}).get("versionStatus")
    if info is None or status == "UNSUPPORTED":
        return [Check("k8s-version", FAIL, f"EKS no longer creates clusters of Kubernetes {k8s}")]
    ends = info.get("endOfExtendedSupportDate")
    until = f" until {ends:%Y-%m-%d}" if hasattr(ends, "strftime") else ""
    if status == "EXTENDED_SUPPORT":
        return [Check("k8s-version", WARN, f"Kubernetes {k8s} is in EKS extended support{until}, billed at its "
                                           "extended-support rate; move eks.version up one minor version a deploy")]
    return [Check("k8s-version", PASS, f"Kubernetes {k8s}: {str(status).lower().replace('_', ' ')}")]


# --- EKS add-on configuration values ---------------------------------------------------------------

# Stand-ins for what the same deploy creates (AMP and Grafana workspace IDs), so the values can be checked
# before they exist. They fit botocore's amp model (WorkspaceArn `arn:aws[-a-z]*:aps:[-a-z0-9]+:[0-9]{12}:
# workspace/.+`) and grafana model (WorkspaceId `g-[0-9a-f]{10}`); the real IDs are AWS's choice.
PLACEHOLDER_ACCOUNT = "000000000000"
PLACEHOLDER_PROMETHEUS_WORKSPACE = "ws-placeholder"
PLACEHOLDER_GRAFANA_WORKSPACE = "g-0000000000"
PLACEHOLDERS = (PLACEHOLDER_ACCOUNT, PLACEHOLDER_PROMETHEUS_WORKSPACE, PLACEHOLDER_GRAFANA_WORKSPACE)


def dns_suffix_of(region: str) -> str:
    """The DNS suffix of the region's partition (the partition itself is aws_lists.partition_of's), from botocore's
    endpoints data."""
    partition = aws_lists.partition_of(region)
    found = next((p for p in loader().load_data("endpoints")["partitions"] if p["partition"] == partition), None)
    return str(found["dnsSuffix"]) if found else "amazonaws.com"


def planned_addon_configurations(cfg: Any) -> dict[str, dict[str, object]]:
    """The configuration values each add-on gets from this config, built by the construct's own function.

    Only the HyperPod observability add-on gets any (Container Insights, the FSx CSI driver and the core
    add-ons are installed with EKS's defaults). Workspace endpoint and ARNs carry the placeholders above.
    """
    prometheus = cfg.observability.prometheus
    if not prometheus.enabled:
        return {}
    partition, suffix = aws_lists.partition_of(cfg.region), dns_suffix_of(cfg.region)
    account = cfg.account or PLACEHOLDER_ACCOUNT
    grafana = None
    if cfg.observability.grafana.enabled:
        grafana = (cfg.hyperpod.cluster_name,
                   f"arn:{partition}:grafana:{cfg.region}:{account}:/workspaces/{PLACEHOLDER_GRAFANA_WORKSPACE}")
    values = addon_configuration(
        prometheus,
        prometheus_endpoint=prometheus_endpoint(cfg.region, suffix, PLACEHOLDER_PROMETHEUS_WORKSPACE),
        prometheus_arn=f"arn:{partition}:aps:{cfg.region}:{account}:workspace/{PLACEHOLDER_PROMETHEUS_WORKSPACE}",
        grafana_workspace=grafana,
    )
    return {HYPERPOD_OBSERVABILITY_ADDON: values}


def _violation(path: list[str], value: Any, reason: str) -> str:
    where = ".".join(path) or "(top level)"
    key = config_key(path)
    shown = "" if isinstance(value, dict | list) else f" = {json.dumps(value)}"
    return f"{where}{shown}: {reason}" + (f" (config: {key})" if key else "")


def schema_violations(values: dict[str, object], schema: dict[str, Any]) -> list[str]:
    """One line per value the schema refuses: the JSON path of the key, the value and the schema's reason.

    Raises SchemaError when the schema itself is not valid, referencing's Unresolvable for a $ref it cannot
    resolve (remote references are never fetched).
    """
    validator_class = validator_for(schema)
    validator_class.check_schema(schema)
    lines = []
    for error in sorted(validator_class(schema).iter_errors(values), key=lambda e: [str(p) for p in e.absolute_path]):
        path = [str(p) for p in error.absolute_path]
        if error.validator == "additionalProperties" and error.validator_value is False:
            # jsonschema reports the object; name each key it does not know instead.
            known = error.schema.get("properties", {})
            patterns = error.schema.get("patternProperties", {})
            for key, value in error.instance.items():
                if key not in known and not any(re.search(p, key) for p in patterns):
                    lines.append(_violation([*path, key], value, "unknown key: the schema allows no other key here"))
        else:
            lines.append(_violation(path, error.instance, error.message))
    return lines


def check_addon_config(cfg: Any, clients: Any) -> list[Check]:
    """The configuration values sent to each add-on satisfy the schema EKS publishes for the version installed.

    EKS validates them against the same schema on create ("validated against the schema returned by
    DescribeAddonConfiguration", https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateAddon.html).
    """
    planned = planned_addon_configurations(cfg)
    if not planned:
        return [Check("addon-config", PASS, "no add-on gets configuration values")]
    k8s = cfg.eks.version
    checks = []
    for name, values in planned.items():
        # The construct gives these add-ons no version (eks.addon_versions pins only the core add-ons). EKS then
        # installs the version DescribeAddonVersions marks defaultVersion for the cluster's Kubernetes version:
        # "The version with True in the Defaultversion column is the version that the add-on is created with, by
        # default" (https://docs.aws.amazon.com/eks/latest/userguide/creating-an-add-on.html, "Create add-on
        # (AWS CLI)"; the CreateAddon API reference does not say).
        offered = offered_addon_versions(clients, name, k8s)
        if not offered:
            checks.append(Check("addon-config", FAIL, f"{name} is not offered for Kubernetes {k8s}"))
            continue
        version = default_addon_version(offered, k8s)
        if version is None:
            checks.append(Check("addon-config", WARN,
                                f"could not check: EKS marks no version of {name} default for Kubernetes {k8s}"))
            continue
        # Request and response shapes: botocore data/eks/2017-11-01/service-2.json, DescribeAddonConfiguration
        # (configurationSchema is a JSON schema as a string).
        raw = clients("eks").describe_addon_configuration(addonName=name, addonVersion=version).get(
            "configurationSchema")
        if not raw:
            checks.append(Check("addon-config", WARN,
                                f"could not check: EKS publishes no configuration schema for {name} {version}"))
            continue
        try:
            violations = schema_violations(values, json.loads(raw))
        except (ValueError, SchemaError, Unresolvable) as error:
            reason = error.message if isinstance(error, SchemaError) else str(error)
            checks.append(Check("addon-config", WARN,
                                f"could not check: the configuration schema of {name} {version} is unusable: {reason}"))
            continue
        if violations:
            # A placeholder the schema refuses says nothing about the real value: warn, do not fail.
            checks += [
                Check("addon-config", WARN, f"{name} {version}: {line} (a placeholder for a value the deploy creates)")
                if any(p in line for p in PLACEHOLDERS) else Check("addon-config", FAIL, f"{name} {version}: {line}")
                for line in violations
            ]
        else:
            checks.append(Check("addon-config", PASS, f"{name} {version}: the values satisfy its configuration schema"))
    return checks


# --- Resource types the region offers --------------------------------------------------------------


def type_offered(clients: Any, type_name: str) -> bool:
    """Whether CloudFormation's registry in the clients' region has the public resource type ``type_name``
    (DescribeType with Type RESOURCE; botocore's cloudformation model lists TypeNotFoundException among its
    errors). Any other error is raised."""
    try:
        clients("cloudformation").describe_type(Type="RESOURCE", TypeName=type_name)
    except ClientError as error:
        if error_code(error) == "TypeNotFoundException":
            return False
        raise
    return True


def check_resource_types(cfg: Any, clients: Any) -> list[Check]:
    """Live, what synth checks with cfn-lint's data (infra/config/regions.py): one check per config key that is on
    (``region`` for what every deployment creates), failing when the region lacks one of the types it creates.
    Each type is asked once."""
    offered: dict[str, bool] = {}
    checks = []
    for key, types in needed_types(cfg).items():
        for type_name in types:
            if type_name not in offered:
                offered[type_name] = type_offered(clients, type_name)
        lacking = [t for t in types if not offered[t]]
        name = f"resource-types {key}"
        if lacking:
            checks.append(Check(name, FAIL, f"CloudFormation in {cfg.region} does not offer {', '.join(lacking)} "
                                            f"(DescribeType): {key} cannot deploy there"))
        else:
            checks.append(Check(name, PASS, f"CloudFormation in {cfg.region} offers all {len(types)} types"))
    return checks


# --- Chart source ----------------------------------------------------------------------------------


def head_status(url: str) -> int:
    """HTTP status of a HEAD request (redirects followed); raises URLError/OSError when unreachable."""
    try:
        with urlopen(Request(url, method="HEAD"), timeout=10) as response:  # noqa: S310 - https URL from config
            return int(response.status)
    except HTTPError as error:
        return error.code


def check_chart_source(cfg: Any) -> list[Check]:
    """The chart installer's GitHub archive for the pinned commit can be fetched from here."""
    chart = cfg.hyperpod.dependencies_chart
    if chart.source != "git":
        return [Check("chart-source", PASS, f"source {chart.source}: not fetched from GitHub")]
    try:
        url = github_archive_url(chart.git_repository, chart.revision)
    except DeployError as error:  # what the installer would refuse: another host, a non-ASCII owner
        return [Check("chart-source", FAIL, str(error))]
    try:
        status = head_status(url)
    except (URLError, OSError) as error:
        return [Check("chart-source", WARN, f"could not reach {url}: {error}")]
    if status in (200, 302):
        return [Check("chart-source", PASS, f"{url} answers {status}")]
    if status == 404:
        return [Check("chart-source", FAIL, f"commit {chart.revision} not found in {chart.git_repository} ({url})")]
    return [Check("chart-source", WARN, f"{url} answers HTTP {status}")]


# --- Device plugins ---------------------------------------------------------------------------------


def check_device_plugins(cfg: Any) -> list[Check]:
    """Per instance group, which of the dependencies chart's device plugins (NVIDIA, EFA, Neuron) will run on its
    nodes with the values the app sends (``infra.config.device_plugins``). A device of the group's type that its
    plugin will not serve fails; a type whose EFA count the instance catalog lacks warns."""
    chart = cfg.hyperpod.dependencies_chart
    pinned = chart.source == "git" and chart.revision == DEPENDENCIES_CHART_REVISION
    checks = []
    for entry in group_plugins(cfg.hyperpod.instance_groups, chart.values, pinned_chart=pinned):
        running = ", ".join(CHART_KEYS[p] for p in entry.plugins) or "no device plugin"
        line = f"group {entry.group} ({', '.join(entry.instance_types)}): {running}"
        if entry.problems:
            checks.append(Check("device-plugins", FAIL, f"{line}; {'; '.join(entry.problems)}"))
        elif entry.unknown:
            checks.append(Check("device-plugins", WARN, (
                f"{line}; the instance catalog has no EFA count for {', '.join(entry.unknown)}, so no EFA plugin "
                f"runs there: if the type has EFA, set dependencies_chart.values.{CHART_KEYS['efa']}")))
        else:
            checks.append(Check("device-plugins", PASS, line))
    return checks


# --- Karpenter autoscaling -------------------------------------------------------------------------


def check_autoscaling(cfg: Any, deployed: dict[str, Any] | None) -> list[Check]:
    """The health monitoring agent autoscaling needs, and the deployed autoscaler's own status."""
    if not cfg.hyperpod.autoscaling.enabled:
        return []
    chart = cfg.hyperpod.dependencies_chart
    override = agent_image_override(chart.values)
    # Tags older than the minimum, tags that are not numbered and a disabled agent are refused when the config
    # loads (infra/config/hyperpod.py).
    if override is not None:
        checks = [Check("autoscaling-agent", PASS, f"agent {override[1]} pinned in dependencies_chart.values "
                                                   f"({override[0]})")]
    elif chart.source == "git" and chart.revision == DEPENDENCIES_CHART_REVISION:
        checks = [Check("autoscaling-agent", PASS, f"the default dependencies chart installs agent "
                                                   f"{DEFAULT_CHART_AGENT_VERSION}")]
    else:
        checks = [Check("autoscaling-agent", WARN, (
            f"this dependencies chart chooses the agent version: autoscaling needs {MIN_AUTOSCALING_AGENT_VERSION} "
            "or later; check the tag with kubectl get daemonset -n aws-hyperpod health-monitoring-agent "
            "-o jsonpath='{..image}'"))]
    # DescribeCluster's AutoScaling (botocore's ClusterAutoScalingConfigOutput): Status and FailureMessage.
    status = (deployed or {}).get("AutoScaling") or {}
    if status.get("Status") == "Failed":
        checks.append(Check("autoscaling-status", FAIL, f"the deployed cluster's autoscaling failed: "
                                                        f"{status.get('FailureMessage', 'no message')}"))
    return checks


# --- Availability Zone IDs -------------------------------------------------------------------------


def check_az_ids(cfg: Any, clients: Any) -> list[Check]:
    wanted = sorted(
        set(cfg.network.control_plane_az_ids)
        | {s.az_id for s in cfg.network.hyperpod_subnets}
        | {g.az_id for g in cfg.hyperpod.instance_groups}
    )
    zones = clients("ec2").describe_availability_zones()["AvailabilityZones"]
    by_id = {z["ZoneId"]: z for z in zones}
    missing = [az for az in wanted if az not in by_id]
    if missing:
        return [Check("az-ids", FAIL, f"not in {cfg.region} for this account: {', '.join(missing)}")]
    unavailable = [
        f"{az} ({by_id[az].get('State')})" for az in wanted if by_id[az].get("State") != "available"
    ]
    if unavailable:
        return [Check("az-ids", WARN, f"AZ not available: {', '.join(unavailable)}")]
    names = ", ".join(f"{az}={by_id[az]['ZoneName']}" for az in wanted)
    return [Check("az-ids", PASS, f"all exist: {names}")]


# --- Instance types offered in the groups' AZs -----------------------------------------------------


def check_instance_offerings(cfg: Any, clients: Any) -> list[Check]:
    """Each group's instance types are offered in its AZ, as EC2 lists them (ec2:DescribeInstanceTypeOfferings by AZ
    ID, the type without its ml. prefix). AWS's answer to a HyperPod cluster failing with "We currently do not have
    sufficient capacity for the requested instance type(s)" is to check exactly this
    (https://github.com/awslabs/awsome-distributed-ai/issues/204). A warning, not a failure: that HyperPod's
    capacity follows EC2's offerings is that advice, not a documented rule (unverified)."""
    # Request and response shapes: botocore data/ec2/2016-11-15/service-2.json, DescribeInstanceTypeOfferings
    # (LocationType availability-zone-id; Filters location and instance-type; InstanceTypeOfferings[].InstanceType).
    ec2 = clients("ec2")
    pairs = sorted({(t, g.az_id) for g in cfg.hyperpod.instance_groups for t in g.instance_types})
    checks = []
    for instance_type, az_id in pairs:
        ec2_type = instance_type.removeprefix("ml.")
        offered = ec2.describe_instance_type_offerings(
            LocationType="availability-zone-id",
            Filters=[{"Name": "location", "Values": [az_id]}, {"Name": "instance-type", "Values": [ec2_type]}],
        ).get("InstanceTypeOfferings", [])
        name = f"offered {instance_type} {az_id}"
        if any(o.get("InstanceType") == ec2_type for o in offered):
            checks.append(Check(name, PASS, f"EC2 offers {ec2_type} in {az_id}"))
        else:
            checks.append(Check(name, WARN, f"EC2 does not offer {ec2_type} in {az_id}: HyperPod would report that it "
                                            "does not have sufficient capacity; use another az_id, or add "
                                            "fallback_instance_types offered there"))
    return checks


# --- Service quotas --------------------------------------------------------------------------------


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for cluster usage"


def check_quotas(cfg: Any, clients: Any) -> list[Check]:
    # First choices are what the config asks for; a flexible group's fallbacks may be asked for its whole count.
    requested: dict[str, int] = defaultdict(int)
    fallback: dict[str, int] = defaultdict(int)
    for group in cfg.hyperpod.instance_groups:
        requested[group.instance_type] += group.instance_count
        for instance_type in group.fallback_instance_types:
            fallback[instance_type] += group.instance_count
    quotas: dict[str, float] = {}
    paginator = clients("service-quotas").get_paginator("list_service_quotas")
    for page in paginator.paginate(ServiceCode="sagemaker"):
        for quota in page.get("Quotas", []):
            quotas[quota.get("QuotaName", "")] = float(quota.get("Value", 0))
    checks = []
    for instance_type in sorted(set(requested) | set(fallback)):
        count, most = requested.get(instance_type, 0), requested.get(instance_type, 0) + fallback.get(instance_type, 0)
        name = f"quota {instance_type}"
        label = quota_name(instance_type)
        if label not in quotas:
            checks.append(Check(name, WARN, f"no quota named {label!r} found; request one in Service Quotas"))
        elif quotas[label] < count:
            checks.append(
                Check(
                    name,
                    FAIL,
                    f"{label!r} is {quotas[label]:g}, the config asks for {count}; request an increase",
                )
            )
        elif quotas[label] < most:
            checks.append(Check(name, WARN, f"{label!r} is {quotas[label]:g}, the config asks for {count} and, as a "
                                            f"fallback type, up to {most}; request an increase if the fallback "
                                            "must cover whole groups"))
        else:
            upto = f" (up to {most} as a fallback type)" if most > count else ""
            checks.append(Check(name, PASS, f"{label!r} is {quotas[label]:g}, the config asks for {count}{upto}"))
    return checks


# --- Subnet IPs (bring your own VPC) ---------------------------------------------------------------


def check_subnet_ips(cfg: Any, clients: Any, deployed: dict[str, Any] | None) -> list[Check]:
    """Free IPs of each existing subnet against the IP plan (instance_count x ips_per_node).

    Nodes already running hold their IPs, so for a deployed cluster only the growth is counted.
    """
    from infra.facts.ip_plan import ips_per_node

    if cfg.network.existing_vpc_id is None:
        return [
            Check(
                "subnet-ips", PASS, "not applicable: the network stack creates the subnets (planned at synth)"
            )
        ]
    current = {
        g["InstanceGroupName"]: g.get("CurrentCount", 0) for g in (deployed or {}).get("InstanceGroups", [])
    }
    ec2 = clients("ec2")
    checks = []
    for subnet in cfg.network.hyperpod_subnets:
        name = f"subnet-ips {subnet.subnet_id}"
        try:
            found = ec2.describe_subnets(SubnetIds=[subnet.subnet_id])["Subnets"]
        except ClientError as error:
            if error_code(error) == "InvalidSubnetID.NotFound":
                checks.append(Check(name, FAIL, f"subnet {subnet.subnet_id} does not exist in {cfg.region}"))
                continue
            raise
        info = found[0]
        if info.get("VpcId") != cfg.network.existing_vpc_id:
            checks.append(Check(name, FAIL, f"in {info.get('VpcId')}, not in {cfg.network.existing_vpc_id}"))
            continue
        if info.get("AvailabilityZoneId") != subnet.az_id:
            checks.append(
                Check(name, FAIL, f"in AZ {info.get('AvailabilityZoneId')}, config says {subnet.az_id}")
            )
            continue
        groups = [g for g in cfg.hyperpod.instance_groups if g.az_id == subnet.az_id]
        needed = sum(
            max(0, g.instance_count - current.get(g.name, 0)) * ips_per_node(g.instance_types)
            for g in groups
        )
        spare_one = max((ips_per_node(g.instance_types) for g in groups), default=0)
        free = int(info.get("AvailableIpAddressCount", 0))
        plan = ", ".join(
            f"{g.name}: {g.instance_count} x {ips_per_node(g.instance_types)}" for g in groups
        )
        if free < needed:
            checks.append(Check(name, FAIL, f"{free} free IPs, the plan needs {needed} more ({plan})"))
        elif free - needed < spare_one:
            checks.append(
                Check(
                    name,
                    WARN,
                    f"{free} free IPs cover the {needed} needed but leave no room to replace a node",
                )
            )
        else:
            checks.append(
                Check(name, PASS, f"{free} free IPs, the plan needs {needed} more ({plan or 'no groups'})")
            )
    return checks


# --- IAM Identity Center for Grafana ---------------------------------------------------------------


def grafana_authentication(cfg: Any) -> list[str]:
    """observability.grafana.authentication, read defensively (default AWS_SSO)."""
    grafana = getattr(getattr(cfg, "observability", None), "grafana", None)
    value = getattr(grafana, "authentication", None)
    if value is None:
        return ["AWS_SSO"]
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def check_admin_access(cfg: Any) -> list[Check]:
    """Someone can use kubectl after the deploy: the EKS cluster is created without the creator as admin
    (in CloudFormation the creator is a deployment role, not a person), so admins come only from the config."""
    admins = list(cfg.eks.admin_principal_arns)
    if not admins:
        return [Check("admin-access", FAIL,
                      "eks.admin_principal_arns is empty: nobody could use kubectl on the cluster; add the IAM role "
                      "ARN of the platform team (e.g. your SSO role's arn:aws:iam::<account>:role/...)")]
    return [Check("admin-access", PASS, f"cluster-admin for {', '.join(admins)}")]


def check_identity_center(cfg: Any, clients: Any) -> list[Check]:
    methods = grafana_authentication(cfg)
    if "AWS_SSO" not in methods:
        return [Check("identity-center", PASS, f"not needed: Grafana uses {', '.join(methods)}")]
    instances = []
    for page in clients("sso-admin").get_paginator("list_instances").paginate():
        instances += page.get("Instances", [])
    if not instances:
        return [
            Check(
                "identity-center",
                FAIL,
                "Grafana uses AWS_SSO but IAM Identity Center is not enabled: enable it or use SAML",
            )
        ]
    active = [i for i in instances if i.get("Status", "ACTIVE") == "ACTIVE"]
    if not active:
        return [
            Check(
                "identity-center",
                WARN,
                f"instance {instances[0].get('InstanceArn')} is {instances[0].get('Status')}",
            )
        ]
    return [Check("identity-center", PASS, f"IAM Identity Center instance {active[0].get('InstanceArn')}")]


# --- Would the deploy replace a stateful resource, or make a change AWS refuses? -------------------------------
# The replacement engine of synth's guard (infra/guards/replacement.py): the deployed templates of every stack of the
# project (cloudformation:GetTemplate) against this synth's, with the same snapshot, findings and reasons.

_VERDICTS = {engine.REFUSE: FAIL, engine.WARN: WARN}


def _parse_body(body: Any) -> dict[str, Any]:
    """GetTemplate's TemplateBody: botocore decodes a JSON body into a dict (botocore/handlers.py,
    json_decode_template_body); a YAML one stays a string."""
    if isinstance(body, dict):
        return body
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = yaml.safe_load(body)
    return parsed if isinstance(parsed, dict) else {}


def synth_stacks(cdk_out: Path, project: str) -> dict[str, Path]:
    """Stack name -> template file of every stack of ``project`` (``<project>-...``) in the cloud assembly's
    manifest.json (artifacts of type aws:cloudformation:stack; the name is properties.stackName, else the artifact
    ID, as the CDK CLI reads it)."""
    manifest = cdk_out / "manifest.json"
    if not manifest.is_file():
        return {}
    try:
        artifacts = json.loads(manifest.read_text(encoding="utf-8")).get("artifacts") or {}
    except ValueError as error:
        raise UsageError(f"{manifest} is not valid JSON ({error}): run `cdk synth` again") from None
    stacks = {}
    for artifact_id, artifact in artifacts.items():
        if not isinstance(artifact, dict) or artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact.get("properties") or {}
        name = props.get("stackName") or artifact_id
        if name.startswith(f"{project}-"):
            stacks[name] = cdk_out / props.get("templateFile", f"{artifact_id}.template.json")
    return stacks


def _synth_template(path: Path) -> dict[str, Any]:
    try:
        template: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"cannot read {path} ({error.strerror}): run `cdk synth` again") from None
    except ValueError as error:
        raise UsageError(f"{path} is not a valid template ({error}): run `cdk synth` again") from None
    return template


def deployed_templates(clients: Any, stacks: list[str]) -> dict[str, dict[str, Any]]:
    """The template CloudFormation holds for each stack that exists (TemplateStage Original: as the CDK wrote it);
    a stack that does not exist is left out."""
    cloudformation = clients("cloudformation")
    templates = {}
    for name in stacks:
        try:
            body = cloudformation.get_template(StackName=name, TemplateStage="Original")["TemplateBody"]
        except ClientError as error:
            if is_not_found(error):
                continue
            raise
        templates[name] = _parse_body(body)
    return templates


def check_replacement(cfg: Any, clients: Any, cdk_out: Path, lock_dir: Path = engine.LOCK_DIR) -> list[Check]:
    """Every finding of the replacement engine, one check each (FAIL for what synth's guard refuses with this
    config, WARN for what it accepts or only warns about), named after the stack of the deployed resource.
    The acknowledgements the project's lock (``lock_dir``, relative to the working directory: the repository)
    records as used by the last deploy are refused as left over, as synth's guard does."""
    stacks = synth_stacks(cdk_out, cfg.project)
    if not stacks:
        return [Check("no-replace", WARN, f"no synthesized stack of {cfg.project} in {cdk_out}: run `cdk synth` first")]
    synth = {name: _synth_template(path) for name, path in stacks.items()}
    deployed = deployed_templates(clients, list(stacks))
    if not deployed:
        return [Check("no-replace", PASS, f"not deployed: none of {', '.join(stacks)}")]
    try:
        before, after = engine.snapshot(deployed, cfg.project), engine.snapshot(synth, cfg.project)
        before["acknowledged"] = engine.deployed_acknowledgements(engine.lock_path(lock_dir, cfg.project))
    except ConfigError as error:
        return [Check("no-replace", WARN, f"could not check: {error}")]
    found = engine.findings(before, after, cfg, templates=(deployed, synth))
    if not found:
        guarded = len(before["resources"])
        return [Check("no-replace", PASS, f"{guarded} guarded resources of {', '.join(deployed)}: nothing replaced, "
                                          "no change AWS refuses")]
    return [Check(f"no-replace {f.stack}", _VERDICTS[f.severity], f.reason) for f in found]


# --- Leftovers of an earlier deployment ------------------------------------------------------------


def check_leftovers(cfg: Any, clients: Any) -> list[Check]:
    found = leftovers.find(cfg, clients)
    if not found:
        return [Check("leftovers", PASS, "no kept log group stands in the way of a create")]
    return [
        Check(f"leftover {item.log_group}", FAIL,
              f"exists but {item.stack} does not own it (AlreadyExists on create): "
              + " | or: ".join(item.commands(cfg.region)))
        for item in found
    ]


# --- Pod slots per node ---------------------------------------------------------------------------


def check_pod_slots(cfg: Any) -> list[Check]:
    """The pod budget of every group's node of each of its types (infra/config/pod_slots.py): the DaemonSet pods the
    config puts on it against the pods it accepts. Synth refuses a group without a slot left for a workload pod;
    a type whose pod figure the catalog lacks warns."""
    checks = []
    for budget in budgets(cfg):
        verdict = WARN if budget.max_pods is None else PASS if budget.fits else FAIL
        checks.append(Check(f"pod-slots {budget.group} {budget.instance_type}", verdict, budget.line()))
    return checks


# --- Names already taken ---------------------------------------------------------------------------

# What CloudFormation records as the physical ID of each (the resource type's primaryIdentifier in cfn-lint's copy of
# the registry schemas, cfnlint/data/schemas: AWS::SageMaker::Cluster /properties/ClusterArn, AWS::EKS::Cluster
# /properties/Name), which ListStackResources gives as PhysicalResourceId.
_CLUSTER_TYPES = {"hyperpod": "AWS::SageMaker::Cluster", "eks": "AWS::EKS::Cluster"}


def _stack_physical_ids(cloudformation: Any, stack: str, resource_type: str) -> set[str]:
    """Physical IDs of the stack's resources of one type; empty when the stack does not exist."""
    try:
        return {r.get("PhysicalResourceId", "")
                for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
                for r in page.get("StackResourceSummaries", []) if r.get("ResourceType") == resource_type}
    except ClientError as error:
        if is_not_found(error):
            return set()
        raise


def _stack_description(cloudformation: Any, stack: str) -> str | None:
    """The stack's Description ("" when it has none), or None when no stack has the name."""
    try:
        (found,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if is_not_found(error):
            return None
        raise
    return str(found.get("Description") or "")


def check_names(cfg: Any, clients: Any, deployed: dict[str, Any] | None, stacks: list[str]) -> list[Check]:
    """The names the deploy creates are free, or this project's own: the HyperPod cluster and the EKS cluster (a
    cluster of the name that the project's stack did not create makes the create fail), and each stack (another
    app's stack of the name would be updated with this app's template)."""
    cloudformation = clients("cloudformation")
    checks = []
    hyperpod, eks = cfg.hyperpod.cluster_name, eks_cluster_name(cfg)
    eks_found = None
    try:
        eks_found = clients("eks").describe_cluster(name=eks)["cluster"]
    except ClientError as error:
        if not is_not_found(error):
            raise
    for component, name, found, arn, delete in (
        ("hyperpod", hyperpod, deployed, (deployed or {}).get("ClusterArn"),
         f"aws sagemaker delete-cluster --cluster-name {hyperpod} --region {cfg.region}"),
        ("eks", eks, eks_found, (eks_found or {}).get("arn"),
         f"aws eks delete-cluster --name {eks} --region {cfg.region}"),
    ):
        stack = f"{cfg.project}-{component}"
        if found is None:
            continue
        owned = _stack_physical_ids(cloudformation, stack, _CLUSTER_TYPES[component])
        if name in owned or arn in owned:
            continue  # the cluster this project's stack created: the deploy updates it
        key = "hyperpod.cluster_name" if component == "hyperpod" else "project (the EKS cluster is <project>-eks)"
        checks.append(Check(f"name {name}", FAIL,
                            f"a {_CLUSTER_TYPES[component]} named {name} already exists in {cfg.region} and stack "
                            f"{stack} did not create it: choose another {key}, or if it is a leftover delete it "
                            f"({delete})"))
    taken = []
    for stack in stacks:
        description = _stack_description(cloudformation, stack)
        if description is None or description.startswith(STACK_DESCRIPTION_PREFIX):
            continue  # free, or this app's stack (a deploy updates it)
        taken.append(Check(f"name {stack}", FAIL,
                           f"a stack named {stack} already exists in {cfg.region} and is not this app's (its "
                           f"description: {description!r}): the deploy would update it with this app's template; "
                           "choose another project"))
    failed = [c for c in checks + taken if c.verdict == FAIL]
    return failed or [Check("names", PASS, f"HyperPod cluster {hyperpod}, EKS cluster {eks} and stacks "
                                           f"{', '.join(stacks)}: free, or this project's own")]


# --- Run them all ----------------------------------------------------------------------------------


def run_all(cfg: Any, clients: Any, cdk_out: Path) -> list[Check]:
    deployed = None
    try:
        deployed = api.find_cluster(clients("sagemaker"), cfg.hyperpod.cluster_name)
    except ClientError:
        deployed = None  # counted as not deployed; the subnet check then plans every node
    checks: list[Check] = []
    checks += _guard("az-ids", lambda: check_az_ids(cfg, clients))
    checks += _guard("instance-offerings", lambda: check_instance_offerings(cfg, clients))
    checks += _guard("quotas", lambda: check_quotas(cfg, clients))
    checks += _guard("subnet-ips", lambda: check_subnet_ips(cfg, clients, deployed))
    checks += check_admin_access(cfg)
    checks += check_pod_slots(cfg)
    checks += _guard("identity-center", lambda: check_identity_center(cfg, clients))
    checks += _guard("leftovers", lambda: check_leftovers(cfg, clients))
    checks += _guard("k8s-version", lambda: check_k8s_version(cfg, clients))
    checks += _guard("addon-versions", lambda: check_addon_versions(cfg, clients))
    checks += _guard("addon-config", lambda: check_addon_config(cfg, clients))
    checks += _guard("resource-types", lambda: check_resource_types(cfg, clients))
    checks += check_chart_source(cfg)
    checks += check_device_plugins(cfg)
    checks += check_autoscaling(cfg, deployed)
    checks += _guard("no-replace", lambda: check_replacement(cfg, clients, cdk_out))
    stacks = list(synth_stacks(cdk_out, cfg.project)) or [f"{cfg.project}-{c}" for c in STACK_COMPONENTS[:3]]
    checks += _guard("names", lambda: check_names(cfg, clients, deployed, stacks))
    return checks


def checks_json(checks: list[Check]) -> list[dict[str, str]]:
    return [asdict(c) for c in checks]
