"""The instance catalog: what this library knows about each HyperPod instance type, and where each fact comes from.

One record per type: NVIDIA GPUs, Neuron devices (Trainium, Inferentia), EFA devices, network cards and IPv4
addresses per network interface, hence the VPC IPs a node takes in EKS mode and the pods its kubelet accepts; its
accelerator kind; whether botocore's ClusterInstanceType list (``infra.facts.aws_lists``) has it.
``InstanceType.source(fact)`` names the source of each. The IP plan, the pod budget (``infra.config.pod_slots``),
``hpctl render-examples``, ``hpctl plan``, the nag pack's accelerated-group rule, the config's instance-type check
and the Karpenter node pools read these facts here and nowhere else.

A leaf module: it imports nothing of this project but ``infra.facts.aws_lists``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from infra.facts.aws_lists import cluster_instance_types

AcceleratorKind = Literal["nvidia", "neuron"]

# --- Sources ---------------------------------------------------------------------------------------------------

# GPUs, Neuron devices and EFA devices: AWS's HyperPod CLI, INSTANCE_RESOURCES (keys gpu, trainium, efa): every figure
# of these three below was read there at this commit. The EC2 User Guide agrees where it was read
# (P5/P5e up to 32 EFA network cards, G6e up to 4: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/p5-efa.html),
# and the Neuron documentation gives 16 Trainium devices for Trn1 and Trn1n
# (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.9.1/general/arch/model-architecture-fit.html).
HYPERPOD_CLI = (
    "aws/sagemaker-hyperpod-cli@011ca927123e02b35a399935bbb3ab1905fe33c7:"
    "src/sagemaker/hyperpod/training/constants.py (INSTANCE_RESOURCES)"
)
# IPv4 addresses per network interface and network cards: "IP addresses per network interface per instance type"
# and "network cards" in the Amazon EC2 User Guide, as AWS's VPC CNI plugin (the only CNI HyperPod supports, and the
# one that draws these IPs) has them in its table generated from EC2 DescribeInstanceTypes. Read there for every
# row; where the table this catalog replaced (infra/facts/ip_plan.py) disagreed, the VPC CNI's figure is taken:
# ml.g5.12xlarge and ml.g6.16xlarge have 50 IPv4 per interface, not 30 (the same repository's misc/eni-max-pods.txt
# gives both 737 pods = 15 interfaces x (50 - 1) + 2).
EC2_NETWORK = (
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/AvailableIpPerENI.html, read in aws/amazon-vpc-cni-k8s@"
    "b52188387f2e2f10bf289ace929d6a63b176a4fa:pkg/vpc/vpc_ip_resource_limit.go (IPv4Limit, NetworkCards)"
)
# In EKS mode a HyperPod instance takes the VPC CNI pool of its primary network card (the IPv4 addresses per
# interface) plus one address for each additional network card: the p5.48xlarge total of 81 (50 + 31) is the
# example SageMaker HyperPod gives for EKS clusters.
EKS_IPS = "SageMaker HyperPod on EKS: primary card's IPv4 per interface + 1 per other card (ml.p5.48xlarge: 81)"
# Pods per node (the kubelet's maxPods, which counts every pod on the node, host-network ones too). The one figure
# read for a HyperPod node: maxPods 14 on an ml.g5.xlarge (15 IPv4 per interface), with add-on pods Pending on
# "Too many pods" (https://github.com/awslabs/ai-on-sagemaker-hyperpod/issues/142). No AWS source read here (the
# HyperPod EKS docs, awslabs/awsome-distributed-training@0edaf152, aws/sagemaker-hyperpod-cli@011ca927, aws/amazon-
# vpc-cni-k8s@b5218838) states the rule HyperPod applies. EKS's own formula, ENIs x (IPv4 per interface - 1) + 2
# (aws/amazon-vpc-cni-k8s README), gives 58 for g5.xlarge, so it is not HyperPod's. The rule taken is the one that
# reproduces the reported figure and matches how a node takes its IPs in EKS mode (EKS_IPS: pods draw on one
# interface of the primary card): IPv4 per interface - 1, the interface's own address left out. Unverified for
# every other type.
MAX_PODS = ("rule reproducing the one reported figure (unverified for other types): IPv4 per interface - 1; "
            "ml.g5.xlarge maxPods 14, https://github.com/awslabs/ai-on-sagemaker-hyperpod/issues/142")
# The accelerator follows from the family. In botocore's HyperPod list the P and G families are the NVIDIA GPU types
# (every one HYPERPOD_CLI counts has gpu > 0; G4ad, AMD, is not a HyperPod type), Trn and Inf the AWS Neuron ones
# (Trainium, Inferentia: the Neuron documentation above). Unverified for the families no source counts: ml.g4dn and
# ml.g7 (GPU types by their family only). botocore lists no ml.inf type today.
FAMILIES: tuple[tuple[str, AcceleratorKind], ...] = (
    ("ml.p", "nvidia"), ("ml.g", "nvidia"), ("ml.trn", "neuron"), ("ml.inf", "neuron"),
)
FAMILY_SOURCE = "instance family (infra/facts/instances.py FAMILIES)"
BOTOCORE = "botocore's SageMaker service model, ClusterInstanceType (infra/facts/aws_lists.json)"

# Catalog types the pinned botocore does not list (each with the reason it is kept); none today.
NOT_IN_BOTOCORE: frozenset[str] = frozenset()


@dataclass(frozen=True)
class InstanceType:
    """The facts about one HyperPod instance type; None where no source read here gives the figure."""

    name: str
    gpus: int | None  # NVIDIA GPUs a pod can request (nvidia.com/gpu)
    neuron: int | None  # Trainium or Inferentia devices a pod can request (aws.amazon.com/neuron)
    efa: int | None  # EFA devices (interfaces) a pod can request (vpc.amazonaws.com/efa)
    ipv4_per_eni: int | None  # IPv4 addresses per network interface
    network_cards: int | None
    sources: Mapping[str, str]  # fact -> its source, for the counted facts above

    @property
    def accelerator(self) -> AcceleratorKind | None:
        return accelerator_kind(self.name)

    @property
    def accelerated(self) -> bool:
        return self.accelerator is not None

    @property
    def accelerators(self) -> int | None:
        """The accelerators a job counts per instance: GPUs of an NVIDIA type, Neuron devices of a Neuron type."""
        if self.accelerator is None:
            return 0
        return self.gpus if self.accelerator == "nvidia" else self.neuron

    @property
    def eks_ips_per_node(self) -> int | None:
        """VPC IPs one instance of this type takes in its subnet in EKS mode."""
        if self.ipv4_per_eni is None or self.network_cards is None:
            return None
        return self.ipv4_per_eni + self.network_cards - 1

    @property
    def max_pods(self) -> int | None:
        """Pods the kubelet of one node of this type accepts (MAX_PODS: a rule, verified on ml.g5.xlarge only)."""
        if self.ipv4_per_eni is None:
            return None
        return self.ipv4_per_eni - 1

    @property
    def listed(self) -> bool:
        """Whether botocore's ClusterInstanceType list has this type (read each time, never copied)."""
        return is_listed(self.name)

    def source(self, fact: str) -> str | None:
        """Where ``fact`` (a field or property name) comes from; None for a figure no source gives."""
        derived = {"accelerator": FAMILY_SOURCE, "accelerated": FAMILY_SOURCE, "listed": BOTOCORE}
        if fact in derived:
            return derived[fact]
        if fact == "accelerators":
            if self.accelerator is None:
                return FAMILY_SOURCE
            return self.sources.get("gpus" if self.accelerator == "nvidia" else "neuron")
        if fact == "eks_ips_per_node":
            return EKS_IPS if self.eks_ips_per_node is not None else None
        if fact == "max_pods":
            return MAX_PODS if self.max_pods is not None else None
        return self.sources.get(fact)


def _row(name: str, gpus: int | None, neuron: int | None, efa: int | None, ipv4_per_eni: int | None,
         network_cards: int | None) -> InstanceType:
    columns = {"gpus": (gpus, HYPERPOD_CLI), "neuron": (neuron, HYPERPOD_CLI), "efa": (efa, HYPERPOD_CLI),
               "ipv4_per_eni": (ipv4_per_eni, EC2_NETWORK), "network_cards": (network_cards, EC2_NETWORK)}
    sources = {fact: source for fact, (value, source) in columns.items() if value is not None}
    return InstanceType(name, gpus, neuron, efa, ipv4_per_eni, network_cards, MappingProxyType(sources))


# Every type the replaced tables held (the IP plan's, the examples' accelerator counts), every other accelerated
# type of botocore's list, and the types without accelerators that HYPERPOD_CLI gives an EFA device (the last six:
# the dependencies chart's EFA device plugin is put on the types with EFA here, infra/config/device_plugins.py).
# None marks a figure no source read here gives:
# - ml.g4dn.* and ml.g7.* (not ml.g7e.*): no GPU, Neuron or EFA count in HYPERPOD_CLI;
# - ml.p6e-gb200.36xlarge: HYPERPOD_CLI says 0 EFA devices, while the AWS Machine Learning Blog post "Train and deploy
#   AI models at trillion-parameter scale with Amazon SageMaker HyperPod support for P6e-GB200 UltraServers" (read in
#   a repost, https://news.fishaiapp.com/news/4622641) gives each compute node up to 17 NICs of EFA v4: the sources
#   disagree, so no EFA count is given (unverified). The VPC CNI table has no p6e-gb200 row: no network figures.
#           name                    GPUs  Neuron EFA   IPv4/ENI cards
_ROWS = (
    _row("ml.t3.medium",            0,    0,     0,    6,       1),
    _row("ml.t3.large",             0,    0,     0,    12,      1),
    _row("ml.t3.xlarge",            0,    0,     0,    15,      1),
    _row("ml.t3.2xlarge",           0,    0,     0,    15,      1),
    _row("ml.m5.large",             0,    0,     0,    10,      1),
    _row("ml.m5.xlarge",            0,    0,     0,    15,      1),
    _row("ml.m5.2xlarge",           0,    0,     0,    15,      1),
    _row("ml.m5.4xlarge",           0,    0,     0,    30,      1),
    _row("ml.m5.8xlarge",           0,    0,     0,    30,      1),
    _row("ml.m5.12xlarge",          0,    0,     0,    30,      1),
    _row("ml.m5.16xlarge",          0,    0,     0,    50,      1),
    _row("ml.m5.24xlarge",          0,    0,     0,    50,      1),
    _row("ml.c5.large",             0,    0,     0,    10,      1),
    _row("ml.c5.xlarge",            0,    0,     0,    15,      1),
    _row("ml.c5.2xlarge",           0,    0,     0,    15,      1),
    _row("ml.c5.4xlarge",           0,    0,     0,    30,      1),
    _row("ml.c5.9xlarge",           0,    0,     0,    30,      1),
    _row("ml.c5.12xlarge",          0,    0,     0,    30,      1),
    _row("ml.c5.18xlarge",          0,    0,     0,    50,      1),
    _row("ml.c5.24xlarge",          0,    0,     0,    50,      1),
    _row("ml.g4dn.xlarge",          None, None,  None, 10,      1),
    _row("ml.g4dn.2xlarge",         None, None,  None, 10,      1),
    _row("ml.g4dn.4xlarge",         None, None,  None, 10,      1),
    _row("ml.g4dn.8xlarge",         None, None,  None, 15,      1),
    _row("ml.g4dn.12xlarge",        None, None,  None, 30,      1),
    _row("ml.g4dn.16xlarge",        None, None,  None, 15,      1),
    _row("ml.g5.xlarge",            1,    0,     0,    15,      1),
    _row("ml.g5.2xlarge",           1,    0,     0,    15,      1),
    _row("ml.g5.4xlarge",           1,    0,     0,    30,      1),
    _row("ml.g5.8xlarge",           1,    0,     1,    30,      1),
    _row("ml.g5.12xlarge",          4,    0,     1,    50,      1),
    _row("ml.g5.16xlarge",          1,    0,     1,    30,      1),
    _row("ml.g5.24xlarge",          4,    0,     1,    50,      1),
    _row("ml.g5.48xlarge",          8,    0,     1,    50,      1),
    _row("ml.g6.xlarge",            1,    0,     0,    15,      1),
    _row("ml.g6.2xlarge",           1,    0,     0,    15,      1),
    _row("ml.g6.4xlarge",           1,    0,     0,    30,      1),
    _row("ml.g6.8xlarge",           1,    0,     1,    30,      1),
    _row("ml.g6.12xlarge",          4,    0,     1,    30,      1),
    _row("ml.g6.16xlarge",          1,    0,     1,    50,      1),
    _row("ml.g6.24xlarge",          4,    0,     1,    50,      1),
    _row("ml.g6.48xlarge",          8,    0,     1,    50,      1),
    _row("ml.g6e.xlarge",           1,    0,     0,    15,      1),
    _row("ml.g6e.2xlarge",          1,    0,     0,    15,      1),
    _row("ml.g6e.4xlarge",          1,    0,     0,    30,      1),
    _row("ml.g6e.8xlarge",          1,    0,     1,    30,      1),
    _row("ml.g6e.12xlarge",         4,    0,     1,    30,      1),
    _row("ml.g6e.16xlarge",         1,    0,     1,    50,      1),
    _row("ml.g6e.24xlarge",         4,    0,     2,    50,      2),
    _row("ml.g6e.48xlarge",         8,    0,     4,    50,      4),
    _row("ml.g7.2xlarge",           None, None,  None, 64,      1),
    _row("ml.g7.4xlarge",           None, None,  None, 64,      1),
    _row("ml.g7.8xlarge",           None, None,  None, 64,      1),
    _row("ml.g7.12xlarge",          None, None,  None, 64,      1),
    _row("ml.g7.24xlarge",          None, None,  None, 64,      1),
    _row("ml.g7.48xlarge",          None, None,  None, 64,      2),
    _row("ml.g7e.2xlarge",          1,    0,     0,    64,      1),
    _row("ml.g7e.4xlarge",          1,    0,     0,    64,      1),
    _row("ml.g7e.8xlarge",          1,    0,     1,    64,      1),
    _row("ml.g7e.12xlarge",         2,    0,     1,    64,      1),
    _row("ml.g7e.24xlarge",         4,    0,     2,    64,      2),
    _row("ml.g7e.48xlarge",         8,    0,     4,    64,      4),
    _row("ml.gr6.4xlarge",          1,    0,     0,    30,      1),
    _row("ml.gr6.8xlarge",          1,    0,     1,    30,      1),
    _row("ml.p4d.24xlarge",         8,    0,     4,    50,      4),
    _row("ml.p4de.24xlarge",        8,    0,     4,    50,      4),
    _row("ml.p5.4xlarge",           1,    0,     1,    30,      1),
    _row("ml.p5.48xlarge",          8,    0,     32,   50,      32),
    _row("ml.p5e.48xlarge",         8,    0,     32,   50,      32),
    _row("ml.p5en.48xlarge",        8,    0,     16,   50,      16),
    _row("ml.p6-b200.48xlarge",     8,    0,     8,    50,      8),
    _row("ml.p6-b300.48xlarge",     8,    0,     16,   50,      17),
    _row("ml.p6e-gb200.36xlarge",   4,    0,     None, None,    None),
    _row("ml.trn1.32xlarge",        0,    16,    8,    50,      8),
    _row("ml.trn1n.32xlarge",       0,    16,    16,   50,      16),
    _row("ml.trn2.3xlarge",         0,    1,     1,    15,      1),
    _row("ml.trn2.48xlarge",        0,    16,    16,   50,      16),
    _row("ml.c5n.9xlarge",          0,    0,     1,    30,      1),
    _row("ml.c5n.18xlarge",         0,    0,     1,    50,      1),
    _row("ml.i3en.12xlarge",        0,    0,     1,    30,      1),
    _row("ml.i3en.24xlarge",        0,    0,     1,    50,      1),
    _row("ml.m7i.48xlarge",         0,    0,     1,    50,      1),
    _row("ml.r7i.48xlarge",         0,    0,     1,    50,      1),
)

CATALOG: Mapping[str, InstanceType] = MappingProxyType({row.name: row for row in _ROWS})


def lookup(instance_type: str) -> InstanceType | None:
    """The catalog's record of ``instance_type``, None for a type it does not hold."""
    return CATALOG.get(instance_type)


def accelerator_kind(instance_type: str) -> AcceleratorKind | None:
    """'nvidia' or 'neuron' by the type's family (FAMILIES), None for a type without accelerators."""
    for prefix, kind in FAMILIES:
        if instance_type.startswith(prefix):
            return kind
    return None


def is_accelerated(instance_type: str) -> bool:
    return accelerator_kind(instance_type) is not None


def accelerators_per_instance(instance_type: str) -> int | None:
    """GPUs of an NVIDIA type, Neuron devices of a Trainium or Inferentia type, 0 for a type without accelerators;
    None for an accelerated type whose count the catalog does not have."""
    known = lookup(instance_type)
    if known is not None:
        return known.accelerators
    return None if is_accelerated(instance_type) else 0


def listed_types() -> frozenset[str]:
    """Every instance type HyperPod accepts, as the pinned botocore lists them."""
    return cluster_instance_types()


def is_listed(instance_type: str) -> bool:
    return instance_type in cluster_instance_types()
