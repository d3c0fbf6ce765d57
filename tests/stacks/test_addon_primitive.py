"""Every EKS add-on comes from one declaration (infra/facts/addons.py) through one construct (EksAddon), and every
Pod Identity role has one trust shape, scoped to the namespace and service account its add-on declares."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack

from infra.constructs.addon import EksAddon
from infra.facts import addons

# Variants that together switch every add-on on (add-ons section, FSx, observability).
VARIANTS = ["default_synth", "addons_synth", "fsx_synth", "governance_synth"]
BY_NAME = {a.name: a for a in addons.ALL}
TRUST_KEYS = {"aws:SourceAccount", "aws:SourceArn", "aws:RequestTag/kubernetes-namespace",
              "aws:RequestTag/kubernetes-service-account"}


def _all_resources(synth: Any) -> dict[str, dict[str, Any]]:
    return {f"{stack}/{lid}": r for stack, t in synth.templates.items() for lid, r in t["Resources"].items()}


def _role_key(value: Any) -> str | None:
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        return None
    return None


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_addon_is_declared_once_and_built_by_the_one_construct(request, variant):
    synth = request.getfixturevalue(variant)
    built = {(Stack.of(n).stack_name, Stack.of(n).resolve(n.addon.logical_id))
             for stack in synth.app.stacks for n in stack.node.find_all() if isinstance(n, EksAddon)}
    found = 0
    for stack, template in synth.templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] != "AWS::EKS::Addon":
                continue
            found += 1
            assert resource["Properties"]["AddonName"] in BY_NAME, f"{stack}/{logical_id} is not declared"
            assert (stack, logical_id) in built, f"{stack}/{logical_id} is not built by EksAddon"
    assert found >= 4


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_pod_identity_role_has_the_one_trust_shape_of_its_addon(request, variant):
    synth = request.getfixturevalue(variant)
    resources = _all_resources(synth)
    # role logical ID -> (namespace, service account) it is given to
    given: dict[str, tuple[str, str]] = {}
    for resource in resources.values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::EKS::Addon":
            identity = BY_NAME[props["AddonName"]].pod_identity
            for association in props.get("PodIdentityAssociations", []):
                assert identity is not None and association["ServiceAccount"] == identity.service_account
                role = _role_key(association["RoleArn"])
                assert role is not None
                given[role] = (identity.namespace, identity.service_account)
        if resource["Type"] == "AWS::EKS::PodIdentityAssociation":
            role = _role_key(props["RoleArn"])
            assert role is not None
            given[role] = (props["Namespace"], props["ServiceAccount"])
    roles = {key.split("/", 1)[1]: r for key, r in resources.items() if r["Type"] == "AWS::IAM::Role"
             and "pods.eks.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])}
    assert roles, "no Pod Identity role in this variant"
    assert set(roles) == set(given), "a Pod Identity role no add-on uses, or an add-on role not found"
    for logical_id, role in roles.items():
        (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        conditions = statement["Condition"]
        assert list(conditions) == ["StringEquals"], logical_id
        equals = conditions["StringEquals"]
        assert set(equals) == TRUST_KEYS, logical_id
        namespace, service_account = given[logical_id]
        assert equals["aws:RequestTag/kubernetes-namespace"] == namespace
        assert equals["aws:RequestTag/kubernetes-service-account"] == service_account
        assert equals["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
        assert ":cluster/" in str(equals["aws:SourceArn"]) or "ClusterArn" in str(equals["aws:SourceArn"])


def test_a_role_goes_only_with_an_addon_that_runs_on_pod_identity():
    stack = Stack()
    with pytest.raises(ValueError, match="role_id goes with an add-on that runs on Pod Identity"):
        EksAddon(stack, "A", addon=addons.TASK_GOVERNANCE, eks_cluster_name="c", role_id="Role")
    with pytest.raises(ValueError, match="role_id goes with an add-on that runs on Pod Identity"):
        EksAddon(stack, "B", addon=addons.FSX_CSI, eks_cluster_name="c")


def test_the_config_pins_versions_of_exactly_the_declared_core_addons():
    from typing import get_args

    from infra.config import EksConfig

    (key_type, _) = get_args(EksConfig.model_fields["addon_versions"].annotation)
    assert set(get_args(key_type)) == {a.name for a in addons.CORE}
