"""What `cdk destroy` keeps is set in config: data-bearing resources are retained unless destroy_data_on_delete."""

from __future__ import annotations

import pytest

from tests.conftest import Synthesized, untagged

DATA_BEARING = ("AWS::S3::Bucket", "AWS::Logs::LogGroup", "AWS::KMS::Key")


def _policies(synth: Synthesized) -> dict[str, tuple[str | None, str | None]]:
    return {
        f"{stack}/{logical_id} ({resource['Type']})": (resource.get("DeletionPolicy"),
                                                       resource.get("UpdateReplacePolicy"))
        for stack, template in synth.templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] in DATA_BEARING
    }


def test_default_retains_every_bucket_log_group_and_key(default_synth):
    policies = _policies(default_synth)
    assert {r.split("(")[1].rstrip(")") for r in policies} == set(DATA_BEARING)
    assert {name: p for name, p in policies.items() if p != ("Retain", "Retain")} == {}


def test_destroy_data_on_delete_deletes_them(destroy_data_synth):
    policies = _policies(destroy_data_synth)
    assert policies
    assert {name: p for name, p in policies.items() if p != ("Delete", "Delete")} == {}


@pytest.mark.parametrize("variant", ["default_synth", "variant_synth"])
def test_every_function_logs_to_a_group_of_its_stack_kept_as_configured(request, variant):
    """No function is left to Lambda's /aws/lambda/<name> group (or to aws-cdk-lib's group of that name, which
    fails with "already exists" once the function has run): each logs to a group its stack creates first."""
    synth: Synthesized = request.getfixturevalue(variant)
    retention = synth.config.eks.log_retention_days
    problems = []
    for stack, template in synth.templates.items():
        resources = template["Resources"]
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            group = resource["Properties"].get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
            if resources.get(group, {}).get("Type") != "AWS::Logs::LogGroup":
                problems.append(f"{stack}/{logical_id} logs to {group!r}")
            elif resources[group]["Properties"].get("RetentionInDays") != retention:
                problems.append(f"{stack}/{group} keeps {resources[group]['Properties'].get('RetentionInDays')}")
    assert problems == []


def _emptied_buckets(synth: Synthesized) -> dict[str, set[str]]:
    """Stack -> the buckets (logical IDs) a Custom::S3AutoDeleteObjects empties before they are deleted."""
    return {
        stack: {r["Properties"]["BucketName"]["Ref"] for r in template["Resources"].values()
                if r["Type"] == "Custom::S3AutoDeleteObjects"}
        for stack, template in synth.templates.items()
    }


def test_destroy_data_on_delete_empties_every_bucket_first(destroy_data_synth):
    """Versioned buckets keep old versions and delete markers: CloudFormation cannot delete them until emptied."""
    buckets = {stack: {k for k, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"}
               for stack, template in destroy_data_synth.templates.items()}
    assert any(buckets.values())
    assert _emptied_buckets(destroy_data_synth) == buckets


def test_default_never_empties_a_bucket(default_synth):
    assert not any(_emptied_buckets(default_synth).values())


def test_stacks_that_hold_state_are_protected_unless_the_config_says_otherwise(default_synth, destroy_data_synth):
    def protected(synth: Synthesized) -> dict[str, bool]:
        app = synth.app
        stacks = (app.network, app.eks, app.hyperpod, app.observability)
        return {s.stack_name: s.termination_protection for s in stacks if s is not None}

    project = default_synth.config.project
    assert protected(default_synth) == {f"{project}-network": False, f"{project}-eks": True,
                                        f"{project}-hyperpod": True, f"{project}-observability": True}
    assert not any(protected(destroy_data_synth).values())


@pytest.mark.parametrize("variant", ["all_features_synth", "destroy_data_synth"])
def test_every_resource_that_takes_tags_carries_the_project_tag(request, variant):
    """Tags.of reaches resources with a tag manager; the plain CfnResources aws-cdk-lib builds (the auto-delete
    provider's role and function, aws-eks-v2's kubectl barrier) and the task governance quotas are tagged by
    infra/composition.py. Which types take tags comes from their CloudFormation resource schemas."""
    synth: Synthesized = request.getfixturevalue(variant)
    templates = synth.templates
    if variant == "destroy_data_synth":  # the provider is there to be checked
        assert any(k.startswith("CustomS3AutoDeleteObjectsCustomResourceProvider")
                   for t in templates.values() for k in t["Resources"])
    assert untagged(templates, "project", synth.config.project) == []
