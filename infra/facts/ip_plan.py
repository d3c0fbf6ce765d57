"""IP planning: how a new VPC's CIDR is carved into control-plane subnets, and how many VPC IPs each HyperPod
instance of a type takes in EKS mode (the instance catalog's figure)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence

from infra.facts.instances import CATALOG, lookup

# Unknown types, and catalog types without network figures, are planned at the largest figure of the catalog
# (infra/facts/instances.py), so a plan errs on the safe side.
UNKNOWN_TYPE_IPS = max(ips for t in CATALOG.values() if (ips := t.eks_ips_per_node) is not None)

# AWS reserves the first four addresses and the last one of every subnet.
RESERVED_PER_SUBNET = 5


def ips_per_instance(instance_type: str) -> int:
    known = lookup(instance_type)
    ips = known.eks_ips_per_node if known is not None else None
    return UNKNOWN_TYPE_IPS if ips is None else ips


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
