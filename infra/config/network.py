"""The `network` section: VPC CIDR, control-plane AZs, HyperPod subnets by AZ ID, or an existing VPC."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from infra.config.base import StrictModel, refusal
from infra.config.fields import AzId, RetentionDays

MAX_HYPERPOD_SUBNETS = 16

_DIRECTIONS = {
    "northeast": "ne",
    "northwest": "nw",
    "southeast": "se",
    "southwest": "sw",
    "central": "c",
    "north": "n",
    "south": "s",
    "east": "e",
    "west": "w",
}


def az_id_prefix(region: str) -> str:
    """The prefix AWS uses for the AZ IDs of a region: us-west-2 -> usw2, ap-northeast-1 -> apne1."""
    parts = region.split("-")
    number = parts[-1]
    words = parts[:-1]
    head = words[0]
    middle = "".join(_DIRECTIONS.get(w, w[0]) for w in words[1:])
    return f"{head}{middle}{number}"


class HyperPodSubnet(StrictModel):
    """One large private subnet for HyperPod nodes in one Availability Zone ID."""

    az_id: AzId
    cidr: ipaddress.IPv4Network | None = None
    subnet_id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-f]{8,17}$")


class NetworkConfig(StrictModel):
    vpc_cidr: ipaddress.IPv4Network = ipaddress.IPv4Network("10.192.0.0/16")
    control_plane_az_ids: list[AzId] = Field(min_length=2)
    nat_gateways: Literal["per_az", "single"] = "per_az"
    # The cluster's VpcConfig lists every one: Subnets holds 1-16 (botocore's sagemaker model, Subnets; cfn-lint's
    # AWS::SageMaker::Cluster schema, VpcConfig.Subnets maxItems 16).
    hyperpod_subnets: list[HyperPodSubnet] = Field(min_length=1, max_length=MAX_HYPERPOD_SUBNETS)
    # Interface endpoints for closed networks (ec2, ecr, sts, logs, ssm, eks-auth, sagemaker, ...).
    interface_endpoints: bool = False
    # Egress of the nodes' security group beyond the group itself. "all" is AWS's rule (its security group
    # template, aws/sagemaker-hyperpod-cluster-setup@b920fcf4:eks/cloudformation/security-group-template.yaml,
    # InternetCommunicationRuleEgress); "https_only" keeps TCP 443 alone, which breaks anything else a job
    # reaches outside the group (other FSx or database security groups, non-HTTPS endpoints).
    node_egress: Literal["all", "https_only"] = "all"
    # The S3 gateway endpoint's policy. "open" is AWS's setup (no policy); "this_account" limits it to this
    # account's buckets plus the AWS-owned package and image-layer buckets: public datasets and other accounts'
    # buckets are then unreachable through it.
    s3_endpoint_policy: Literal["open", "this_account"] = "open"
    flow_logs_retention_days: RetentionDays = 365
    # Bring your own VPC: set existing_vpc_id, control_plane_subnet_ids and a subnet_id per HyperPod subnet.
    existing_vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$")
    control_plane_subnet_ids: list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = []

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr_size(cls, value: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if not 16 <= value.prefixlen <= 24:
            raise refusal("", None, f"VPC CIDR must be between /16 and /24, got {value}")
        if not value.is_private:
            raise refusal("", None, f"VPC CIDR {value} is not a private range")
        return value

    @field_validator("control_plane_az_ids")
    @classmethod
    def _distinct_control_plane_azs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise refusal("", None, f"AZ IDs must be distinct, got {value}")
        return value

    @model_validator(mode="after")
    def _subnets(self) -> NetworkConfig:
        byo = self.existing_vpc_id is not None
        seen: set[str] = set()
        for i, subnet in enumerate(self.hyperpod_subnets):
            where = f"hyperpod_subnets.{i}"
            if subnet.az_id in seen:
                raise refusal(f"{where}.az_id", subnet.az_id, "one HyperPod subnet per AZ ID")
            seen.add(subnet.az_id)
            if byo and subnet.subnet_id is None:
                raise refusal(f"{where}.subnet_id", None, "required with network.existing_vpc_id")
            if not byo and subnet.subnet_id is not None:
                raise refusal(f"{where}.subnet_id", subnet.subnet_id, "only allowed with network.existing_vpc_id")
            if not byo and subnet.cidr is None:
                raise refusal(f"{where}.cidr", None, "required when the VPC is created")
        if byo and len(self.control_plane_subnet_ids) < 2:
            raise refusal("control_plane_subnet_ids", self.control_plane_subnet_ids,
                          "at least 2 subnets in different AZs are required with network.existing_vpc_id")
        if not byo and self.control_plane_subnet_ids:
            raise refusal("control_plane_subnet_ids", self.control_plane_subnet_ids,
                          "only allowed with network.existing_vpc_id")
        if not byo:
            self._check_cidrs()
        return self

    def _check_cidrs(self) -> None:
        placed: list[tuple[str, ipaddress.IPv4Network]] = [("network.vpc_cidr", self.vpc_cidr)]
        for i, subnet in enumerate(self.hyperpod_subnets):
            if subnet.cidr is None:  # refused by _subnets before this runs
                continue
            key = f"hyperpod_subnets.{i}.cidr"
            if not 16 <= subnet.cidr.prefixlen <= 28:
                raise refusal(key, str(subnet.cidr), "a secondary VPC CIDR must be between /16 and /28")
            if not _same_private_family(self.vpc_cidr, subnet.cidr):
                raise refusal(key, str(subnet.cidr),
                              f"a secondary CIDR must come from the same private range as the VPC CIDR "
                              f"{self.vpc_cidr} or from 100.64.0.0/10")
            for other_key, other in placed:
                if subnet.cidr.overlaps(other):
                    raise refusal(key, str(subnet.cidr), f"overlaps {other_key} ({other})")
            placed.append((f"network.{key}", subnet.cidr))


def _same_private_family(primary: ipaddress.IPv4Network, secondary: ipaddress.IPv4Network) -> bool:
    families = [ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
    if secondary.subnet_of(ipaddress.IPv4Network("100.64.0.0/10")):
        return True
    return any(primary.subnet_of(f) and secondary.subnet_of(f) for f in families)
