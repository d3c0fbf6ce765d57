#!/usr/bin/env python3
"""A team's own CDK app using the `infra` library: HyperPod in an existing VPC, and HyperPod on a shared EKS.

Synthesize it with the project's own Python and Node.js (no system Node.js needed): `make consumer-synth` in the
repository root. Its cdk.json sets the same feature flags as the app's.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Environment, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from cdk_nag import AwsSolutionsChecks

from infra import HyperPodChecks, HyperPodOnEks, load_config, parse_config

HERE = Path(__file__).resolve().parent


def existing_vpc(stack: Stack) -> ec2.IVpc:
    """The team's VPC, by its attributes. Imported subnets name their route tables: without them CDK warns
    (@aws-cdk/aws-ec2:noSubnetRouteTableId) that reading one would give undefined."""
    return ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0a1b2c3d4e5f60718", availability_zones=["us-west-2a", "us-west-2b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
        private_subnet_route_table_ids=["rtb-0eeeeeeeeeeeeeee1", "rtb-0eeeeeeeeeeeeeee2"],
    )


def hyperpod_in_existing_vpc(app: App) -> Stack:
    """Everything (EKS, HyperPod, observability) in a VPC the team already has: the whole integration."""
    config = load_config(HERE / "team.yaml")
    stack = Stack(app, "TeamHyperPod", env=Environment(account=config.account, region=config.region))
    vpc = existing_vpc(stack)
    gpu_subnet = ec2.Subnet.from_subnet_attributes(stack, "GpuSubnet", subnet_id="subnet-0bbbbbbbbbbbbbbb1",
                                                   route_table_id="rtb-0eeeeeeeeeeeeeee1")
    HyperPodOnEks(
        stack, "HyperPod", config=config, vpc=vpc,
        control_plane_subnets=vpc.private_subnets, hyperpod_subnets={"usw2-az2": gpu_subnet},
    )
    return stack


def hyperpod_on_shared_eks(app: App) -> Stack:
    """Only the HyperPod part, joined to an EKS cluster the platform team runs."""
    data = load_config(HERE / "team.yaml").model_dump(mode="json")
    data["hyperpod"]["cluster_name"] = "team-ml-shared"
    config = parse_config(data, "team.yaml (shared EKS)")
    stack = Stack(app, "TeamHyperPodOnSharedEks", env=Environment(account=config.account, region=config.region))
    vpc = existing_vpc(stack)
    shared_eks = eks.Cluster.from_cluster_attributes(stack, "SharedEks", cluster_name="platform-eks")
    HyperPodOnEks(
        stack, "HyperPod", config=config, vpc=vpc, control_plane_subnets=vpc.private_subnets,
        hyperpod_subnets={"usw2-az2": ec2.Subnet.from_subnet_attributes(
            stack, "GpuSubnet", subnet_id="subnet-0bbbbbbbbbbbbbbb1", route_table_id="rtb-0eeeeeeeeeeeeeee1")},
        security_group=ec2.SecurityGroup.from_security_group_id(stack, "NodesSg", "sg-0ccccccccccccccc1"),
        eks_cluster=shared_eks,
        eks_cluster_security_group=ec2.SecurityGroup.from_security_group_id(stack, "EksSg", "sg-0ddddddddddddddd1"),
    )
    return stack


def build(app: App) -> list[Stack]:
    stacks = [hyperpod_in_existing_vpc(app), hyperpod_on_shared_eks(app)]
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    Validations.of(app).add_plugins(HyperPodChecks(app))
    return stacks


if __name__ == "__main__":
    application = App()
    build(application)
    application.synth()
