"""HyperPod's node-health taint, and, for each workload this product installs, whether it tolerates it: AWS's choice
in its dependencies chart and its Terraform modules, which this product keeps.

The taint. During deep health checks HyperPod taints a node ``sagemaker.amazonaws.com/node-health-status=
Unschedulable:NoSchedule`` (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:
1.architectures/7.sagemaker-hyperpod-eks/nvidia-cloud-functions/docs/TROUBLESHOOTING.md lines 343-348, "SageMaker
HyperPod applies NoSchedule taint during deep health checks"); AWS's dependencies chart tolerates exactly that
(key, operator Equal, value Unschedulable, effect NoSchedule: DEPENDENCIES_CHART below, values.yaml lines 206-209
and 266-269). The same key is the node label whose values are Schedulable, Unschedulable (deep health checks
running), UnschedulablePendingReplacement and UnschedulablePendingReboot (failed checks)
(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html, "Node health
status labels"). Whether a node pending replacement or reboot carries a taint of that key too, and with which
effect, no source read here says: unverified.

A NoSchedule taint keeps new pods off the node; pods already running stay ("Existing pods continue running, but new
pods cannot be scheduled on the tainted node", the same TROUBLESHOOTING.md lines 350-351). So the choice matters
for a pod created while its node is tainted: a DaemonSet's pod on a node that joins or restarts during checks, a
controller rescheduled then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

HEALTH_STATUS_KEY = "sagemaker.amazonaws.com/node-health-status"
DEEP_HEALTH_CHECK_VALUE = "Unschedulable"
DEEP_HEALTH_CHECK_EFFECT = "NoSchedule"

DEPENDENCIES_CHART = "aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart"
_TF = ("awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/"
       "7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/modules")

# What a workload's tolerations let through:
# - every taint: tolerations without a key (operator Exists) for NoSchedule and NoExecute, so also this one;
# - deep health checks: the deep-health-check taint above (and no key-less toleration);
# - none: neither; its pods stay off a node while HyperPod checks it.
# - add-on default: this product sends the add-on no tolerations (as AWS's module), so its pods tolerate what EKS's
#   manifest of the add-on says, which is not read here.
Tolerance = Literal["every taint", "deep health checks", "none", "add-on default"]


@dataclass(frozen=True)
class TaintChoice:
    """One workload (``Kind/name`` as the chart renders it, or an EKS add-on's name) and what it tolerates."""

    workload: str
    installed_by: str
    tolerates: Tolerance
    source: str  # where AWS makes that choice


def _chart(workload: str, tolerates: Tolerance, path: str) -> TaintChoice:
    return TaintChoice(workload, "dependencies chart", tolerates, f"{DEPENDENCIES_CHART}/{path}")


# The workloads of the dependencies chart with the subcharts its values switch on (and the device plugin values of
# infra/config/device_plugins.py, which set no toleration): tests/contract/test_health_taints.py renders them.
CHART_WORKLOADS: tuple[TaintChoice, ...] = (
    _chart("DaemonSet/health-monitoring-agent", "every taint",
           "charts/health-monitoring-agent/templates/health-monitoring-agent.yaml lines 162-166"),
    _chart("DaemonSet/health-monitoring-agent-non-nvidia", "every taint",
           "charts/health-monitoring-agent/templates/health-monitoring-agent.yaml lines 253-257"),
    _chart("DaemonSet/hyperpod-dependencies-nvidia-device-plugin", "deep health checks", "values.yaml lines 202-209"),
    _chart("DaemonSet/hyperpod-dependencies-nvidia-device-plugin-mps-control-daemon", "deep health checks",
           "values.yaml lines 202-209 (the NVIDIA chart gives its MPS daemon the same tolerations)"),
    _chart("DaemonSet/hyperpod-dependencies-aws-efa-k8s-device-plugin", "deep health checks",
           "values.yaml lines 260-269"),
    _chart("DaemonSet/neuron-device-plugin-daemonset", "deep health checks",
           "charts/neuron-device-plugin/templates/k8s-neuron-device-plugin.yaml lines 22-31"),
    _chart("Deployment/hyperpod-dependencies-mpi-operator", "deep health checks",
           "charts/mpi-operator/values.yaml lines 24-28"),
    _chart("Deployment/hyperpod-dependencies-training-operators", "none",
           "charts/training-operators/templates/Deployment/training-operator-kubeflow-Deployment.yaml"
           " (no tolerations)"),
)

# The EKS add-ons (infra.facts.addons.ALL, by name): what this product sends is what AWS's module sends.
ADDONS: tuple[TaintChoice, ...] = (
    TaintChoice("cert-manager", "EKS add-on", "every taint", f"{_TF}/hyperpod_cluster/cert_manager.tf lines 11-61"),
    TaintChoice("vpc-cni", "EKS add-on", "add-on default", f"{_TF}/eks_cluster/main.tf lines 103-108"),
    TaintChoice("kube-proxy", "EKS add-on", "add-on default", f"{_TF}/eks_cluster/main.tf lines 110-115"),
    TaintChoice("eks-pod-identity-agent", "EKS add-on", "add-on default", f"{_TF}/eks_cluster/main.tf lines 117-122"),
    TaintChoice("coredns", "EKS add-on", "add-on default", "not in AWS's module (unverified)"),
    TaintChoice("amazon-sagemaker-hyperpod-training-operator", "EKS add-on", "add-on default",
                f"{_TF}/hyperpod_training_operator/main.tf lines 57-68"),
    TaintChoice("aws-mountpoint-s3-csi-driver", "EKS add-on", "add-on default",
                f"{_TF}/hyperpod_inference_operator/main.tf lines 32-37"),
    TaintChoice("aws-fsx-csi-driver", "EKS add-on", "add-on default", f"{_TF}/fsx_lustre/main.tf lines 34-44"),
    TaintChoice("amazon-sagemaker-hyperpod-taskgovernance", "EKS add-on", "add-on default",
                f"{_TF}/task_governance/main.tf lines 85-90"),
    TaintChoice("amazon-cloudwatch-observability", "EKS add-on", "add-on default",
                "not in AWS's HyperPod module (unverified)"),
    TaintChoice("amazon-sagemaker-hyperpod-observability", "EKS add-on", "add-on default",
                f"{_TF}/observability/eks_addon.tf lines 7-72 (its configuration sets no tolerations)"),
    TaintChoice("amazon-sagemaker-hyperpod-inference", "EKS add-on", "add-on default",
                f"{_TF}/hyperpod_inference_operator/main.tf lines 53-84 (its configuration sets no tolerations)"),
    TaintChoice("metrics-server", "EKS add-on", "every taint",
                f"{_TF}/hyperpod_inference_operator/main.tf lines 39-51"),
)


def _matches(toleration: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """Kubernetes' rule for one toleration and one taint: same effect or none; no key with Exists matches every
    key; else the same key, and Exists, or Equal (the default operator) with the same value."""
    if toleration.get("effect") not in (None, "", effect):
        return False
    operator = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return operator == "Exists"
    if toleration["key"] != key:
        return False
    return operator == "Exists" or toleration.get("value", "") == value


def tolerates(tolerations: Iterable[Mapping[str, Any]], key: str, value: str, effect: str) -> bool:
    return any(_matches(t, key, value, effect) for t in tolerations)


def tolerance(tolerations: Iterable[Mapping[str, Any]] | None) -> Tolerance:
    """What ``tolerations`` (a pod spec's, or an add-on's configuration values') let through, as classified above."""
    found = list(tolerations or [])
    if all(tolerates(found, "any.example.com/taint", "any", effect) for effect in ("NoSchedule", "NoExecute")):
        return "every taint"
    if tolerates(found, HEALTH_STATUS_KEY, DEEP_HEALTH_CHECK_VALUE, DEEP_HEALTH_CHECK_EFFECT):
        return "deep health checks"
    return "none"
