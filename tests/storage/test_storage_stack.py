"""StorageStack intent: FSx for Lustre, its key, placement, retention, data repository, CSI driver, volume and claim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from syrupy.extensions.json import JSONSnapshotExtension

from infra.config import FsxLustreConfig
from infra.constructs.storage import STORAGE_CHART_DIR, SharedFileSystem, persistent_volume_name
from tests.conftest import cdk_json_context, new_app
from tests.stacks.test_snapshots import normalise
from tests.template_graph import readiness_checks
from tests.template_lint import cfn_lint_problems


def _one(synth, cfn_type: str) -> tuple[str, dict[str, Any]]:
    """The storage stack's one resource of ``cfn_type``, besides the stack's logs key (infra/constructs/logs_key.py)."""
    (item,) = [(k, r) for k, r in synth.resources("storage", cfn_type).items() if not k.startswith("LogsKey")]
    return item


def _file_system(synth) -> tuple[str, dict[str, Any]]:
    return _one(synth, "AWS::FSx::FileSystem")


def _values(synth) -> dict[str, Any]:
    """The release's Values JSON with each CloudFormation reference replaced by a readable marker."""
    _, release = _one(synth, "Custom::HyperPodHelmRelease")
    parts = release["Properties"]["Values"]["Fn::Join"][1]

    def text(part: Any) -> str:
        if isinstance(part, str):
            return part
        if "Ref" in part:
            return f"<Ref {part['Ref']}>"
        return f"<GetAtt {'.'.join(part['Fn::GetAtt'])}>"

    return dict(json.loads("".join(text(p) for p in parts)))


def test_no_storage_stack_unless_enabled(default_synth):
    assert default_synth.app.storage is None
    assert not any(name.endswith("-storage") for name in default_synth.templates)


def test_file_system_is_persistent_2_with_the_configured_size_and_throughput(fsx_synth):
    props = _file_system(fsx_synth)[1]["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["StorageCapacity"] == 2400
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == 500


def test_file_system_is_encrypted_with_a_rotating_customer_managed_key(fsx_synth):
    props = _file_system(fsx_synth)[1]["Properties"]
    key_id, key = _one(fsx_synth, "AWS::KMS::Key")
    assert props["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True


def test_file_system_sits_in_the_hyperpod_subnet_of_its_az_with_the_node_security_group(fsx_synth):
    props = _file_system(fsx_synth)[1]["Properties"]
    (subnet,) = props["SubnetIds"]
    assert "NetworkHyperPodusw2az3" in subnet["Fn::ImportValue"]
    (group,) = props["SecurityGroupIds"]
    assert "EfaSecurityGroup" in group["Fn::ImportValue"]
    # ... and that group lets Lustre through within itself (the nodes' side of the mount).
    network = fsx_synth.template("network")["Resources"]
    lustre_ports = {
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in network.values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and "Lustre" in r["Properties"].get("Description", "")
    }
    assert lustre_ports == {(988, 988), (1018, 1023)}


def test_file_system_and_key_are_retained_by_default(fsx_synth):
    for cfn_type in ("AWS::FSx::FileSystem", "AWS::KMS::Key"):
        resource = _one(fsx_synth, cfn_type)[1]
        assert resource["DeletionPolicy"] == "Retain", cfn_type
        assert resource["UpdateReplacePolicy"] == "Retain", cfn_type


@pytest.fixture(scope="module")
def disposable_file_system() -> dict[str, Any]:
    """The construct alone with removal policy DESTROY and no data repository (no full app synth)."""
    return _file_system_alone("Disposable", FsxLustreConfig(enabled=True), RemovalPolicy.DESTROY)[1]


def test_removal_policy_destroy_deletes_file_system_and_key(disposable_file_system):
    kinds = {r["Type"]: r for r in disposable_file_system.values()}
    assert kinds["AWS::FSx::FileSystem"]["DeletionPolicy"] == "Delete"
    assert kinds["AWS::KMS::Key"]["DeletionPolicy"] == "Delete"


def test_no_data_repository_association_without_an_s3_uri(disposable_file_system):
    assert not [r for r in disposable_file_system.values() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"]


def test_data_repository_association_links_the_configured_prefix(fsx_synth):
    fs_id = _file_system(fsx_synth)[0]
    props = _one(fsx_synth, "AWS::FSx::DataRepositoryAssociation")[1]["Properties"]
    assert props["FileSystemId"] == {"Ref": fs_id}
    assert props["DataRepositoryPath"] == "s3://example-training-data/datasets"
    assert props["FileSystemPath"] == "/datasets"
    assert props["BatchImportMetaDataOnCreate"] is True
    assert set(props["S3"]["AutoImportPolicy"]["Events"]) == {"NEW", "CHANGED", "DELETED"}
    # A file deleted on FSx stays in S3 unless data_repository_export_deletions says otherwise.
    assert set(props["S3"]["AutoExportPolicy"]["Events"]) == {"NEW", "CHANGED"}


def _file_system_alone(name: str, config: FsxLustreConfig,
                       removal_policy: RemovalPolicy = RemovalPolicy.RETAIN) -> tuple[SharedFileSystem, dict[str, Any]]:
    """The construct in a stack of its own (no full app synth): the construct and its resources."""
    app = new_app(context=cdk_json_context())
    stack = Stack(app, name)
    construct = SharedFileSystem(
        stack, "SharedFileSystem", capacity_gib=config.capacity_gib, throughput_per_tib=config.throughput_per_tib,
        automatic_backup_retention_days=config.automatic_backup_retention_days,
        data_repository_s3_uri=config.data_repository_s3_uri,
        data_repository_export_deletions=config.data_repository_export_deletions, removal_policy=removal_policy,
        subnet=ec2.Subnet.from_subnet_id(stack, "Subnet", "subnet-0123456789abcdef0"),
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef0"),
    )
    return construct, dict(Template.from_stack(stack).to_json()["Resources"])


def test_export_deletions_only_when_asked():
    config = FsxLustreConfig(enabled=True, data_repository_s3_uri="s3://example-training-data/datasets",
                             automatic_backup_retention_days=0, data_repository_export_deletions=True)
    _, resources = _file_system_alone("ExportDeletions", config)
    (association,) = [r for r in resources.values() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"]
    assert set(association["Properties"]["S3"]["AutoExportPolicy"]["Events"]) == {"NEW", "CHANGED", "DELETED"}


def test_daily_backups_are_kept_a_week_by_default_and_off_only_when_written(disposable_file_system, fsx_synth):
    (fs,) = [r for r in disposable_file_system.values() if r["Type"] == "AWS::FSx::FileSystem"]
    assert fs["Properties"]["LustreConfiguration"]["AutomaticBackupRetentionDays"] == 7
    assert fsx_synth.config.storage.fsx_lustre.automatic_backup_retention_days == 0  # written in FSX_CHANGES
    lustre = _file_system(fsx_synth)[1]["Properties"]["LustreConfiguration"]
    assert lustre["AutomaticBackupRetentionDays"] == 0


def test_growing_the_file_system_changes_the_file_system_alone():
    """A bigger capacity_gib must not touch the volume release: a failure there would roll the stack back into
    an FSx shrink, which FSx refuses (UPDATE_ROLLBACK_FAILED)."""
    small, small_resources = _file_system_alone("Small", FsxLustreConfig(enabled=True, capacity_gib=1200))
    large, large_resources = _file_system_alone("Large", FsxLustreConfig(enabled=True, capacity_gib=4800))
    assert Stack.of(small).resolve(small.volume_values()) == Stack.of(large).resolve(large.volume_values())
    assert small_resources.keys() == large_resources.keys()
    changed = {k for k in small_resources if small_resources[k] != large_resources[k]}
    (fs_id,) = changed
    small_props, large_props = small_resources[fs_id]["Properties"], large_resources[fs_id]["Properties"]
    assert (small_props["StorageCapacity"], large_props["StorageCapacity"]) == (1200, 4800)
    assert {**small_props, "StorageCapacity": None} == {**large_props, "StorageCapacity": None}


def test_csi_driver_addon_runs_on_its_own_pod_identity_role_that_only_describes_file_systems(fsx_synth):
    resources = fsx_synth.template("storage")["Resources"]
    addon = _one(fsx_synth, "AWS::EKS::Addon")[1]["Properties"]
    assert addon["AddonName"] == "aws-fsx-csi-driver"
    assert addon["AddonVersion"] == "v1.6.0-eksbuild.1"
    assert "ControlPlaneCluster" in addon["ClusterName"]["Fn::ImportValue"]
    (association,) = addon["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "fsx-csi-controller-sa"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    (trust,) = resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    tags = trust["Condition"]["StringEquals"]
    assert tags["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert tags["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert tags["aws:RequestTag/kubernetes-service-account"] == "fsx-csi-controller-sa"
    assert ":cluster/" in json.dumps(tags["aws:SourceArn"])
    assert tags["aws:SourceArn"]["Fn::Join"][1][-1] == addon["ClusterName"]
    policies = [r for r in resources.values()
                if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]]
    (statement,) = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    # The action takes no resource type (Service Authorization Reference): "*" is the only Resource that matches.
    assert statement["Resource"] == "*"
    assert statement["Action"] == "fsx:DescribeFileSystems"  # static claim: nothing to update
    assert not [r for r in resources.values() if r["Type"] == "AWS::IAM::ManagedPolicy"]


def test_storage_comes_after_the_hyperpod_cluster_and_reads_only_leftwards(fsx_synth):
    app = fsx_synth.app
    assert app.storage is not None and app.hyperpod in app.storage.dependencies
    storage_name = f"{fsx_synth.config.project}-storage"
    imports = [v for v in _walk(fsx_synth.template("storage")) if isinstance(v, dict) and "Fn::ImportValue" in v]
    sources = {i["Fn::ImportValue"].split(":")[0] for i in imports}
    assert sources <= {"hyperpod-dev-network", "hyperpod-dev-eks"}, sources
    for name, template in fsx_synth.templates.items():
        if name != storage_name:
            assert storage_name not in json.dumps(template), f"{name} reads from the storage stack"


def _walk(value: Any):
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def test_volume_release_carries_the_claim_the_config_names(fsx_synth):
    fs_id = _file_system(fsx_synth)[0]
    fsx = fsx_synth.config.storage.fsx_lustre
    assert _values(fsx_synth) == {
        "namespace": "ml-team",
        "claimName": "shared-fsx",
        "persistentVolumeName": persistent_volume_name(fsx.namespace, fsx.pvc_name),
        "storage": "1200Gi",  # nominal, whatever capacity_gib is
        "fileSystemId": f"<Ref {fs_id}>",
        "dnsName": f"<GetAtt {fs_id}.DNSName>",
        "mountName": f"<GetAtt {fs_id}.LustreMountName>",
    }
    assert (fsx.namespace, fsx.pvc_name) == ("ml-team", "shared-fsx")


def test_volume_release_installs_the_local_chart_after_the_driver_and_access_entry(fsx_synth):
    resources = fsx_synth.template("storage")["Resources"]
    _, release = _one(fsx_synth, "Custom::HyperPodHelmRelease")
    props = release["Properties"]
    release_at = (props["ReleaseName"], props["Namespace"], props["Source"])
    assert release_at == ("hyperpod-shared-storage", "kube-system", "s3")
    depends = {resources[d]["Type"] for d in release["DependsOn"]}
    assert {"Custom::HyperPodReadiness", "AWS::EKS::AccessEntry", "AWS::FSx::DataRepositoryAssociation"} <= depends
    # The driver's readiness: the add-on ACTIVE and its controller available, as AWS's module waits before using it.
    (ready,) = [resources[d] for d in release["DependsOn"] if resources[d]["Type"] == "Custom::HyperPodReadiness"]
    assert [(c["kind"], c.get("namespace"), c.get("name")) for c in readiness_checks(ready)] == [
        ("addon", None, "aws-fsx-csi-driver"), ("deployment", "kube-system", "fsx-csi-controller")]
    assert any(resources[d]["Type"] == "AWS::EKS::Addon" for d in ready["DependsOn"])
    # The uploaded asset is the chart directory of the repository.
    staged = Path(fsx_synth.outdir) / f"asset.{props['AssetKey'].removesuffix('.zip')}"
    assert sorted(p.name for p in staged.rglob("*.yaml")) == sorted(p.name for p in STORAGE_CHART_DIR.rglob("*.yaml"))


def test_one_installer_function_per_stack_reading_only_the_chart_object(fsx_synth):
    resources = fsx_synth.template("storage")["Resources"]
    installers = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Function"
                  and r["Properties"].get("Handler") == "runtime.chart_installer.handler.on_event"]
    assert len(installers) == 1
    assert len([r for r in resources.values() if r["Type"] == "AWS::EKS::AccessEntry"]) == 1
    reads = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
             for s in r["Properties"]["PolicyDocument"]["Statement"] if "s3:GetObject" in json.dumps(s["Action"])]
    (read,) = reads
    assert read["Action"] == "s3:GetObject"
    assert json.dumps(read["Resource"]).endswith('.zip"]]}')


def test_aws_solutions_is_clean_and_each_acknowledgment_is_one_finding_on_one_resource(fsx_synth):
    report = json.loads((fsx_synth.outdir / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    nag = plugins["AwsSolutions"]
    assert nag["conclusion"] == "success", json.dumps(nag["violations"], indent=1)[:4000]
    for plugin in report["pluginReports"]:
        for finding in plugin.get("suppressedViolations", []):
            assert len(finding["violatingConstructs"]) == 1, finding["ruleName"]
            assert "*" not in finding["acknowledgedId"].split("[")[0], finding["acknowledgedId"]
            assert len(finding["reason"]) >= 30, finding


def test_cfn_lint_reports_nothing_on_the_storage_stack(fsx_synth):
    template = Path(fsx_synth.outdir) / "hyperpod-dev-storage.template.json"
    assert cfn_lint_problems(template) == []


def test_storage_stack_snapshot(fsx_synth, snapshot):
    template = normalise(fsx_synth.template("storage"))
    template.get("Parameters", {}).pop("BootstrapVersion", None)
    template.get("Rules", {}).pop("CheckBootstrapVersion", None)
    assert template == snapshot.use_extension(JSONSnapshotExtension)


def test_nodes_install_the_lustre_client_when_the_file_system_is_on(default_synth, fsx_synth):
    """The lifecycle settings uploaded next to on_create.sh switch the FSx client on with FSx itself."""

    def settings(synth):
        (path,) = [p for p in Path(synth.outdir).glob("asset.*/lifecycle_config.env")]
        return path.read_text()

    assert "ENABLE_FSX_LUSTRE_CLIENT=true" in settings(fsx_synth)
    assert "ENABLE_FSX_LUSTRE_CLIENT=false" in settings(default_synth)


def test_the_storage_stack_is_protected_from_deletion(fsx_synth):
    assert fsx_synth.app.storage is not None and fsx_synth.app.storage.termination_protection
