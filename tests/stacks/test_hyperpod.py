"""HyperPodStack intent: the cluster, its groups, lifecycle bucket, execution role and dependencies chart."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest
from aws_cdk import Environment, Stack
from aws_cdk.assertions import Match, Template

from infra.config.hyperpod import DEPENDENCIES_CHART_SOURCE_SHA256
from infra.constructs.hyperpod.execution_role import POLICY, HyperPodExecutionRole
from infra.facts.intrinsics import render
from infra.guards.create_only import HYPERPOD_GROUP_CREATE_ONLY, create_only_paths, lookup
from infra.runtime.chart_installer.handler.properties import check_allowed_source
from infra.runtime.common.errors import DeployError
from tests.conftest import ROOT, cdk_json_context, new_app


def _cluster(synth):
    (item,) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").items()
    return item


def _groups(synth):
    return {g["InstanceGroupName"]: g for g in _cluster(synth)[1]["Properties"]["InstanceGroups"]}


def test_cluster_is_orchestrated_by_the_eks_cluster(default_synth):
    props = _cluster(default_synth)[1]["Properties"]
    arn = props["Orchestrator"]["Eks"]["ClusterArn"]
    assert arn["Fn::ImportValue"].startswith("hyperpod-dev-eks:") and "ControlPlaneCluster" in arn["Fn::ImportValue"]
    assert props["ClusterName"] == "hyperpod-dev"
    assert props["NodeRecovery"] == "Automatic"
    assert props["NodeProvisioningMode"] == "Continuous"


def test_vpc_config_uses_the_hyperpod_subnets_and_efa_group(default_synth):
    vpc = _cluster(default_synth)[1]["Properties"]["VpcConfig"]
    (subnet,) = vpc["Subnets"]
    assert "NetworkHyperPodusw2az2" in subnet["Fn::ImportValue"]
    (group,) = vpc["SecurityGroupIds"]
    assert "EfaSecurityGroup" in group["Fn::ImportValue"]


def test_instance_group_carries_every_configured_field(default_synth):
    group = _groups(default_synth)["gpu-workers"]
    assert group["InstanceType"] == "ml.g5.8xlarge"
    assert group["InstanceCount"] == 1
    assert group["ThreadsPerCore"] == 1
    assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    assert group["OnStartDeepHealthChecks"] == ["InstanceStress"]
    assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert group["LifeCycleConfig"]["SourceS3Uri"]["Fn::Join"][1][-1] == "/lifecycle/"
    assert group["ExecutionRole"]["Fn::GetAtt"][0].startswith("ExecutionRole")
    assert "OverrideVpcConfig" not in group  # one HyperPod subnet: the cluster's VpcConfig is enough


def test_groups_spanning_azs_are_pinned_to_their_subnet_with_labels_and_taints(variant_synth):
    groups = _groups(variant_synth)
    gpu, cpu = groups["gpu-workers"], groups["cpu-workers"]
    assert "usw2az2" in json.dumps(gpu["OverrideVpcConfig"]["Subnets"])
    assert "usw2az3" in json.dumps(cpu["OverrideVpcConfig"]["Subnets"])
    assert gpu["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert gpu["KubernetesConfig"] == {
        "Labels": {"team": "research"},
        "Taints": [{"Key": "nvidia.com/gpu", "Value": "present", "Effect": "NoSchedule"}],
    }
    assert "KubernetesConfig" not in cpu and "OnStartDeepHealthChecks" not in cpu
    assert len(_cluster(variant_synth)[1]["Properties"]["VpcConfig"]["Subnets"]) == 2


def test_cluster_waits_for_the_chart_and_the_scripts(default_synth):
    logical_id, cluster = _cluster(default_synth)
    resources = default_synth.template("hyperpod")["Resources"]
    depends = cluster["DependsOn"]
    assert any(resources[d]["Type"] == "Custom::HyperPodHelmRelease" for d in depends)
    assert any(resources[d]["Type"] == "Custom::CDKBucketDeployment" for d in depends)


@pytest.mark.parametrize("variant", ["default_synth", "variant_synth", "group_features_synth", "governance_synth",
                                     "rolling_update_synth", "addons_synth", "autoscaling_synth",
                                     "all_features_synth"])
def test_cluster_properties_satisfy_the_create_cluster_api(request, variant):
    """Validate against botocore's CreateCluster model: patterns, ranges and enums of every field we set."""
    import botocore.session

    synth = request.getfixturevalue(variant)
    model = botocore.session.get_session().get_service_model("sagemaker")
    create = model.operation_model("CreateCluster").input_shape
    group_shape = create.members["InstanceGroups"].member
    props = _cluster(synth)[1]["Properties"]
    name_shape = create.members["ClusterName"]
    assert re.fullmatch(name_shape.metadata["pattern"], props["ClusterName"])
    assert props["NodeRecovery"] in create.members["NodeRecovery"].enum
    assert props["NodeProvisioningMode"] in create.members["NodeProvisioningMode"].enum
    if "TieredStorageConfig" in props:
        tiered = create.members["TieredStorageConfig"]
        assert set(props["TieredStorageConfig"]) <= set(tiered.members)
        assert props["TieredStorageConfig"]["Mode"] in tiered.members["Mode"].enum
        share = tiered.members["InstanceMemoryAllocationPercentage"].metadata
        assert share["min"] <= props["TieredStorageConfig"]["InstanceMemoryAllocationPercentage"] <= share["max"]
    if "AutoScaling" in props:
        autoscaling = create.members["AutoScaling"]
        assert set(props["AutoScaling"]) <= set(autoscaling.members)
        assert set(autoscaling.required_members) <= set(props["AutoScaling"])
        for key, value in props["AutoScaling"].items():
            assert value in autoscaling.members[key].enum
        assert "ClusterRole" in props
    for group in props["InstanceGroups"]:
        members = group_shape.members
        assert re.fullmatch(members["InstanceGroupName"].metadata["pattern"], group["InstanceGroupName"])
        # One of InstanceType and InstanceRequirements, never both (botocore's InstanceRequirements docs).
        assert ("InstanceType" in group) != ("InstanceRequirements" in group), group["InstanceGroupName"]
        if "InstanceType" in group:
            assert group["InstanceType"] in members["InstanceType"].enum
        else:
            requirements = members["InstanceRequirements"]
            assert set(group["InstanceRequirements"]) <= set(requirements.members)
            types = group["InstanceRequirements"]["InstanceTypes"]
            listed = requirements.members["InstanceTypes"]
            assert listed.metadata["min"] <= len(types) <= listed.metadata["max"]
            assert set(types) <= set(listed.member.enum) and len(set(types)) == len(types)
        count = members["InstanceCount"].metadata
        assert count["min"] <= group["InstanceCount"] <= count.get("max", 6758)
        assert members["ThreadsPerCore"].metadata["min"] <= group["ThreadsPerCore"] <= \
            members["ThreadsPerCore"].metadata["max"]
        checks = members["OnStartDeepHealthChecks"].member.enum
        assert set(group.get("OnStartDeepHealthChecks", [])) <= set(checks)
        volume = members["InstanceStorageConfigs"].member.members["EbsVolumeConfig"]
        size = volume.members["VolumeSizeInGB"].metadata
        for config in group["InstanceStorageConfigs"]:
            ebs = config["EbsVolumeConfig"]
            assert set(ebs) <= set(volume.members)
            # RootVolume true takes no size and needs a key; otherwise a size (botocore's RootVolume docs).
            if ebs.get("RootVolume"):
                assert "VolumeSizeInGB" not in ebs and "VolumeKmsKeyId" in ebs
            else:
                assert size["min"] <= ebs["VolumeSizeInGB"] <= size["max"]
        if "CapacityRequirements" in group:
            assert set(group["CapacityRequirements"]) <= set(members["CapacityRequirements"].members)
        if "MinInstanceCount" in group:
            least = members["MinInstanceCount"].metadata["min"]
            assert least <= group["MinInstanceCount"] <= group["InstanceCount"]
        on_create = members["LifeCycleConfig"].members["OnCreate"].metadata
        assert re.fullmatch(on_create["pattern"], group["LifeCycleConfig"]["OnCreate"])
        _check_software_fields(members, group)


def _check_software_fields(members, group) -> None:
    """ImageId, ScheduledUpdateConfig and AutoPatchConfig of a synthesized group against the CreateCluster model."""
    if "ImageId" in group:
        image = members["ImageId"].metadata
        assert image["min"] <= len(group["ImageId"]) <= image["max"]
        assert re.fullmatch(image["pattern"], group["ImageId"])
    if "AutoPatchConfig" in group:
        strategy = members["AutoPatchConfig"].members["PatchingStrategy"]
        assert set(group["AutoPatchConfig"]) == {"PatchingStrategy"}
        assert group["AutoPatchConfig"]["PatchingStrategy"] in strategy.enum
    if "ScheduledUpdateConfig" in group:
        scheduled_shape = members["ScheduledUpdateConfig"]
        scheduled = group["ScheduledUpdateConfig"]
        assert set(scheduled_shape.required_members) <= set(scheduled) <= set(scheduled_shape.members)
        expression = scheduled_shape.members["ScheduleExpression"].metadata
        assert expression["min"] <= len(scheduled["ScheduleExpression"]) <= expression["max"]
        deployment_shape = scheduled_shape.members["DeploymentConfig"]
        deployment = scheduled["DeploymentConfig"]
        assert set(deployment) <= set(deployment_shape.members)
        batch_shape = deployment_shape.members["RollingUpdatePolicy"].members["MaximumBatchSize"]
        batch = deployment["RollingUpdatePolicy"]["MaximumBatchSize"]
        assert batch["Type"] in batch_shape.members["Type"].enum
        assert batch["Value"] >= batch_shape.members["Value"].metadata["min"]
        wait = deployment_shape.members["WaitIntervalInSeconds"].metadata
        assert wait["min"] <= deployment["WaitIntervalInSeconds"] <= wait["max"]
        alarms_shape = deployment_shape.members["AutoRollbackConfiguration"]
        alarms = deployment.get("AutoRollbackConfiguration")
        if alarms is not None:
            assert alarms_shape.metadata["min"] <= len(alarms) <= alarms_shape.metadata["max"]
            name = alarms_shape.member.members["AlarmName"].metadata
            assert all(name["min"] <= len(a["AlarmName"]) <= name["max"] for a in alarms)


def test_lifecycle_bucket_is_named_for_the_managed_policy_and_locked_down(default_synth):
    buckets = default_synth.resources("hyperpod", "AWS::S3::Bucket")
    named = [b for b in buckets.values() if "BucketName" in b["Properties"]]
    (bucket,) = named
    name = bucket["Properties"]["BucketName"]["Fn::Join"]
    assert name[0] == "-" and name[1][0].startswith("sagemaker-")
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True
    }
    # SSE-KMS under the account's aws/s3 key (no key ID), with an S3 Bucket Key.
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"BucketKeyEnabled": True, "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]
    assert props["LifecycleConfiguration"] == {"Rules": [{
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}, "Id": "NoncurrentVersions",
        "NoncurrentVersionExpiration": {"NoncurrentDays": 90}, "Status": "Enabled"}]}
    assert "DestinationBucketName" in props["LoggingConfiguration"]
    # The access log bucket: SSE-S3 (S3 requires it of a log destination), the same lifecycle rule, no ACL.
    (logs,) = [b for b in buckets.values() if "BucketName" not in b["Properties"]]
    log_props = logs["Properties"]
    assert log_props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] \
        == {"SSEAlgorithm": "AES256"}
    assert log_props["LifecycleConfiguration"] == props["LifecycleConfiguration"]
    assert "AccessControl" not in log_props

    assert bucket["DeletionPolicy"] == "Retain"
    template = Template.from_json(default_synth.template("hyperpod"))
    template.has_resource_properties("AWS::S3::BucketPolicy", {
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}
    })


def test_scripts_and_rendered_settings_are_uploaded_from_the_repository(default_synth):
    (deployment,) = default_synth.resources("hyperpod", "Custom::CDKBucketDeployment").values()
    assert deployment["Properties"]["DestinationBucketKeyPrefix"] == "lifecycle/"
    assert deployment["Properties"]["Prune"] is True
    # Both sources are staged as asset directories in the cloud assembly.
    staged = {f.name: f for d in Path(default_synth.outdir).glob("asset.*") if d.is_dir() for f in d.iterdir()}
    assert staged["on_create.sh"].read_bytes() == (ROOT / "lifecycle_scripts" / "on_create.sh").read_bytes()
    settings = staged["lifecycle_config.env"].read_text()
    assert "ENABLE_FSX_LUSTRE_CLIENT=false" in settings
    assert "SECONDARY_VOLUME_WAIT_SECONDS=300" in settings
    assert "README.md" not in staged and ".gitattributes" not in staged

def _role_policy(synth):
    policies = synth.resources("hyperpod", "AWS::IAM::Policy")
    (policy,) = [p for k, p in policies.items() if k.startswith("ExecutionRolePolicy")]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_execution_role_is_least_privilege(default_synth):
    statements = _role_policy(default_synth)
    by_sid = {s["Sid"]: s for s in statements}
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all(a != "*" and not a.endswith(":*") for a in actions), statement
        if statement["Resource"] == "*":
            assert statement["Sid"] in {"ClusterMetrics", "SsmSessions", "VpcCniDescribe", "EcrAuth"}
    assert by_sid["ClusterMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Clusters"}
    }
    # No condition key on the ENI statements (AWS's template has none; ec2:Vpc would deny on some resource types).
    assert not any("Condition" in by_sid[sid] for sid in ("VpcCniManageEni", "VpcCniAttachEni", "VpcCniTagEni"))
    assert "Condition" not in by_sid["LifecycleScriptsList"]  # an s3:prefix condition denies HeadBucket
    assert "ImportValue" in json.dumps(by_sid["ThisEksCluster"]["Resource"])
    assert "eks-auth:AssumeRoleForPodIdentity" in by_sid["ThisEksCluster"]["Action"]
    lifecycle = json.dumps(by_sid["LifecycleScriptsRead"]["Resource"])
    assert "/lifecycle/*" in lifecycle
    # Stack.format_arn everywhere: the stack's partition and region (literals, as its region is known).
    assert "arn:aws:ec2:us-west-2:<AWS::AccountId>:network-interface/*" in {
        render(r) for r in by_sid["VpcCniManageEni"]["Resource"]}
    role = next(r for k, r in default_synth.resources("hyperpod", "AWS::IAM::Role").items()
                if k.startswith("ExecutionRole"))
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "sagemaker.amazonaws.com"
    }
    assert "ManagedPolicyArns" not in role["Properties"]
    assert "PermissionsBoundary" not in role["Properties"]


def test_the_execution_role_policy_is_its_table_and_every_statement_cites_a_source(default_synth):
    """The policy is written from POLICY, in its order, and each grant says where it comes from: an AWS page
    or an owner/repo@commit:path file."""
    statements = _role_policy(default_synth)
    assert [s["Sid"] for s in statements] == [g.sid for g in POLICY]
    for statement, grant in zip(statements, POLICY, strict=True):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert sorted(actions) == sorted(grant.actions)
        assert re.search(r"https://docs\.aws\.amazon\.com/\S+|[\w-]+/[\w.-]+@[0-9a-f]{40}:\S+", grant.source), grant


def test_aws_node_may_attach_enis_through_sagemaker_on_hyperpod_clusters_of_this_stack_only(default_synth):
    """VPC CNI releases with aws/amazon-vpc-cni-k8s#3874 attach ENIs on HyperPod nodes with
    sagemaker:AttachClusterNodeNetworkInterface as the node role: the execution role allows that one SageMaker
    action, on cluster ARNs of this stack's partition, region and account only, with no other SageMaker grant."""
    sagemaker = [s for s in _role_policy(default_synth)
                 if any(a.startswith("sagemaker:") for a in
                        (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))]
    (statement,) = sagemaker
    assert statement["Sid"] == "VpcCniHyperPodAttachEni"
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "sagemaker:AttachClusterNodeNetworkInterface"
    assert "Condition" not in statement
    (resource,) = [statement["Resource"]] if not isinstance(statement["Resource"], list) else statement["Resource"]
    pattern = render(resource).replace("<AWS::AccountId>", "111122223333")
    assert pattern == "arn:aws:sagemaker:us-west-2:111122223333:cluster/*"
    # IAM's wildcard over ARNs the action may name: this stack's cluster (its ARN ends in the id HyperPod
    # assigns), and nothing of another region, account or SageMaker resource type.
    assert fnmatch.fnmatchcase("arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef012345", pattern)
    for other in ("arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef012345",
                  "arn:aws:sagemaker:us-west-2:444455556666:cluster/abcdef012345",
                  "arn:aws:sagemaker:us-west-2:111122223333:cluster-scheduler-config/abcdef012345",
                  "arn:aws:sagemaker:us-west-2:111122223333:endpoint/e"):
        assert not fnmatch.fnmatchcase(other, pattern), other
    # The cluster the nodes belong to is this stack's, so it is in the granted region and account.
    (cluster,) = default_synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    assert cluster["Properties"]["InstanceGroups"][0]["ExecutionRole"]["Fn::GetAtt"][0].startswith("ExecutionRole")


def test_permissions_boundary_from_config(variant_synth):
    role = next(r for k, r in variant_synth.resources("hyperpod", "AWS::IAM::Role").items()
                if k.startswith("ExecutionRole"))
    assert role["Properties"]["PermissionsBoundary"] == "arn:aws:iam::111122223333:policy/PlatformBoundary"


def test_no_access_entry_competes_with_hyperpod_for_the_execution_role(default_synth):
    for entry in default_synth.resources("hyperpod", "AWS::EKS::AccessEntry").values():
        assert "ExecutionRole" not in json.dumps(entry["Properties"]["PrincipalArn"])


def test_dependencies_chart_release_is_pinned_namespaced_and_regional(default_synth):
    (release,) = default_synth.resources("hyperpod", "Custom::HyperPodHelmRelease").values()
    props = release["Properties"]
    assert props["ReleaseName"] == "hyperpod-dependencies"
    assert props["Namespace"] == "kube-system"
    assert props["Source"] == "git"
    assert re.fullmatch(r"[0-9a-f]{40}", props["GitRevision"])
    assert props["GitRepository"] == "https://github.com/aws/sagemaker-hyperpod-cli"
    assert props["ChartPath"] == "helm_chart/HyperPodHelmChart"
    assert props["Region"] == "us-west-2"
    assert int(props["TimeoutMinutes"]) < 15
    # CloudFormation gives up after 20 minutes if the provider never answers, not after the default hour.
    assert int(props["ServiceTimeout"]) == 1200
    resources = default_synth.template("hyperpod")["Resources"]
    assert props["Wait"] == "false"  # installed before any node exists: its Deployments cannot be ready yet
    # The release keeps its path to the API server until it is uninstalled (delete order).
    assert [resources[d]["Type"] for d in release["DependsOn"]].count("AWS::EC2::SecurityGroupIngress") == 1
    (entry_id,) = [d for d in release["DependsOn"] if resources[d]["Type"] == "AWS::EKS::AccessEntry"]
    entry = resources[entry_id]["Properties"]
    assert entry["AccessPolicies"][0]["AccessScope"] == {"Type": "cluster"}
    assert entry["PrincipalArn"]["Fn::GetAtt"][0].startswith("DependenciesChartRole")


def test_the_installer_may_install_only_the_chart_its_template_names_at_the_pinned_digest(default_synth):
    """The release's source, digest included, is in the installer function's environment, and the handler's check
    passes that source and refuses any other."""
    (release,) = default_synth.resources("hyperpod", "Custom::HyperPodHelmRelease").values()
    props = release["Properties"]
    assert props["SourceSha256"] == DEPENDENCIES_CHART_SOURCE_SHA256
    functions = default_synth.resources("hyperpod", "AWS::Lambda::Function")
    (installer,) = [f for k, f in functions.items() if k.startswith("DependenciesChartFunction")]
    environment = installer["Properties"]["Environment"]["Variables"]
    assert sorted(name for name in environment if name.startswith("CHART_SOURCE_")) == ["CHART_SOURCE_0"]
    check_allowed_source(props, environment)
    with pytest.raises(DeployError, match="is not one this installer was deployed with"):
        check_allowed_source({**props, "GitRepository": "https://github.com/someone/sagemaker-hyperpod-cli"},
                             environment)


def test_chart_installer_runs_in_the_vpc_and_reaches_the_api_on_443(default_synth):
    functions = default_synth.resources("hyperpod", "AWS::Lambda::Function")
    (installer,) = [f for k, f in functions.items() if k.startswith("DependenciesChartFunction")]
    props = installer["Properties"]
    assert props["Handler"] == "runtime.chart_installer.handler.on_event"
    # A minute under the provider framework's 15 minutes: the framework outlives it and reports a kill.
    assert props["Timeout"] == 840
    assert len(props["VpcConfig"]["SubnetIds"]) == 2
    assert len(props["Layers"]) == 1
    (ingress,) = default_synth.resources("hyperpod", "AWS::EC2::SecurityGroupIngress").values()
    assert (ingress["Properties"]["FromPort"], ingress["Properties"]["ToPort"]) == (443, 443)
    assert "EfaSecurityGroup" in json.dumps(ingress["Properties"]["GroupId"])


def test_outputs(default_synth):
    descriptions = " ".join(o.get("Description", "") for o in default_synth.template("hyperpod")["Outputs"].values())
    for words in ("HyperPod cluster name", "HyperPod cluster ARN", "HyperPod cluster id", "lifecycle scripts",
                  "SSM target"):
        assert words in descriptions


def _create_only(synth):
    logical_id, cluster = _cluster(synth)
    props = cluster["Properties"]
    groups = {g["InstanceGroupName"]: {k: g.get(k) for k in HYPERPOD_GROUP_CREATE_ONLY}
              for g in props["InstanceGroups"]}
    return logical_id, {p: lookup(props, p) for p in create_only_paths("AWS::SageMaker::Cluster")}, groups


@pytest.mark.parametrize(("before", "after"), [("default_synth", "routine_synth"),
                                               ("variant_synth", "group_removed_synth")],
                         ids=["count-up-and-add-group", "remove-group"])
def test_routine_changes_update_the_cluster_in_place(request, before, after):
    id_before, cluster_before, groups_before = _create_only(request.getfixturevalue(before))
    id_after, cluster_after, groups_after = _create_only(request.getfixturevalue(after))
    assert id_before == id_after
    assert cluster_before == cluster_after
    for name in groups_before.keys() & groups_after.keys():
        assert groups_before[name] == groups_after[name]
    assert groups_before.keys() != groups_after.keys()


def test_org_permissions_boundary_and_tags_reach_every_stack(default_synth, variant_synth):
    for part in ("network", "eks", "hyperpod", "observability"):
        roles = variant_synth.resources(part, "AWS::IAM::Role")
        for logical_id, role in roles.items():
            expected = ("arn:aws:iam::111122223333:policy/PlatformBoundary" if logical_id.startswith("ExecutionRole")
                        else "arn:aws:iam::111122223333:policy/OrgBoundary")
            assert role["Properties"].get("PermissionsBoundary") == expected, (part, logical_id)
        for role in default_synth.resources(part, "AWS::IAM::Role").values():
            assert "PermissionsBoundary" not in role["Properties"]
    (cluster,) = variant_synth.resources("hyperpod", "AWS::SageMaker::Cluster").values()
    assert {"Key": "cost-center", "Value": "ml-platform"} in cluster["Properties"]["Tags"]


def test_execution_role_arns_follow_the_stacks_partition():
    """No hard-coded partition: in a China region every ARN the role's policy names is arn:aws-cn:."""
    app = new_app(context=cdk_json_context())
    stack = Stack(app, "China", env=Environment(region="cn-north-1"))
    HyperPodExecutionRole(
        stack, "ExecutionRole", eks_cluster_arn="arn:aws-cn:eks:cn-north-1:111122223333:cluster/e",
        vpc_id="vpc-0123456789abcdef0", subnet_ids=["subnet-03333333333333333"],
        security_group_ids=["sg-0123456789abcdef0"], lifecycle_bucket_arn="arn:aws-cn:s3:::sagemaker-x",
        lifecycle_prefix="lifecycle",
    )
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    arns = [render(r) for s in policy["Properties"]["PolicyDocument"]["Statement"]
            for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]) if r != "*"]
    assert arns and all(a.startswith("arn:aws-cn:") for a in arns), arns
