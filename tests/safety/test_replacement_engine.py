"""One replacement engine: synth's guard (against the lock) and `hpctl preflight` (against the templates
CloudFormation holds) report each change below with the same reason string, from infra/guards/replacement.py.

Before, preflight compared only the create-only paths of the EKS, HyperPod and FSx resources in their own stacks:
a subnet's new CIDR (in the network stack, behind a cross-stack export) passed it and was refused at synth.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hpctl import preflight as pf
from hpctl.aws import Clients
from infra.config import AppConfig, parse_config
from infra.errors import ConfigError
from infra.guards.replacement import guard_replacement, lock_path, snapshot, write_atomically
from tests.conftest import Synthesized, fsx_config_data, mutate

Templates = dict[str, dict[str, Any]]
NETWORK, HYPERPOD, STORAGE = "hyperpod-dev-network", "hyperpod-dev-hyperpod", "hyperpod-dev-storage"
HYPERPOD_CLUSTER = "HyperPodCluster11759092"
HYPERPOD_SUBNET = "NetworkHyperPodusw2az23095453A"  # the HyperPod subnet of usw2-az2


def _subnet_cidr(request: pytest.FixtureRequest, deployed: Synthesized) -> tuple[Templates, AppConfig]:
    """network.hyperpod_subnets[0].cidr 10.1.0.0/16 -> 10.9.0.0/16. A synth of that config differs from the
    default one in these two resources only (measured on the default config, 2026-12-05)."""
    templates = copy.deepcopy(deployed.templates)
    resources = templates[NETWORK]["Resources"]
    for logical_id in (HYPERPOD_SUBNET, "NetworkSecondaryCidrusw2az2ECC2C99E"):
        assert resources[logical_id]["Properties"]["CidrBlock"] == "10.1.0.0/16"
        resources[logical_id]["Properties"]["CidrBlock"] = "10.9.0.0/16"
    return templates, deployed.config


def _cluster_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[..., tuple[Templates, AppConfig]]:
    def change(request: pytest.FixtureRequest, deployed: Synthesized) -> tuple[Templates, AppConfig]:
        templates = copy.deepcopy(deployed.templates)
        edit(templates[HYPERPOD]["Resources"][HYPERPOD_CLUSTER]["Properties"])
        return templates, deployed.config

    return change


def _fsx_az_move(request: pytest.FixtureRequest, deployed: Synthesized) -> tuple[Templates, AppConfig]:
    """storage.fsx_lustre.az_id usw2-az3 -> usw2-az2. A synth of that config differs from the fsx one only in the
    file system's SubnetIds, which imports the HyperPod subnet of usw2-az2 instead (measured 2026-12-05)."""
    templates = copy.deepcopy(deployed.templates)
    (file_system,) = [r for r in templates[STORAGE]["Resources"].values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert file_system["Properties"]["SubnetIds"] == [
        {"Fn::ImportValue": "hyperpod-dev-network:ExportsOutputRefNetworkHyperPodusw2az3D32FE05FE44ECA02"}]
    file_system["Properties"]["SubnetIds"] = [
        {"Fn::ImportValue": "hyperpod-dev-network:ExportsOutputRefNetworkHyperPodusw2az23095453AF4597763"}]
    return templates, deployed.config


def _group_removed(request: pytest.FixtureRequest, deployed: Synthesized) -> tuple[Templates, AppConfig]:
    """The variant's cpu-workers group (1 node) taken out of the config: a synth of its own."""
    removed = request.getfixturevalue("group_removed_synth")
    return removed.templates, removed.config


CASES = [
    ("subnet-cidr", "default_synth", _subnet_cidr, NETWORK,
     f"{NETWORK}/{HYPERPOD_SUBNET} (AWS::EC2::Subnet) CidrBlock changes from '10.1.0.0/16' to '10.9.0.0/16'"),
    ("group-instance-type", "default_synth",
     _cluster_edit(lambda p: p["InstanceGroups"][0].update(InstanceType="ml.g5.12xlarge")), HYPERPOD,
     f"{HYPERPOD}/{HYPERPOD_CLUSTER} (AWS::SageMaker::Cluster) hyperpod.instance_groups[gpu-workers] InstanceType "
     "changes from 'ml.g5.8xlarge' to 'ml.g5.12xlarge'"),
    ("fsx-az-move", "fsx_synth", _fsx_az_move, STORAGE,
     f"{STORAGE}/SharedFileSystem983B48B7 (AWS::FSx::FileSystem) SubnetIds changes from "
     '[{"Fn::ImportValue": "hyperpod-dev-net...workHyperPodusw2az3D32FE05FE44ECA02"}] to '
     '[{"Fn::ImportValue": "hyperpod-dev-net...workHyperPodusw2az23095453AF4597763"}]'),
    ("cluster-rename", "default_synth", _cluster_edit(lambda p: p.update(ClusterName="renamed")), HYPERPOD,
     f"{HYPERPOD}/{HYPERPOD_CLUSTER} (AWS::SageMaker::Cluster) ClusterName changes from 'hyperpod-dev' to 'renamed'"),
    ("group-removal", "variant_synth", _group_removed, HYPERPOD,
     f"{HYPERPOD}/{HYPERPOD_CLUSTER} (AWS::SageMaker::Cluster) hyperpod.instance_groups[cpu-workers] with 1 nodes is "
     "removed or renamed"),
]


def _cdk_out(directory: Path, deployed: Synthesized, templates: Templates) -> list[str]:
    """A cloud assembly as `cdk synth` leaves it (the deployed synth's own manifest.json) holding ``templates``;
    returns its stack names in the manifest's order."""
    directory.mkdir()
    manifest = json.loads((deployed.outdir / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps(manifest))
    stacks = []
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact["type"] == "aws:cloudformation:stack":
            stacks.append(artifact_id)
            (directory / artifact["properties"]["templateFile"]).write_text(json.dumps(templates[artifact_id]))
    assert sorted(stacks) == sorted(templates)
    return stacks


@pytest.mark.parametrize(("variant", "change", "stack", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_synth_and_preflight_report_the_same_reason(request, tmp_path, variant, change, stack, reason):
    deployed: Synthesized = request.getfixturevalue(variant)
    templates, config = change(request, deployed)
    project = config.project

    # Synth: the lock holds the deployed state; the guard reads the new templates.
    write_atomically(lock_path(tmp_path / "locks", project), snapshot(deployed.templates, project))
    warnings: list[str] = []
    with pytest.raises(ConfigError) as refused:
        guard_replacement(config, templates, tmp_path / "locks", warn=warnings.append)
    assert reason in str(refused.value), str(refused.value)
    assert warnings == []

    # Preflight: CloudFormation holds the deployed templates of every stack, cdk.out the new ones.
    stacks = _cdk_out(tmp_path / "cdk.out", deployed, templates)
    cloudformation = boto3.client("cloudformation", region_name=config.region)
    stub = Stubber(cloudformation)
    for name in stacks:
        # Shapes: botocore's cloudformation model, GetTemplateInput / GetTemplateOutput.
        stub.add_response("get_template", {"TemplateBody": json.dumps(deployed.templates[name])},
                          {"StackName": name, "TemplateStage": "Original"})
    with stub:
        checks = pf.check_replacement(config, Clients(config.region, preset={"cloudformation": cloudformation}),
                                      tmp_path / "cdk.out")
    stub.assert_no_pending_responses()
    assert [(c.name, c.verdict) for c in checks] == [(f"no-replace {stack}", "fail")]
    # The same reason, word for word: synth's one line holds preflight's.
    assert checks[0].reason.startswith(reason) and checks[0].reason in str(refused.value), checks[0].reason


def test_preflight_refuses_an_acknowledgement_the_lock_records_as_deployed(tmp_path, fsx_synth):
    """After the deploy that moved the file system, the lock records the acknowledgement: preflight, like synth,
    refuses it when the config keeps it (the deployed templates already hold the new subnet)."""
    moved, config = _fsx_az_move(None, fsx_synth)  # type: ignore[arg-type]
    entry = {"resource": f"{STORAGE}/SharedFileSystem983B48B7", "field": "SubnetIds"}
    acknowledging = parse_config(mutate({"acknowledge_replacement": [entry]}, fsx_config_data()))
    locks = tmp_path / "locks"
    write_atomically(lock_path(locks, config.project),
                     {**snapshot(moved, config.project), "acknowledged": [{**entry, "deletes_data": False}]})
    stacks = _cdk_out(tmp_path / "cdk.out", fsx_synth, moved)
    cloudformation = boto3.client("cloudformation", region_name=config.region)
    stub = Stubber(cloudformation)
    for name in stacks:
        stub.add_response("get_template", {"TemplateBody": json.dumps(moved[name])},
                          {"StackName": name, "TemplateStage": "Original"})
    with stub:
        checks = pf.check_replacement(acknowledging, Clients(config.region, preset={"cloudformation": cloudformation}),
                                      tmp_path / "cdk.out", lock_dir=locks)
    reason = (f"{STORAGE}/SharedFileSystem983B48B7/SubnetIds was acknowledged for the deploy the lock records, which "
              "made that replacement: remove the entry")
    assert [(c.verdict, c.reason.startswith(reason)) for c in checks] == [("fail", True)], checks
    with pytest.raises(ConfigError, match="was acknowledged for the deploy the lock records"):
        guard_replacement(acknowledging, moved, locks)
