"""EksStack intent: private, logged, encrypted control plane with HyperPod's add-ons and scoped access."""

from __future__ import annotations

from aws_cdk.assertions import Template


def _cluster(synth):
    (cluster,) = synth.resources("eks", "AWS::EKS::Cluster").values()
    return cluster["Properties"]


def test_endpoint_is_private_by_default(default_synth):
    vpc_config = _cluster(default_synth)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPrivateAccess"] is True
    assert vpc_config["EndpointPublicAccess"] is False


def test_public_endpoint_is_limited_to_the_allow_list(variant_synth):
    vpc_config = _cluster(variant_synth)["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["203.0.113.0/24"]


def test_all_five_control_plane_log_types_with_retention(default_synth):
    types = {t["Type"] for t in _cluster(default_synth)["Logging"]["ClusterLogging"]["EnabledTypes"]}
    assert types == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    template = Template.from_json(default_synth.template("eks"))
    template.has_resource("AWS::Logs::LogGroup", {
        "DeletionPolicy": "Retain",
        "Properties": {"LogGroupName": "/aws/eks/hyperpod-dev-eks/cluster", "RetentionInDays": 365},
    })


def test_secrets_encrypted_with_a_rotating_retained_customer_key(default_synth):
    encryption = _cluster(default_synth)["EncryptionConfig"]
    assert encryption[0]["Resources"] == ["secrets"]
    key_id = encryption[0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = default_synth.template("eks")["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"


def test_authentication_mode_default_and_override(default_synth, variant_synth):
    assert _cluster(default_synth)["AccessConfig"]["AuthenticationMode"] == "API"
    assert _cluster(variant_synth)["AccessConfig"]["AuthenticationMode"] == "API_AND_CONFIG_MAP"
    assert _cluster(default_synth)["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False


def test_no_auto_mode_no_node_groups_no_self_managed_addons(default_synth):
    props = _cluster(default_synth)
    assert props["BootstrapSelfManagedAddons"] is False
    assert "ComputeConfig" not in props or props["ComputeConfig"].get("Enabled") is False
    types = {r["Type"] for r in default_synth.template("eks")["Resources"].values()}
    assert "AWS::EKS::Nodegroup" not in types
    assert "AWS::Lambda::Function" not in types


def test_core_addons_with_a_vpc_cni_hyperpod_supports(default_synth):
    addons = {a["Properties"]["AddonName"]: a["Properties"] for a in
              default_synth.resources("eks", "AWS::EKS::Addon").values()}
    assert set(addons) == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"}
    # No pin by default: EKS picks its default build for the Kubernetes version, as AWS's Terraform module does.
    assert not any("AddonVersion" in a for a in addons.values())
    assert all(a["PreserveOnDelete"] is True for a in addons.values())


def test_admin_access_entries_only_for_configured_principals(default_synth, variant_synth):
    assert default_synth.resources("eks", "AWS::EKS::AccessEntry") == {}
    (entry,) = [e for e in variant_synth.resources("eks", "AWS::EKS::AccessEntry").values()
                if e["Properties"]["AccessPolicies"][0]["AccessScope"]["Type"] == "cluster"]
    props = entry["Properties"]
    assert props["PrincipalArn"] == "arn:aws:iam::111122223333:role/PlatformAdmin"
    (policy,) = props["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert "policy/AmazonEKSClusterAdminPolicy" in str(policy["PolicyArn"])


def test_control_plane_shares_the_efa_group_and_uses_private_subnets(default_synth):
    vpc_config = _cluster(default_synth)["ResourcesVpcConfig"]
    imports = str(vpc_config)
    assert "Fn::ImportValue" in imports and "EfaSecurityGroup" in imports
    assert len(vpc_config["SubnetIds"]) == 2


def test_outputs_name_arn_and_kubeconfig_command(default_synth):
    outputs = default_synth.template("eks")["Outputs"]
    descriptions = {v.get("Description") for v in outputs.values()}
    assert {"EKS cluster name", "EKS cluster ARN"} <= descriptions
    command = next(v for v in outputs.values() if "kubeconfig" in v.get("Description", ""))
    assert "aws eks update-kubeconfig --name" in str(command["Value"])


def test_namespace_admins_get_namespace_scoped_access(default_synth, variant_synth):
    def scoped(synth):
        return [e["Properties"] for e in synth.resources("eks", "AWS::EKS::AccessEntry").values()
                if e["Properties"]["AccessPolicies"][0]["AccessScope"]["Type"] == "namespace"]
    assert scoped(default_synth) == []
    (entry,) = scoped(variant_synth)
    assert entry["PrincipalArn"] == "arn:aws:iam::111122223333:role/DataScientist"
    (policy,) = entry["AccessPolicies"]
    assert policy["AccessScope"]["Namespaces"] == ["training"]
    assert "policy/AmazonEKSAdminPolicy" in str(policy["PolicyArn"])
