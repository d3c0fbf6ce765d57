"""IP planning: how a new VPC's CIDR is carved into control-plane subnets, and how many VPC IPs each HyperPod
instance of a type takes in EKS mode."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence

# In EKS mode a HyperPod instance takes the VPC CNI pool of its primary network card (the IPv4
# addresses per ENI of that type) plus one address for each additional network card (EFA).
# Figures: "IP addresses per network interface per instance type" and "network cards" in the
# Amazon EC2 User Guide (docs.aws.amazon.com/AWSEC2/latest/UserGuide/AvailableIpPerENI.html);
# the p5.48xlarge total of 81 (50 + 31) is the example SageMaker HyperPod gives for EKS clusters.
# (IPv4 addresses per ENI, network cards)
_NETWORK_FACTS: dict[str, tuple[int, int]] = {
    "ml.t3.medium": (6, 1),
    "ml.t3.large": (12, 1),
    "ml.t3.xlarge": (15, 1),
    "ml.t3.2xlarge": (15, 1),
    "ml.m5.large": (10, 1),
    "ml.m5.xlarge": (15, 1),
    "ml.m5.2xlarge": (15, 1),
    "ml.m5.4xlarge": (30, 1),
    "ml.m5.8xlarge": (30, 1),
    "ml.m5.12xlarge": (30, 1),
    "ml.m5.16xlarge": (50, 1),
    "ml.m5.24xlarge": (50, 1),
    "ml.c5.large": (10, 1),
    "ml.c5.xlarge": (15, 1),
    "ml.c5.2xlarge": (15, 1),
    "ml.c5.4xlarge": (30, 1),
    "ml.c5.9xlarge": (30, 1),
    "ml.c5.12xlarge": (30, 1),
    "ml.c5.18xlarge": (50, 1),
    "ml.c5.24xlarge": (50, 1),
    "ml.g5.xlarge": (15, 1),
    "ml.g5.2xlarge": (15, 1),
    "ml.g5.4xlarge": (30, 1),
    "ml.g5.8xlarge": (30, 1),
    "ml.g5.12xlarge": (30, 1),
    "ml.g5.16xlarge": (30, 1),
    "ml.g5.24xlarge": (50, 1),
    "ml.g5.48xlarge": (50, 1),
    "ml.g6.xlarge": (15, 1),
    "ml.g6.2xlarge": (15, 1),
    "ml.g6.4xlarge": (30, 1),
    "ml.g6.8xlarge": (30, 1),
    "ml.g6.12xlarge": (30, 1),
    "ml.g6.16xlarge": (30, 1),
    "ml.g6.24xlarge": (50, 1),
    "ml.g6.48xlarge": (50, 1),
    "ml.p4d.24xlarge": (50, 4),
    "ml.p4de.24xlarge": (50, 4),
    "ml.p5.48xlarge": (50, 32),
    "ml.p5e.48xlarge": (50, 32),
    "ml.p5en.48xlarge": (50, 16),
    "ml.trn1.32xlarge": (50, 8),
    "ml.trn1n.32xlarge": (50, 16),
    "ml.trn2.48xlarge": (50, 16),
}

# Unknown types are planned at the largest figure in the table, so a plan errs on the safe side.
UNKNOWN_TYPE_IPS = max(per_eni + cards - 1 for per_eni, cards in _NETWORK_FACTS.values())

# AWS reserves the first four addresses and the last one of every subnet.
RESERVED_PER_SUBNET = 5


def ips_per_instance(instance_type: str) -> int:
    facts = _NETWORK_FACTS.get(instance_type)
    if facts is None:
        return UNKNOWN_TYPE_IPS
    per_eni, cards = facts
    return per_eni + cards - 1


def ips_per_node(instance_types: Sequence[str]) -> int:
    """IPs to plan per node of a group that may run any of ``instance_types`` (a flexible group): the most."""
    return max(ips_per_instance(t) for t in instance_types)


def subnet_capacity(cidr: ipaddress.IPv4Network) -> int:
    return cidr.num_addresses - RESERVED_PER_SUBNET


def control_plane_layout(
    vpc_cidr: ipaddress.IPv4Network, az_ids: Sequence[str]
) -> list[tuple[str, ipaddress.IPv4Network, ipaddress.IPv4Network]]:
    """(az_id, private CIDR, public CIDR) per control-plane AZ, carved from ``vpc_cidr``.

    The VPC CIDR is split into 2^k equal blocks (2^k > number of AZs): the first blocks become the
    private subnets, the last block is split again into the small public subnets for NAT gateways.
    """
    count = len(az_ids)
    split = math.ceil(math.log2(count + 1))
    blocks = list(vpc_cidr.subnets(prefixlen_diff=split))
    public_split = max(1, math.ceil(math.log2(count)))
    publics = list(blocks[-1].subnets(prefixlen_diff=public_split))
    return [(az, blocks[i], publics[i]) for i, az in enumerate(az_ids)]
