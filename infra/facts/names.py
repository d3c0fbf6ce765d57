"""Names AWS fixes for one cluster's log groups, and the names this library gives what more than one layer reads
(constructs and guards); light (no CDK import) so hpctl reads the same facts."""

from __future__ import annotations

# The cdk-nag pack of this library (infra/guards/nag_pack.py): its findings are HyperPod-<rule>, and a construct
# acknowledges one with infra.constructs.common.acknowledge(..., pack=NAG_PACK_NAME).
NAG_PACK_NAME = "HyperPod"
# The Helm release of the HyperpodNodeClass and NodePool of each autoscaled group
# (infra/constructs/hyperpod/autoscaling.py); its values name the groups Karpenter scales, which the replacement
# guard's lock (infra/guards/replacement.py) records with the cluster.
NODE_POOLS_RELEASE_NAME = "hyperpod-karpenter-node-pools"

# The app's stacks are `<project>-<component>`, in creation order (stacks/app_builder.py), each described with this
# prefix: `hpctl preflight` tells a stack of this app from another app's stack of the same name by it.
STACK_COMPONENTS = ("network", "eks", "hyperpod", "observability", "storage")
STACK_DESCRIPTION_PREFIX = "HyperPod on EKS: "

# The CloudWatch agent of Container Insights writes one group per kind under /aws/containerinsights/<cluster>/.
CONTAINER_INSIGHTS_LOG_KINDS = ("application", "dataplane", "host", "performance")


def eks_control_plane_log_group(eks_cluster_name: str) -> str:
    """EKS writes control-plane logs to this group; the name cannot be chosen."""
    return f"/aws/eks/{eks_cluster_name}/cluster"


def container_insights_log_groups(eks_cluster_name: str) -> list[str]:
    return [f"/aws/containerinsights/{eks_cluster_name}/{kind}" for kind in CONTAINER_INSIGHTS_LOG_KINDS]


def cluster_log_groups(eks_cluster_name: str, hyperpod_cluster_name: str) -> list[str]:
    """The log groups of one cluster as name patterns: EKS control plane, Container Insights, HyperPod nodes
    (``/aws/sagemaker/Clusters/<name>/<id>``, the id known only once the cluster exists)."""
    return [eks_control_plane_log_group(eks_cluster_name), f"/aws/containerinsights/{eks_cluster_name}/*",
            f"/aws/sagemaker/Clusters/{hyperpod_cluster_name}/*"]

# The label HyperPod puts on each of its nodes in the EKS cluster, naming its HyperPod cluster: what AWS's module
# waits for (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/
# 7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/scripts/wait-for-hyperpod-nodes.sh line 12,
# `kubectl get nodes -l sagemaker.amazonaws.com/cluster-name=$HYPERPOD_CLUSTER_NAME`).
HYPERPOD_CLUSTER_NAME_LABEL = "sagemaker.amazonaws.com/cluster-name"


# The CDK bootstrap's lookup role: aws-cdk-lib 2.275.0 DefaultStackSynthesizer.DEFAULT_LOOKUP_ROLE_ARN with
# DEFAULT_QUALIFIER "hnb659fds" (tests/stacks/test_pipeline.py compares the two). The bootstrap template (aws-cdk
# 2.1148.1 lib/api/bootstrap/bootstrap-template.yaml, LookupRole) gives it the ReadOnlyAccess managed policy, denies
# kms:Decrypt, and lets the accounts of `cdk bootstrap --trust` (or --trust-for-lookup) assume it: the read-only
# role the fleet pipeline's guard and preflight steps read a target environment with.
CDK_BOOTSTRAP_QUALIFIER = "hnb659fds"


def cdk_lookup_role_arn(partition: str, account: str, region: str) -> str:
    return f"arn:{partition}:iam::{account}:role/cdk-{CDK_BOOTSTRAP_QUALIFIER}-lookup-role-{account}-{region}"
