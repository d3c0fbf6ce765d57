"""addons.task_governance: each mistake refused naming the key, against the API's bounds and the instance groups."""

from __future__ import annotations

import pytest

from infra.config import parse_config
from infra.errors import ConfigError
from tests.conftest import default_config_data, governance_config_data, mutate


def team(name="research", instance_type="ml.g5.8xlarge", count=1, **extra):
    return {"name": name, "quota": {"instance_type": instance_type, "count": count}, **extra}


def governance(*teams, **settings):
    return {"addons": {"task_governance": {"enabled": True, "teams": list(teams), **settings}}}


def two_gpus():
    groups = default_config_data()["hyperpod"]["instance_groups"]
    return {"hyperpod": {"instance_groups": [dict(groups[0], instance_count=2)]}}


REFUSALS = [
    # (case id, changes, key the message must name, words the message must contain)
    ("duplicate team", governance(team(), team()), "addons.task_governance.teams.1.name", "listed twice"),
    ("team name pattern", governance(team(name="Research")), "addons.task_governance.teams.0.name", "Research"),
    ("team name underscore", governance(team(name="ml_team")), "addons.task_governance.teams.0.name", "ml_team"),
    ("namespace too long", governance(team(name="a" * 52)), "addons.task_governance.teams.0.name",
     "longer than Kubernetes' 63"),
    ("quota name too long", mutate({"hyperpod": {"cluster_name": "c" * 40}}, mutate(governance(team(name="t" * 30)))),
     "addons.task_governance.teams.0.name", "longer than the API's 63"),
    ("instance type of no group", governance(team(instance_type="ml.p5.48xlarge")),
     "addons.task_governance.teams.0.quota.instance_type", "no instance group of that type"),
    ("quotas above the group", governance(team(count=1), team(name="product", count=1)),
     "addons.task_governance.teams.1.quota.count", "add up to 2, more than the 1"),
    ("negative count", governance(team(count=-1)), "addons.task_governance.teams.0.quota.count", "0"),
    ("borrow limit below 1", governance(team(borrowing={"limit_percent": 0})),
     "addons.task_governance.teams.0.borrowing.limit_percent", "1"),
    ("borrow limit above 500", governance(team(borrowing={"limit_percent": 501})),
     "addons.task_governance.teams.0.borrowing.limit_percent", "500"),
    ("borrow limit without borrowing", governance(team(borrowing={"strategy": "Lend", "limit_percent": 50})),
     "addons.task_governance.teams.0.borrowing.limit_percent", "only to strategy LendAndBorrow"),
    ("unknown strategy", governance(team(borrowing={"strategy": "Borrow"})),
     "addons.task_governance.teams.0.borrowing.strategy", "Borrow"),
    ("weight above 100", governance(team(fair_share_weight=101)),
     "addons.task_governance.teams.0.fair_share_weight", "100"),
    ("preempt value", governance(team(preempt_team_tasks="Always")),
     "addons.task_governance.teams.0.preempt_team_tasks", "Always"),
    ("priority weight", governance(priority_classes=[{"name": "high", "weight": 101}]),
     "addons.task_governance.priority_classes.0.weight", "100"),
    ("priority class twice", governance(priority_classes=[{"name": "high", "weight": 1}] * 2),
     "addons.task_governance.priority_classes.1.name", "listed twice"),
    ("eleven priority classes",
     governance(priority_classes=[{"name": f"p{i}", "weight": i} for i in range(11)]),
     "addons.task_governance.priority_classes", "10"),
    ("kubernetes too old", mutate({"eks": {"version": "1.29"}}, mutate(governance(team()))), "eks.version",
     "not supported by SageMaker HyperPod"),
    ("typo", governance(team(quota_count=1)), "addons.task_governance.teams.0.quota_count", "unknown key"),
]


@pytest.mark.parametrize(("changes", "key", "words"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_bad_team_config_is_refused_naming_the_key(changes, key, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes), "bad.yaml")
    message = str(caught.value)
    assert f"{key}:" in message, message
    assert words in message, message
    assert "\n" not in message


def test_quotas_may_fill_the_groups_of_their_type_exactly():
    config = parse_config(mutate(governance(team(count=1), team(name="product", count=1)), mutate(two_gpus())))
    assert [t.quota.count for t in config.addons.task_governance.teams] == [1, 1]


def test_off_means_the_teams_are_not_checked_against_the_groups():
    config = parse_config(mutate({"addons": {"task_governance": {"teams": [team(count=5)]}}}))
    assert not config.addons.task_governance.enabled


def test_existing_configs_parse_with_governance_off():
    config = parse_config(default_config_data())
    assert config.addons.task_governance.enabled is False
    assert config.addons.task_governance.teams == []


def test_fixture_variant_is_valid():
    governance_settings = parse_config(governance_config_data()).addons.task_governance
    assert [t.name for t in governance_settings.teams] == ["research", "product", "data"]


def test_a_flexible_group_may_hold_its_whole_count_of_any_of_its_types():
    groups = default_config_data()["hyperpod"]["instance_groups"]
    flexible = {"hyperpod": {"instance_groups": [dict(groups[0], instance_count=2,
                                                      fallback_instance_types=["ml.g5.12xlarge"])]}}
    # Each type up to the group's 2 nodes: quotas on the fallback type are checked against that, not refused.
    parse_config(mutate(governance(team(instance_type="ml.g5.12xlarge", count=2), team(name="product", count=2)),
                        mutate(flexible)), "ok.yaml")
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(governance(team(instance_type="ml.g5.12xlarge", count=3)), mutate(flexible)), "bad.yaml")
    assert "the teams' quotas of ml.g5.12xlarge add up to 3, more than the 2 instances" in str(caught.value)
