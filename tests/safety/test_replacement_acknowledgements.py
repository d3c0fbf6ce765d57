"""A replacement is acknowledged for one named resource and field, once; replacing data needs its own
acknowledgement; every refusal names the resource and what replacing it destroys; an FSx growth deploys alone.

Before: ``hyperpod.allow_cluster_replacement`` accepted every replacement of every protected resource and stayed
set, so a later FSx AZ move (the file system and, with ``retain_on_delete: false``, its files deleted) passed
synth; without it, every refusal said "(a new HyperPod cluster terminates every node)", FSx included; and nothing
stopped an FSx growth deployed with other storage changes, whose rollback FSx refuses.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import parse_config
from infra.errors import ConfigError
from infra.guards.replacement import (
    CANDIDATE_NAME,
    guard_replacement,
    lock_path,
    promote,
    snapshot,
    write_atomically,
)
from tests.conftest import Synthesized, default_config_data, fsx_config_data, mutate

PROJECT = "hyperpod-dev"
STORAGE, NETWORK = f"{PROJECT}-storage", f"{PROJECT}-network"
CLUSTER = f"{PROJECT}-hyperpod/HyperPodCluster11759092"
AZ2_SUBNET = f"{PROJECT}-network:ExportsOutputRefNetworkHyperPodusw2az23095453AF4597763"

Templates = dict[str, dict[str, Any]]


def _file_system(templates: Templates) -> tuple[str, dict[str, Any]]:
    (logical_id,) = [k for k, r in templates[STORAGE]["Resources"].items() if r["Type"] == "AWS::FSx::FileSystem"]
    return logical_id, templates[STORAGE]["Resources"][logical_id]


def _deleting(templates: Templates) -> Templates:
    """The templates with the file system deleted on replacement, as ``storage.fsx_lustre.retain_on_delete: false``
    makes them (SharedFileSystem applies that removal policy, which sets DeletionPolicy and UpdateReplacePolicy)."""
    changed = copy.deepcopy(templates)
    _, resource = _file_system(changed)
    resource["DeletionPolicy"] = resource["UpdateReplacePolicy"] = "Delete"
    return changed


def _az_moved(templates: Templates) -> Templates:
    """storage.fsx_lustre.az_id usw2-az3 -> usw2-az2: the file system imports the other HyperPod subnet."""
    changed = copy.deepcopy(templates)
    _, resource = _file_system(changed)
    resource["Properties"]["SubnetIds"] = [{"Fn::ImportValue": AZ2_SUBNET}]
    return changed


def _config(*acknowledgements: dict[str, Any]) -> Any:
    return parse_config(mutate({"acknowledge_replacement": list(acknowledgements)}, fsx_config_data()), "test.yaml")


def _lock(directory: Path, templates: Templates) -> Path:
    write_atomically(lock_path(directory, PROJECT), snapshot(templates, PROJECT))
    return directory


def _refusal(config: Any, templates: Templates, lock_dir: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        guard_replacement(config, templates, lock_dir)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_allow_cluster_replacement_true_is_refused_with_the_new_form():
    data = mutate({"hyperpod": {"allow_cluster_replacement": True}})
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "old.yaml")
    message = str(caught.value)
    assert message.startswith("Invalid configuration in old.yaml: hyperpod.allow_cluster_replacement: no longer "
                              "accepted"), message
    assert "acknowledge_replacement: [{resource: <stack>/<logical ID>, field: <field>}]" in message
    assert "\n" not in message
    # false never accepted anything: an old config that says so still loads.
    parse_config(mutate({"hyperpod": {"allow_cluster_replacement": False}}), "old.yaml")


def test_an_fsx_az_move_is_refused_naming_the_file_system_and_its_deleted_data(tmp_path, fsx_synth):
    """The issue's case: retain_on_delete false and the AZ moved. The refusal names the file system, says its files
    go, and asks for both acknowledgements; it says nothing of HyperPod nodes."""
    deployed = _deleting(fsx_synth.templates)
    logical_id, _ = _file_system(deployed)
    file_system = f"{STORAGE}/{logical_id}"
    lock_dir = _lock(tmp_path, deployed)
    moved = _az_moved(deployed)
    message = _refusal(_config(), moved, lock_dir)
    assert f"{file_system} (AWS::FSx::FileSystem) SubnetIds changes from" in message, message
    assert ("a new file system (it starts empty); "
            f"{file_system} is deleted with every file on it and its automatic backups") in message, message
    assert f"list {{resource: {file_system}, field: SubnetIds, deletes_data: true}} in acknowledge_replacement" \
        in message
    assert "HyperPod cluster" not in message and "node is terminated" not in message

    # The replacement acknowledged, but not the data: refused, saying what is missing.
    message = _refusal(_config({"resource": file_system, "field": "SubnetIds"}), moved, lock_dir)
    assert "It deletes data, which needs its own acknowledgement: add deletes_data: true to its entry in " \
           "acknowledge_replacement" in message, message

    # Both: accepted, with a warning, and the candidate lock records what was acknowledged.
    warnings: list[str] = []
    acknowledged = {"resource": file_system, "field": "SubnetIds", "deletes_data": True}
    candidate = guard_replacement(_config(acknowledged), moved, lock_dir, warn=warnings.append)
    assert len(warnings) == 1 and warnings[0].endswith("(acknowledged in acknowledge_replacement)"), warnings
    assert candidate["acknowledged"] == [acknowledged]


def test_a_kept_file_system_needs_no_data_acknowledgement(tmp_path, fsx_synth):
    """With retain_on_delete true (UpdateReplacePolicy Retain) the old file system stays: one acknowledgement."""
    logical_id, _ = _file_system(fsx_synth.templates)
    lock_dir = _lock(tmp_path, fsx_synth.templates)
    message = _refusal(_config(), _az_moved(fsx_synth.templates), lock_dir)
    assert "deletes_data" not in message and "is deleted with" not in message, message
    guard_replacement(_config({"resource": f"{STORAGE}/{logical_id}", "field": "SubnetIds"}),
                      _az_moved(fsx_synth.templates), lock_dir)


def test_dropping_the_retention_in_the_same_deploy_counts_as_deleting_the_data(tmp_path, fsx_synth):
    """Deployed with Retain, the new template with Delete (retain_on_delete turned false with the move): which of
    the two CloudFormation applies is not documented, so the data acknowledgement is asked for."""
    lock_dir = _lock(tmp_path, fsx_synth.templates)
    assert "deletes_data: true" in _refusal(_config(), _az_moved(_deleting(fsx_synth.templates)), lock_dir)


def test_an_acknowledgement_accepts_only_its_resource_and_field(tmp_path, fsx_synth):
    logical_id, _ = _file_system(fsx_synth.templates)
    lock_dir = _lock(tmp_path, fsx_synth.templates)
    both = _az_moved(fsx_synth.templates)
    both[f"{PROJECT}-hyperpod"]["Resources"]["HyperPodCluster11759092"]["Properties"]["ClusterName"] = "renamed"
    message = _refusal(_config({"resource": f"{STORAGE}/{logical_id}", "field": "SubnetIds"}), both, lock_dir)
    assert message.startswith(f"Invalid configuration: acknowledge_replacement: this change would REPLACE deployed "
                              f"resources: {CLUSTER} (AWS::SageMaker::Cluster) ClusterName changes from "
                              "'hyperpod-dev' to 'renamed': a new HyperPod cluster (every node is terminated with "
                              "the jobs it runs)"), message
    assert "SubnetIds" not in message


def test_a_replaced_subnet_names_what_is_replaced_with_it_and_the_data_it_deletes(tmp_path, fsx_synth):
    """A subnet's CIDR replaces the subnet, so the HyperPod cluster and the file system in it: the refusal names
    both, and the file system's deleted data needs its acknowledgement on the subnet's entry."""
    deployed = _deleting(fsx_synth.templates)
    logical_id, _ = _file_system(deployed)
    state = snapshot(deployed, PROJECT)["resources"]
    (subnet,) = [k for k, e in state.items() if e["Type"] == "AWS::EC2::Subnet"
                 and f"{STORAGE}/{logical_id}" in e.get("Protects", [])]
    changed = copy.deepcopy(deployed)
    changed[NETWORK]["Resources"][subnet.split("/")[1]]["Properties"]["CidrBlock"] = "10.9.0.0/16"
    message = _refusal(_config(), changed, _lock(tmp_path, deployed))
    assert (f"so replaced too: {CLUSTER}, a new HyperPod cluster (every node is terminated with the jobs it runs); "
            f"{STORAGE}/{logical_id}, a new file system (it starts empty); {STORAGE}/{logical_id} is "
            "deleted with every file on it") in message, message
    assert f"{{resource: {subnet}, field: CidrBlock, deletes_data: true}}" in message


def test_an_acknowledgement_left_over_from_the_deploy_is_refused(tmp_path, fsx_synth):
    """The lock promoted after the deploy records the acknowledgement: kept in the config, it is refused, also when
    the same field would change again; one deploy without it makes it usable anew."""
    logical_id, _ = _file_system(fsx_synth.templates)
    entry = {"resource": f"{STORAGE}/{logical_id}", "field": "SubnetIds"}
    lock_dir = _lock(tmp_path / "locks", fsx_synth.templates)
    moved = _az_moved(fsx_synth.templates)
    candidate = guard_replacement(_config(entry), moved, lock_dir)
    write_atomically(tmp_path / "cdk.out" / CANDIDATE_NAME, candidate)
    promote(tmp_path / "cdk.out", lock_dir)  # make deploy, after cdk deploy succeeded
    assert json.loads(lock_path(lock_dir, PROJECT).read_text())["acknowledged"] == [{**entry, "deletes_data": False}]

    left_over = (f"acknowledge_replacement.0: {STORAGE}/{logical_id}/SubnetIds was acknowledged for the deploy the "
                 "lock records, which made that replacement: remove the entry")
    assert left_over in _refusal(_config(entry), moved, lock_dir)
    assert left_over in _refusal(_config(entry), fsx_synth.templates, lock_dir)  # moved back: still refused

    # The next deploy, without it, records no acknowledgement; then the field may be acknowledged again.
    candidate = guard_replacement(fsx_synth.config, moved, lock_dir)
    assert "acknowledged" not in candidate
    write_atomically(tmp_path / "cdk.out" / CANDIDATE_NAME, candidate)
    promote(tmp_path / "cdk.out", lock_dir)
    guard_replacement(_config(entry), fsx_synth.templates, lock_dir)


def test_an_acknowledgement_that_matches_no_replacement_is_refused(tmp_path, fsx_synth):
    lock_dir = _lock(tmp_path, fsx_synth.templates)
    message = _refusal(_config({"resource": CLUSTER, "field": "ClusterName"}), fsx_synth.templates, lock_dir)
    assert message.startswith(f"Invalid configuration: acknowledge_replacement.0: {CLUSTER}/ClusterName acknowledges "
                              "no replacement this change makes"), message


def test_acknowledgements_are_checked_as_config():
    for entries, words in [
        ([{"resource": CLUSTER, "field": "ClusterName"}] * 2, "acknowledge_replacement.1: acknowledged twice"),
        ([{"resource": "no-slash", "field": "ClusterName"}], "acknowledge_replacement.0.resource"),
        ([{"resource": CLUSTER, "field": "../x"}], "acknowledge_replacement.0.field"),
        ([{"resource": CLUSTER}], "acknowledge_replacement.0.field"),
    ]:
        with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
            parse_config(mutate({"acknowledge_replacement": entries}, default_config_data()))


def test_a_lock_written_before_these_records_still_loads_and_guards(tmp_path, fsx_synth):
    """Backward compatible: a lock without UpdateReplacePolicy, Protects, the capacity or acknowledgements."""
    old = snapshot(_deleting(fsx_synth.templates), PROJECT)
    for entry in old["resources"].values():
        for key in ("ReplaceRetained", "Protects", "StorageCapacity", "StackDigest"):
            entry.pop(key, None)
    write_atomically(lock_path(tmp_path, PROJECT), old)
    guard_replacement(fsx_synth.config, _deleting(fsx_synth.templates), tmp_path)
    # DeletionPolicy stands in for the UpdateReplacePolicy it did not record (the app sets both alike).
    assert "deletes_data: true" in _refusal(_config(), _az_moved(_deleting(fsx_synth.templates)), tmp_path)


# --- FSx growth: alone, never with another change of its stack --------------------------------------------------


def _grown(templates: Templates, to: int) -> Templates:
    changed = copy.deepcopy(templates)
    _, resource = _file_system(changed)
    resource["Properties"]["StorageCapacity"] = to
    return changed


def test_an_fsx_growth_with_another_change_of_its_stack_is_refused(tmp_path, fsx_synth):
    _, resource = _file_system(fsx_synth.templates)
    was = resource["Properties"]["StorageCapacity"]
    lock_dir = _lock(tmp_path, fsx_synth.templates)
    grown = _grown(fsx_synth.templates, was + 2400)
    guard_replacement(fsx_synth.config, grown, lock_dir)  # alone: passes

    with_other = copy.deepcopy(grown)
    with_other[STORAGE]["Resources"]["SharedStorageRelease"]["Properties"]["Namespace"] = "other"
    message = _refusal(fsx_synth.config, with_other, lock_dir)
    assert message.startswith(f"Invalid configuration: storage.fsx_lustre.capacity_gib: {STORAGE}/"), message
    assert (f"StorageCapacity grows from {was} to {was + 2400} in the same deploy as other changes to stack "
            f"{STORAGE}: a failure after the growth would roll it back into a shrink, which FSx refuses "
            f"(UPDATE_ROLLBACK_FAILED). Deploy the other changes with capacity_gib {was} first, then the growth "
            "alone") in message

    # The other change alone passes, and so does a growth next to a change of metadata only.
    other_alone = copy.deepcopy(fsx_synth.templates)
    other_alone[STORAGE]["Resources"]["SharedStorageRelease"]["Properties"]["Namespace"] = "other"
    guard_replacement(fsx_synth.config, other_alone, lock_dir)
    metadata = copy.deepcopy(grown)
    metadata[STORAGE]["Resources"]["SharedStorageRelease"]["Metadata"] = {"aws:cdk:path": "moved"}
    guard_replacement(fsx_synth.config, metadata, lock_dir)


def test_a_growth_compared_with_a_lock_without_the_capacity_is_not_refused(tmp_path, fsx_synth):
    old = snapshot(fsx_synth.templates, PROJECT)
    for entry in old["resources"].values():
        entry.pop("StorageCapacity", None)
    write_atomically(lock_path(tmp_path, PROJECT), old)
    with_other = _grown(fsx_synth.templates, 4800)
    with_other[STORAGE]["Resources"]["SharedStorageRelease"]["Properties"]["Namespace"] = "other"
    guard_replacement(fsx_synth.config, with_other, tmp_path)


def test_the_synthesized_fsx_config_is_the_one_these_tests_edit(fsx_synth: Synthesized):
    """The edits above stand for config changes: the storage stack has the release and file system they touch."""
    resources = fsx_synth.templates[STORAGE]["Resources"]
    assert resources["SharedStorageRelease"]["Type"] == "Custom::HyperPodHelmRelease"
    _, resource = _file_system(fsx_synth.templates)
    assert resource["DeletionPolicy"] == resource["UpdateReplacePolicy"] == "Retain"  # retain_on_delete: true


def test_a_resource_no_longer_pointed_at_names_what_pointed_at_it(tmp_path, default_synth):
    """The cluster's security groups become a literal ID: the deployed group drops out of what is guarded, and the
    reason says the cluster that pointed at it is replaced (its own VpcConfig change is a finding of its own)."""
    changed = copy.deepcopy(default_synth.templates)
    cluster = changed[f"{PROJECT}-hyperpod"]["Resources"]["HyperPodCluster11759092"]["Properties"]
    cluster["VpcConfig"]["SecurityGroupIds"] = ["sg-0123456789abcdef0"]
    message = _refusal(default_synth.config, changed, _lock(tmp_path, default_synth.templates))
    assert (f"{NETWORK}/NetworkEfaSecurityGroup3744DDDC (AWS::EC2::SecurityGroup) is no longer what the protected "
            f"resources point at: what pointed at it is replaced: {CLUSTER}, a new HyperPod cluster (every node is "
            "terminated with the jobs it runs). To accept, list {resource: "
            f"{NETWORK}/NetworkEfaSecurityGroup3744DDDC, field: removed}}") in message, message
    assert f"{CLUSTER} (AWS::SageMaker::Cluster) VpcConfig changes" in message
