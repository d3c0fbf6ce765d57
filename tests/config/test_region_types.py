"""The table of the resource types each feature creates matches the templates, the copy of cfn-lint's region data
is the installed cfn-lint's, and synth refuses a feature whose types the config's region does not offer."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from infra.config import load_config, needed_types, parse_config, require_offered_types
from infra.errors import ConfigError
from infra.facts import region_types
from infra.facts.region_types import ALWAYS, DATA_FILE, FEATURE_RESOURCE_TYPES, from_cfn_lint, unoffered
from tests.conftest import ROOT, cdk_json_context, default_config_data, mutate, new_app
from tests.stacks.test_all_features import _switches
from tests.stacks.test_replacement_guard import _run_app

# Every optional feature off: what any config creates.
ALL_OFF: dict[str, Any] = {"observability": {
    "container_insights": False, "prometheus": {"enabled": False}, "grafana": {"enabled": False},
    "alerts": {"enabled": False}, "dashboard": False}}

# Each switch of the config turned on alone (with what it needs, and every optional part that adds a type: the
# alerts' e-mail subscription, the file system's S3 link).
FEATURES: dict[str, dict[str, Any]] = {
    "observability.container_insights": {"observability": {"container_insights": True}},
    "observability.prometheus.enabled": {"observability": {"prometheus": {"enabled": True}}},
    "observability.grafana.enabled": {"observability": {"prometheus": {"enabled": True},
                                                        "grafana": {"enabled": True}}},
    "observability.alerts.enabled": {"observability": {"alerts": {"enabled": True, "email": "a@example.com"}}},
    "observability.dashboard": {"observability": {"dashboard": True}},
    "storage.fsx_lustre.enabled": {"storage": {"fsx_lustre": {
        "enabled": True, "data_repository_s3_uri": "s3://example-datasets/x", "automatic_backup_retention_days": 0}}},
    "addons.training_operator.enabled": {"addons": {"training_operator": {"enabled": True}}},
    "addons.s3_csi.enabled": {"addons": {"s3_csi": {"enabled": True,
                                                    "bucket_arns": ["arn:aws:s3:::example-datasets"]}}},
    "addons.inference_operator.enabled": {"addons": {"inference_operator": {"enabled": True}, "s3_csi": {
        "enabled": True, "bucket_arns": ["arn:aws:s3:::example-models"]}}},
    "addons.task_governance.enabled": {"addons": {"task_governance": {
        "enabled": True, "teams": [{"name": "a", "quota": {"instance_type": "ml.g5.8xlarge", "count": 1}}]}}},
    "hyperpod.autoscaling.enabled": {"hyperpod": {"autoscaling": {"enabled": True, "instance_groups": ["burst"]}}},
    "hyperpod.tiered_checkpointing.enabled": {"hyperpod": {"tiered_checkpointing": {"enabled": True}}},
}
# Not a switch, but types of their own: the https_only egress rule (AWS::EC2::SecurityGroupEgress).
OTHER_CHANGES: dict[str, Any] = {"network": {"node_egress": "https_only"}}


def _aws_types(data: dict[str, Any], name: str, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The AWS:: types of every CloudFormation resource the app builds for ``data``: the resources of its construct
    tree, which synth writes into the templates (the nag packs and the synth itself are left out: about 0.4 s a
    config instead of 0.7 s to 1 s)."""
    from aws_cdk import CfnResource

    from stacks.app_builder import build_app

    context = cdk_json_context()
    context["aws:cdk:disable-asset-staging"] = True
    app = new_app(context=context, outdir=str(tmp_path_factory.mktemp(f"cdk-{name}")))
    build_app(app, parse_config(data, name), nag=False)
    return {c.cfn_resource_type for c in app.node.find_all()
            if CfnResource.is_cfn_resource(c) and c.cfn_resource_type.startswith("AWS::")}


def _with(changes: dict[str, Any]) -> dict[str, Any]:
    data = mutate(changes, mutate(ALL_OFF))
    if "autoscaling" in changes.get("hyperpod", {}):
        data["hyperpod"]["instance_groups"].append(
            {"name": "burst", "instance_type": "ml.c5.xlarge", "instance_count": 0, "az_id": "usw2-az2"})
    return data


def test_the_region_data_file_is_the_installed_cfn_lint():
    """infra/facts/region_types.json is current: regenerate it with `python -m infra.facts.region_types`."""
    assert json.loads(DATA_FILE.read_text(encoding="utf-8")) == from_cfn_lint()


def test_the_data_holds_the_issues_finding():
    """cfn-lint 1.58.0's us-west-2 has no AWS::SageMaker::ClusterSchedulerConfig (E3006 with --regions us-west-2)."""
    assert unoffered("us-west-2") == {"AWS::SageMaker::ClusterSchedulerConfig"}
    assert unoffered("us-east-1") == frozenset()
    assert unoffered("me-south-1") is None  # SageMaker's (botocore) but no cfn-lint file: not known


def test_the_table_is_what_each_feature_adds_to_the_templates(tmp_path_factory):
    """Each feature alone against every feature off: exactly the table's types appear (a new type or feature that
    the table misses fails here)."""
    base = _aws_types(_with({}), "all-off", tmp_path_factory)
    assert base <= set(FEATURE_RESOURCE_TYPES[ALWAYS])
    other = _aws_types(_with(OTHER_CHANGES), "other", tmp_path_factory)
    assert set(FEATURE_RESOURCE_TYPES[ALWAYS]) == base | other
    for key, changes in FEATURES.items():
        added = _aws_types(_with(changes), key.replace(".", "-"), tmp_path_factory) - base
        assert added == set(FEATURE_RESOURCE_TYPES.get(key, ())), key


def test_every_switch_is_in_the_derivation_and_every_type_of_all_features_in_the_table(all_features_synth):
    switches = set(_switches(all_features_synth.config)) | {"observability.container_insights",
                                                             "observability.dashboard"}
    assert switches <= set(FEATURES), switches - set(FEATURES)
    assert set(FEATURE_RESOURCE_TYPES) - {ALWAYS} <= set(FEATURES)
    types = {r["Type"] for t in all_features_synth.templates.values() for r in t["Resources"].values()
             if r["Type"].startswith("AWS::")}
    assert types <= region_types.all_types()  # the file system's S3 link is in the derivation's synth only


def test_all_features_is_in_a_region_that_offers_every_type():
    config = load_config(ROOT / "config" / "all-features.yaml")
    require_offered_types(config)
    assert unoffered(config.region) == frozenset()


def _governance_in(region_changes: dict[str, Any]) -> Any:
    return parse_config(mutate({**FEATURES["addons.task_governance.enabled"], **region_changes}))


def test_a_feature_the_region_does_not_offer_is_refused_naming_key_region_and_source():
    config = _governance_in({})
    assert config.region == "us-west-2"
    with pytest.raises(ConfigError) as refused:
        require_offered_types(config)
    assert str(refused.value) == (
        "Invalid configuration: addons.task_governance.enabled: region us-west-2 does not offer "
        "AWS::SageMaker::ClusterSchedulerConfig, which this feature creates (per cfn-lint 1.58.0's bundled provider "
        "schema for us-west-2, schemas of 2026-10-20); turn it off or use another region (got True).")
    assert "\n" not in str(refused.value)
    require_offered_types(parse_config(default_config_data()))  # the same region without the feature


def test_a_region_without_the_hyperpod_cluster_is_refused_on_the_region_key(monkeypatch):
    east = {"region": "us-east-1", "network": {"control_plane_az_ids": ["use1-az1", "use1-az2"],
                                               "hyperpod_subnets": [{"az_id": "use1-az2", "cidr": "10.1.0.0/16"}]},
            "hyperpod": {"instance_groups": [{**default_config_data()["hyperpod"]["instance_groups"][0],
                                              "az_id": "use1-az2"}]}}
    config = parse_config(mutate(east))
    require_offered_types(config)
    monkeypatch.setattr(region_types, "_data", lambda: {"cfn_lint": "9.9.9", "schema_date": "2030-01-01T00:00:00Z",
                                                        "unoffered": {"us-east-1": ["AWS::SageMaker::Cluster"]}})
    with pytest.raises(ConfigError, match=r"^Invalid configuration: region: region us-east-1 does not offer "
                                          r"AWS::SageMaker::Cluster, which every deployment creates \(per cfn-lint "
                                          r"9\.9\.9's .*; use another region \(got 'us-east-1'\)\.$"):
        require_offered_types(config)


def test_needed_types_follow_the_switches():
    config = _governance_in({})
    keys = list(needed_types(config))
    assert keys[0] == ALWAYS and "addons.task_governance.enabled" in keys
    assert "addons.s3_csi.enabled" not in keys and "storage.fsx_lustre.enabled" not in keys


def test_cdk_synth_refuses_it_before_building(tmp_path, monkeypatch, capsys):
    """app.py: exit 2, one line naming the key, the region and the source, and no template written."""
    config = tmp_path / "governed.yaml"
    config.write_text(yaml.safe_dump(mutate(FEATURES["addons.task_governance.enabled"])))
    code, stderr, _ = _run_app(monkeypatch, capsys, config, tmp_path / "locks", tmp_path / "out")
    assert code == 2
    assert stderr.startswith(f"error: Invalid configuration in {config}: addons.task_governance.enabled: region "
                             "us-west-2 does not offer AWS::SageMaker::ClusterSchedulerConfig")
    assert "cfn-lint 1.58.0's bundled provider schema for us-west-2" in stderr
    assert stderr.count("\n") == 1
    assert not (tmp_path / "out" / "manifest.json").exists()
