"""`hpctl pre-destroy`: what Kubernetes created in the VPC outside CloudFormation, which would stop `cdk destroy`
from deleting the subnets and the VPC (DELETE_FAILED, "has dependencies"), and its removal.

Two kinds are found: load balancers in the VPC (a Service of type LoadBalancer or an Ingress makes one; the
stack never knew it) and detached network interfaces the VPC CNI left behind when nodes went away.
Only what carries this EKS cluster's tag is removed; anything else in the VPC is listed and left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from hpctl.errors import HpctlError, is_not_found
from infra.config import eks_cluster_name

# Tags that say "made for this EKS cluster":
# - the VPC CNI tags its ENIs cluster.k8s.amazonaws.com/name=<cluster> and describes them "aws-K8S-..."
#   (aws/amazon-vpc-cni-k8s, pkg/awsutils/awsutils.go: eniClusterTagKey, eniDescriptionPrefix);
# - Kubernetes' AWS cloud provider tags what it creates kubernetes.io/cluster/<cluster> (owned|shared)
#   (TagNameKubernetesClusterPrefix in the cloud provider's tags.go);
# - the AWS Load Balancer Controller tags what it creates (load balancers, target groups) elbv2.k8s.aws/cluster=
#   <cluster> (kubernetes-sigs/aws-load-balancer-controller@225f445: pkg/shared_constants/tag_keys.go
#   TagKeyK8sCluster, set by pkg/deploy/tracking/provider.go StackTags).
CNI_CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
CNI_DESCRIPTION_PREFIX = "aws-K8S-"
CLOUD_PROVIDER_TAG_PREFIX = "kubernetes.io/cluster/"
LB_CONTROLLER_TAG = "elbv2.k8s.aws/cluster"
_TAGS_PER_CALL = 20  # DescribeTags takes at most 20 load balancers (elbv2 ResourceArns, elb LoadBalancerNames)


@dataclass(frozen=True)
class Blocker:
    kind: str  # "load balancer" (elbv2), "classic load balancer" (elb) or "network interface"
    id: str  # ARN, name or ENI ID: what the delete call takes
    detail: str
    ours: bool  # tagged for this EKS cluster: removed by `--delete`


def vpc_id(cfg: Any, clients: Any) -> str | None:
    """The app's VPC: the configured one, else the network stack's; None when that stack is gone."""
    if cfg.network.existing_vpc_id:
        return str(cfg.network.existing_vpc_id)
    stack = f"{cfg.project}-network"
    try:
        pages = clients("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
        for page in pages:
            for resource in page.get("StackResourceSummaries", []):
                if resource.get("ResourceType") == "AWS::EC2::VPC":
                    return str(resource["PhysicalResourceId"])
    except ClientError as error:
        if is_not_found(error):
            return None
        raise
    raise HpctlError(f"stack {stack} has no AWS::EC2::VPC")


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _TAGS_PER_CALL):
        yield items[start:start + _TAGS_PER_CALL]


def _tagged_for(tags: dict[str, str], cluster: str) -> bool:
    return tags.get(LB_CONTROLLER_TAG) == cluster or f"{CLOUD_PROVIDER_TAG_PREFIX}{cluster}" in tags


def _load_balancers(clients: Any, vpc: str, cluster: str) -> list[Blocker]:
    elbv2 = clients("elbv2")
    found = [lb for page in elbv2.get_paginator("describe_load_balancers").paginate()
             for lb in page.get("LoadBalancers", []) if lb.get("VpcId") == vpc]
    tags: dict[str, dict[str, str]] = {}
    for chunk in _chunks([lb["LoadBalancerArn"] for lb in found]):
        for item in elbv2.describe_tags(ResourceArns=chunk)["TagDescriptions"]:
            tags[item["ResourceArn"]] = {t["Key"]: t.get("Value", "") for t in item.get("Tags", [])}
    blockers = [Blocker("load balancer", lb["LoadBalancerArn"], f"{lb.get('Type', '')} {lb['LoadBalancerName']}",
                        _tagged_for(tags.get(lb["LoadBalancerArn"], {}), cluster)) for lb in found]
    elb = clients("elb")
    classic = [lb for page in elb.get_paginator("describe_load_balancers").paginate()
               for lb in page.get("LoadBalancerDescriptions", []) if lb.get("VPCId") == vpc]
    classic_tags: dict[str, dict[str, str]] = {}
    for chunk in _chunks([lb["LoadBalancerName"] for lb in classic]):
        for item in elb.describe_tags(LoadBalancerNames=chunk)["TagDescriptions"]:
            classic_tags[item["LoadBalancerName"]] = {t["Key"]: t.get("Value", "") for t in item.get("Tags", [])}
    blockers += [Blocker("classic load balancer", lb["LoadBalancerName"], lb.get("DNSName", ""),
                         _tagged_for(classic_tags.get(lb["LoadBalancerName"], {}), cluster)) for lb in classic]
    return blockers


def _network_interfaces(clients: Any, vpc: str, cluster: str) -> list[Blocker]:
    """Detached interfaces only: attached ones go with the instance, endpoint or cluster that holds them."""
    pages = clients("ec2").get_paginator("describe_network_interfaces").paginate(
        Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "status", "Values": ["available"]}])
    blockers = []
    for page in pages:
        for eni in page.get("NetworkInterfaces", []):
            tags = {t["Key"]: t.get("Value", "") for t in eni.get("TagSet", [])}
            description = eni.get("Description", "")
            ours = tags.get(CNI_CLUSTER_TAG) == cluster or (
                CNI_CLUSTER_TAG not in tags and description.startswith(CNI_DESCRIPTION_PREFIX))
            blockers.append(Blocker("network interface", eni["NetworkInterfaceId"],
                                    f"{eni.get('SubnetId', '')} {description}".strip(), ours))
    return blockers


def find(cfg: Any, clients: Any, vpc: str) -> list[Blocker]:
    cluster = eks_cluster_name(cfg)
    return _load_balancers(clients, vpc, cluster) + _network_interfaces(clients, vpc, cluster)


def remove(clients: Any, blockers: list[Blocker]) -> list[tuple[Blocker, str]]:
    """Delete the blockers tagged for this cluster; (blocker, error) for each delete that failed."""
    delete = {
        "load balancer": lambda b: clients("elbv2").delete_load_balancer(LoadBalancerArn=b.id),
        "classic load balancer": lambda b: clients("elb").delete_load_balancer(LoadBalancerName=b.id),
        "network interface": lambda b: clients("ec2").delete_network_interface(NetworkInterfaceId=b.id),
    }
    failed = []
    for blocker in blockers:
        if not blocker.ours:
            continue
        try:
            delete[blocker.kind](blocker)
        except ClientError as error:
            failed.append((blocker, str(error)))
    return failed
