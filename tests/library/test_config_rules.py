"""A rule the config file and a construct both enforce is stated once, in infra/config, and both give its verdict.

The constructs check again for library users who build their props without the config file; these tests give
the file and the construct the same inputs and expect the same answer and the same reason, under each one's keys.
"""

from __future__ import annotations

import itertools

import pytest
from aws_cdk import Stack
from pydantic import ValidationError

import infra
from infra.config import (
    GrafanaConfig,
    InstanceGroupConfig,
    ObservabilityConfig,
    PrometheusConfig,
    grafana_needs_prometheus,
    instance_groups_have_subnets,
    parse_config,
)
from infra.errors import ConfigError
from tests.conftest import cdk_json_context, default_config_data, new_app


def _stack() -> Stack:
    return Stack(new_app(context=cdk_json_context()), "Rules", env={"account": "111122223333", "region": "us-west-2"})


# --- every instance group's AZ ID has a HyperPod subnet ----------------------------------------------------------

COVERAGE = [
    # (case, the groups' AZ IDs in order, the HyperPod subnets' AZ IDs)
    ("covered", ["usw2-az2"], ["usw2-az2"]),
    ("more subnets than groups need", ["usw2-az2"], ["usw2-az2", "usw2-az3"]),
    ("one group outside", ["usw2-az3"], ["usw2-az2"]),
    ("second group outside", ["usw2-az2", "usw2-az3"], ["usw2-az2"]),
    ("two groups outside in two AZs", ["usw2-az1", "usw2-az2", "usw2-az4", "usw2-az1"], ["usw2-az2", "usw2-az3"]),
]


def _file_verdict(group_azs: list[str], subnet_azs: list[str]) -> ConfigError | None:
    data = default_config_data()
    template = data["hyperpod"]["instance_groups"][0]
    data["hyperpod"]["instance_groups"] = [dict(template, name=f"g{i}", az_id=az) for i, az in enumerate(group_azs)]
    data["network"]["hyperpod_subnets"] = [{"az_id": az, "cidr": f"10.{i + 1}.0.0/16"}
                                           for i, az in enumerate(subnet_azs)]
    try:
        parse_config(data, "team.yaml")
    except ConfigError as error:
        return error
    return None


def _construct_verdict(group_azs: list[str], subnet_azs: list[str]) -> ConfigError | None:
    groups = [InstanceGroupConfig(name=f"g{i}", instance_type="ml.g5.12xlarge", instance_count=1, az_id=az)
              for i, az in enumerate(group_azs)]
    try:
        infra.HyperPodCluster(
            _stack(), "HyperPod", hyperpod_cluster_name="team", instance_groups=groups,
            eks_cluster_arn="arn:aws:eks:us-west-2:111122223333:cluster/e",
            execution_role_arn="arn:aws:iam::111122223333:role/Exec", security_group_ids=["sg-0123456789abcdef0"],
            subnet_ids_by_az={az: f"subnet-0{i:016x}" for i, az in enumerate(subnet_azs)},
            lifecycle_s3_uri="s3://sagemaker-x/lifecycle/")
    except ConfigError as error:
        return error
    return None


@pytest.mark.parametrize(("group_azs", "subnet_azs"), [c[1:] for c in COVERAGE], ids=[c[0] for c in COVERAGE])
def test_the_file_and_hyperpod_cluster_agree_on_subnet_coverage(group_azs, subnet_azs):
    in_file, in_construct = _file_verdict(group_azs, subnet_azs), _construct_verdict(group_azs, subnet_azs)
    if in_construct is None:
        assert in_file is None
        return
    assert in_file is not None
    assert in_file.key == f"hyperpod.{in_construct.key}" and in_file.value == in_construct.value
    assert in_file.reason == in_construct.reason.replace("subnet_ids_by_az", "network.hyperpod_subnets")


def test_subnet_coverage_names_the_first_group_outside_and_every_missing_az():
    groups = [InstanceGroupConfig(name=f"g{i}", instance_type="ml.g5.12xlarge", instance_count=1, az_id=az)
              for i, az in enumerate(["usw2-az2", "usw2-az4", "usw2-az1", "usw2-az4"])]
    with pytest.raises(ConfigError) as caught:
        instance_groups_have_subnets(groups, {"usw2-az2": "subnet-1", "usw2-az3": "subnet-2"})
    assert str(caught.value) == (
        "Invalid configuration: instance_groups.1.az_id: no HyperPod subnet for the instance groups' AZ IDs "
        "['usw2-az1', 'usw2-az4'] in subnet_ids_by_az (have: usw2-az2, usw2-az3) (got 'usw2-az4').")
    with pytest.raises(ConfigError, match=r"\(have: none\)"):
        instance_groups_have_subnets(groups, [])
    instance_groups_have_subnets(groups, ["usw2-az1", "usw2-az2", "usw2-az4"])


# --- Grafana only with Prometheus ---------------------------------------------------------------------------------


def _refused(check) -> bool:
    try:
        check()
    except (ConfigError, ValidationError):
        return True
    return False


@pytest.mark.parametrize(("grafana", "prometheus"), list(itertools.product([True, False], repeat=2)))
def test_off_means_the_same_to_the_file_and_to_a_construct(grafana, prometheus):
    """The file switches a section off with enabled: false, a construct with None: one rule, one verdict."""
    in_file = _refused(lambda: ObservabilityConfig(grafana=GrafanaConfig(enabled=grafana),
                                                   prometheus=PrometheusConfig(enabled=prometheus)))
    as_flags = _refused(lambda: grafana_needs_prometheus(GrafanaConfig(enabled=grafana),
                                                         PrometheusConfig(enabled=prometheus)))
    as_none = _refused(lambda: grafana_needs_prometheus(GrafanaConfig() if grafana else None,
                                                        PrometheusConfig() if prometheus else None))
    assert in_file == as_flags == as_none == (grafana and not prometheus)


def test_grafana_rule_reads_the_same_under_each_callers_keys():
    with pytest.raises(ConfigError) as construct:
        grafana_needs_prometheus(GrafanaConfig(), None)
    assert construct.value.detail == ("grafana: Grafana's dashboards read the Prometheus workspace; enable prometheus "
                                      "or disable Grafana (got True)")
    data = default_config_data()
    data["observability"]["prometheus"] = {"enabled": False}
    with pytest.raises(ConfigError) as in_file:
        parse_config(data, "team.yaml")
    assert in_file.value.problems == [
        "observability.grafana.enabled: Grafana's dashboards read the Prometheus workspace; enable "
        "observability.prometheus or disable Grafana (got True)"]


def test_hyperpod_observability_takes_a_disabled_grafana_without_prometheus_as_the_file_does():
    assert not _refused(lambda: ObservabilityConfig(grafana=GrafanaConfig(enabled=False),
                                                    prometheus=PrometheusConfig(enabled=False)))
    observability = infra.HyperPodObservability(
        _stack(), "Observability", name="team", eks_cluster_name="eks",
        eks_cluster_arn="arn:aws:eks:us-west-2:111122223333:cluster/eks", hyperpod_cluster_name="team",
        container_insights=False, dashboard=False, grafana=GrafanaConfig(enabled=False))
    assert observability.grafana is None and observability.prometheus is None
