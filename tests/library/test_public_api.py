"""The library's contract for other teams: exports, bring-your-own rules, cross-cutting options, packaging."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest
import yaml
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

import infra
from hpctl import target
from infra.config import parse_config
from infra.errors import ConfigError
from stacks.app_builder import build_app
from tests.conftest import ROOT, cdk_json_context, default_config_data, mutate, new_app, untagged
from tests.template_graph import waits_for


def test_every_exported_name_resolves():
    for name in infra.__all__:
        assert getattr(infra, name) is not None, name
    with pytest.raises(AttributeError):
        infra.NoSuchConstruct  # noqa: B018


def test_importing_the_config_does_not_start_the_cdk_runtime():
    code = "import sys, infra, infra.config; print('aws_cdk' in sys.modules, 'jsii' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False False"


def _stack():
    app = new_app(context=cdk_json_context())
    return Stack(app, "Consumer")


def _vpc(stack):
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0",
                                      availability_zones=["us-west-2a", "us-west-2b"],
                                      private_subnet_ids=["subnet-01111111111111111", "subnet-02222222222222222"])
    return vpc, {"usw2-az2": ec2.Subnet.from_subnet_id(stack, "Gpu", "subnet-03333333333333333")}


CONFIG = parse_config(default_config_data(), "default")


def test_the_network_takes_exactly_one_way_to_its_vpc():
    stack = _stack()
    vpc, subnets = _vpc(stack)
    with pytest.raises(ConfigError, match="give exactly one of vpc_cidr"):
        infra.HyperPodNetwork(stack, "Net", vpc_cidr="10.192.0.0/16", vpc=vpc,
                              control_plane_subnets=vpc.private_subnets, hyperpod_subnets=subnets)
    with pytest.raises(ConfigError, match="give exactly one of vpc_cidr"):
        infra.HyperPodNetwork(stack, "Net2")
    with pytest.raises(ConfigError, match="at least 2 control_plane_subnets"):
        infra.HyperPodNetwork(stack, "Net3", vpc=vpc, hyperpod_subnets=subnets)
    with pytest.raises(ConfigError, match="interface_endpoints: not with an existing vpc construct"):
        infra.HyperPodNetwork(stack, "Net4", vpc=vpc, control_plane_subnets=vpc.private_subnets,
                              hyperpod_subnets=subnets, interface_endpoints=True)


def test_existing_subnets_must_cover_every_instance_group():
    stack = _stack()
    vpc, _ = _vpc(stack)
    other = {"usw2-az3": ec2.Subnet.from_subnet_id(stack, "Other", "subnet-04444444444444444")}
    with pytest.raises(ConfigError, match=r"no HyperPod subnet for the instance groups' AZ IDs \['usw2-az2'\]"):
        infra.HyperPodOnEks(stack, "HP", config=CONFIG, vpc=vpc, control_plane_subnets=vpc.private_subnets,
                            hyperpod_subnets=other)


def test_imported_eks_cluster_rules():
    stack = _stack()
    vpc, subnets = _vpc(stack)
    cluster = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="shared")
    common = {"config": CONFIG, "vpc": vpc, "control_plane_subnets": vpc.private_subnets,
              "hyperpod_subnets": subnets, "eks_cluster": cluster}
    with pytest.raises(ConfigError, match="needs eks_cluster_security_group"):
        infra.HyperPodOnEks(stack, "A", **common)
    sg = ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-0123456789abcdef0")
    with pytest.raises(ConfigError, match="secrets_key applies to a cluster created here"):
        infra.HyperPodOnEks(stack, "B", **common, eks_cluster_security_group=sg,
                            secrets_key=kms.Key.from_key_arn(stack, "K", "arn:aws:kms:us-west-2:111122223333:key/x"))


def test_existing_execution_role_and_a_boundary_in_config_conflict():
    stack = _stack()
    data = default_config_data()
    data["hyperpod"]["permissions_boundary_arn"] = "arn:aws:iam::111122223333:policy/Boundary"
    role = iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::111122223333:role/Existing")
    with pytest.raises(ConfigError, match="not to execution_role"):
        infra.HyperPodOnEks(stack, "HP", config=parse_config(data, "x"), execution_role=role)


def test_the_configs_boundary_tags_and_storage_reach_everything_it_builds(tmp_path):
    """Cross-cutting settings come from the config, as in the app's stacks; storage is built here too."""
    app = new_app(context=cdk_json_context(), outdir=str(tmp_path))
    stack = Stack(app, "Consumer")
    role = iam.Role.from_role_arn(stack, "Existing", "arn:aws:iam::111122223333:role/NodeRole")
    # destroy_data_on_delete: the buckets' auto-delete provider, which aws-cdk-lib puts at stack level as plain
    # CfnResources (a role and a function that Tags.of cannot reach), is built for them.
    data = mutate({"permissions_boundary_arn": "arn:aws:iam::111122223333:policy/Boundary", "tags": {"team": "ml"},
                   "storage": {"fsx_lustre": {"enabled": True}}, "destroy_data_on_delete": True})
    built = infra.HyperPodOnEks(stack, "HP", config=parse_config(data, "x"), execution_role=role)
    assert built.execution_role.role is role and built.execution_role.policy is None
    assert built.storage is not None and built.eks_control_plane is not None
    template = app.synth().get_stack_by_name("Consumer").template
    resources = template["Resources"].values()
    roles = [r for r in resources if r["Type"] == "AWS::IAM::Role"]
    assert roles and all(
        r["Properties"].get("PermissionsBoundary") == "arn:aws:iam::111122223333:policy/Boundary" for r in roles
    )
    assert any(k.startswith("CustomS3AutoDeleteObjectsCustomResourceProviderRole") for k in template["Resources"])
    (cluster,) = [r for r in resources if r["Type"] == "AWS::SageMaker::Cluster"]
    assert {"Key": "team", "Value": "ml"} in cluster["Properties"]["Tags"]
    assert untagged({"Consumer": template}, "team", "ml") == []
    assert untagged({"Consumer": template}, "project", "hyperpod-dev") == []
    assert "NodeRole" in str(cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"])
    (file_system,) = [r for r in resources if r["Type"] == "AWS::FSx::FileSystem"]
    assert {"Key": "team", "Value": "ml"} in file_system["Properties"]["Tags"]
    # The CSI driver's add-on waits for a HyperPod node, as the storage stack does in the app (after the HyperPod
    # stack, which ends with that wait).
    (addon_id,) = [k for k, r in template["Resources"].items()
                   if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "aws-fsx-csi-driver"]
    cluster_id = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::Cluster")
    (nodes_ready_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "Custom::HyperPodReadiness"
                         and r["Properties"]["What"] == "HyperPod nodes"]
    assert nodes_ready_id in template["Resources"][addon_id].get("DependsOn", [])
    assert waits_for(template["Resources"], addon_id, cluster_id)


def test_wheel_ships_the_runtime_files(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("hyperpod_eks_cdk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        script = archive.getinfo("infra/lifecycle_scripts/on_create.sh")
        assert (script.external_attr >> 16) & 0o111, "on_create.sh lost its executable bit"
        packaged = archive.read("infra/lifecycle_scripts/on_create.sh")
        assert packaged == (ROOT / "lifecycle_scripts/on_create.sh").read_bytes()
    for name in ("infra/runtime/chart_installer/handler/__init__.py",
                 "infra/runtime/chart_installer/handler/protocol.py", "infra/runtime/grafana_content/handler.py",
                 "infra/runtime/common/deadline.py", "infra/runtime/common/errors.py",
                 "infra/constructs/hyperpod/autoscaling_chart/templates/node-pools.yaml",
                 "infra/py.typed", "infra/config/__init__.py", "hpctl/cli.py", "stacks/app_builder.py",
                 "infra/facts/region_types.json"):
        assert name in names, name
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


def test_an_existing_vpc_and_a_vpc_id_in_config_conflict():
    stack = _stack()
    vpc, subnets = _vpc(stack)
    data = default_config_data()
    data["network"] = {"existing_vpc_id": "vpc-0123456789abcdef0", "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
                       "control_plane_subnet_ids": ["subnet-01111111111111111", "subnet-02222222222222222"],
                       "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": "subnet-03333333333333333"}]}
    with pytest.raises(ConfigError, match="network.existing_vpc_id: give either"):
        infra.HyperPodOnEks(stack, "HP", config=parse_config(data, "x"), vpc=vpc,
                            control_plane_subnets=vpc.private_subnets, hyperpod_subnets=subnets)


def test_the_boundary_and_tags_leave_the_consumers_own_stack_level_providers_alone(tmp_path):
    """aws-cdk-lib's providers of the consumer's own VPC (restrictDefaultSecurityGroup) and auto-delete bucket sit
    at the stack's root too; with destroy_data_on_delete off this composition asks for none, so it changes none."""
    from aws_cdk import RemovalPolicy
    from aws_cdk import aws_s3 as s3

    app = new_app(context=cdk_json_context(), outdir=str(tmp_path))
    stack = Stack(app, "Consumer")
    ec2.Vpc(stack, "TeamVpc", max_azs=2)
    s3.Bucket(stack, "TeamBucket", auto_delete_objects=True, removal_policy=RemovalPolicy.DESTROY)
    data = mutate({"permissions_boundary_arn": "arn:aws:iam::111122223333:policy/Boundary", "tags": {"team": "ml"}})
    infra.HyperPodOnEks(stack, "HP", config=parse_config(data, "x"))
    resources = app.synth().get_stack_by_name("Consumer").template["Resources"]
    providers = {k: r["Properties"] for k, r in resources.items()
                 if k.startswith(("CustomVpcRestrictDefaultSGCustomResourceProvider",
                                  "CustomS3AutoDeleteObjectsCustomResourceProvider"))}
    assert len(providers) == 4  # a role and a function each
    assert all("PermissionsBoundary" not in p and "Tags" not in p for p in providers.values()), providers
    # while every role this composition builds has the boundary
    ours = [r for k, r in resources.items() if r["Type"] == "AWS::IAM::Role" and k.startswith("HP")]
    assert ours and all("PermissionsBoundary" in r["Properties"] for r in ours)


def test_eks_control_plane_takes_typed_props_and_l2_overrides_but_keeps_its_invariants():
    stack = _stack()
    vpc, _ = _vpc(stack)
    sg = ec2.SecurityGroup.from_security_group_id(stack, "Sg", "sg-0123456789abcdef0")
    common = {"eks_cluster_name": "team-eks", "vpc": vpc, "subnets": vpc.private_subnets, "security_group": sg,
              "kubernetes_version": "1.33"}
    with pytest.raises(ConfigError, match=r"eks_cluster_overrides.default_capacity: HyperPod brings the workers"):
        infra.EksControlPlane(stack, "Refused", **common, eks_cluster_overrides={"default_capacity": 2})
    plane = infra.EksControlPlane(
        stack, "ControlPlane", **common, admin_principal_arns=["arn:aws:iam::111122223333:role/Admin"],
        namespace_admins={"arn:aws:iam::111122223333:role/Scientist": ["training"]},
        eks_cluster_overrides={"tags": {"team": "ml"}},
    )
    (props,) = [r["Properties"] for r in Template.from_stack(stack).find_resources("AWS::EKS::Cluster").values()]
    assert props["Name"] == "team-eks" and props["Version"] == "1.33"
    assert {"Key": "team", "Value": "ml"} in props["Tags"]
    assert props["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert props["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert props["BootstrapSelfManagedAddons"] is False
    assert len(plane.admin_access_entries) == 1 and len(plane.namespace_access_entries) == 1


def test_hyperpod_cluster_takes_instance_groups_as_validated_structs():
    stack = _stack()
    group = infra.InstanceGroupConfig(name="gpu", instance_type="ml.g5.12xlarge", instance_count=2, az_id="usw2-az2")
    common = {"hyperpod_cluster_name": "team-ml", "eks_cluster_arn": "arn:aws:eks:us-west-2:111122223333:cluster/e",
              "execution_role_arn": "arn:aws:iam::111122223333:role/Exec",
              "security_group_ids": ["sg-0123456789abcdef0"], "lifecycle_s3_uri": "s3://sagemaker-x/lifecycle/"}
    subnet, other = {"usw2-az2": "subnet-03333333333333333"}, {"usw2-az3": "subnet-04444444444444444"}
    with pytest.raises(ConfigError, match=r"no HyperPod subnet for the instance groups' AZ IDs \['usw2-az2'\]"):
        infra.HyperPodCluster(stack, "Missing", instance_groups=[group], subnet_ids_by_az=other, **common)
    with pytest.raises(ConfigError, match="instance_groups: a HyperPod cluster needs at least one instance group"):
        infra.HyperPodCluster(stack, "Empty", instance_groups=[], subnet_ids_by_az=subnet, **common)
    infra.HyperPodCluster(stack, "HyperPod", instance_groups=[group], node_recovery="None", subnet_ids_by_az=subnet,
                          **common)
    (resource,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Cluster").values()
    assert resource["Properties"]["NodeRecovery"] == "None"
    (only,) = resource["Properties"]["InstanceGroups"]
    assert only["InstanceGroupName"] == "gpu" and only["InstanceCount"] == 2 and only["ThreadsPerCore"] == 1
    assert only["LifeCycleConfig"] == {"SourceS3Uri": "s3://sagemaker-x/lifecycle/", "OnCreate": "on_create.sh"}


def test_a_config_without_network_serves_only_hyperpod_on_eks_given_a_vpc(tmp_path):
    data = default_config_data()
    del data["network"]
    config = parse_config(data, "team.yaml")
    assert config.network is None
    with pytest.raises(ConfigError, match=r"network: required by the app's network stack"):
        build_app(new_app(context=cdk_json_context()), config)
    with pytest.raises(ConfigError, match=r"network: required by a VPC created or adopted by ID"):
        infra.HyperPodOnEks(_stack(), "HP", config=config)
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"network: required by hpctl"):
        target._load(str(path))


def test_observability_refuses_grafana_without_prometheus():
    with pytest.raises(ConfigError, match="grafana: Grafana's dashboards read the Prometheus workspace"):
        infra.HyperPodObservability(
            _stack(), "Observability", name="team", eks_cluster_name="eks",
            eks_cluster_arn="arn:aws:eks:us-west-2:111122223333:cluster/eks", hyperpod_cluster_name="team",
            grafana=infra.config.GrafanaConfig())
