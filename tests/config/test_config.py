"""Every config mistake is refused before synth with one message that names the key and the value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.config import az_id_prefix, cluster_instance_types, load_config, parse_config
from infra.constructs.hyperpod.lifecycle_render import render_lifecycle_env
from infra.errors import ConfigError
from infra.facts.ip_plan import ips_per_instance, subnet_capacity
from tests.conftest import ROOT, default_config_data, mutate


def group(**changes):
    base = dict(default_config_data()["hyperpod"]["instance_groups"][0])
    base.update(changes)
    return {"hyperpod": {"instance_groups": [base]}}


REFUSALS = [
    # (case id, changes, key the message must name, words the message must contain)
    ("typo top level", {"regoin": "us-west-2"}, "regoin", "unknown key"),
    ("typo nested", {"network": {"nat_gateway": "single"}}, "network.nat_gateway", "unknown key"),
    ("typo in group", group(instance_cout=2), "hyperpod.instance_groups.0.instance_cout", "unknown key"),
    ("wrong type", group(instance_count="two"), "hyperpod.instance_groups.0.instance_count", "integer"),
    ("wrong type list", {"network": {"control_plane_az_ids": "usw2-az1"}}, "network.control_plane_az_ids", "list"),
    ("missing key", {"region": None}, "region", "missing"),
    ("cluster name pattern", {"hyperpod": {"cluster_name": "my_cluster"}}, "hyperpod.cluster_name", "my_cluster"),
    ("cluster name length", {"hyperpod": {"cluster_name": "a" * 64}}, "hyperpod.cluster_name", "63"),
    ("group name pattern", group(name="gpu_workers"), "hyperpod.instance_groups.0.name", "gpu_workers"),
    ("project pattern", {"project": "1bad"}, "project", "1bad"),
    ("duplicate groups", {"hyperpod": {"instance_groups": [group()["hyperpod"]["instance_groups"][0]] * 2}},
     "hyperpod.instance_groups", "gpu-workers"),
    ("az of another region", {"network": {"control_plane_az_ids": ["use1-az1", "usw2-az2"]}},
     "network.control_plane_az_ids.0", "use1-az1"),
    ("malformed az id", {"network": {"control_plane_az_ids": ["us-west-2a", "usw2-az2"]}},
     "network.control_plane_az_ids.0", "us-west-2a"),
    ("group az without subnet", group(az_id="usw2-az3"), "hyperpod.instance_groups.0.az_id", "usw2-az3"),
    ("duplicate control plane az", {"network": {"control_plane_az_ids": ["usw2-az1", "usw2-az1"]}},
     "network.control_plane_az_ids", "distinct"),
    ("one control plane az", {"network": {"control_plane_az_ids": ["usw2-az1"]}},
     "network.control_plane_az_ids", "at least 2"),
    ("secondary overlaps vpc", {"network": {"hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.192.128.0/17"}]}},
     "network.hyperpod_subnets.0.cidr", "overlaps network.vpc_cidr"),
    ("secondaries overlap", {"network": {"hyperpod_subnets": [
        {"az_id": "usw2-az2", "cidr": "10.1.0.0/16"}, {"az_id": "usw2-az3", "cidr": "10.1.128.0/17"}]}},
     "network.hyperpod_subnets.1.cidr", "overlaps network.hyperpod_subnets.0.cidr"),
    ("secondary from another private range", {"network": {"hyperpod_subnets": [
        {"az_id": "usw2-az2", "cidr": "192.168.0.0/16"}]}}, "network.hyperpod_subnets.0.cidr", "same private range"),
    ("secondary too large", {"network": {"hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.0.0.0/15"}]}},
     "network.hyperpod_subnets.0.cidr", "/16 and /28"),
    ("vpc cidr too large", {"network": {"vpc_cidr": "10.0.0.0/12"}}, "network.vpc_cidr", "/16 and /24"),
    ("vpc cidr public", {"network": {"vpc_cidr": "8.8.0.0/16"}}, "network.vpc_cidr", "private"),
    ("not a cidr", {"network": {"vpc_cidr": "10.192.0.0/33"}}, "network.vpc_cidr", "10.192.0.0/33"),
    ("subnets too small for the groups",
     {"network": {"hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.1.0.0/28"}]}},
     "network.hyperpod_subnets.0.cidr", "need 30 IPs"),
    ("k8s version unsupported", {"eks": {"version": "1.27"}}, "eks.version", "1.27"),
    # HyperPod's list stops at 1.35; 1.29 is no longer in it; EKS creates no 1.31 cluster since 2026-11-26.
    ("k8s newer than hyperpod", {"eks": {"version": "1.36"}}, "eks.version", "not supported by SageMaker HyperPod"),
    ("k8s older than hyperpod", {"eks": {"version": "1.29"}}, "eks.version", "not supported by SageMaker HyperPod"),
    ("k8s past eks support", {"eks": {"version": "1.31"}}, "eks.version",
     "Amazon EKS no longer creates clusters of Kubernetes 1.31"),
    ("k8s version as float", {"eks": {"version": 1.3}}, "eks.version", "quoted string"),
    ("count too large", group(instance_count=6759), "hyperpod.instance_groups.0.instance_count", "6758"),
    ("count negative", group(instance_count=-1), "hyperpod.instance_groups.0.instance_count", "0"),
    ("ebs too large", group(ebs_volume_gb=16385), "hyperpod.instance_groups.0.ebs_volume_gb", "16384"),
    ("ebs zero", group(ebs_volume_gb=0), "hyperpod.instance_groups.0.ebs_volume_gb", "1"),
    ("threads per core", group(threads_per_core=4), "hyperpod.instance_groups.0.threads_per_core", "1 or 2"),
    ("no ml prefix", group(instance_type="p5.48xlarge"), "hyperpod.instance_groups.0.instance_type", "'ml.'"),
    ("unknown instance type", group(instance_type="ml.g5.9xlarge"), "hyperpod.instance_groups.0.instance_type",
     "ml.g5.9xlarge"),
    ("connectivity on one node", group(deep_health_checks=["InstanceConnectivity"]),
     "hyperpod.instance_groups.0.deep_health_checks", "InstanceConnectivity needs at least 2"),
    ("unknown deep health check", group(deep_health_checks=["InstanceMagic"]),
     "hyperpod.instance_groups.0.deep_health_checks.0", "InstanceMagic"),
    ("public endpoint without cidrs", {"eks": {"endpoint": "public_and_private"}}, "eks.public_access_cidrs",
     "non-empty"),
    ("public endpoint open to all", {"eks": {"endpoint": "public_and_private", "public_access_cidrs": ["0.0.0.0/0"]}},
     "eks.public_access_cidrs.0", "0.0.0.0/0"),
    ("public endpoint open by halves",
     {"eks": {"endpoint": "public_and_private", "public_access_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]}},
     "eks.public_access_cidrs.0", "shorter than /8"),
    ("public endpoint open to a /7", {"eks": {"endpoint": "public_and_private",
                                              "public_access_cidrs": ["203.0.113.0/24", "2.0.0.0/7"]}},
     "eks.public_access_cidrs.1", "2.0.0.0/7"),
    ("grafana reachable by nobody", {"observability": {"grafana": {"network_access": {}}}},
     "observability.grafana.network_access", "prefix_list_ids or vpce_ids"),
    ("grafana prefix list id", {"observability": {"grafana": {"network_access": {"prefix_list_ids": ["10.0.0.0/8"]}}}},
     "observability.grafana.network_access.prefix_list_ids.0", "pattern"),
    ("cidrs with private endpoint", {"eks": {"public_access_cidrs": ["203.0.113.0/24"]}}, "eks.public_access_cidrs",
     "only used"),
    ("endpoint value", {"eks": {"endpoint": "public"}}, "eks.endpoint", "public"),
    ("nat value", {"network": {"nat_gateways": "two"}}, "network.nat_gateways", "two"),
    ("old vpc cni", {"eks": {"addon_versions": {"vpc-cni": "v1.18.2-eksbuild.1"}}}, "eks.addon_versions.vpc-cni",
     "v1.18.3"),
    ("admin arn", {"eks": {"admin_principal_arns": ["PlatformAdmin"]}}, "eks.admin_principal_arns.0",
     "PlatformAdmin"),
    ("unknown region", {"region": "us-west-9"}, "region", "us-west-9"),
    ("retention", {"eks": {"log_retention_days": 42}}, "eks.log_retention_days", "42"),
    ("too many groups", {"hyperpod": {"instance_groups": [
        dict(group()["hyperpod"]["instance_groups"][0], name=f"g{i}") for i in range(21)]}},
     "hyperpod.instance_groups", "20"),
    ("byo without subnet ids", {"network": {"existing_vpc_id": "vpc-0123456789abcdef0"}},
     "network.hyperpod_subnets.0.subnet_id", "existing_vpc_id"),
    ("subnet id without byo", {"network": {"hyperpod_subnets": [
        {"az_id": "usw2-az2", "cidr": "10.1.0.0/16", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}]}},
     "network.hyperpod_subnets.0.subnet_id", "only allowed"),
    ("grafana without prometheus", {"observability": {"prometheus": {"enabled": False}}},
     "observability.grafana.enabled", "enable observability.prometheus"),
    ("malformed alert email", {"observability": {"alerts": {"email": "oncall-at-example"}}},
     "observability.alerts.email", "oncall-at-example"),
    ("alert level", {"observability": {"alerts": {"levels": ["Critical"]}}},
     "observability.alerts.levels.0", "Critical"),
    ("no alert level", {"observability": {"alerts": {"levels": []}}}, "observability.alerts.levels", "at least 1"),
    ("saml with admin ids", {"observability": {"grafana": {"authentication": "SAML", "admin_user_ids": ["u-1"]}}},
     "observability.grafana.admin_user_ids", "AWS_SSO"),
    ("principal twice", {"eks": {"admin_principal_arns": ["arn:aws:iam::111122223333:role/A"],
                                 "namespace_admins": [{"principal_arn": "arn:aws:iam::111122223333:role/A",
                                                       "namespaces": ["training"]}]}},
     "eks.namespace_admins", "role/A"),
    ("namespace admin without namespaces",
     {"eks": {"namespace_admins": [{"principal_arn": "arn:aws:iam::111122223333:role/B", "namespaces": []}]}},
     "eks.namespace_admins.0.namespaces", "at least 1"),
    ("grafana provisioner behind network access",
     {"observability": {"grafana": {"network_access": {"vpce_ids": ["vpce-0123456789abcdef0"]}}}},
     "observability.grafana.provision_dashboards", "network_access"),
    ("metric level", {"observability": {"prometheus": {"metrics": {"node": {"level": "FULL"}}}}},
     "observability.prometheus.metrics.node.level", "FULL"),
    # AWS documents DISABLED | ADVANCED for the network family: BASIC is not one of them.
    ("network metric level", {"observability": {"prometheus": {"metrics": {"network": {"level": "BASIC"}}}}},
     "observability.prometheus.metrics.network.level", "BASIC"),
    # The inference family has one level (BASIC): the inference operator's endpoints are always measured.
    ("inference metrics off", {"observability": {"prometheus": {"metrics": {"inference": {"level": "DISABLED"}}}}},
     "observability.prometheus.metrics.inference.level", "DISABLED"),
    ("old flat metric key", {"observability": {"prometheus": {"cluster_metrics": "BASIC"}}},
     "observability.prometheus.cluster_metrics", "BASIC"),
    ("scrape interval", {"observability": {"prometheus": {"metrics": {"node": {"scrape_interval": 0}}}}},
     "observability.prometheus.metrics.node.scrape_interval", "0"),
    ("fsx capacity step", {"storage": {"fsx_lustre": {"capacity_gib": 3000}}}, "storage.fsx_lustre.capacity_gib",
     "multiple of 2400"),
    ("fsx az without subnet", {"storage": {"fsx_lustre": {"az_id": "usw2-az4"}}}, "storage.fsx_lustre.az_id",
     "usw2-az4"),
    ("training plan arn", group(training_plan_arn="plan-1"), "hyperpod.instance_groups.0.training_plan_arn", "plan-1"),
    ("fallback not a type", group(fallback_instance_types=["ml.g5.12xlarge", "ml.g5.9xlarge"]),
     "hyperpod.instance_groups.0.fallback_instance_types.1", "ml.g5.9xlarge is not a HyperPod instance type"),
    ("fallback without ml.", group(fallback_instance_types=["g5.12xlarge"]),
     "hyperpod.instance_groups.0.fallback_instance_types.0", "start with 'ml.'"),
    ("fallback twice", group(fallback_instance_types=["ml.g5.12xlarge", "ml.g5.12xlarge"]),
     "hyperpod.instance_groups.0.fallback_instance_types", "listed twice"),
    ("fallback is the first choice", group(fallback_instance_types=["ml.g5.12xlarge", "ml.g5.8xlarge"]),
     "hyperpod.instance_groups.0.fallback_instance_types", "is the group's instance_type already"),
    ("more than 20 types", group(fallback_instance_types=sorted(t for t in cluster_instance_types()
                                                                if t != "ml.g5.8xlarge")[:20]),
     "hyperpod.instance_groups.0.fallback_instance_types", "at most 19"),
    ("grafana files prefix", {"observability": {"grafana": {"dashboards_s3_source": "s3://bucket/no-slash"}}},
     "observability.grafana.dashboards_s3_source", "s3://bucket/no-slash"),
]


@pytest.mark.parametrize(("changes", "key", "words"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_bad_config_is_refused_naming_the_key(changes, key, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes), "bad.yaml")
    message = str(caught.value)
    assert message.startswith("Invalid configuration in bad.yaml: ")
    assert f"{key}:" in message, message
    assert words in message, message
    assert "\n" not in message


def test_default_config_loads():
    config = load_config(ROOT / "config" / "default.yaml")
    assert config.hyperpod.instance_groups[0].instance_type == "ml.g5.8xlarge"
    assert config.eks.version == "1.33"


def test_several_mistakes_are_reported_together():
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(group(threads_per_core=3, ebs_volume_gb=0)), "bad.yaml")
    assert "threads_per_core" in str(caught.value) and "ebs_volume_gb" in str(caught.value)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("project: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match=r"^Invalid configuration in .*scalar.yaml: <root>: must be a YAML mapping"):
        load_config(scalar)


@pytest.mark.parametrize(
    ("region", "prefix"),
    [("us-west-2", "usw2"), ("us-east-1", "use1"), ("ap-northeast-1", "apne1"), ("eu-central-1", "euc1"),
     ("ap-southeast-2", "apse2"), ("us-gov-west-1", "usgw1"), ("sa-east-1", "sae1")],
)
def test_az_id_prefix_of_region(region, prefix):
    assert az_id_prefix(region) == prefix


def test_ip_plan_figures():
    assert ips_per_instance("ml.p5.48xlarge") == 81  # 50 on the primary card + 31 other cards
    assert ips_per_instance("ml.g5.8xlarge") == 30
    assert ips_per_instance("ml.some-new.48xlarge") == 81  # unknown types are planned generously
    import ipaddress

    assert subnet_capacity(ipaddress.IPv4Network("10.1.0.0/16")) == 65531


def test_ip_plan_names_needed_and_available():
    changes = {
        "network": {"hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.1.0.0/24"}]},
        **group(instance_type="ml.p5.48xlarge", instance_count=4),
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes), "bad.yaml")
    assert "need 324 IPs (gpu-workers: 4 x 81) but the subnet has 251 usable" in str(caught.value)


def test_a_flexible_group_needs_continuous_provisioning():
    data = mutate(group(fallback_instance_types=["ml.g5.12xlarge"]))
    data["hyperpod"]["node_provisioning_mode"] = None  # mutate would delete the key (and keep the default)
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "bad.yaml")
    assert "hyperpod.instance_groups.0.fallback_instance_types: a flexible instance group needs " \
           "node_provisioning_mode: Continuous" in str(caught.value)
    data["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = []
    parse_config(data, "ok.yaml")


def test_a_flexible_group_is_planned_at_its_hungriest_type():
    # ml.g5.8xlarge takes 30 IPs, ml.p5.48xlarge 81: four nodes that may all fall back to p5 need 4 x 81.
    changes = {
        "network": {"hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.1.0.0/24"}]},
        **group(instance_type="ml.g5.8xlarge", fallback_instance_types=["ml.p5.48xlarge"], instance_count=4),
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes), "bad.yaml")
    assert "need 324 IPs (gpu-workers: 4 x 81)" in str(caught.value)
    flexible = parse_config(mutate(group(fallback_instance_types=["ml.g5.12xlarge", "ml.g6.8xlarge"])), "ok.yaml")
    assert flexible.hyperpod.instance_groups[0].instance_types == ("ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g6.8xlarge")


def test_app_refuses_a_bad_config_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(mutate(group(instance_type="g5.8xlarge"))))
    env = dict(os.environ, CDK_CONTEXT_JSON=json.dumps({"config": str(bad)}), CDK_OUTDIR=str(tmp_path / "out"))
    result = subprocess.run([sys.executable, str(ROOT / "app.py")], capture_output=True, text=True, env=env,
                            cwd=ROOT, check=False, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "hyperpod.instance_groups.0.instance_type" in lines[0]
    assert not (Path(tmp_path) / "out" / "manifest.json").exists()


@pytest.mark.parametrize("key", ["\n", "bad key ", "", "tab\there"])
def test_odd_unknown_keys_are_quoted_on_one_line(key):
    data = default_config_data()
    data["network"][key] = 1
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "odd.yaml")
    message = str(caught.value)
    assert "\n" not in message
    assert f"network.{key!r}: unknown key" in message


def test_rendered_lifecycle_settings_are_keys_the_script_knows():
    """The stack writes lifecycle_config.env; on_create.sh refuses unknown keys and has no setting the stack
    cannot write, so the two sets are equal."""
    script = (ROOT / "lifecycle_scripts" / "on_create.sh").read_text()
    known_line = next(line for line in script.splitlines() if line.startswith("readonly KNOWN_KEYS="))
    known = set(known_line.split("=", 1)[1].strip('"').split())
    rendered = render_lifecycle_env(load_config(ROOT / "config" / "default.yaml").hyperpod.lifecycle)
    keys = {line.split("=", 1)[0] for line in rendered.splitlines() if line and not line.startswith("#")}
    assert keys == known, keys ^ known


# Every refusal reads "<key>: <reason> (got <value>)", wherever it is raised. The first four used to read otherwise:
# a check on a whole instance group named the group and dumped it, a value the reason quoted was repeated or
# mis-rendered (true as 1), and a Literal's value was hidden when it was part of an allowed value.
ONE_WAY = [
    ("check on a group names its field, at any index",
     {"hyperpod": {"instance_groups": [
         dict(group()["hyperpod"]["instance_groups"][0], name="a"),
         dict(group()["hyperpod"]["instance_groups"][0], name="b", deep_health_checks=["InstanceConnectivity"])]}},
     "hyperpod.instance_groups.1.deep_health_checks: InstanceConnectivity needs at least 2 instances in the group, "
     "instance_count is 1."),
    ("key inside a mapping", {"eks": {"addon_versions": {"vpc-cni": "v1.18.2-eksbuild.1"}}},
     "eks.addon_versions.vpc-cni: HyperPod needs the VPC CNI v1.18.3 or later, got v1.18.2-eksbuild.1."),
    ("true where a number is expected", group(threads_per_core=True),
     "hyperpod.instance_groups.0.threads_per_core: expected a whole number, got True."),
    ("value that is part of an allowed one", {"eks": {"endpoint": "public"}},
     "eks.endpoint: Input should be 'private' or 'public_and_private' (got 'public')."),
    ("check on a section", {"observability": {"prometheus": {"enabled": False}}},
     "observability.grafana.enabled: Grafana's dashboards read the Prometheus workspace; enable "
     "observability.prometheus or disable Grafana (got True)."),
]


@pytest.mark.parametrize(("changes", "expected"), [c[1:] for c in ONE_WAY], ids=[c[0] for c in ONE_WAY])
def test_every_refusal_reads_key_reason_value(changes, expected):
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes), "bad.yaml")
    assert str(caught.value) == f"Invalid configuration in bad.yaml: {expected}"


def test_a_refusal_in_the_schema_reads_like_one_raised_outside_it():
    """The file reader and the constructs raise ConfigError themselves; the schema's refusals end the same way."""
    outside = ConfigError("network.hyperpod_subnets.0.subnet_id", "subnet-0bbbbbbbbbbbbbbb1",
                          "only allowed with network.existing_vpc_id", source="bad.yaml")
    with pytest.raises(ConfigError) as inside:
        parse_config(mutate({"network": {"hyperpod_subnets": [
            {"az_id": "usw2-az2", "cidr": "10.1.0.0/16", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}]}}), "bad.yaml")
    assert str(inside.value) == str(outside)
    assert (inside.value.key, inside.value.value, inside.value.reason) == (outside.key, outside.value, outside.reason)


def test_the_tests_read_default_yaml_as_pyyamls_safe_loader_does():
    """tests/conftest.py parses config/default.yaml once, with LibYAML's loader where there is one."""
    text = (ROOT / "config" / "default.yaml").read_text()
    assert default_config_data() == yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - SafeLoader
    assert default_config_data() is not default_config_data()  # each test gets its own copy to change


def test_kubernetes_versions_are_what_hyperpod_and_eks_both_support_on_the_day_read():
    from infra.config.eks import CALENDAR_READ, EKS_SUPPORT_ENDS, HYPERPOD_K8S_VERSIONS, SUPPORTED_K8S_VERSIONS

    assert SUPPORTED_K8S_VERSIONS == ("1.32", "1.33", "1.34", "1.35")
    assert set(SUPPORTED_K8S_VERSIONS) <= set(HYPERPOD_K8S_VERSIONS) & set(EKS_SUPPORT_ENDS)
    assert all(EKS_SUPPORT_ENDS[v][1] > CALENDAR_READ for v in SUPPORTED_K8S_VERSIONS)
    for version in ("1.32", "1.35"):
        assert parse_config(mutate({"eks": {"version": version}}), "v.yaml").eks.version == version
