"""The replacement guard: refuses templates that would replace deployed resources; records only deploys."""

from __future__ import annotations

import copy
import importlib.util
import json
import stat
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from aws_cdk import App
from botocore.stub import Stubber

from infra.config import parse_config
from infra.constructs.hyperpod.lifecycle import check_lifecycle_dir
from infra.errors import ConfigError
from infra.guards.replacement import (
    CANDIDATE_NAME,
    LOCK_DIR,
    guard_replacement,
    lock_path,
    promote,
    read_lock,
    removed_groups,
    snapshot,
    write_atomically,
)
from stacks import validation
from tests.conftest import ROOT, VARIANT_CHANGES, default_config_data, mutate

CLUSTER = "hyperpod-dev-hyperpod/HyperPodCluster11759092"


def _config(data=None, **hyperpod):
    data = mutate({"hyperpod": hyperpod}, data)
    return parse_config(data, "test.yaml")


def _acknowledging(*names, data=None):
    """The config with each (resource, field) in acknowledge_replacement."""
    acknowledgements = [{"resource": resource, "field": field} for resource, field in names]
    return parse_config(mutate({"acknowledge_replacement": acknowledgements}, data), "test.yaml")


@pytest.fixture
def lock_dir(tmp_path, default_synth):
    """A lock of the deployed default app, as `make deploy` leaves it."""
    write_atomically(lock_path(tmp_path, "hyperpod-dev"), snapshot(default_synth.templates, "hyperpod-dev"))
    return tmp_path


def _edited(templates, stack, logical_id, edit):
    changed = copy.deepcopy(templates)
    edit(changed[stack]["Resources"][logical_id]["Properties"])
    return changed


def _cluster_id(synth):
    return next(iter(synth.resources("hyperpod", "AWS::SageMaker::Cluster")))


def test_committed_lock_is_the_default_apps_deployed_state(default_synth):
    """config/default.lock.json moved to config/locks/<project>.lock.json in the new format."""
    committed = read_lock(lock_path(ROOT / LOCK_DIR, "hyperpod-dev"))
    assert committed == snapshot(default_synth.templates, "hyperpod-dev")
    assert not (ROOT / "config" / "default.lock.json").exists()


def test_unchanged_and_routine_changes_pass_without_writing_the_lock(lock_dir, default_synth, routine_synth):
    before = lock_path(lock_dir, "hyperpod-dev").read_bytes()
    guard_replacement(default_synth.config, default_synth.templates, lock_dir)
    candidate = guard_replacement(routine_synth.config, routine_synth.templates, lock_dir)
    assert set(candidate["resources"][CLUSTER]["InstanceGroups"]) == {"gpu-workers", "gpu-extra"}
    assert lock_path(lock_dir, "hyperpod-dev").read_bytes() == before


def test_an_accepted_replacement_that_is_never_deployed_leaves_the_lock_alone(lock_dir, default_synth):
    """Bypass (a): the old guard rewrote the lock at synth, so the deployed config was then refused."""
    replaced = _edited(default_synth.templates, "hyperpod-dev-hyperpod", _cluster_id(default_synth),
                       lambda p: p.update(ClusterName="renamed"))
    guard_replacement(_acknowledging((CLUSTER, "ClusterName")), replaced, lock_dir)
    guard_replacement(default_synth.config, default_synth.templates, lock_dir)  # the deployed config still passes


def test_promote_records_the_candidate_of_the_deployed_synth(tmp_path, routine_synth):
    candidate = snapshot(routine_synth.templates, "hyperpod-dev")
    write_atomically(tmp_path / "cdk.out" / CANDIDATE_NAME, candidate)
    path = promote(tmp_path / "cdk.out", tmp_path / "locks")
    assert path == tmp_path / "locks" / "hyperpod-dev.lock.json"
    assert read_lock(path) == candidate


@pytest.mark.parametrize(
    ("stack", "logical_id", "edit", "words"),
    [
        ("hyperpod-dev-network", "NetworkVpcFAC8F4A5", lambda p: p.update(CidrBlock="10.100.0.0/16"),
         "NetworkVpcFAC8F4A5 (AWS::EC2::VPC) CidrBlock changes from '10.192.0.0/16' to '10.100.0.0/16'"),
        ("hyperpod-dev-network", "NetworkEfaSecurityGroup3744DDDC", lambda p: p.update(GroupDescription="other"),
         "NetworkEfaSecurityGroup3744DDDC (AWS::EC2::SecurityGroup) GroupDescription changes"),
        ("hyperpod-dev-hyperpod", "HyperPodCluster11759092", lambda p: p.update(ClusterName="renamed"),
         "(AWS::SageMaker::Cluster) ClusterName changes from 'hyperpod-dev' to 'renamed'"),
        ("hyperpod-dev-eks", "ControlPlaneCluster8AFA2E51", lambda p: p.update(Name="other-eks"),
         "(AWS::EKS::Cluster) Name changes"),
    ],
)
def test_a_change_that_replaces_a_deployed_resource_is_refused(lock_dir, default_synth, stack, logical_id, edit, words):
    templates = _edited(default_synth.templates, stack, logical_id, edit)
    with pytest.raises(ConfigError) as caught:
        guard_replacement(default_synth.config, templates, lock_dir)
    message = str(caught.value)
    assert "REPLACE deployed resources" in message and "acknowledge_replacement" in message
    assert words in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda g: g.update(InstanceType="ml.g5.12xlarge"),
         "hyperpod.instance_groups[gpu-workers] InstanceType changes from 'ml.g5.8xlarge' to 'ml.g5.12xlarge'"),
        # A group turned flexible: the same first choice, now with fallbacks in InstanceRequirements.
        (lambda g: g.update(InstanceType=None,
                            InstanceRequirements={"InstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"]}),
         "hyperpod.instance_groups[gpu-workers] InstanceRequirements changes from null to "
         '{"InstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"]}'),
        (lambda g: g.update(ThreadsPerCore=2),
         "hyperpod.instance_groups[gpu-workers] ThreadsPerCore changes from 1 to 2"),
        # Bypass (c): the execution role, the security groups and vpc_cidr were not recorded.
        (lambda g: g.update(ExecutionRole={"Fn::GetAtt": ["OtherRole", "Arn"]}),
         "hyperpod.instance_groups[gpu-workers] ExecutionRole changes"),
    ],
)
def test_a_change_hyperpod_does_not_make_to_a_deployed_group_is_refused_whatever_the_config_says(
        lock_dir, default_synth, edit, words):
    """CloudFormation updates the cluster in place (no replacement) and HyperPod keeps these fields of an existing
    group (infra.guards.create_only): accepting a replacement changes nothing, the deploy would fail anyway."""
    templates = _edited(default_synth.templates, "hyperpod-dev-hyperpod", "HyperPodCluster11759092",
                        lambda p: edit(p["InstanceGroups"][0]))
    for config in (default_synth.config, _acknowledging((CLUSTER, "ClusterName"))):
        with pytest.raises(ConfigError) as caught:
            guard_replacement(config, templates, lock_dir)
        message = str(caught.value)
        assert ("hyperpod.instance_groups: HyperPod does not change these on an existing instance group, so the "
                "deploy would fail") in message, message
        assert words in message and "Add a new instance group" in message, message
        assert "REPLACE" not in message and "\n" not in message


def test_a_replaced_cluster_takes_new_groups_without_a_group_refusal(lock_dir, default_synth):
    """With the cluster itself replaced (and accepted), its groups are created anew: their fields may differ."""
    def edit(p: dict) -> None:
        p.update(ClusterName="renamed")
        p["InstanceGroups"][0].update(InstanceType="ml.g5.12xlarge")

    templates = _edited(default_synth.templates, "hyperpod-dev-hyperpod", "HyperPodCluster11759092", edit)
    with pytest.raises(ConfigError, match="REPLACE deployed resources.*ClusterName changes") as caught:
        guard_replacement(default_synth.config, templates, lock_dir)
    assert "InstanceType" not in str(caught.value)
    guard_replacement(_acknowledging((CLUSTER, "ClusterName")), templates, lock_dir)


def test_the_type_list_of_a_deployed_flexible_group_may_change_but_not_its_form(tmp_path, default_synth):
    """AWS's update-cluster page: types may be added to or removed from InstanceRequirements; a group cannot
    switch between InstanceType and InstanceRequirements."""
    def flexible(*types):
        return lambda p: p["InstanceGroups"][0].update(InstanceType=None,
                                                       InstanceRequirements={"InstanceTypes": list(types)})

    deployed = _edited(default_synth.templates, "hyperpod-dev-hyperpod", "HyperPodCluster11759092",
                       flexible("ml.g5.8xlarge", "ml.g5.12xlarge"))
    write_atomically(lock_path(tmp_path, "hyperpod-dev"), snapshot(deployed, "hyperpod-dev"))
    guard_replacement(default_synth.config, deployed, tmp_path)  # unchanged: passes
    for types in (("ml.g5.12xlarge", "ml.g5.8xlarge"), ("ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.16xlarge"),
                  ("ml.g5.16xlarge", "ml.g5.12xlarge")):
        edited = _edited(default_synth.templates, "hyperpod-dev-hyperpod", "HyperPodCluster11759092", flexible(*types))
        guard_replacement(default_synth.config, edited, tmp_path)
    # Back to a single type: InstanceType reappears and the list goes.
    with pytest.raises(ConfigError) as caught:
        guard_replacement(default_synth.config, default_synth.templates, tmp_path)
    assert "InstanceType changes from null to 'ml.g5.8xlarge'" in str(caught.value)
    with pytest.raises(ConfigError, match="HyperPod does not change these"):
        guard_replacement(_acknowledging((CLUSTER, "ClusterName")), default_synth.templates, tmp_path)


EKS_CLUSTER = ("hyperpod-dev-eks", "ControlPlaneCluster8AFA2E51")


@pytest.mark.parametrize(
    ("version", "words"),
    [
        ("1.35", "eks.version: hyperpod-dev-eks/ControlPlaneCluster8AFA2E51 (AWS::EKS::Cluster) Version changes from "
                 "'1.33' to '1.35': the deployed cluster runs Kubernetes 1.33 and EKS upgrades a control plane one "
                 "minor version at a time: deploy 1.34 first, then 1.35"),
        ("1.31", "eks.version: hyperpod-dev-eks/ControlPlaneCluster8AFA2E51 (AWS::EKS::Cluster) Version changes from "
                 "'1.33' to '1.31': the deployed cluster runs Kubernetes 1.33 and EKS rolls a control plane back only "
                 "to the previous minor version, within 7 days of the upgrade: 1.31 cannot be reached"),
    ],
)
def test_a_kubernetes_version_change_eks_does_not_make_is_refused(lock_dir, default_synth, version, words):
    """The lock records the deployed cluster's version: a step of two minor versions up or down would fail the
    deploy (EKS upgrades one minor version at a time and rolls back one), whatever the config accepts; the message
    says how to record a version changed outside CloudFormation."""
    templates = _edited(default_synth.templates, *EKS_CLUSTER, lambda p: p.update(Version=version))
    for config in (default_synth.config, _acknowledging(("/".join(EKS_CLUSTER), "Version"))):
        with pytest.raises(ConfigError) as caught:
            guard_replacement(config, templates, lock_dir)
        message = str(caught.value)
        assert message.startswith(f"Invalid configuration: {words}"), message
        assert f"(got '{version}')" in message and "\n" not in message
        assert "write the version it runs as the EKS cluster's Version there" in message


def test_one_minor_version_up_or_down_passes_and_an_old_lock_without_the_version_compares_nothing(
        lock_dir, default_synth):
    """One up is EKS's upgrade step; one down is its rollback (within 7 days of the upgrade: left to EKS)."""
    for version in ("1.34", "1.32"):
        step = _edited(default_synth.templates, *EKS_CLUSTER, lambda p, v=version: p.update(Version=v))
        assert snapshot(step, "hyperpod-dev")["resources"]["/".join(EKS_CLUSTER)]["Version"] == version
        guard_replacement(default_synth.config, step, lock_dir)
    path = lock_path(lock_dir, "hyperpod-dev")
    old = json.loads(path.read_text())
    del old["resources"]["/".join(EKS_CLUSTER)]["Version"]  # a lock written before versions were recorded
    write_atomically(path, old)
    guard_replacement(default_synth.config, _edited(default_synth.templates, *EKS_CLUSTER,
                                                    lambda p: p.update(Version="1.35")), lock_dir)


def test_a_replaced_eks_cluster_may_start_at_any_version(lock_dir, default_synth):
    """A new cluster (its name changes, the replacement accepted) is created at the version given."""
    def edit(p: dict) -> None:
        p.update(Name="renamed", Version="1.35")

    templates = _edited(default_synth.templates, *EKS_CLUSTER, edit)
    with pytest.raises(ConfigError, match="REPLACE deployed resources"):
        guard_replacement(default_synth.config, templates, lock_dir)
    guard_replacement(_acknowledging(("/".join(EKS_CLUSTER), "Name")), templates, lock_dir)


def test_a_replacement_is_accepted_when_the_config_says_so_and_reported_as_a_warning(lock_dir, default_synth,
                                                                                     capsys):
    templates = _edited(default_synth.templates, "hyperpod-dev-network", "NetworkVpcFAC8F4A5",
                        lambda p: p.update(CidrBlock="10.100.0.0/16"))
    config = _acknowledging(("hyperpod-dev-network/NetworkVpcFAC8F4A5", "CidrBlock"))
    warnings: list[str] = []
    candidate = guard_replacement(config, templates, lock_dir, warn=warnings.append)
    assert warnings == ["hyperpod-dev-network/NetworkVpcFAC8F4A5 (AWS::EC2::VPC) CidrBlock changes from "
                        "'10.192.0.0/16' to '10.100.0.0/16': a new AWS::EC2::VPC; so replaced too: "
                        f"{CLUSTER}, a new HyperPod cluster (every node is terminated with the jobs it runs) "
                        "(acknowledged in acknowledge_replacement)"]
    # The candidate records what it accepted, for the lock of that deploy.
    assert candidate["acknowledged"] == [{"resource": "hyperpod-dev-network/NetworkVpcFAC8F4A5", "field": "CidrBlock",
                                          "deletes_data": False}]
    # By default (app.py) one line on stderr each.
    guard_replacement(config, templates, lock_dir)
    assert capsys.readouterr().err == f"warning: {warnings[0]}\n"


def test_a_long_value_is_cut_in_the_message(lock_dir, default_synth):
    templates = _edited(default_synth.templates, "hyperpod-dev-hyperpod", _cluster_id(default_synth),
                        lambda p: p.update(ClusterName="x" * 5000))
    with pytest.raises(ConfigError) as caught:
        guard_replacement(default_synth.config, templates, lock_dir)
    assert len(str(caught.value)) < 1000


def test_removing_a_group_with_nodes_needs_an_acknowledgment(tmp_path, variant_synth, group_removed_synth):
    """Bypass (d): a removed (or renamed) group passed silently and its nodes were terminated."""
    write_atomically(lock_path(tmp_path, "hyperpod-dev"), snapshot(variant_synth.templates, "hyperpod-dev"))
    assert removed_groups(snapshot(variant_synth.templates, "x"), snapshot(group_removed_synth.templates, "x")) == {
        "cpu-workers": 1}
    with pytest.raises(ConfigError, match=r"terminates its nodes: hyperpod-dev-hyperpod/HyperPodCluster\w+ "
                       r"\(AWS::SageMaker::Cluster\) hyperpod\.instance_groups\[cpu-workers\] with 1 nodes is "
                       r"removed or renamed\. .*acknowledge_group_removal"):
        guard_replacement(group_removed_synth.config, group_removed_synth.templates, tmp_path)
    data = mutate(VARIANT_CHANGES)
    data["hyperpod"]["instance_groups"] = data["hyperpod"]["instance_groups"][:1]
    data["hyperpod"]["acknowledge_group_removal"] = ["cpu-workers"]
    warnings: list[str] = []
    guard_replacement(parse_config(data, "ack.yaml"), group_removed_synth.templates, tmp_path, warn=warnings.append)
    assert warnings == ["hyperpod-dev-hyperpod/HyperPodCluster11759092 (AWS::SageMaker::Cluster) "
                        "hyperpod.instance_groups[cpu-workers] with 1 nodes is removed or renamed (its nodes are "
                        "terminated; listed in hyperpod.acknowledge_group_removal)"]


def test_renaming_a_group_is_a_removal(lock_dir, default_synth):
    templates = _edited(default_synth.templates, "hyperpod-dev-hyperpod", _cluster_id(default_synth),
                        lambda p: p["InstanceGroups"][0].update(InstanceGroupName="gpu-workers-v2"))
    with pytest.raises(ConfigError, match=r"hyperpod\.instance_groups\[gpu-workers\] with 1 nodes is removed"):
        guard_replacement(default_synth.config, templates, lock_dir)


def test_an_acknowledgment_of_a_group_still_present_is_refused():
    with pytest.raises(ConfigError, match="acknowledge_group_removal.0.*still in hyperpod.instance_groups"):
        _config(acknowledge_group_removal=["gpu-workers"])


def test_a_lock_of_another_format_is_refused_not_ignored(tmp_path):
    path = lock_path(tmp_path, "hyperpod-dev")
    path.write_text(json.dumps({"version": 1, "cluster_name": "hyperpod-dev"}))
    with pytest.raises(ConfigError, match="not a version 2 lock"):
        read_lock(path)
    path.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_lock(path)


def test_an_interrupted_write_keeps_the_old_lock(tmp_path):
    """Bypass (e): a write cut short left a truncated lock, which the old guard then replaced silently."""
    path = tmp_path / "hyperpod-dev.lock.json"
    write_atomically(path, {"version": 2, "resources": {}})
    with pytest.raises(TypeError):
        write_atomically(path, {"version": 2, "resources": {"x": object()}})
    assert json.loads(path.read_text()) == {"version": 2, "resources": {}}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _promote_script():
    return _load("promote_lock", ROOT / "scripts" / "promote_lock.py")


def test_lock_rebuilt_from_the_deployed_stacks(tmp_path, monkeypatch, default_synth):
    """--from-stacks records what CloudFormation holds; a stack not deployed yet is skipped."""
    out = tmp_path / "cdk.out"
    write_atomically(out / CANDIDATE_NAME, snapshot(default_synth.templates, "hyperpod-dev"))
    stacks = sorted(default_synth.templates)
    artifacts = {name: {"type": "aws:cloudformation:stack", "properties": {"stackName": name}} for name in stacks}
    (out / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    client = boto3.client("cloudformation", region_name="us-west-2")
    stub = Stubber(client)
    assert "hyperpod-dev-observability" in stacks
    deployed = {name: default_synth.templates[name] for name in stacks if name != "hyperpod-dev-observability"}
    for name in stacks:
        params = {"StackName": name, "TemplateStage": "Original"}
        if name in deployed:
            stub.add_response("get_template", {"TemplateBody": json.dumps(deployed[name])}, params)
        else:
            stub.add_client_error("get_template", "ValidationError", f"Stack with id {name} does not exist",
                                  expected_params=params)
    stub.activate()
    monkeypatch.setattr(boto3, "client", lambda service, **_: client)
    path = _promote_script().from_stacks(out, tmp_path / "locks")
    stub.assert_no_pending_responses()
    assert read_lock(path) == snapshot(deployed, "hyperpod-dev")
    # The stack not deployed holds no protected resource; its add-ons are not recorded until it is deployed.
    everything = snapshot(default_synth.templates, "hyperpod-dev")
    assert read_lock(path)["resources"] == everything["resources"]
    assert set(everything["addons"]) - set(read_lock(path)["addons"]) == {
        "amazon-cloudwatch-observability", "amazon-sagemaker-hyperpod-observability"}


def _run_app(monkeypatch, capsys, config_path: Path, lock_dir: Path, outdir: Path) -> tuple[int, str, Any]:
    """app.py's main() in this process with the context `cdk synth` would pass: (exit code, stderr, its App).

    Its synth runs on the session's jsii kernel instead of a new Python and Node.js; an exception other than
    the exit fails the test. tests/config/test_config.py runs app.py as its own process."""
    entry = _load("app_entry", ROOT / "app.py")
    context = {"config": str(config_path), "lock_dir": str(lock_dir)}
    apps: list[Any] = []

    def new_app() -> Any:
        apps.append(App(context=context, outdir=str(outdir)))
        return apps[-1]

    monkeypatch.setattr(entry, "App", new_app)
    with pytest.raises(SystemExit) as exited:
        entry.main()
    return exited.value.code, capsys.readouterr().err, apps[0]


def test_app_refuses_a_replacement_from_a_renamed_config_file_without_a_traceback(tmp_path, lock_dir, monkeypatch,
                                                                                  capsys):
    """Bypass (b): the lock was keyed by the config file's name, so a renamed file started a fresh one."""
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0]["threads_per_core"] = 2
    moved = tmp_path / "elsewhere" / "renamed.yaml"
    moved.parent.mkdir()
    moved.write_text(yaml.safe_dump(data))
    code, stderr, app = _run_app(monkeypatch, capsys, moved, lock_dir, tmp_path / "out")
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert "hyperpod.instance_groups[gpu-workers] ThreadsPerCore changes from 1 to 2" in stderr
    assert (tmp_path / "out" / "manifest.json").exists(), "the app did not synthesize"
    assert not (tmp_path / "out" / CANDIDATE_NAME).exists()
    # app.py's synth ran AWS's template validation through stacks/validation.py's plugin.
    assert app in validation._registered


def test_app_refuses_an_old_lock_beside_the_config(tmp_path, monkeypatch, capsys):
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(default_config_data()))
    (tmp_path / "cluster.lock.json").write_text("{}")
    code, stderr, _ = _run_app(monkeypatch, capsys, config, tmp_path / "locks", tmp_path / "out")
    assert code == 2, stderr
    assert "old-format lock" in stderr and "--from-stacks" in stderr


@pytest.fixture
def scripts(tmp_path):
    directory = tmp_path / "scripts"
    directory.mkdir()
    script = directory / "on_create.sh"
    script.write_bytes(b"#!/usr/bin/env bash\necho ok\n")
    script.chmod(0o755)
    return directory


def test_lifecycle_dir_check_accepts_the_repository_scripts(scripts):
    assert check_lifecycle_dir(ROOT / "lifecycle_scripts", "on_create.sh").name == "on_create.sh"
    assert check_lifecycle_dir(scripts, "on_create.sh") == scripts / "on_create.sh"


def test_lifecycle_dir_check_refuses_a_missing_script(scripts):
    with pytest.raises(ConfigError, match="hyperpod.on_create_script: not found"):
        check_lifecycle_dir(scripts, "setup.sh")
    with pytest.raises(ConfigError, match="hyperpod.lifecycle_scripts_dir: no such directory"):
        check_lifecycle_dir(scripts / "missing", "on_create.sh")


def test_lifecycle_dir_check_refuses_a_script_that_is_not_executable(scripts):
    (scripts / "on_create.sh").chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(ConfigError, match="not executable"):
        check_lifecycle_dir(scripts, "on_create.sh")


def test_lifecycle_dir_check_refuses_crlf_line_endings(scripts):
    helper = scripts / "helper.sh"
    helper.write_bytes(b"#!/usr/bin/env bash\r\necho hi\r\n")
    with pytest.raises(ConfigError, match="helper.sh.*CRLF"):
        check_lifecycle_dir(scripts, "on_create.sh")


_FUNCTION_OR_CUSTOM = ("AWS::Lambda::Function", "AWS::CloudFormation::CustomResource")


def test_turning_compliance_control_tower_on_replaces_nothing_deployed(lock_dir, default_synth, governed_synth):
    """The switch on a deployed default app: functions into the VPC, Object Lock, notifications, the waiter's
    logs all update in place or add resources, so the guard passes without an acknowledgment, and every function
    and custom resource keeps its logical ID (a custom resource cannot change its ServiceToken)."""
    guard_replacement(governed_synth.config, governed_synth.templates, lock_dir)
    for name, template in default_synth.templates.items():
        kept = {k: r["Properties"].get("ServiceToken") for k, r in template["Resources"].items()
                if r["Type"] in _FUNCTION_OR_CUSTOM or r["Type"].startswith("Custom::")}
        governed = governed_synth.templates[name]["Resources"]
        assert set(kept) <= set(governed), (name, set(kept) - set(governed))
        for logical_id, token in kept.items():
            assert governed[logical_id]["Properties"].get("ServiceToken") == token, (name, logical_id)


# What the Control Tower work sets on resources a deployed app already has (docs/safety.md, "Existing
# deployments"): the defaults (logs key, grant condition, lifecycle bucket) and compliance: control_tower.
_CONTROL_TOWER_UPDATES = {
    "AWS::Logs::LogGroup": ("KmsKeyId",),
    "AWS::KMS::Key": ("KeyPolicy",),
    "AWS::S3::Bucket": ("BucketEncryption", "LoggingConfiguration", "LifecycleConfiguration",
                        "NotificationConfiguration", "ObjectLockEnabled"),
    "AWS::Lambda::Function": ("VpcConfig",),
    "AWS::StepFunctions::StateMachine": ("LoggingConfiguration", "TracingConfiguration"),
}


@pytest.mark.parametrize("resource_type", sorted(_CONTROL_TOWER_UPDATES))
def test_the_control_tower_properties_update_in_place(resource_type):
    """Each is a property of the type's schema in cfn-lint, and none is create-only there, so CloudFormation
    updates the resource rather than replacing it."""
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    from infra.guards.create_only import SCHEMA_REGION, schema_create_only

    properties = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, resource_type).schema["properties"]
    create_only = {path.split("/")[2] for path in schema_create_only(resource_type)}
    for name in _CONTROL_TOWER_UPDATES[resource_type]:
        assert name in properties and name not in create_only, (resource_type, name, sorted(create_only))
