"""`hpctl preflight` asks CloudFormation (DescribeType) for every resource type the config's features create."""

from __future__ import annotations

from hpctl_testkit import REGION, config_data, described_type, offer_every_type, stubbed

from hpctl import preflight as pf
from hpctl.aws import Clients
from infra.config import parse_config
from infra.facts.region_types import FEATURE_RESOURCE_TYPES


def _governance_config():
    data = config_data()
    data["addons"] = {"task_governance": {"enabled": True}}
    return parse_config(data)


def test_every_type_offered_passes_one_check_per_key_asking_each_type_once() -> None:
    cfg = _governance_config()
    cf, stub = stubbed("cloudformation")
    asked = offer_every_type(stub, cfg)
    checks = pf.check_resource_types(cfg, Clients(REGION, preset={"cloudformation": cf}))
    stub.assert_no_pending_responses()
    assert "AWS::SageMaker::ClusterSchedulerConfig" in asked and len(asked) == len(set(asked))
    assert [c.name for c in checks] == [f"resource-types {key}" for key in pf.needed_types(cfg)]
    assert "resource-types addons.task_governance.enabled" in [c.name for c in checks]
    assert {c.verdict for c in checks} == {"pass"}


def test_a_type_the_region_does_not_have_fails_naming_the_feature() -> None:
    cfg = _governance_config()
    cf, stub = stubbed("cloudformation")
    asked: set[str] = set()
    for types in pf.needed_types(cfg).values():
        for type_name in types:
            if type_name in asked:
                continue
            asked.add(type_name)
            if type_name == "AWS::SageMaker::ClusterSchedulerConfig":
                stub.add_client_error("describe_type", "TypeNotFoundException",
                                      f"The type '{type_name}' cannot be found.",
                                      expected_params={"Type": "RESOURCE", "TypeName": type_name})
            else:
                stub.add_response("describe_type", described_type(type_name),
                                  {"Type": "RESOURCE", "TypeName": type_name})
    checks = {c.name: c for c in pf.check_resource_types(cfg, Clients(REGION, preset={"cloudformation": cf}))}
    stub.assert_no_pending_responses()
    failed = {name: c.reason for name, c in checks.items() if c.verdict == "fail"}
    assert failed == {"resource-types addons.task_governance.enabled": (
        f"CloudFormation in {REGION} does not offer AWS::SageMaker::ClusterSchedulerConfig (DescribeType): "
        "addons.task_governance.enabled cannot deploy there")}
    assert checks["resource-types region"].verdict == "pass"


def test_a_refused_call_is_a_warning_not_a_verdict() -> None:
    """Any answer but TypeNotFoundException (here AccessDenied) is "could not check", as for every check."""
    cfg = parse_config(config_data())
    cf, stub = stubbed("cloudformation")
    first = FEATURE_RESOURCE_TYPES["region"][0]
    stub.add_client_error("describe_type", "AccessDenied", "not authorized to perform cloudformation:DescribeType",
                          expected_params={"Type": "RESOURCE", "TypeName": first})
    [check] = pf._guard("resource-types", lambda: pf.check_resource_types(
        cfg, Clients(REGION, preset={"cloudformation": cf})))
    assert check.verdict == "warn" and check.reason.startswith("could not check:")
