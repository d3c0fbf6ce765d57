"""drift (including the replacement warning) and every preflight verdict."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from hpctl_testkit import CLUSTER, REGION, config_data, moto_cluster, names_are_free, offer_every_type, stubbed
from moto import mock_aws

from hpctl import preflight as pf
from hpctl.aws import Clients
from infra.config import parse_config
from infra.errors import ConfigError
from tests.conftest import default_config_data

# --- drift ----------------------------------------------------------------------------------------


@mock_aws
def test_no_drift_exits_0(run, config_file: Path) -> None:
    moto_cluster(boto3.client("sagemaker", region_name=REGION))
    code, out, _ = run("drift", "--config", str(config_file))
    assert code == 0 and "no drift" in out


@mock_aws
def test_count_and_health_check_changes_are_updates(run, write_config) -> None:
    moto_cluster(boto3.client("sagemaker", region_name=REGION))
    data = config_data()
    data["hyperpod"]["instance_groups"][0].update(instance_count=5, deep_health_checks=[])
    code, result = run.json("drift", "--config", str(write_config(data)))
    assert code == 1
    assert result["refused"] is False
    changes = {c["field"]: (c["deployed"], c["config"], c["effect"]) for c in result["changes"]}
    assert changes == {
        "instance_count": (3, 5, "update"),
        "deep_health_checks": (["InstanceStress"], [], "update"),
    }


@mock_aws
def test_type_change_on_an_existing_group_is_one_hyperpod_refuses(run, write_config) -> None:
    moto_cluster(boto3.client("sagemaker", region_name=REGION))
    data = config_data()
    data["hyperpod"]["instance_groups"][0].update(instance_type="ml.g5.12xlarge", threads_per_core=2)
    code, out, err = run("drift", "--config", str(write_config(data)))
    assert code == 1
    assert "HYPERPOD REFUSES: new group" in out and "ml.g5.12xlarge" in out
    assert "Add a new instance group" in err and "REPLACE" not in err
    code, result = run.json("drift", "--config", str(write_config(data)))
    assert code == 1 and result["refused"] is True
    assert {c["field"]: c["effect"] for c in result["changes"]}["instance_type"] == "HYPERPOD REFUSES: new group"


@mock_aws
def test_added_and_removed_groups(run, write_config) -> None:
    moto_cluster(
        boto3.client("sagemaker", region_name=REGION),
        [
            {"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 3},
            {"InstanceGroupName": "old", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
        ],
    )
    data = config_data()
    data["hyperpod"]["instance_groups"].append(
        {"name": "new", "instance_type": "ml.g5.12xlarge", "instance_count": 2, "az_id": "usw2-az2"}
    )
    code, result = run.json("drift", "--config", str(write_config(data)))
    assert code == 1 and result["refused"] is True  # "old" has a node: synth refuses its removal unacknowledged
    assert {(c["group"], c["effect"]) for c in result["changes"]} == {
        ("new", "add group"),
        ("old", "SYNTH REFUSES: its nodes would terminate"),
    }


@mock_aws
def test_not_deployed_is_drift(run, config_file: Path) -> None:
    code, result = run.json("drift", "--config", str(config_file))
    assert code == 1 and result["changes"][0]["effect"] == "create cluster"


# --- preflight: building blocks -------------------------------------------------------------------


def _cfg(**network: object):
    data = config_data()
    data["network"].update(network)
    return parse_config(data)


def _byo_cfg(subnet_id: str, vpc_id: str, count: int = 3, **group: object):
    data = config_data()
    data["network"] = {
        "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
        "existing_vpc_id": vpc_id,
        "control_plane_subnet_ids": ["subnet-0000000000000000a", "subnet-0000000000000000b"],
        "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": subnet_id}],
    }
    data["hyperpod"]["instance_groups"][0].update(instance_count=count, **group)
    return parse_config(data)


@mock_aws
def test_az_ids_pass_and_fail_with_moto() -> None:
    clients = Clients(REGION)
    [check] = pf.check_az_ids(_cfg(), clients)
    assert check.verdict == "pass" and "usw2-az2=us-west-2a" in check.reason
    [check] = pf.check_az_ids(_cfg(control_plane_az_ids=["usw2-az1", "usw2-az9"]), clients)
    assert check.verdict == "fail" and "usw2-az9" in check.reason


def test_az_ids_warn_when_a_zone_is_impaired() -> None:
    ec2, stub = stubbed("ec2")
    zones = [
        {"ZoneName": "us-west-2a", "ZoneId": "usw2-az2", "State": "impaired"},
        {"ZoneName": "us-west-2b", "ZoneId": "usw2-az1", "State": "available"},
    ]
    stub.add_response("describe_availability_zones", {"AvailabilityZones": zones})
    [check] = pf.check_az_ids(_cfg(), Clients(REGION, preset={"ec2": ec2}))
    assert check.verdict == "warn" and "impaired" in check.reason


@pytest.mark.parametrize(("value", "verdict"), [(10.0, "pass"), (2.0, "fail"), (None, "warn")])
def test_quota_verdicts(value: float | None, verdict: str) -> None:
    sq, stub = stubbed("service-quotas")
    quotas = [{"QuotaName": "ml.p5.48xlarge for cluster usage", "Value": 4.0}]
    if value is not None:
        quotas.append({"QuotaName": "ml.g5.8xlarge for cluster usage", "Value": value})
    stub.add_response(
        "list_service_quotas", {"Quotas": quotas[:1], "NextToken": "n"}, {"ServiceCode": "sagemaker"}
    )
    stub.add_response(
        "list_service_quotas", {"Quotas": quotas[1:]}, {"ServiceCode": "sagemaker", "NextToken": "n"}
    )
    [check] = pf.check_quotas(_cfg(), Clients(REGION, preset={"service-quotas": sq}))
    assert check.name == "quota ml.g5.8xlarge"
    assert check.verdict == verdict


def test_quota_sums_counts_per_type() -> None:
    data = config_data()
    data["hyperpod"]["instance_groups"].append(
        {"name": "more", "instance_type": "ml.g5.8xlarge", "instance_count": 4, "az_id": "usw2-az2"}
    )
    sq, stub = stubbed("service-quotas")
    stub.add_response(
        "list_service_quotas", {"Quotas": [{"QuotaName": "ml.g5.8xlarge for cluster usage", "Value": 6.0}]}
    )
    [check] = pf.check_quotas(parse_config(data), Clients(REGION, preset={"service-quotas": sq}))
    assert check.verdict == "fail" and "asks for 7" in check.reason


@mock_aws
@pytest.mark.parametrize(("count", "verdict"), [(3, "pass"), (8, "warn"), (9, "fail")])
def test_subnet_ip_verdicts_with_moto(count: int, verdict: str) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZoneId="usw2-az2")["Subnet"]
    # 251 free; ml.g5.8xlarge plans 30 IPs: 8 nodes = 240 leaves 11 (< 30 for a replacement), 9 = 270 > 251
    [check] = pf.check_subnet_ips(_byo_cfg(subnet["SubnetId"], vpc, count), Clients(REGION), None)
    assert check.verdict == verdict, check.reason


@mock_aws
def test_subnet_ips_count_only_growth_of_a_deployed_cluster_and_check_the_az() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZoneId="usw2-az2")["Subnet"]
    deployed = {"InstanceGroups": [{"InstanceGroupName": "workers", "CurrentCount": 6}]}
    [check] = pf.check_subnet_ips(_byo_cfg(subnet["SubnetId"], vpc, 9), Clients(REGION), deployed)
    assert check.verdict == "pass" and "needs 90 more" in check.reason
    wrong_az = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZoneId="usw2-az1")["Subnet"]
    [check] = pf.check_subnet_ips(_byo_cfg(wrong_az["SubnetId"], vpc), Clients(REGION), None)
    assert check.verdict == "fail" and "usw2-az1" in check.reason
    [check] = pf.check_subnet_ips(_byo_cfg("subnet-0123456789abcdef0", vpc), Clients(REGION), None)
    assert check.verdict == "fail" and "does not exist" in check.reason


def test_a_type_not_offered_in_its_az_warns() -> None:
    # "We currently do not have sufficient capacity for the requested instance type(s)" (awslabs/awsome-distributed-ai
    # #204): AWS's advice is to check that EC2 offers the type in the group's AZ.
    ec2, stub = stubbed("ec2")
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": []}, {
        "LocationType": "availability-zone-id",
        "Filters": [{"Name": "location", "Values": ["usw2-az2"]}, {"Name": "instance-type", "Values": ["g5.8xlarge"]}],
    })
    [check] = pf.check_instance_offerings(_cfg(), Clients(REGION, preset={"ec2": ec2}))
    assert check.name == "offered ml.g5.8xlarge usw2-az2" and check.verdict == "warn"
    assert "does not offer g5.8xlarge in usw2-az2" in check.reason and "fallback_instance_types" in check.reason
    stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": [
        {"InstanceType": "g5.8xlarge", "LocationType": "availability-zone-id", "Location": "usw2-az2"}]})
    [check] = pf.check_instance_offerings(_cfg(), Clients(REGION, preset={"ec2": ec2}))
    assert check.verdict == "pass"


def test_subnet_ips_not_applicable_when_the_vpc_is_created() -> None:
    [check] = pf.check_subnet_ips(_cfg(), Clients(REGION), None)
    assert check.verdict == "pass" and "not applicable" in check.reason


def _grafana(auth: object) -> SimpleNamespace:
    return SimpleNamespace(observability=SimpleNamespace(grafana=SimpleNamespace(authentication=auth)))


def test_grafana_authentication_is_read_defensively() -> None:
    assert pf.grafana_authentication(_cfg()) == ["AWS_SSO"]  # no observability key yet
    assert pf.grafana_authentication(_grafana(["SAML"])) == ["SAML"]
    assert pf.grafana_authentication(_grafana("AWS_SSO")) == ["AWS_SSO"]


@pytest.mark.parametrize(
    ("instances", "verdict"),
    [
        ([{"InstanceArn": "arn:aws:sso:::instance/ssoins-1", "Status": "ACTIVE"}], "pass"),
        ([{"InstanceArn": "arn:aws:sso:::instance/ssoins-1", "Status": "CREATE_IN_PROGRESS"}], "warn"),
        ([], "fail"),
    ],
)
def test_identity_center_verdicts(instances: list, verdict: str) -> None:
    sso, stub = stubbed("sso-admin")
    stub.add_response("list_instances", {"Instances": instances})
    [check] = pf.check_identity_center(_cfg(), Clients(REGION, preset={"sso-admin": sso}))
    assert check.verdict == verdict


def test_identity_center_not_needed_with_saml() -> None:
    [check] = pf.check_identity_center(_grafana("SAML"), Clients(REGION, preset={}))
    assert check.verdict == "pass" and "not needed" in check.reason


# --- preflight: would the deploy replace a stateful resource? --------------------------------------
# The replacement engine of synth's guard (infra/guards/replacement.py) over the deployed templates of every stack
# of the project (cloudformation:GetTemplate) and cdk.out's; tests/safety/test_replacement_engine.py holds both
# callers to the same reasons on synthesized apps.

EKS_TEMPLATE = {
    "Resources": {
        "Cluster9EE0221C": {
            "Type": "AWS::EKS::Cluster",
            "Properties": {
                "Name": "hp-eks",
                "RoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "ResourcesVpcConfig": {"SubnetIds": ["subnet-a", "subnet-b"], "EndpointPrivateAccess": True},
                "Version": "1.32",
            },
        }
    }
}
HP_TEMPLATE = {
    "Resources": {
        "HyperPodCluster": {
            "Type": "AWS::SageMaker::Cluster",
            "Properties": {
                "ClusterName": CLUSTER,
                "VpcConfig": {"Subnets": ["subnet-a"], "SecurityGroupIds": ["sg-1"]},
                "InstanceGroups": [
                    {
                        "InstanceGroupName": "workers",
                        "InstanceType": "ml.g5.8xlarge",
                        "InstanceCount": 3,
                        "ThreadsPerCore": 1,
                        "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                    }
                ],
            },
        }
    }
}
EKS_KEY = "hp-eks/Cluster9EE0221C"
EKS = f"{EKS_KEY} (AWS::EKS::Cluster)"
NEW_EKS = ("a new EKS cluster (every Kubernetes object on it is lost: workloads, secrets, what the charts and add-ons "
           "installed)")
HP = "hp-hyperpod/HyperPodCluster (AWS::SageMaker::Cluster)"


def _edit(template: dict, fn) -> dict:
    copy = json.loads(json.dumps(template))
    fn(copy)
    return copy


def _assembly(cdk_out: Path, templates: dict[str, dict]) -> None:
    """A cloud assembly holding ``templates``, its manifest.json written as `cdk synth` writes it."""
    artifacts = {name: {"type": "aws:cloudformation:stack", "properties": {"templateFile": f"{name}.template.json"}}
                 for name in templates}
    (cdk_out / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    for name, template in templates.items():
        (cdk_out / f"{name}.template.json").write_text(json.dumps(template))


def _replacement_checks(tmp_path: Path, deployed: dict[str, dict | None], synth: dict[str, dict] | None,
                        cfg=None) -> list[pf.Check]:
    """check_replacement with ``synth`` in cdk.out and CloudFormation holding ``deployed`` (None: no such stack),
    asked in the manifest's order."""
    cf, stub = stubbed("cloudformation")
    for stack, template in deployed.items():
        params = {"StackName": stack, "TemplateStage": "Original"}
        if template is None:
            stub.add_client_error("get_template", "ValidationError", f"Stack with id {stack} does not exist",
                                  expected_params=params)
        else:
            stub.add_response("get_template", {"TemplateBody": json.dumps(template)}, params)
    if synth is not None:
        _assembly(tmp_path, synth)
    checks = pf.check_replacement(cfg or _cfg(), Clients(REGION, preset={"cloudformation": cf}), tmp_path)
    if synth is not None:
        stub.assert_no_pending_responses()
    return checks


def _replacement(tmp_path: Path, stack: str, deployed: dict | None, synth: dict | None, cfg=None) -> pf.Check:
    [check] = _replacement_checks(tmp_path, {stack: deployed}, None if synth is None else {stack: synth}, cfg)
    return check


def test_not_deployed_stack_passes(tmp_path: Path) -> None:
    check = _replacement(tmp_path, "hp-eks", None, EKS_TEMPLATE)
    assert (check.name, check.verdict, check.reason) == ("no-replace", "pass", "not deployed: none of hp-eks")


def test_in_place_updates_pass(tmp_path: Path) -> None:
    synth = _edit(
        EKS_TEMPLATE, lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(Version="1.33")
    )
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert check.verdict == "pass" and "1 guarded resources of hp-eks: nothing replaced" in check.reason, check
    synth = _edit(
        HP_TEMPLATE,
        lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["InstanceGroups"][0].update(
            InstanceCount=8
        ),
    )
    assert _replacement(tmp_path, "hp-hyperpod", HP_TEMPLATE, synth).verdict == "pass"


@pytest.mark.parametrize(("version", "words"), [
    ("1.34", "deploy 1.33 first, then 1.34"),
    ("1.30", "EKS rolls a control plane back only to the previous minor version"),
])
def test_a_kubernetes_version_step_eks_does_not_make_fails(tmp_path: Path, version: str, words: str) -> None:
    """Deployed 1.32: more than one minor version up, or down, is refused by EKS (infra.guards.create_only); one down
    (EKS's rollback) passes."""
    synth = _edit(EKS_TEMPLATE, lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(Version=version))
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert (check.name, check.verdict) == ("no-replace hp-eks", "fail"), check.reason
    assert check.reason.startswith(f"{EKS} Version changes from '1.32' to '{version}': the deployed cluster runs "
                                   "Kubernetes 1.32 and EKS"), check.reason
    assert words in check.reason
    down = _edit(EKS_TEMPLATE, lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(Version="1.31"))
    assert _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, down).verdict == "pass"


def test_a_replaced_eks_cluster_is_reported_as_a_replacement_not_a_version_step(tmp_path: Path) -> None:
    synth = _edit(EKS_TEMPLATE, lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(
        Name="other", Version="1.35"))
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert (check.verdict, check.reason) == ("fail", f"{EKS} Name changes from 'hp-eks' to 'other': {NEW_EKS}. To "
                                                     f"accept, list {{resource: {EKS_KEY}, field: Name}} in "
                                                     "acknowledge_replacement")


def test_an_accepted_replacement_warns(tmp_path: Path) -> None:
    """Acknowledged in acknowledge_replacement, synth lets it through, and preflight warns instead of failing; an
    acknowledgement of another field accepts nothing and is itself refused."""
    synth = _edit(EKS_TEMPLATE, lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(Name="other"))
    data = config_data()
    data["acknowledge_replacement"] = [{"resource": EKS_KEY, "field": "Name"}]
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth, parse_config(data))
    assert (check.verdict, check.reason) == (
        "warn", f"{EKS} Name changes from 'hp-eks' to 'other': {NEW_EKS} (acknowledged in acknowledge_replacement)")
    data["acknowledge_replacement"] = [{"resource": EKS_KEY, "field": "RoleArn"}]
    (tmp_path / "other").mkdir()
    checks = _replacement_checks(tmp_path / "other", {"hp-eks": EKS_TEMPLATE}, {"hp-eks": synth}, parse_config(data))
    assert [c.verdict for c in checks] == ["fail", "fail"]
    assert checks[0].reason == (f"{EKS_KEY}/RoleArn acknowledges no replacement this change makes: remove the entry, "
                                "or name the resource and field as the refusal writes them")


def test_a_new_logical_id_fails(tmp_path: Path) -> None:
    synth = {"Resources": {"ClusterNEW": EKS_TEMPLATE["Resources"]["Cluster9EE0221C"]}}
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert (check.verdict, check.reason) == ("fail", f"{EKS} disappears: CloudFormation deletes it. To accept, "
                                                     f"list {{resource: {EKS_KEY}, field: removed}} in "
                                                     "acknowledge_replacement")


def test_a_create_only_eks_property_fails(tmp_path: Path) -> None:
    synth = _edit(
        EKS_TEMPLATE,
        lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"].update(
            KubernetesNetworkConfig={"IpFamily": "ipv6"}
        ),
    )
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert check.verdict == "fail"
    assert check.reason.startswith(f"{EKS} KubernetesNetworkConfig/IpFamily changes from null to 'ipv6': {NEW_EKS}. "
                                   f"To accept, list {{resource: {EKS_KEY}, field: KubernetesNetworkConfig/IpFamily}}")


def test_eks_subnet_change_warns(tmp_path: Path) -> None:
    synth = _edit(
        EKS_TEMPLATE,
        lambda t: t["Resources"]["Cluster9EE0221C"]["Properties"]["ResourcesVpcConfig"].update(
            SubnetIds=["subnet-c"]
        ),
    )
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, synth)
    assert (check.verdict, check.reason) == (
        "warn", f'{EKS} ResourcesVpcConfig/SubnetIds changes from ["subnet-a", "subnet-b"] to ["subnet-c"]: EKS '
                "updates them in place only to subnets in the Availability Zones the cluster was created with")


def test_a_group_instance_type_change_fails(tmp_path: Path) -> None:
    synth = _edit(
        HP_TEMPLATE,
        lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["InstanceGroups"][0].update(
            InstanceType="ml.g5.12xlarge"
        ),
    )
    check = _replacement(tmp_path, "hp-hyperpod", HP_TEMPLATE, synth)
    assert (check.name, check.verdict, check.reason) == (
        "no-replace hp-hyperpod", "fail",
        f"{HP} hyperpod.instance_groups[workers] InstanceType changes from 'ml.g5.8xlarge' to 'ml.g5.12xlarge'")


def test_a_flexible_groups_list_may_change_but_not_turn_single(tmp_path: Path) -> None:
    def flexible(*types: str):
        return lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["InstanceGroups"][0].update(
            InstanceType=None, InstanceRequirements={"InstanceTypes": list(types)})

    deployed = _edit(HP_TEMPLATE, flexible("ml.g5.8xlarge", "ml.g5.12xlarge"))
    edited = _edit(HP_TEMPLATE, flexible("ml.g5.12xlarge", "ml.g5.16xlarge"))
    check = _replacement(tmp_path, "hp-hyperpod", deployed, edited)
    assert check.verdict == "pass", check.reason
    (tmp_path / "single").mkdir()
    checks = _replacement_checks(tmp_path / "single", {"hp-hyperpod": deployed}, {"hp-hyperpod": HP_TEMPLATE})
    assert [c.verdict for c in checks] == ["fail", "fail"]
    assert f"{HP} hyperpod.instance_groups[workers] InstanceType changes from null" in checks[0].reason
    assert f"{HP} hyperpod.instance_groups[workers] InstanceRequirements changes" in checks[1].reason


def test_a_volume_key_on_a_deployed_group_fails(tmp_path: Path) -> None:
    synth = _edit(
        HP_TEMPLATE,
        lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["InstanceGroups"][0].update(
            InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500, "VolumeKmsKeyId": {"Ref": "Key"}}}]
        ),
    )
    check = _replacement(tmp_path, "hp-hyperpod", HP_TEMPLATE, synth)
    assert check.verdict == "fail"
    assert check.reason.startswith(f"{HP} hyperpod.instance_groups[workers] the KMS key of its EBS volumes changes "
                                   """from AWS's own key to {"Ref": "Key"}"""), check.reason


def test_a_cluster_vpc_change_fails(tmp_path: Path) -> None:
    synth = _edit(
        HP_TEMPLATE,
        lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["VpcConfig"].update(Subnets=["subnet-z"]),
    )
    check = _replacement(tmp_path, "hp-hyperpod", HP_TEMPLATE, synth)
    assert check.verdict == "fail" and check.reason.startswith(f"{HP} VpcConfig changes from "), check.reason


def test_missing_synth_warns(tmp_path: Path) -> None:
    check = _replacement(tmp_path, "hp-eks", EKS_TEMPLATE, None)
    assert check.verdict == "warn" and "cdk synth" in check.reason


def test_the_projects_stacks_are_found_through_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "EksStack.template.json").write_text(json.dumps(EKS_TEMPLATE))
    manifest = {
        "artifacts": {
            "EksStack": {
                "type": "aws:cloudformation:stack",
                "properties": {"templateFile": "EksStack.template.json", "stackName": "hp-eks"},
            },
            "hp-network": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "n.template.json"}},
            "other-eks": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "o.template.json"}},
            "hp-eks.assets": {"type": "cdk:asset-manifest", "properties": {"file": "hp-eks.assets.json"}},
        }
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert pf.synth_stacks(tmp_path, "hp") == {"hp-eks": tmp_path / "EksStack.template.json",
                                               "hp-network": tmp_path / "n.template.json"}


def test_a_removed_group_with_nodes_fails_unless_acknowledged(tmp_path: Path) -> None:
    """As synth's guard: refused, or a warning once hyperpod.acknowledge_group_removal lists the group."""
    renamed = _edit(HP_TEMPLATE, lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["InstanceGroups"][0].update(
        InstanceGroupName="workers-v2"))
    check = _replacement(tmp_path, "hp-hyperpod", HP_TEMPLATE, renamed)
    assert (check.verdict, check.reason) == ("fail", f"{HP} hyperpod.instance_groups[workers] with 3 nodes is removed "
                                                     "or renamed")
    data = config_data(acknowledge_group_removal=["workers"])
    data["hyperpod"]["instance_groups"][0]["name"] = "workers-v2"
    (tmp_path / "ack").mkdir()
    check = _replacement(tmp_path / "ack", "hp-hyperpod", HP_TEMPLATE, renamed, parse_config(data))
    assert (check.verdict, check.reason) == (
        "warn", f"{HP} hyperpod.instance_groups[workers] with 3 nodes is removed or renamed (its nodes are "
                "terminated; listed in hyperpod.acknowledge_group_removal)")


def test_a_file_system_subnet_change_fails(tmp_path: Path) -> None:
    deployed = {"Resources": {"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {"SubnetIds": ["subnet-a"]}}}}
    synth = _edit(deployed, lambda t: t["Resources"]["Fs"]["Properties"].update(SubnetIds=["subnet-b"]))
    check = _replacement(tmp_path, "hp-storage", deployed, synth)
    # Without DeletionPolicy/UpdateReplacePolicy Retain CloudFormation deletes the old file system: the reason says
    # so and asks for the data acknowledgement too.
    assert (check.name, check.verdict, check.reason) == (
        "no-replace hp-storage", "fail",
        'hp-storage/Fs (AWS::FSx::FileSystem) SubnetIds changes from ["subnet-a"] to ["subnet-b"]: a new file system '
        "(it starts empty); hp-storage/Fs is deleted with every file on it and its automatic "
        "backups. To accept, list {resource: hp-storage/Fs, field: SubnetIds, deletes_data: true} in "
        "acknowledge_replacement")


# A network stack exporting a subnet that the HyperPod stack imports, as `cdk synth` writes the two.
NETWORK_TEMPLATE = {
    "Resources": {"Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
        "VpcId": "vpc-1", "CidrBlock": "10.1.0.0/16", "AvailabilityZoneId": "usw2-az2"}}},
    "Outputs": {"ExportsOutputRefSubnet": {"Value": {"Ref": "Subnet"},
                                           "Export": {"Name": "hp-network:ExportsOutputRefSubnet"}}},
}
HP_IMPORTING = _edit(HP_TEMPLATE, lambda t: t["Resources"]["HyperPodCluster"]["Properties"]["VpcConfig"].update(
    Subnets=[{"Fn::ImportValue": "hp-network:ExportsOutputRefSubnet"}]))


def test_a_subnet_behind_an_export_is_followed_into_the_other_stack(tmp_path: Path) -> None:
    """The subnet the HyperPod cluster imports gets a new CIDR: CloudFormation replaces it and the cluster's
    VpcConfig with it. The old preflight compared only the cluster's own properties (the import stays) and passed."""
    synth = {"hp-network": _edit(NETWORK_TEMPLATE, lambda t: t["Resources"]["Subnet"]["Properties"].update(
        CidrBlock="10.9.0.0/16")), "hp-hyperpod": HP_IMPORTING}
    checks = _replacement_checks(tmp_path, {"hp-network": NETWORK_TEMPLATE, "hp-hyperpod": HP_IMPORTING}, synth)
    assert [(c.name, c.verdict, c.reason) for c in checks] == [
        ("no-replace hp-network", "fail",
         "hp-network/Subnet (AWS::EC2::Subnet) CidrBlock changes from '10.1.0.0/16' to '10.9.0.0/16': a new "
         "AWS::EC2::Subnet; so replaced too: hp-hyperpod/HyperPodCluster, a new HyperPod cluster (every node is "
         "terminated with the jobs it runs). To accept, list {resource: hp-network/Subnet, field: CidrBlock} in "
         "acknowledge_replacement")]


def test_a_stack_not_deployed_is_skipped(tmp_path: Path) -> None:
    """The storage stack is new in this synth: CloudFormation has none, the other stacks are still compared."""
    storage = {"Resources": {"Fs": {"Type": "AWS::FSx::FileSystem", "Properties": {"SubnetIds": ["subnet-a"]}}}}
    synth = {"hp-network": NETWORK_TEMPLATE, "hp-hyperpod": HP_IMPORTING, "hp-storage": storage}
    [check] = _replacement_checks(
        tmp_path, {"hp-network": NETWORK_TEMPLATE, "hp-hyperpod": HP_IMPORTING, "hp-storage": None}, synth)
    assert (check.name, check.verdict, check.reason) == (
        "no-replace", "pass", "2 guarded resources of hp-network, hp-hyperpod: nothing replaced, no change AWS refuses")


def test_a_deployed_template_the_engine_cannot_read_warns(tmp_path: Path) -> None:
    """The node pools release's values are not plain JSON in the deployed template: could not check, not a pass."""
    release = {"Type": "Custom::HyperPodHelmRelease",
               "Properties": {"ReleaseName": "hyperpod-karpenter-node-pools", "Values": {"Fn::Join": ["", []]}}}
    def autoscaled(t: dict) -> None:
        t["Resources"].update(NodePools=release)
        t["Resources"]["HyperPodCluster"]["Properties"]["AutoScaling"] = {"Mode": "Enable",
                                                                          "AutoScalerType": "Karpenter"}

    deployed = _edit(HP_TEMPLATE, autoscaled)
    check = _replacement(tmp_path, "hp-hyperpod", deployed, HP_TEMPLATE)
    assert check.verdict == "warn" and check.reason.startswith("could not check: ") and "node-pools" in check.reason


# --- preflight end to end -------------------------------------------------------------------------


def _addon_page(name: str, versions: list[str], k8s: str = "1.33") -> dict:
    """A DescribeAddonVersions page in botocore's eks model shape."""
    return {"addons": [{
        "addonName": name,
        "addonVersions": [
            {"addonVersion": v, "compatibilities": [{"clusterVersion": k8s, "defaultVersion": False}]}
            for v in versions
        ],
    }]}


def test_addon_versions_follow_pages_and_name_the_missing_version() -> None:
    eks, stub = stubbed("eks")
    wanted = {"addonName": "vpc-cni", "kubernetesVersion": "1.33"}
    stub.add_response(
        "describe_addon_versions", {**_addon_page("vpc-cni", ["v1.19.0-eksbuild.1"]), "nextToken": "n"}, wanted
    )
    stub.add_response(
        "describe_addon_versions", _addon_page("vpc-cni", ["v1.20.4-eksbuild.2"]), {**wanted, "nextToken": "n"}
    )
    stub.add_response("describe_addon_versions", _addon_page("vpc-cni", ["v1.19.0-eksbuild.1"]), wanted)
    clients = Clients(REGION, preset={"eks": eks})
    data = config_data()
    data["eks"]["addon_versions"] = {"vpc-cni": "v1.20.4-eksbuild.2"}
    cfg = parse_config(data)
    [check] = pf.check_addon_versions(cfg, clients)
    assert check.verdict == "pass" and "vpc-cni v1.20.4-eksbuild.2" in check.reason
    [check] = pf.check_addon_versions(cfg, clients)
    assert check.verdict == "fail"
    assert check.reason == "not offered for Kubernetes 1.33: vpc-cni v1.20.4-eksbuild.2"
    stub.assert_no_pending_responses()


def test_task_governance_addon_must_be_offered_for_the_kubernetes_version() -> None:
    eks, stub = stubbed("eks")
    name = "amazon-sagemaker-hyperpod-taskgovernance"
    wanted = {"addonName": name, "kubernetesVersion": "1.33"}
    stub.add_response("describe_addon_versions", _addon_page(name, ["v1.6.0-eksbuild.1"]), wanted)
    stub.add_response("describe_addon_versions", {"addons": []}, wanted)
    stub.add_response("describe_addon_versions", _addon_page(name, ["v1.5.0-eksbuild.1"]), wanted)
    clients = Clients(REGION, preset={"eks": eks})
    data = config_data()
    data["addons"] = {"task_governance": {"enabled": True}}
    [check] = pf.check_addon_versions(parse_config(data), clients)
    assert check.verdict == "pass" and f"{name} (EKS default)" in check.reason
    [check] = pf.check_addon_versions(parse_config(data), clients)
    assert check.reason == f"not offered for Kubernetes 1.33: {name} (any version)"
    data["addons"]["task_governance"]["addon_version"] = "v1.6.0-eksbuild.1"
    [check] = pf.check_addon_versions(parse_config(data), clients)
    assert check.reason == f"not offered for Kubernetes 1.33: {name} v1.6.0-eksbuild.1"
    stub.assert_no_pending_responses()


def test_no_pinned_addon_asks_nothing() -> None:
    [check] = pf.check_addon_versions(_cfg(), lambda service: pytest.fail(service))
    assert check.verdict == "pass"


# A test schema written for these tests, NOT AWS's schema of amazon-sagemaker-hyperpod-observability (none was
# found published): it has the keys infra/config/observability_addon.py sends and bounds chosen to test against.
_FAMILY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"level": {"enum": ["DISABLED", "BASIC", "ADVANCED"]},
                   "scrapeInterval": {"type": "integer", "minimum": 1, "maximum": 300}},
}
TEST_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "ampWorkspace": {"type": "object", "properties": {"prometheusEndpoint": {"type": "string"},
                                                          "arn": {"type": "string", "pattern": "^arn:aws"}}},
        "amgWorkspace": {"type": "object", "properties": {"workspaceName": {"type": "string"},
                                                          "arn": {"type": "string"}}},
        "metricsProvider": {"type": "object", "additionalProperties": _FAMILY},
        "logging": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
    },
}
OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"


def _default_page(versions: dict[str, bool], k8s: str = "1.33") -> dict:
    """A DescribeAddonVersions page (botocore's eks model shape) marking which versions are EKS's default."""
    return {"addons": [{
        "addonName": OBSERVABILITY_ADDON,
        "addonVersions": [
            {"addonVersion": v, "compatibilities": [{"clusterVersion": k8s, "defaultVersion": default}]}
            for v, default in versions.items()
        ],
    }]}


def _cluster_version(stub: object, status: str | None, version: str = "1.33") -> None:
    """DescribeClusterVersions for one version (botocore's eks model, ClusterVersionInformation); None: not listed."""
    listed = [] if status is None else [{"clusterVersion": version, "clusterType": "eks", "versionStatus": status,
                                         "endOfExtendedSupportDate": datetime(2027, 7, 29, tzinfo=UTC)}]
    stub.add_response("describe_cluster_versions", {"clusterVersions": listed},
                      {"clusterVersions": [version], "includeAll": True})


def _eks_with_schema(schema: object, versions: dict[str, bool] | None = None,
                     k8s_status: str | None = None) -> tuple[object, object]:
    """An EKS client answering DescribeAddonVersions, then DescribeAddonConfiguration for the default version;
    with ``k8s_status``, DescribeClusterVersions first (preflight's k8s-version check)."""
    eks, stub = stubbed("eks")
    if k8s_status is not None:
        _cluster_version(stub, k8s_status)
    versions = {"v1.0.2-eksbuild.1": False, "v1.0.3-eksbuild.1": True} if versions is None else versions
    stub.add_response("describe_addon_versions", _default_page(versions),
                      {"addonName": OBSERVABILITY_ADDON, "kubernetesVersion": "1.33"})
    default = next((v for v, d in versions.items() if d), None)
    if default is not None:
        # Response shape: botocore data/eks/2017-11-01/service-2.json, DescribeAddonConfigurationResponse.
        response = {"addonName": OBSERVABILITY_ADDON, "addonVersion": default}
        if schema is not None:
            response["configurationSchema"] = schema if isinstance(schema, str) else json.dumps(schema)
        stub.add_response("describe_addon_configuration", response,
                          {"addonName": OBSERVABILITY_ADDON, "addonVersion": default})
    return eks, stub


def _addon_config(data: dict, eks: object) -> list[pf.Check]:
    return pf.check_addon_config(parse_config(data), Clients(REGION, preset={"eks": eks}))


@pytest.mark.parametrize(("status", "verdict", "words"), [
    ("STANDARD_SUPPORT", "pass", "Kubernetes 1.33: standard support"),
    ("EXTENDED_SUPPORT", "warn", "extended support until 2027-07-29, billed at its extended-support rate"),
    ("UNSUPPORTED", "fail", "EKS no longer creates clusters of Kubernetes 1.33"),
    (None, "fail", "EKS no longer creates clusters of Kubernetes 1.33"),
])
def test_k8s_version_asks_eks_whether_it_still_creates_the_version(status, verdict, words) -> None:
    eks, stub = stubbed("eks")
    _cluster_version(stub, status)
    [check] = pf.check_k8s_version(parse_config(config_data()), Clients(REGION, preset={"eks": eks}))
    stub.assert_no_pending_responses()
    assert (check.name, check.verdict) == ("k8s-version", verdict) and words in check.reason, check.reason


def test_addon_config_valid_values_pass_against_the_default_version() -> None:
    eks, stub = _eks_with_schema(TEST_SCHEMA)
    [check] = _addon_config(config_data(), eks)
    assert (check.name, check.verdict) == ("addon-config", "pass")
    assert check.reason.startswith(f"{OBSERVABILITY_ADDON} v1.0.3-eksbuild.1:")
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("family", "field", "value", "path", "key"),
    [
        ("network", "scrape_interval", 301, "metricsProvider.networkMetrics.scrapeInterval = 301",
         "observability.prometheus.metrics.network.scrape_interval"),
        ("training", "scrape_interval", 600, "metricsProvider.trainingMetrics.scrapeInterval = 600",
         "observability.prometheus.metrics.training.scrape_interval"),
    ],
)
def test_addon_config_a_value_the_schema_forbids_fails_naming_its_path(
    family: str, field: str, value: int, path: str, key: str
) -> None:
    data = config_data()
    data["observability"] = {"prometheus": {"metrics": {family: {field: value}}}}
    eks, _ = _eks_with_schema(TEST_SCHEMA)
    [check] = _addon_config(data, eks)
    assert check.verdict == "fail"
    assert check.reason == (f"{OBSERVABILITY_ADDON} v1.0.3-eksbuild.1: {path}: {value} is greater than the maximum "
                            f"of 300 (config: {key})")


def test_addon_config_a_level_outside_the_enum_fails() -> None:
    schema = json.loads(json.dumps(TEST_SCHEMA))
    schema["properties"]["metricsProvider"]["additionalProperties"]["properties"]["level"]["enum"] = ["DISABLED"]
    eks, _ = _eks_with_schema(schema)
    checks = _addon_config(config_data(), eks)
    failed = {c.reason.split(": ", 1)[1].split(" = ")[0] for c in checks if c.verdict == "fail"}
    # Every family whose default level is BASIC (AWS's module defaults) and nothing else.
    assert failed == {f"metricsProvider.{f}.level" for f in
                      ("trainingMetrics", "inferenceMetrics", "customMetrics", "nodeMetrics",
                       "acceleratedComputeMetrics")}
    assert all("'BASIC' is not one of ['DISABLED']" in c.reason for c in checks)


def test_addon_config_an_unknown_key_fails_when_the_schema_allows_no_other() -> None:
    schema = json.loads(json.dumps(TEST_SCHEMA))
    del schema["properties"]["amgWorkspace"]
    eks, _ = _eks_with_schema(schema)
    [check] = _addon_config(config_data(), eks)  # Grafana is on by default: amgWorkspace is sent
    assert check.verdict == "fail"
    assert check.reason == (f"{OBSERVABILITY_ADDON} v1.0.3-eksbuild.1: amgWorkspace: unknown key: the schema "
                            "allows no other key here")


def test_addon_config_a_refused_placeholder_warns_instead_of_failing() -> None:
    schema = json.loads(json.dumps(TEST_SCHEMA))
    schema["properties"]["ampWorkspace"]["properties"]["arn"]["pattern"] = "workspace/ws-[0-9a-f]{8}$"
    eks, _ = _eks_with_schema(schema)
    [check] = _addon_config(config_data(), eks)
    assert check.verdict == "warn"
    assert check.reason.startswith(f"{OBSERVABILITY_ADDON} v1.0.3-eksbuild.1: ampWorkspace.arn = ")
    assert check.reason.endswith("(a placeholder for a value the deploy creates)")


def test_addon_config_sends_no_grafana_workspace_without_grafana() -> None:
    schema = json.loads(json.dumps(TEST_SCHEMA))
    del schema["properties"]["amgWorkspace"]
    data = config_data()
    data["observability"] = {"grafana": {"enabled": False}}
    eks, _ = _eks_with_schema(schema)
    [check] = _addon_config(data, eks)
    assert check.verdict == "pass"


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (None, f"could not check: EKS publishes no configuration schema for {OBSERVABILITY_ADDON} v1.0.3-eksbuild.1"),
        ("{not json", "is unusable: Expecting property name"),
        ({"type": "no-such-type"}, "is unusable: 'no-such-type' is not valid under any of the given schemas"),
    ],
)
def test_addon_config_a_missing_or_broken_schema_warns(schema: object, reason: str) -> None:
    eks, _ = _eks_with_schema(schema)
    [check] = _addon_config(config_data(), eks)
    assert check.verdict == "warn" and reason in check.reason


def test_addon_config_not_offered_fails_and_no_default_warns() -> None:
    eks, _ = _eks_with_schema(TEST_SCHEMA, versions={})
    [check] = _addon_config(config_data(), eks)
    assert (check.verdict, check.reason) == ("fail", f"{OBSERVABILITY_ADDON} is not offered for Kubernetes 1.33")
    eks, _ = _eks_with_schema(TEST_SCHEMA, versions={"v1.0.3-eksbuild.1": False})
    [check] = _addon_config(config_data(), eks)
    assert check.verdict == "warn" and "no version" in check.reason


def test_addon_config_without_prometheus_asks_nothing() -> None:
    data = config_data()
    data["observability"] = {"prometheus": {"enabled": False}, "grafana": {"enabled": False}}
    [check] = pf.check_addon_config(parse_config(data), lambda service: pytest.fail(service))
    assert check.verdict == "pass" and "no add-on" in check.reason


def test_addon_config_placeholders_follow_the_partition() -> None:
    cfg = parse_config(config_data()).model_copy(update={"region": "cn-north-1"})  # AZ IDs would not parse
    values = pf.planned_addon_configurations(cfg)[OBSERVABILITY_ADDON]
    amp = values["ampWorkspace"]
    assert amp["prometheusEndpoint"].startswith("https://aps-workspaces.cn-north-1.amazonaws.com.cn/workspaces/")
    assert amp["arn"].startswith("arn:aws-cn:aps:cn-north-1:")


def _head(monkeypatch: pytest.MonkeyPatch, outcome: int | Exception) -> list[str]:
    urls: list[str] = []

    def head(url: str) -> int:
        urls.append(url)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(pf, "head_status", head)
    return urls


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [(200, "pass"), (302, "pass"), (404, "fail"), (500, "warn"), (pf.URLError("no route"), "warn")],
)
def test_chart_source_verdicts(monkeypatch: pytest.MonkeyPatch, outcome: object, verdict: str) -> None:
    urls = _head(monkeypatch, outcome)  # type: ignore[arg-type]
    cfg = _cfg()
    [check] = pf.check_chart_source(cfg)
    chart = cfg.hyperpod.dependencies_chart
    assert urls == [f"https://github.com/aws/sagemaker-hyperpod-cli/archive/{chart.revision}.tar.gz"]
    assert check.verdict == verdict
    if verdict == "fail":
        assert chart.revision in check.reason


def test_chart_source_not_fetched_for_oci(monkeypatch: pytest.MonkeyPatch) -> None:
    urls = _head(monkeypatch, 404)
    data = config_data()
    data["hyperpod"]["dependencies_chart"] = {"source": "oci", "oci_uri": "oci://example.com/charts/hp",
                                              "version": "1.0.0"}
    [check] = pf.check_chart_source(parse_config(data))
    assert check.verdict == "pass" and "not fetched from GitHub" in check.reason and urls == []


def test_chart_source_the_installer_would_refuse_fails_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config refuses a non-ASCII owner in one line; a config built past that check (a consumer's model copy)
    is still refused by preflight, as the installer refuses it, without a request."""
    urls = _head(monkeypatch, 200)
    data = config_data()
    data["hyperpod"]["dependencies_chart"] = dict(git_repository="https://github.com/ówner/charts",
                                                  source_sha256="0" * 64)
    with pytest.raises(ConfigError, match=r"hyperpod\.dependencies_chart\.git_repository"):
        parse_config(data)
    cfg = parse_config(config_data())
    chart = cfg.hyperpod.dependencies_chart.model_copy(
        update={"git_repository": "https://github.com/ówner/charts", "source_sha256": "0" * 64})
    cfg = cfg.model_copy(update={"hyperpod": cfg.hyperpod.model_copy(update={"dependencies_chart": chart})})
    [check] = pf.check_chart_source(cfg)
    assert check.verdict == "fail" and "must look like https://github.com/<owner>/<repo>" in check.reason
    assert urls == []


@pytest.fixture
def github_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    _head(monkeypatch, 302)


def _stubs(quota: float, instances: list, cdk_out: Path) -> dict:
    """Clients for a whole preflight run; ``cdk_out`` gets a synth of the eks and hyperpod stacks, neither deployed."""
    sq, sq_stub = stubbed("service-quotas")
    sq_stub.add_response(
        "list_service_quotas", {"Quotas": [{"QuotaName": "ml.g5.8xlarge for cluster usage", "Value": quota}]}
    )
    sso, sso_stub = stubbed("sso-admin")
    sso_stub.add_response("list_instances", {"Instances": instances})
    cf, cf_stub = stubbed("cloudformation")
    offer_every_type(cf_stub, parse_config(config_data()))
    _assembly(cdk_out, {"hp-eks": EKS_TEMPLATE, "hp-hyperpod": HP_TEMPLATE})
    for stack in ("hp-eks", "hp-hyperpod"):
        cf_stub.add_client_error("get_template", "ValidationError", f"Stack with id {stack} does not exist")
    eks, eks_stub = _eks_with_schema(TEST_SCHEMA, k8s_status="STANDARD_SUPPORT")
    names_are_free(eks_stub, cf_stub, ["hp-eks", "hp-hyperpod"])
    return {"service-quotas": sq, "sso-admin": sso, "cloudformation": cf, "eks": eks}


@mock_aws
def test_preflight_all_pass_exits_0(
    run, config_file: Path, tmp_path: Path, github_ok: None
) -> None:
    clients = _stubs(10.0, [{"InstanceArn": "arn:aws:sso:::instance/ssoins-1", "Status": "ACTIVE"}], tmp_path)
    code, out, _ = run("preflight", "--config", str(config_file), "--cdk-out", str(tmp_path), clients=clients)
    assert code == 0, out
    assert "0 failed" in out and "FAIL" not in out


@mock_aws
def test_preflight_a_failed_check_exits_1_and_json_parses(
    run, config_file: Path, tmp_path: Path, github_ok: None
) -> None:
    clients = _stubs(1.0, [], tmp_path)
    code, data = run.json(
        "preflight", "--config", str(config_file), "--cdk-out", str(tmp_path), clients=clients
    )
    assert code == 1 and data["ok"] is False
    verdicts = {c["name"]: c["verdict"] for c in data["checks"]}
    assert verdicts == {
        "az-ids": "pass",
        "offered ml.g5.8xlarge usw2-az2": "pass",
        "quota ml.g5.8xlarge": "fail",
        "subnet-ips": "pass",
        "admin-access": "pass",
        "pod-slots workers ml.g5.8xlarge": "pass",
        "identity-center": "fail",
        "leftovers": "pass",
        "k8s-version": "pass",
        "addon-versions": "pass",
        "addon-config": "pass",
        "resource-types region": "pass",
        "resource-types observability.container_insights": "pass",
        "resource-types observability.prometheus.enabled": "pass",
        "resource-types observability.grafana.enabled": "pass",
        "resource-types observability.alerts.enabled": "pass",
        "resource-types observability.dashboard": "pass",
        "chart-source": "pass",
        "device-plugins": "pass",
        "no-replace": "pass",
        "names": "pass",
    }


@mock_aws
def test_preflight_access_denied_on_one_api_is_a_warning(
    run, config_file: Path, tmp_path: Path, github_ok: None
) -> None:
    clients = _stubs(10.0, [{"InstanceArn": "arn:aws:sso:::instance/ssoins-1"}], tmp_path)
    sq, stub = stubbed("service-quotas")
    stub.add_client_error(
        "list_service_quotas", "AccessDeniedException", "no servicequotas:ListServiceQuotas"
    )
    clients["service-quotas"] = sq
    code, data = run.json(
        "preflight", "--config", str(config_file), "--cdk-out", str(tmp_path), clients=clients
    )
    assert code == 0
    [quota] = [c for c in data["checks"] if c["name"] == "quotas"]
    assert quota["verdict"] == "warn" and "could not check" in quota["reason"]


@mock_aws
def test_preflight_an_eks_error_on_the_schema_is_a_warning(
    run, config_file: Path, tmp_path: Path, github_ok: None
) -> None:
    clients = _stubs(10.0, [{"InstanceArn": "arn:aws:sso:::instance/ssoins-1"}], tmp_path)
    eks, stub = stubbed("eks")
    _cluster_version(stub, "STANDARD_SUPPORT")
    stub.add_response("describe_addon_versions", _default_page({"v1.0.3-eksbuild.1": True}))
    stub.add_client_error("describe_addon_configuration", "ResourceNotFoundException",
                          "No addon: amazon-sagemaker-hyperpod-observability found in version")
    stub.add_client_error("describe_cluster", "ResourceNotFoundException", "No cluster found for name: hp-eks.", 404)
    clients["eks"] = eks
    code, data = run.json(
        "preflight", "--config", str(config_file), "--cdk-out", str(tmp_path), clients=clients
    )
    assert code == 0
    [check] = [c for c in data["checks"] if c["name"] == "addon-config"]
    assert check["verdict"] == "warn"
    assert check["reason"] == ("could not check: not found: No addon: amazon-sagemaker-hyperpod-observability found "
                               "in version (DescribeAddonConfiguration)")


def test_addons_turned_on_must_be_offered_for_the_kubernetes_version() -> None:
    data = config_data()
    data["addons"] = {"training_operator": {"enabled": True},
                      "s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::data"]}}
    cfg = parse_config(data)
    k8s = cfg.eks.version
    eks, stub = stubbed("eks")
    # cert-manager comes at the version AWS's module pins (infra/facts/addons.py): that version must be offered.
    for name, versions in (("cert-manager", ["v1.18.2-eksbuild.1"]),
                           ("amazon-sagemaker-hyperpod-training-operator", ["v1.2.1-eksbuild.1"]),
                           ("aws-mountpoint-s3-csi-driver", [])):
        page = _addon_page(name, versions, k8s) if versions else {"addons": []}
        stub.add_response("describe_addon_versions", page, {"addonName": name, "kubernetesVersion": k8s})
    [check] = pf.check_addon_versions(cfg, Clients(REGION, preset={"eks": eks}))
    assert check.verdict == "fail"
    assert check.reason == (f"not offered for Kubernetes {k8s}: cert-manager v1.18.2-eksbuild.2, "
                            "aws-mountpoint-s3-csi-driver (any version)")
    stub.assert_no_pending_responses()

    eks, stub = stubbed("eks")
    for name in cfg.addons.eks_addons():
        stub.add_response("describe_addon_versions",
                          _addon_page(name, ["v1.0.0-eksbuild.1", "v1.18.2-eksbuild.2"], k8s),
                          {"addonName": name, "kubernetesVersion": k8s})
    [check] = pf.check_addon_versions(cfg, Clients(REGION, preset={"eks": eks}))
    assert check.verdict == "pass"
    assert check.reason.endswith("cert-manager v1.18.2-eksbuild.2, amazon-sagemaker-hyperpod-training-operator "
                                 "(EKS default), aws-mountpoint-s3-csi-driver (EKS default)")


# --- flexible instance groups ----------------------------------------------------------------------

# A flexible group as DescribeCluster reports it (botocore's ClusterInstanceGroupDetails): no InstanceType, the
# requested types in InstanceRequirements and the nodes per type in InstanceTypeDetails.
FLEXIBLE_GROUP = {
    "InstanceGroupName": "workers",
    "CurrentCount": 3,
    "TargetCount": 3,
    "InstanceRequirements": {"CurrentInstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"],
                             "DesiredInstanceTypes": ["ml.g5.8xlarge", "ml.g5.12xlarge"]},
    "InstanceTypeDetails": [{"InstanceType": "ml.g5.8xlarge", "CurrentCount": 2, "ThreadsPerCore": 1},
                            {"InstanceType": "ml.g5.12xlarge", "CurrentCount": 1, "ThreadsPerCore": 1}],
    "OnStartDeepHealthChecks": ["InstanceStress"],
    "ExecutionRole": "arn:aws:iam::123456789012:role/exec",
    "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/scripts", "OnCreate": "on_create.sh"},
}


def _described(*groups: dict) -> dict:
    """DescribeCluster's response through a Stubber, which checks it against botocore's model."""
    sm, stub = stubbed("sagemaker")
    response = {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/abc123", "ClusterName": CLUSTER,
                "ClusterStatus": "InService", "InstanceGroups": list(groups)}
    stub.add_response("describe_cluster", response, {"ClusterName": CLUSTER})
    return sm.describe_cluster(ClusterName=CLUSTER)


def test_drift_of_a_flexible_group_compares_its_types_in_order() -> None:
    from hpctl.drift import REFUSED, UPDATE, compare

    deployed = _described(FLEXIBLE_GROUP)
    flexible = config_data()
    flexible["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.12xlarge"]
    assert compare(deployed, parse_config(flexible)) == []
    reordered = config_data()
    reordered["hyperpod"]["instance_groups"][0].update(instance_type="ml.g5.12xlarge",
                                                       fallback_instance_types=["ml.g5.8xlarge"])
    # A group flexible before and after may have its list edited (AWS's update-cluster page): updates.
    changes = {c.field: (c.deployed, c.config, c.effect) for c in compare(deployed, parse_config(reordered))}
    assert changes == {"instance_type": ("ml.g5.8xlarge", "ml.g5.12xlarge", UPDATE),
                       "fallback_instance_types": (["ml.g5.12xlarge"], ["ml.g5.8xlarge"], UPDATE)}
    # The config drops the fallback: a single-type group again, a switch HyperPod does not make.
    [change] = compare(deployed, parse_config(config_data()))
    assert (change.field, change.deployed, change.config, change.effect) == \
        ("fallback_instance_types", ["ml.g5.12xlarge"], [], REFUSED)


def test_drift_refuses_dropping_a_type_that_still_runs_nodes() -> None:
    from hpctl.drift import BUSY, UPDATE, compare, removed_types

    deployed = _described(FLEXIBLE_GROUP)  # ml.g5.8xlarge first, ml.g5.12xlarge as fallback
    narrowed = config_data()
    narrowed["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.16xlarge"]
    cfg = parse_config(narrowed)
    assert removed_types(deployed, cfg) == {"workers": {"ml.g5.12xlarge"}}
    assert removed_types(deployed, parse_config(config_data())) == {}, "not flexible after: no list edit"
    assert removed_types(None, cfg) == {}
    idle = compare(deployed, cfg, {"workers": {"ml.g5.8xlarge"}})
    assert [(c.field, c.effect) for c in idle] == [("fallback_instance_types", UPDATE)]
    busy = compare(deployed, cfg, {"workers": {"ml.g5.8xlarge", "ml.g5.12xlarge"}})
    assert [(c.field, c.deployed, c.effect) for c in busy] == [
        ("fallback_instance_types", ["ml.g5.12xlarge"], UPDATE),
        ("removed types with nodes", ["ml.g5.12xlarge"], BUSY)]


def test_drift_command_asks_the_nodes_of_a_group_whose_list_drops_a_type(run, write_config) -> None:
    """The command lists only the nodes of the groups removed_types names, filtered by the group's name."""
    from hpctl.cluster import PAGE_SIZE

    sm, stub = stubbed("sagemaker")
    described = {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/abc123", "ClusterName": CLUSTER,
                 "ClusterStatus": "InService", "InstanceGroups": [FLEXIBLE_GROUP]}
    stub.add_response("describe_cluster", described, {"ClusterName": CLUSTER})
    node = {"InstanceGroupName": "workers", "InstanceId": "i-0123456789abcdef0", "InstanceType": "ml.g5.12xlarge",
            "LaunchTime": 0, "InstanceStatus": {"Status": "Running"}}
    other = {**node, "InstanceGroupName": "workers-b", "InstanceId": "i-0fedcba9876543210",
             "InstanceType": "ml.g5.8xlarge"}
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [node, other]},
                      {"ClusterName": CLUSTER, "InstanceGroupNameContains": "workers", "MaxResults": PAGE_SIZE})
    narrowed = config_data()
    narrowed["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.16xlarge"]
    code, out, err = run("drift", "--config", str(write_config(narrowed)), clients={"sagemaker": sm})
    stub.assert_no_pending_responses()
    assert code == 1
    assert "removed types with nodes" in out and "HYPERPOD REFUSES: nodes run on it" in out
    assert "keep the types until their nodes are gone" in err and "Add a new instance group" not in err


def test_drift_turning_a_group_flexible_is_refused_and_a_removed_one_names_its_types() -> None:
    from hpctl.drift import REFUSED, REMOVE_REFUSED, compare

    single = {k: v for k, v in FLEXIBLE_GROUP.items() if k not in ("InstanceRequirements", "InstanceTypeDetails")}
    deployed = _described({**single, "InstanceType": "ml.g5.8xlarge"})
    flexible = config_data()
    flexible["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.12xlarge"]
    [change] = compare(deployed, parse_config(flexible))
    assert (change.field, change.deployed, change.config, change.effect) == \
        ("fallback_instance_types", [], ["ml.g5.12xlarge"], REFUSED)
    renamed = config_data()
    renamed["hyperpod"]["instance_groups"][0]["name"] = "others"
    removed = [c for c in compare(_described(FLEXIBLE_GROUP), parse_config(renamed)) if c.effect == REMOVE_REFUSED]
    assert [(c.group, c.deployed) for c in removed] == [("workers", "3 x ml.g5.8xlarge or ml.g5.12xlarge")]


def test_quota_of_a_fallback_type_warns_when_it_cannot_cover_the_group() -> None:
    data = config_data()
    data["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.12xlarge"]
    sq, stub = stubbed("service-quotas")
    stub.add_response("list_service_quotas", {"Quotas": [
        {"QuotaName": "ml.g5.8xlarge for cluster usage", "Value": 3.0},
        {"QuotaName": "ml.g5.12xlarge for cluster usage", "Value": 1.0},
    ]})
    checks = {c.name: c for c in pf.check_quotas(parse_config(data), Clients(REGION, preset={"service-quotas": sq}))}
    assert checks["quota ml.g5.8xlarge"].verdict == "pass"
    fallback = checks["quota ml.g5.12xlarge"]
    assert fallback.verdict == "warn" and "asks for 0 and, as a fallback type, up to 3" in fallback.reason


@mock_aws
def test_subnet_ips_of_a_flexible_group_are_planned_at_its_hungriest_type() -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZoneId="usw2-az2")["Subnet"]
    # ml.g5.8xlarge plans 30 IPs, ml.p5.48xlarge 81: 3 nodes that may all fall back to p5 need 243 of the 251.
    cfg = _byo_cfg(subnet["SubnetId"], vpc, 3, fallback_instance_types=["ml.p5.48xlarge"])
    [check] = pf.check_subnet_ips(cfg, Clients(REGION), None)
    assert check.verdict == "warn" and "the 243 needed" in check.reason


# --- drift: the orchestrating EKS cluster's Kubernetes version --------------------------------------


def test_drift_compares_the_eks_version_and_names_a_step_eks_refuses() -> None:
    """The config's eks.version against what the EKS cluster runs (it may have moved outside CloudFormation, by
    EKS at the end of extended support): one minor version is an update, more is refused (infra.guards.create_only)."""
    from hpctl.drift import EKS_REFUSES, UPDATE, compare, refused

    deployed = _described(FLEXIBLE_GROUP)
    data = config_data()
    data["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.12xlarge"]
    cfg = parse_config(data)  # eks.version 1.33
    assert compare(deployed, cfg, eks_version=None) == [] == compare(deployed, cfg, eks_version="1.33")
    step = compare(deployed, cfg, eks_version="1.32")
    assert [(c.field, c.deployed, c.config, c.effect) for c in step] == [("eks.version", "1.32", "1.33", UPDATE)]
    assert not refused(step)
    jump = compare(deployed, cfg, eks_version="1.31")
    assert [(c.field, c.effect) for c in jump] == [("eks.version", EKS_REFUSES)] and refused(jump)


EKS_ARN = f"arn:aws:eks:{REGION}:123456789012:cluster/hp-eks"


def _drift_with_eks(run, write_config, eks_answer) -> tuple[int, dict, str]:
    sm, sm_stub = stubbed("sagemaker")
    described = {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/abc123", "ClusterName": CLUSTER,
                 "ClusterStatus": "InService", "InstanceGroups": [FLEXIBLE_GROUP],
                 "Orchestrator": {"Eks": {"ClusterArn": EKS_ARN}}}
    for _ in range(2):
        sm_stub.add_response("describe_cluster", described, {"ClusterName": CLUSTER})
    eks, eks_stub = stubbed("eks")
    for _ in range(2):
        eks_answer(eks_stub)
    data = config_data()
    data["hyperpod"]["instance_groups"][0]["fallback_instance_types"] = ["ml.g5.12xlarge"]
    config = str(write_config(data))
    code, out, err = run("drift", "--config", config, clients={"sagemaker": sm, "eks": eks})
    code_json, result = run.json("drift", "--config", config, clients={"sagemaker": sm, "eks": eks})
    sm_stub.assert_no_pending_responses()
    eks_stub.assert_no_pending_responses()
    assert code == code_json
    return code, result, out + err


def test_drift_command_reads_the_eks_clusters_version(run, write_config) -> None:
    """DescribeCluster of the EKS cluster named in the HyperPod cluster's Orchestrator (botocore's eks model:
    DescribeClusterResponse.cluster.version)."""
    def answer(stub):
        stub.add_response("describe_cluster", {"cluster": {"name": "hp-eks", "version": "1.31"}}, {"name": "hp-eks"})

    code, result, text = _drift_with_eks(run, write_config, answer)
    assert code == 1 and result["refused"] is True
    assert result["changes"] == [{"group": "-", "field": "eks.version", "deployed": "1.31", "config": "1.33",
                                  "effect": "EKS REFUSES: more than one minor version", "note": ""}]
    assert "deploy 1.32 first, then 1.33" in text


def test_drift_goes_on_when_the_eks_cluster_cannot_be_read(run, write_config) -> None:
    def answer(stub):
        stub.add_client_error("describe_cluster", "AccessDeniedException", "not allowed", 403,
                              expected_params={"name": "hp-eks"})

    code, result, text = _drift_with_eks(run, write_config, answer)
    assert code == 0 and result["changes"] == []
    assert "the EKS cluster's version is not compared (AccessDeniedException)" in text


def test_preflight_prints_the_pod_budget_of_each_group() -> None:
    data = default_config_data()
    group = data["hyperpod"]["instance_groups"][0]
    group["fallback_instance_types"] = ["ml.g5.xlarge"]
    checks = {c.name: c for c in pf.check_pod_slots(parse_config(data))}
    small = checks["pod-slots gpu-workers ml.g5.xlarge"]
    # ml.g5.xlarge: 14 pods (the figure of awslabs/ai-on-sagemaker-hyperpod#142); the default config puts the core
    # add-ons, Container Insights' three and the chart's GPU agent and device plugin on it, not the EFA plugin.
    assert small.verdict == "pass" and "8 of 14 pod slots per node taken" in small.reason and "6 left" in small.reason
    assert "aws-efa-k8s-device-plugin" in checks["pod-slots gpu-workers ml.g5.8xlarge"].reason


def _groups_cfg(*types: str, values: dict | None = None):
    data = config_data()
    group = data["hyperpod"]["instance_groups"][0]
    data["hyperpod"]["instance_groups"] = [{**group, "name": f"g{i}", "instance_type": t} for i, t in enumerate(types)]
    if values is not None:
        data["hyperpod"]["dependencies_chart"] = {"values": values}
    return parse_config(data)


def test_device_plugins_maps_each_group_to_the_plugins_that_run_there() -> None:
    checks = pf.check_device_plugins(_groups_cfg("ml.g5.xlarge", "ml.p5.48xlarge", "ml.m5.large"))
    assert [(c.verdict, c.reason) for c in checks] == [
        ("pass", "group g0 (ml.g5.xlarge): nvidia-device-plugin"),
        ("pass", "group g1 (ml.p5.48xlarge): nvidia-device-plugin, aws-efa-k8s-device-plugin"),
        ("pass", "group g2 (ml.m5.large): no device plugin"),
    ]


def test_device_plugins_fails_a_neuron_type_the_pinned_chart_does_not_serve() -> None:
    # The pinned chart's Neuron template lists no ml.trn2.3xlarge (infra/config/device_plugins.py).
    [check] = pf.check_device_plugins(_groups_cfg("ml.trn2.3xlarge"))
    assert check.verdict == "fail"
    assert "ml.trn2.3xlarge has neuron devices but the neuron-device-plugin will not run there" in check.reason


def test_device_plugins_warns_on_an_efa_count_the_catalog_lacks_and_follows_the_configs_values() -> None:
    [check] = pf.check_device_plugins(_groups_cfg("ml.c6i.32xlarge"))
    assert check.verdict == "warn" and "no EFA count for ml.c6i.32xlarge" in check.reason
    own = {"aws-efa-k8s-device-plugin": {"devicePlugin": {"enabled": True},
                                         "supportedInstanceLabels": {"values": ["ml.c6i.32xlarge"]}}}
    [check] = pf.check_device_plugins(_groups_cfg("ml.c6i.32xlarge", values=own))
    assert (check.verdict, check.reason) == ("pass", "group g0 (ml.c6i.32xlarge): aws-efa-k8s-device-plugin")


def test_the_inference_operator_and_its_cert_manager_must_be_offered_at_their_versions() -> None:
    """Inference alone installs cert-manager at the pinned version too, and a pinned operator version is checked
    as pinned (before, both were asked for "any version")."""
    data = config_data()
    data["addons"] = {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::data"]},
                      "inference_operator": {"enabled": True, "addon_version": "v1.1.0-eksbuild.1"}}
    cfg = parse_config(data)
    k8s = cfg.eks.version
    eks, stub = stubbed("eks")
    offered = {"cert-manager": ["v1.18.2-eksbuild.1"], "amazon-sagemaker-hyperpod-inference": ["v1.0.0-eksbuild.1"],
               "aws-mountpoint-s3-csi-driver": ["v2.0.0-eksbuild.1"], "metrics-server": ["v0.8.0-eksbuild.1"]}
    for name in ("amazon-sagemaker-hyperpod-inference", "cert-manager", "aws-mountpoint-s3-csi-driver",
                 "metrics-server"):
        stub.add_response("describe_addon_versions", _addon_page(name, offered[name], k8s),
                          {"addonName": name, "kubernetesVersion": k8s})
    [check] = pf.check_addon_versions(cfg, Clients(REGION, preset={"eks": eks}))
    assert check.verdict == "fail"
    assert check.reason == (f"not offered for Kubernetes {k8s}: amazon-sagemaker-hyperpod-inference "
                            "v1.1.0-eksbuild.1, cert-manager v1.18.2-eksbuild.2")
    stub.assert_no_pending_responses()
