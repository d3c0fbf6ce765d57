"""An existing deployment upgrades to this code without losing a stateful resource.

``baseline.json`` holds the stateful resources (VPC, CIDR blocks, subnets, security groups, EKS and HyperPod
clusters, buckets, keys, log groups, workspaces, file system) of the templates synthesized from the commit it
names, for the default app, the fuller variant, the shared-storage variant and the consumer example. Today's
code must give each of them the same stack, logical ID and type, and the same value for every create-only
property (the CloudFormation resource schemas bundled with cfn-lint) and HyperPod create-only group field.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from infra.guards.create_only import HYPERPOD_GROUP_CREATE_ONLY, lookup, schema_create_only_paths
from tests.safety.upgrade.record import BASELINE_FILE, stateful
from tests.safety.upgrade.variants import STATEFUL_TYPES

BASELINE: dict[str, Any] = json.loads(BASELINE_FILE.read_text(encoding="utf-8"))
FIXTURES = {"default": "default_synth", "variant": "variant_synth", "fsx": "fsx_synth", "consumer": "consumer"}


create_only = cache(schema_create_only_paths)


def templates_of(request: pytest.FixtureRequest, variant: str) -> dict[str, dict[str, Any]]:
    synth = request.getfixturevalue(FIXTURES[variant])
    return synth[1] if variant == "consumer" else synth.templates


def losses(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What an update from ``before`` to ``after`` (both as ``stateful()`` gives them) would replace or orphan."""
    found = []
    for stack, resources in before.items():
        for logical_id, old in resources.items():
            new = after.get(stack, {}).get(logical_id)
            if new is None or new["Type"] != old["Type"]:
                found.append(f"{stack}/{logical_id} ({old['Type']}) is gone: its logical ID changed or it moved")
                continue
            for path in create_only(old["Type"]):
                was, now = lookup(old["Properties"], path), lookup(new["Properties"], path)
                if was != now:
                    found.append(f"{stack}/{logical_id} create-only {'/'.join(path)}: {was!r} -> {now!r}")
            if old["Type"] == "AWS::SageMaker::Cluster":
                new_groups = {g["InstanceGroupName"]: g for g in new["Properties"]["InstanceGroups"]}
                for group in old["Properties"]["InstanceGroups"]:
                    for field in HYPERPOD_GROUP_CREATE_ONLY:
                        now = new_groups.get(group["InstanceGroupName"], {}).get(field)
                        if group.get(field) != now:
                            found.append(f"{stack}/{logical_id} group {group['InstanceGroupName']} create-only "
                                         f"{field}: {group.get(field)!r} -> {now!r}")
    return found


def test_the_baseline_covers_every_stateful_kind():
    kinds = {r["Type"] for v in BASELINE["variants"].values() for s in v.values() for r in s.values()}
    assert kinds == set(STATEFUL_TYPES), sorted(set(STATEFUL_TYPES) - kinds)


@pytest.mark.parametrize("variant", sorted(FIXTURES))
def test_upgrading_from_the_baseline_replaces_nothing_stateful(request, variant):
    assert losses(BASELINE["variants"][variant], stateful(templates_of(request, variant))) == []


def test_the_comparison_sees_a_moved_resource_and_a_changed_create_only_value():
    before = BASELINE["variants"]["default"]
    after = json.loads(json.dumps(before))
    stack = next(s for s, r in after.items() if any(x["Type"] == "AWS::EKS::Cluster" for x in r.values()))
    logical_id = next(k for k, x in after[stack].items() if x["Type"] == "AWS::EKS::Cluster")
    after[stack][f"{logical_id}Moved"] = after[stack].pop(logical_id)
    hyperpod_stack, cluster_id = next((s, k) for s, r in after.items() for k, x in r.items()
                                      if x["Type"] == "AWS::SageMaker::Cluster")
    after[hyperpod_stack][cluster_id]["Properties"]["InstanceGroups"][0]["InstanceType"] = "ml.p5.48xlarge"
    found = losses(before, after)
    assert any(f"{stack}/{logical_id} (AWS::EKS::Cluster) is gone" in f for f in found), found
    assert any("create-only InstanceType" in f for f in found), found
