"""The addons section on: the training operator with cert-manager and the S3 CSI driver, in the HyperPod stack."""

from __future__ import annotations

import json

from infra.config.addons import CERT_MANAGER_ADDON, S3_CSI_ADDON, TRAINING_OPERATOR_ADDON
from infra.facts.addons import S3_CSI, TRAINING_OPERATOR
from tests.template_graph import readiness_checks

assert S3_CSI.pod_identity is not None and TRAINING_OPERATOR.pod_identity is not None
S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT = S3_CSI.pod_identity.namespace, S3_CSI.pod_identity.service_account
TRAINING_OPERATOR_NAMESPACE = TRAINING_OPERATOR.pod_identity.namespace
TRAINING_OPERATOR_SERVICE_ACCOUNT = TRAINING_OPERATOR.pod_identity.service_account

BUCKETS = ["arn:aws:s3:::example-datasets", "arn:aws:s3:::example-models"]


def _addons(synth):
    return {r["Properties"]["AddonName"]: (k, r) for k, r in synth.resources("hyperpod", "AWS::EKS::Addon").items()}


def _associations(synth):
    return {(r["Properties"]["Namespace"], r["Properties"]["ServiceAccount"]): r
            for r in synth.resources("hyperpod", "AWS::EKS::PodIdentityAssociation").values()}


def _role_of(synth, association):
    return synth.template("hyperpod")["Resources"][association["Properties"]["RoleArn"]["Fn::GetAtt"][0]]


def test_off_by_default(default_synth):
    assert _addons(default_synth) == {}
    assert _associations(default_synth) == {}
    assert default_synth.config.addons.training_operator.enabled is False
    assert default_synth.config.addons.s3_csi.enabled is False


def test_addons_wait_for_the_hyperpod_cluster_and_their_association(addons_synth):
    resources = addons_synth.template("hyperpod")["Resources"]
    (cluster_id,) = addons_synth.resources("hyperpod", "AWS::SageMaker::Cluster")
    addons = _addons(addons_synth)
    assert set(addons) == {TRAINING_OPERATOR_ADDON, CERT_MANAGER_ADDON, S3_CSI_ADDON}
    # The names AWS's Terraform modules and the EKS user guide give.
    assert set(addons) == {"amazon-sagemaker-hyperpod-training-operator", "cert-manager",
                           "aws-mountpoint-s3-csi-driver"}
    assert set(addons) == set(addons_synth.config.addons.eks_addons())
    (nodes_ready_id,) = [k for k, r in resources.items() if r["Type"] == "Custom::HyperPodReadiness"
                         and r["Properties"]["What"] == "HyperPod nodes"]
    assert cluster_id in resources[nodes_ready_id]["DependsOn"]
    for _, addon in addons.values():
        # After a HyperPod node and the Pod Identity agent are ready, so after the cluster.
        assert nodes_ready_id in addon["DependsOn"]
        # The EKS cluster's name, as the rest of the stack reads it.
        assert "Fn::ImportValue" in addon["Properties"]["ClusterName"]
        assert "PodIdentityAssociations" not in addon["Properties"]
    # The operator after cert-manager is ACTIVE and its three Deployments are available (AWS's module's wait).
    (cert_manager_ready_id,) = [k for k, r in resources.items() if r["Type"] == "Custom::HyperPodReadiness"
                                and r["Properties"]["What"] == CERT_MANAGER_ADDON]
    assert cert_manager_ready_id in addons[TRAINING_OPERATOR_ADDON][1]["DependsOn"]
    assert addons[CERT_MANAGER_ADDON][0] in resources[cert_manager_ready_id]["DependsOn"]
    checks = readiness_checks(resources[cert_manager_ready_id])
    assert [(c["kind"], c.get("namespace"), c.get("name")) for c in checks] == [
        ("addon", None, CERT_MANAGER_ADDON), ("deployment", "cert-manager", "cert-manager"),
        ("deployment", "cert-manager", "cert-manager-cainjector"),
        ("deployment", "cert-manager", "cert-manager-webhook")]
    for name in (TRAINING_OPERATOR_ADDON, S3_CSI_ADDON):
        assert any(resources[d]["Type"] == "AWS::EKS::PodIdentityAssociation" for d in addons[name][1]["DependsOn"])


def test_training_operator_role_is_for_its_controller_only(addons_synth):
    association = _associations(addons_synth)[(TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_SERVICE_ACCOUNT)]
    role = _role_of(addons_synth, association)["Properties"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    equals = statement["Condition"]["StringEquals"]
    assert equals["aws:RequestTag/kubernetes-namespace"] == "aws-hyperpod"
    assert equals["aws:RequestTag/kubernetes-service-account"] == "hp-training-operator-controller-manager"
    (managed,) = role["ManagedPolicyArns"]
    assert json.dumps(managed).endswith(':iam::aws:policy/AmazonSageMakerHyperPodTrainingOperatorAccess"]]}')


def test_s3_csi_driver_reaches_only_the_listed_buckets(addons_synth):
    association = _associations(addons_synth)[(S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT)]
    assert (S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT) == ("kube-system", "s3-csi-driver-sa")
    role_id = association["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    role = _role_of(addons_synth, association)["Properties"]
    equals = role["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]["StringEquals"]
    assert equals["aws:RequestTag/kubernetes-service-account"] == "s3-csi-driver-sa"
    assert "ManagedPolicyArns" not in role
    policies = [p["Properties"] for p in addons_synth.resources("hyperpod", "AWS::IAM::Policy").values()
                if {"Ref": role_id} in p["Properties"]["Roles"]]
    (policy,) = policies
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    assert set(statements) == {"MountpointBuckets", "MountpointObjects"}
    # Mountpoint's documented least-privilege actions (awslabs/mountpoint-s3 doc/CONFIGURATION.md).
    assert statements["MountpointBuckets"]["Action"] == "s3:ListBucket"
    assert statements["MountpointBuckets"]["Resource"] == BUCKETS
    assert sorted(statements["MountpointObjects"]["Action"]) == sorted(
        ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"])
    assert statements["MountpointObjects"]["Resource"] == [f"{b}/*" for b in BUCKETS]


def test_addons_variant_passes_both_nag_packs(addons_synth):
    report = json.loads((addons_synth.outdir / "validation-report.json").read_text())
    assert {p["pluginName"] for p in report["pluginReports"]} >= {"AwsSolutions", "HyperPod"}
    assert all(p["conclusion"] == "success" for p in report["pluginReports"]), \
        json.dumps([p["violations"] for p in report["pluginReports"]], indent=1)[:3000]


def test_other_stacks_do_not_change(default_synth, addons_synth):
    for part in ("network", "eks"):
        assert addons_synth.template(part) == default_synth.template(part)


# --- what AWS's own setups do around the operator ------------------------------------------------------------


def test_the_hyperpod_cluster_carries_the_tag_the_operators_policy_requires(default_synth, addons_synth):
    # AmazonSageMakerHyperPodTrainingOperatorAccess allows DescribeClusterNode only with aws:ResourceTag/SageMaker
    # = true; AWS's Terraform module tags every cluster so. Always on, so turning the operator on later is no
    # tag change.
    for synth in (default_synth, addons_synth):
        ((_, cluster),) = synth.resources("hyperpod", "AWS::SageMaker::Cluster").items()
        assert {"Key": "SageMaker", "Value": "true"} in cluster["Properties"]["Tags"]


def test_cert_manager_tolerates_every_taint_as_in_aws_module(addons_synth):
    (_, cert_manager) = _addons(addons_synth)[CERT_MANAGER_ADDON]
    values = json.loads(cert_manager["Properties"]["ConfigurationValues"])
    every = [{"operator": "Exists", "effect": e} for e in ("NoSchedule", "NoExecute", "PreferNoSchedule")]
    # awslabs/awsome-distributed-training@0edaf15: .../modules/hyperpod_cluster/cert_manager.tf
    assert values == {"replicaCount": 1, "tolerations": every,
                      "webhook": {"replicaCount": 1, "tolerations": every},
                      "cainjector": {"replicaCount": 1, "tolerations": every}}


def test_cert_manager_is_pinned_as_in_aws_module_and_its_version_updates_in_place(addons_synth):
    from infra.guards.create_only import schema_create_only

    (_, cert_manager) = _addons(addons_synth)[CERT_MANAGER_ADDON]
    # awslabs/awsome-distributed-training@0edaf15: .../modules/hyperpod_cluster/variables.tf, cert_manager_version
    assert cert_manager["Properties"]["AddonVersion"] == "v1.18.2-eksbuild.2"
    # Pinning it on a deployed add-on does not replace the add-on (cfn-lint's schema).
    assert "/properties/AddonVersion" not in schema_create_only("AWS::EKS::Addon")


def test_cert_manager_version_is_a_prop_none_leaving_eks_default():
    from aws_cdk import Stack
    from aws_cdk import aws_eks_v2 as eks

    from infra.constructs.addons import TrainingOperator
    from tests.conftest import new_app

    stack = Stack(new_app(), "Operator")
    cluster = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="hp-eks")
    default = TrainingOperator(stack, "EksDefault", eks_cluster=cluster, cert_manager_version=None)
    other = TrainingOperator(stack, "Other", eks_cluster=cluster, cert_manager_version="v1.19.1-eksbuild.1")
    assert default.cert_manager is not None and other.cert_manager is not None
    assert default.cert_manager.addon.addon_version is None
    assert other.cert_manager.addon.addon_version == "v1.19.1-eksbuild.1"


def test_the_operator_follows_task_governance_when_both_are_on(all_features_synth):
    addons = _addons(all_features_synth)
    governance_id = addons["amazon-sagemaker-hyperpod-taskgovernance"][0]
    assert governance_id in addons[TRAINING_OPERATOR_ADDON][1]["DependsOn"]


def test_in_one_stack_the_pod_identity_add_ons_follow_the_agent():
    from aws_cdk import Stack

    import infra
    from infra.config import parse_config
    from tests.conftest import cdk_json_context, mutate, new_app

    stack = Stack(new_app(context=cdk_json_context()), "Together")
    data = mutate({"addons": {"training_operator": {"enabled": True},
                              "s3_csi": {"enabled": True, "bucket_arns": BUCKETS}}})
    built = infra.HyperPodOnEks(stack, "HP", config=parse_config(data, "together"))
    agent = built.eks_control_plane.addons["eks-pod-identity-agent"]
    for addon in (built.parts.training_operator, built.parts.s3_csi_driver):
        assert agent in addon.node.dependencies


def test_the_s3_driver_refuses_no_buckets_naming_the_prop():
    import pytest
    from aws_cdk import Stack
    from aws_cdk import aws_eks_v2 as eks

    from infra.constructs.addons import S3CsiDriver
    from infra.errors import ConfigError
    from tests.conftest import new_app

    stack = Stack(new_app(), "Driver")
    cluster = eks.Cluster.from_cluster_attributes(stack, "Eks", cluster_name="e")
    with pytest.raises(ConfigError, match=r"bucket_arns: S3CsiDriver needs at least one bucket ARN") as refused:
        S3CsiDriver(stack, "S3CsiDriver", eks_cluster=cluster, bucket_arns=[])
    assert refused.value.key == "bucket_arns"
