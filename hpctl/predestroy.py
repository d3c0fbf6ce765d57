"""`hpctl pre-destroy`: what Kubernetes and GuardDuty created in the VPC outside CloudFormation, which would stop
`cdk destroy` from deleting the subnets and the VPC (DELETE_FAILED, "has dependencies"), and its removal.

Four kinds are found: load balancers in the VPC (a Service of type LoadBalancer or an Ingress makes one; the
stack never knew it), detached network interfaces the VPC CNI left behind when nodes went away, and the
`guardduty-data` interface endpoint and its security group that GuardDuty Runtime Monitoring's automated agent
configuration puts in every VPC of the account. Only what carries this EKS cluster's tag, or GuardDuty's own
tag, is removed; anything else in the VPC is listed and left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
# What GuardDuty writes on what it creates. AmazonGuardDutyServiceRolePolicy (the service-linked role's policy,
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonGuardDutyServiceRolePolicy.html, v10:
# GuardDutyCreateVpcEndpointPolicy, GuardDutyModifyDeleteVpcEndpointPolicy, GuardDutyCreateSecurityGroupPolicy,
# GuardDutySecurityGroupManagementPolicy) lets GuardDuty create only endpoints of `com.amazonaws.*.guardduty-data`
# (or `-data-fips`) carrying the tag key GuardDutyManaged, create only security groups tagged GuardDutyManaged, and
# delete only endpoints and groups that carry it. The value it writes is "true": hashicorp/terraform-provider-aws
# pull request #46953 (merged, r/aws_vpc and r/aws_subnet GuardDuty cleanup) matches endpoints tagged
# GuardDutyManaged=true and groups named GuardDutyManagedSecurityGroup-<vpc-id>; GuardDuty's docs use the same
# key with "true" (include) and "false" (exclude) on EC2 instances, so a user's own resource may carry
# GuardDutyManaged=false, and only "true" counts. AWS's HyperPod Terraform cleans up by service name
# (awslabs/awsome-distributed-training@0edaf15: 1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/
# hyperpod-eks-tf/scripts/guardduty-cleanup.sh: endpoints with service-name *guardduty* in the VPC, then their
# security groups once the endpoints' network interfaces are gone); we require the service name and the tag both.
GUARDDUTY_TAG = "GuardDutyManaged"
GUARDDUTY_TAG_VALUE = "true"
GUARDDUTY_SERVICE_SUFFIXES = (".guardduty-data", ".guardduty-data-fips")
_TAGS_PER_CALL = 20  # DescribeTags takes at most 20 load balancers (elbv2 ResourceArns, elb LoadBalancerNames)


@dataclass(frozen=True)
class Blocker:
    kind: str  # "load balancer" (elbv2), "classic load balancer" (elb), "network interface", "vpc endpoint",
    # "security group"
    id: str  # ARN, name, ENI, endpoint or group ID: what the delete call takes
    detail: str
    ours: bool  # tagged for this EKS cluster, or by GuardDuty as its own: removed by `--delete`


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


def _tags(items: list[dict[str, str]]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in items}


def _guardduty(clients: Any, vpc: str) -> list[Blocker]:
    """GuardDuty's `guardduty-data` endpoints in the VPC (ours when tagged GuardDutyManaged=true; one created by hand
    for a manually managed agent is listed and left alone), then the security groups tagged GuardDutyManaged=true.
    Endpoints come first: a group cannot go while the endpoint's network interfaces use it."""
    ec2 = clients("ec2")
    blockers = []
    for page in ec2.get_paginator("describe_vpc_endpoints").paginate(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}]):
        for endpoint in page.get("VpcEndpoints", []):
            service = endpoint.get("ServiceName", "")
            state = endpoint.get("State", "")
            if not service.endswith(GUARDDUTY_SERVICE_SUFFIXES) or state.lower() == "deleted":
                continue
            ours = _tags(endpoint.get("Tags", [])).get(GUARDDUTY_TAG) == GUARDDUTY_TAG_VALUE
            blockers.append(Blocker("vpc endpoint", endpoint["VpcEndpointId"], f"{service} {state}".strip(), ours))
    for page in ec2.get_paginator("describe_security_groups").paginate(
            Filters=[{"Name": "vpc-id", "Values": [vpc]},
                     {"Name": f"tag:{GUARDDUTY_TAG}", "Values": [GUARDDUTY_TAG_VALUE]}]):
        for group in page.get("SecurityGroups", []):
            if _tags(group.get("Tags", [])).get(GUARDDUTY_TAG) == GUARDDUTY_TAG_VALUE:  # the filter, checked again
                blockers.append(Blocker("security group", group["GroupId"], group.get("GroupName", ""), True))
    return blockers


def find(cfg: Any, clients: Any, vpc: str) -> list[Blocker]:
    """In the order `remove` deletes them: load balancers before the interfaces they may hold, GuardDuty's
    endpoints before their security groups."""
    cluster = eks_cluster_name(cfg)
    return (_load_balancers(clients, vpc, cluster) + _network_interfaces(clients, vpc, cluster)
            + _guardduty(clients, vpc))


def _delete_endpoint(clients: Any, blocker: Blocker) -> None:
    """DeleteVpcEndpoints answers a refused endpoint in Unsuccessful rather than with an error."""
    answer = clients("ec2").delete_vpc_endpoints(VpcEndpointIds=[blocker.id])
    for item in answer.get("Unsuccessful", []):
        error = item.get("Error", {})
        raise HpctlError(f"{error.get('Code', '')}: {error.get('Message', '')}")


def _delete_security_group(clients: Any, blocker: Blocker) -> None:
    try:
        clients("ec2").delete_security_group(GroupId=blocker.id)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "DependencyViolation":
            raise HpctlError(f"{error} (the deleted endpoint's network interfaces still use it until they are "
                             "gone: run `hpctl pre-destroy --delete` again in a few minutes)") from error
        raise


def remove(clients: Any, blockers: list[Blocker]) -> list[tuple[Blocker, str]]:
    """Delete the blockers marked ours, in the order given; (blocker, error) for each delete that failed."""
    delete: dict[str, Callable[[Blocker], Any]] = {
        "load balancer": lambda b: clients("elbv2").delete_load_balancer(LoadBalancerArn=b.id),
        "classic load balancer": lambda b: clients("elb").delete_load_balancer(LoadBalancerName=b.id),
        "network interface": lambda b: clients("ec2").delete_network_interface(NetworkInterfaceId=b.id),
        "vpc endpoint": lambda b: _delete_endpoint(clients, b),
        "security group": lambda b: _delete_security_group(clients, b),
    }
    failed = []
    for blocker in blockers:
        if not blocker.ours:
            continue
        try:
            delete[blocker.kind](blocker)
        except (ClientError, HpctlError) as error:
            failed.append((blocker, str(error)))
    return failed
