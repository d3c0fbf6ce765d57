"""The EKS add-ons this product installs: each add-on's name and, where it runs on EKS Pod Identity, the namespace
and service account its credentials go to. One declaration per add-on; every fact names its source.

The constructs build every add-on from these with ``infra.constructs.addon.EksAddon``; the config, ``hpctl
preflight`` and the tests read the names from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# AWS's Terraform modules for HyperPod on EKS, read at this commit (written ${_TF} in the comments below):
_TF = ("awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/"
       "7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules")


@dataclass(frozen=True)
class PodIdentityFacts:
    """Where an add-on's controller takes its credentials: ``namespace/service_account``.

    ``association``: ``addon`` when the add-on's own ``PodIdentityAssociations`` carry it; ``separate`` when a
    ``AWS::EKS::PodIdentityAssociation`` of its own must (an add-on version that does not declare that it needs
    IAM permissions refuses the add-on's associations).
    """

    namespace: str
    service_account: str
    association: Literal["addon", "separate"] = "addon"


@dataclass(frozen=True)
class Workload:
    """A workload an add-on runs, whose readiness tells that the add-on works (what AWS's modules wait for)."""

    kind: Literal["deployment", "daemonset"]
    namespace: str
    name: str


NodeKind = Literal["every", "nvidia", "neuron", "efa"]


@dataclass(frozen=True)
class NodePod:
    """A DaemonSet that puts one pod on each node of a kind, taking one of the node's pod slots (the kubelet's
    maxPods counts every pod, host-network ones too).

    ``runs_on``: ``every`` node, or the nodes whose instance type has NVIDIA GPUs, Neuron devices or EFA by the
    instance catalog (``infra/facts/instances.py``; a type whose count it lacks is counted as having the device, so
    the budget errs on the full side). ``source``: where the DaemonSet and its placement were read.
    """

    namespace: str
    name: str
    runs_on: NodeKind
    source: str


@dataclass(frozen=True)
class AddonFacts:
    """One EKS add-on: its name, its Pod Identity facts (None: the add-on takes no AWS credentials of its own),
    where both were read, the workloads that must be available before what needs the add-on is created, the
    version AWS's own setup pins (None: none pinned, EKS installs its default for the Kubernetes version), and the
    pods it puts on every node (``node_pods``; its Deployments run once per cluster and are not listed there)."""

    name: str
    pod_identity: PodIdentityFacts | None
    source: str
    workloads: tuple[Workload, ...] = ()
    version: str | None = None
    node_pods: tuple[NodePod, ...] = ()


# The control plane's add-ons; HyperPod supports only the VPC CNI (../shared/ARCHITECTURE.md, "Facts: EKS side").
# vpc-cni, kube-proxy and eks-pod-identity-agent: ${_TF}/eks_cluster/main.tf (aws_eks_addon, lines 105-119).
# coredns is not in AWS's module (it leaves it to EKS); the name is the one deployed clusters of this product carry,
# not checked against a document here.
# Their DaemonSets, aws-node and kube-proxy in kube-system: "kubectl describe daemonset aws-node --namespace
# kube-system" and "kubectl describe daemonset kube-proxy -n kube-system" (_EKS_NET lines 167 and 4545).
_EKS_NET = ("awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/networking/"
            "eks-networking-add-ons.adoc")
VPC_CNI = AddonFacts("vpc-cni", None, f"{_TF}/eks_cluster/main.tf",
                     node_pods=(NodePod("kube-system", "aws-node", "every", f"{_EKS_NET} line 167"),))
KUBE_PROXY = AddonFacts("kube-proxy", None, f"{_TF}/eks_cluster/main.tf",
                        node_pods=(NodePod("kube-system", "kube-proxy", "every", f"{_EKS_NET} line 4545"),))
# CoreDNS runs as a Deployment (once per cluster), no pod per node.
COREDNS = AddonFacts("coredns", None, "unverified: not in AWS's Terraform module")
# Its DaemonSet: "kubectl rollout status daemonset/eks-pod-identity-agent --namespace kube-system"
# (awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/manage-access/aws-access/
# service-accounts.adoc line 976, https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html).
POD_IDENTITY_AGENT = AddonFacts(
    "eks-pod-identity-agent", None, f"{_TF}/eks_cluster/main.tf",
    (Workload("daemonset", "kube-system", "eks-pod-identity-agent"),),
    node_pods=(NodePod("kube-system", "eks-pod-identity-agent", "every",
                       "awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/manage-access/"
                       "aws-access/service-accounts.adoc line 976"),),
)
CORE = (VPC_CNI, KUBE_PROXY, COREDNS, POD_IDENTITY_AGENT)

# cert-manager, "required for HPTO": ${_TF}/hyperpod_cluster/cert_manager.tf, which waits (lines 73-75,
# `kubectl wait --for=condition=available deployment/<name> -n cert-manager`) for its three Deployments. Its version
# is pinned as AWS's module pins it: addon_version = var.cert_manager_version (cert_manager.tf line 6), default
# "v1.18.2-eksbuild.2" (${_TF}/hyperpod_cluster/variables.tf lines 129-133). Whether EKS offers it for the config's
# Kubernetes version is checked live by `hpctl preflight` (check_addon_versions), not here.
CERT_MANAGER = AddonFacts("cert-manager", None, f"{_TF}/hyperpod_cluster/cert_manager.tf", (
    Workload("deployment", "cert-manager", "cert-manager"),
    Workload("deployment", "cert-manager", "cert-manager-cainjector"),
    Workload("deployment", "cert-manager", "cert-manager-webhook"),
), version="v1.18.2-eksbuild.2")
# The operator's service account, and a separate association: ${_TF}/hyperpod_training_operator/main.tf (version
# v1.2.1-eksbuild.1 stopped declaring that it needs IAM permissions, so CreateAddon refuses the add-on's own
# associations: "Pod Identity feature is not supported for addon version", awslabs/awsome-distributed-training#1075).
TRAINING_OPERATOR = AddonFacts(
    "amazon-sagemaker-hyperpod-training-operator",
    PodIdentityFacts("aws-hyperpod", "hp-training-operator-controller-manager", association="separate"),
    f"{_TF}/hyperpod_training_operator/main.tf",
)
# Driver-level credentials go to kube-system/s3-csi-driver-sa (awsdocs/amazon-eks-user-guide@4d52b4d:latest/ug/storage/
# s3-csi.adoc lines 141-142, an IRSA setup; whether every add-on version takes Pod Identity is not verified here):
# awslabs/mountpoint-s3-csi-driver@
# 57c6bedb46e2c1281883b80dad4d5d54b438b0de:docs/CONFIGURATION.md ("Driver-Level Credentials with EKS Pod Identity"),
# and ${_TF}/hyperpod_inference_operator/iam_roles.tf (system:serviceaccount:kube-system:s3-csi-driver-sa). A separate
# association, as for the operator: it works whatever the add-on version declares.
# Its node plugin, DaemonSet s3-csi-node on every Linux node (nodeSelector kubernetes.io/os: linux only):
# awslabs/mountpoint-s3-csi-driver@005c378669a0f21a485b109bc1b90ce6975ce28a:charts/aws-mountpoint-s3-csi-driver/
# templates/node.yaml. Version 2 of the driver also runs a Mountpoint pod per mounted volume on the node that mounts
# it (mount-s3 namespace): those belong to the workloads that mount, and are not counted here.
S3_CSI = AddonFacts(
    "aws-mountpoint-s3-csi-driver",
    PodIdentityFacts("kube-system", "s3-csi-driver-sa", association="separate"),
    "https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html",
    node_pods=(NodePod("kube-system", "s3-csi-node", "every",
                       "awslabs/mountpoint-s3-csi-driver@005c378669a0f21a485b109bc1b90ce6975ce28a:charts/"
                       "aws-mountpoint-s3-csi-driver/templates/node.yaml"),),
)
# The controller's service account: ${_TF}/fsx_lustre/main.tf (aws_eks_addon.fsx_lustre_csi_driver,
# pod_identity_association), in kube-system (awsdocs/amazon-eks-user-guide@4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:
# latest/ug/storage/fsx-csi.adoc lines 74-75 and 95, "kube-system/fsx-csi-controller-sa").
# AWS's module waits for Deployment fsx-csi-controller in kube-system before it uses the driver (same file, line 53).
# Its node plugin, DaemonSet fsx-csi-node on every Linux node: kubernetes-sigs/aws-fsx-csi-driver@
# 01a892782f3c0c6862093e38d544f59df3c4afaa:charts/aws-fsx-csi-driver/templates/node-daemonset.yaml.
FSX_CSI = AddonFacts(
    "aws-fsx-csi-driver",
    PodIdentityFacts("kube-system", "fsx-csi-controller-sa"),
    f"{_TF}/fsx_lustre/main.tf",
    (Workload("deployment", "kube-system", "fsx-csi-controller"),),
    node_pods=(NodePod("kube-system", "fsx-csi-node", "every",
                       "kubernetes-sigs/aws-fsx-csi-driver@01a892782f3c0c6862093e38d544f59df3c4afaa:charts/"
                       "aws-fsx-csi-driver/templates/node-daemonset.yaml"),),
)
# No IAM role: AWS's module installs it without a pod identity association (${_TF}/task_governance/main.tf), and
# waits for Kueue's controller, Deployment kueue-controller-manager in kueue-system, before the compute quotas
# (same file, lines 105-106, its wait_for_kueue_webhook). No DaemonSet of it was read (none counted per node;
# unverified that the add-on has none).
TASK_GOVERNANCE = AddonFacts("amazon-sagemaker-hyperpod-taskgovernance", None, f"{_TF}/task_governance/main.tf",
                             (Workload("deployment", "kueue-system", "kueue-controller-manager"),))
# Container Insights: the agent's service account cloudwatch-agent in amazon-cloudwatch
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html,
# option 3's `--name cloudwatch-agent --namespace amazon-cloudwatch`; awsdocs/amazon-eks-user-guide@
# 4d52b4d05e3478582e7d10a73cbd9ba9194dd5f7:latest/ug/workloads/eks-add-ons.adoc lines 513-514).
# Its pods per node: the CloudWatch agent "as a DaemonSet" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/
# monitoring/CloudWatch-Agent-container-insights-eks.html; the DaemonSet's name, cloudwatch-agent like its service
# account, is not read there: unverified), DaemonSet fluent-bit (aws-observability/helm-charts@
# 019933111a14b07c731fd4095125c2e4cd88921b:charts/amazon-cloudwatch-observability/templates/linux/
# fluent-bit-daemonset.yaml), and the DCGM exporter and Neuron monitor the chart declares beside them
# (templates/linux/dcgm-exporter-daemonset.yaml, neuron-monitor-daemonset.yaml of the same chart; their placement on
# GPU and Neuron nodes is by the chart's values, not read here: unverified, counted on those nodes only). The chart
# also has a node-exporter DaemonSet (templates/linux/node-exporter-daemonset.yaml) whose default state in the EKS
# add-on is not read: not counted (unverified).
_CW_CHART = ("aws-observability/helm-charts@019933111a14b07c731fd4095125c2e4cd88921b:"
             "charts/amazon-cloudwatch-observability")
_CW_AGENT = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-container-insights-eks.html"
CONTAINER_INSIGHTS = AddonFacts(
    "amazon-cloudwatch-observability",
    PodIdentityFacts("amazon-cloudwatch", "cloudwatch-agent"),
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html",
    node_pods=(
        NodePod("amazon-cloudwatch", "cloudwatch-agent", "every", _CW_AGENT),
        NodePod("amazon-cloudwatch", "fluent-bit", "every", f"{_CW_CHART}/templates/linux/fluent-bit-daemonset.yaml"),
        NodePod("amazon-cloudwatch", "dcgm-exporter", "nvidia",
                f"{_CW_CHART}/templates/linux/dcgm-exporter-daemonset.yaml (placement unverified)"),
        NodePod("amazon-cloudwatch", "neuron-monitor", "neuron",
                f"{_CW_CHART}/templates/linux/neuron-monitor-daemonset.yaml (placement unverified)"),
    ),
)
# The collector's service account: ${_TF}/observability/eks_addon.tf (pod_identity_association); its namespace:
# "Namespace: hyperpod-observability; Service account: hyperpod-observability-operator-otel-collector" (AWS's page
# "Troubleshooting the Amazon SageMaker HyperPod observability add-on", section "Verify Pod Identity association",
# https://docs.aws.amazon.com/sagemaker/latest/dg/hyperpod-observability-addon-troubleshooting.html).
# Its exporters run on the nodes, but no source read here names its DaemonSets or where they run: none is counted
# per node (unverified; the pod budget says so for configs with the add-on on).
HYPERPOD_OBSERVABILITY = AddonFacts(
    "amazon-sagemaker-hyperpod-observability",
    PodIdentityFacts("hyperpod-observability", "hyperpod-observability-operator-otel-collector"),
    f"{_TF}/observability/eks_addon.tf",
)

# The HyperPod inference operator: ${_TF}/hyperpod_inference_operator/main.tf (aws_eks_addon.inference_operator). Its
# roles are IAM roles for service accounts (OIDC web identity, iam_roles.tf there), not Pod Identity: the add-on's
# configuration takes their ARNs (executionRoleArn, jumpstartGatedModelDownloadRoleArn, alb.serviceAccount.roleArn,
# keda.auth.aws.irsa.roleArn, main.tf lines 59-84). AWS's module installs it after the S3 CSI add-on (depends_on) and
# after cert-manager (hyperpod_cluster/cert_manager.tf: "required for HPTO and HPIO"). No wait on its workloads is
# read in a source: nothing of this product depends on them, so none is declared.
INFERENCE_OPERATOR = AddonFacts("amazon-sagemaker-hyperpod-inference", None,
                                f"{_TF}/hyperpod_inference_operator/main.tf")
# metrics-server, "optional for HPIO" (${_TF}/hyperpod_inference_operator/variables.tf, enable_metrics_server), which
# the Helm-to-add-on migration installs as an EKS add-on after the operator (aws/sagemaker-hyperpod-cli@
# a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/charts/inference-operator/migration/
# helm_to_addon.sh lines 1090-1097). A Deployment, no pod per node.
METRICS_SERVER = AddonFacts("metrics-server", None, f"{_TF}/hyperpod_inference_operator/main.tf")

# The inference operator's service accounts, to which its IRSA roles are trusted (${_TF}/hyperpod_inference_operator/
# iam_roles.tf): the controller, KEDA's operator and the load balancer controller in hyperpod-inference-system, and
# the model pods' service accounts (any namespace, name starting hyperpod-inference-service-account) for gated
# JumpStart models.
INFERENCE_NAMESPACE = "hyperpod-inference-system"
INFERENCE_CONTROLLER_SERVICE_ACCOUNT = "hyperpod-inference-controller-manager"
INFERENCE_KEDA_SERVICE_ACCOUNT = "keda-operator"
INFERENCE_LB_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"
INFERENCE_MODEL_SERVICE_ACCOUNT_PREFIX = "hyperpod-inference-service-account"
# Deployed as an add-on, the operator refuses an execution role whose name does not start with this ("executionRoleArn
# must have a role name with prefix 'SageMakerHyperPodInference'", aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2
# efdafe01b1005ea:helm_chart/HyperPodHelmChart/charts/inference-operator/templates/_validateRequiredValues.tpl, when
# isAddOn): the managed policy's restrictions key on it.
INFERENCE_EXECUTION_ROLE_PREFIX = "SageMakerHyperPodInference"
# The regions the operator's images are published in: the keys of image.repositoryDomainMap in the same chart's
# values.yaml (lines 10-26); the chart fails "Unsupported AWS Region" elsewhere. The add-on's own region list is not in
# a source read here (unverified that it is the same).
INFERENCE_OPERATOR_REGIONS = frozenset({
    "us-east-2", "eu-north-1", "eu-central-1", "us-west-2", "us-east-1", "eu-west-2", "ap-northeast-1",
    "ap-southeast-2", "ap-south-1", "eu-west-1", "sa-east-1", "us-west-1", "ap-southeast-1", "ap-southeast-4",
    "ap-southeast-3", "eu-south-2",
})

ALL = (*CORE, CERT_MANAGER, TRAINING_OPERATOR, S3_CSI, FSX_CSI, TASK_GOVERNANCE, CONTAINER_INSIGHTS,
       HYPERPOD_OBSERVABILITY, INFERENCE_OPERATOR, METRICS_SERVER)

# The dependencies chart's DaemonSets (aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea, the pinned
# chart, helm_chart/HyperPodHelmChart): each with the chart value that turns it on (all on in its values.yaml) and
# the nodes it runs on. The health-monitoring agent is two DaemonSets, one on the NVIDIA types of its list and one
# (-non-nvidia) on the Trainium and Inferentia ones (charts/health-monitoring-agent/templates/
# health-monitoring-agent.yaml); each node gets at most one. The device plugins: nvidia-device-plugin (subchart
# 0.16.1 of https://nvidia.github.io/k8s-device-plugin, affinity to the GPU types in values.yaml), neuron-device-plugin
# (charts/neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml, affinity to the Neuron types) and
# aws-efa-k8s-device-plugin (subchart 0.5.20 of https://aws.github.io/eks-charts/, supportedInstanceLabels: the EFA
# types). The chart's lists are taken by the device each type has in the instance catalog. Its other subcharts the
# chart turns on (training operators, MPI operator) run Deployments, not pods per node.
_CHART = "aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart"
DEPENDENCIES_CHART_NODE_PODS: tuple[tuple[str, NodePod], ...] = (
    ("health-monitoring-agent.enabled", NodePod(
        "aws-hyperpod", "health-monitoring-agent", "nvidia",
        f"{_CHART}/charts/health-monitoring-agent/templates/health-monitoring-agent.yaml")),
    ("health-monitoring-agent.enabled", NodePod(
        "aws-hyperpod", "health-monitoring-agent-non-nvidia", "neuron",
        f"{_CHART}/charts/health-monitoring-agent/templates/health-monitoring-agent.yaml")),
    ("nvidia-device-plugin.devicePlugin.enabled", NodePod(
        "kube-system", "nvidia-device-plugin", "nvidia", f"{_CHART}/values.yaml (nvidia-device-plugin.affinity)")),
    ("neuron-device-plugin.devicePlugin.enabled", NodePod(
        "kube-system", "neuron-device-plugin-daemonset", "neuron",
        f"{_CHART}/charts/neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml")),
    ("aws-efa-k8s-device-plugin.devicePlugin.enabled", NodePod(
        "kube-system", "aws-efa-k8s-device-plugin", "efa",
        f"{_CHART}/values.yaml (aws-efa-k8s-device-plugin.supportedInstanceLabels)")),
)


def addon_namespaces() -> frozenset[str]:
    """Every namespace the add-ons above run in (their Pod Identity service accounts' and their workloads')."""
    return frozenset({a.pod_identity.namespace for a in ALL if a.pod_identity}
                     | {w.namespace for a in ALL for w in a.workloads})
