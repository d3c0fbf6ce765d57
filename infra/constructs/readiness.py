"""Waiting, during a deployment, until what a HyperPod feature needs on the cluster is ready.

CloudFormation waits only on CloudFormation resources. With ``Continuous`` provisioning the HyperPod cluster
resource completes before any node exists, and CloudFormation's EKS add-on handler is reported to take DEGRADED
as success, so an add-on or chart that needs running nodes (or another add-on's webhook) would be installed too
early. AWS's own Terraform waits in three places
(awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1,
1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf): for a HyperPod node and the Pod
Identity agent before the operators, observability, task governance and FSx (scripts/wait-for-hyperpod-nodes.sh:
60 polls 30 s apart, then 300 s for the agent's pods), for cert-manager's Deployments before the training operator
(modules/hyperpod_cluster/cert_manager.tf, 300 s each) and for Kueue's controller before the compute quotas
(modules/task_governance/main.tf, 300 s). A ``Readiness`` is that wait as a custom resource: make whatever
needs the thing depend on it.

Time limits, and why (``timeout`` defaults to 35 minutes: AWS's 30 for a node plus 5 for the agent):

- The wait outlives one Lambda invocation (at most 15 minutes), so it uses aws-cdk-lib's Provider in asynchronous
  mode: an onEvent function records, for a Create, when the wait ends (``Data.Deadline``, now + ``timeout``); the
  framework's waiter state machine then calls the isComplete function every 30 s
  (``READINESS_QUERY_INTERVAL_SECONDS``), which checks once and answers ready, not yet, or fails.
- Our failure comes before the framework's. The framework answers "Operation timed out" once it has called
  isComplete 1 + total/interval times, each call at least one interval after the last (aws-cdk-lib 2.275.0
  custom-resources/lib/provider-framework/waiter-state-machine.js: Retry IntervalSeconds, MaxAttempts, BackoffRate
  1; util.js: MaxAttempts = totalTimeout / queryInterval). The isComplete function raises its own one-line error
  on its first call after the deadline, and that call comes before the last one the framework makes as long as
  ``timeout`` + interval <= total timeout: ``MAX_TIMEOUT_SECONDS`` (50 minutes) + 30 s <= 55 minutes
  (``READINESS_TOTAL_TIMEOUT_SECONDS``).
- CloudFormation's own limit comes last: ``ServiceTimeout`` is the maximum, 3600 s ("an integer from 1 to 3600",
  AWS::CloudFormation::CustomResource). It covers the onEvent call, the wait, one interval and one isComplete call
  (at most ``CHECK_FUNCTION_TIMEOUT_SECONDS``, 3 minutes): 50 + 0.5 + 3 minutes and the framework's start, within
  the hour, and it exceeds the framework's 55 minutes, so even a framework that gave up answers before
  CloudFormation stops waiting.
- Every isComplete call ends: each kubectl request within 20 s (``--request-timeout``), all of them within the
  function's own deadline (``runtime.common.deadline``); a check that runs out of time in one call is "not yet".

Update and Delete answer at once (a wait has nothing to change or undo). The checks run with the installer's role,
whose cluster-admin access entry and API ingress the resource depends on, like a ``HelmRelease``. An ``addon``
check gives the role ``eks:DescribeAddon`` on this cluster's add-ons (``HelmInstaller.allow_describe_addons``).
The runtime side: ``infra/runtime/chart_installer/handler/readiness.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import CustomResource, Duration, Stack, Token
from constructs import Construct

from infra.constructs.helm_release import (
    READINESS_QUERY_INTERVAL_SECONDS,
    READINESS_TOTAL_TIMEOUT_SECONDS,
    HelmInstaller,
)
from infra.errors import ConfigError
from infra.runtime.chart_installer.handler.properties import NAMESPACE as NAMESPACE_NAME
from infra.runtime.chart_installer.handler.readiness import (
    ADDON_NAME,
    CHECK_FUNCTION_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    OBJECT_NAME,
    SELECTOR,
    Check,
)

RESOURCE_TYPE = "Custom::HyperPodReadiness"
# CloudFormation's longest wait for a custom resource: "The value must be an integer from 1 to 3600. The default
# value is 3600 seconds (1 hour)" (AWS::CloudFormation::CustomResource ServiceTimeout,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-cloudformation-customresource.html).
SERVICE_TIMEOUT_SECONDS = 3600
DEFAULT_TIMEOUT = Duration.minutes(35)

__all__ = ["CHECK_FUNCTION_TIMEOUT_SECONDS", "DEFAULT_TIMEOUT", "MAX_TIMEOUT_SECONDS",
           "READINESS_QUERY_INTERVAL_SECONDS", "READINESS_TOTAL_TIMEOUT_SECONDS", "RESOURCE_TYPE",
           "SERVICE_TIMEOUT_SECONDS", "Readiness", "ReadinessCheck"]


def _valid(key: str, value: str, pattern: re.Pattern[str], rule: str) -> str:
    """``value`` checked against ``pattern`` unless it is a token (resolved at deploy time; the handler checks it)."""
    if not Token.is_unresolved(value) and not pattern.match(value):
        raise ConfigError(key, value, rule)
    return value


@dataclass(frozen=True)
class ReadinessCheck(Check):
    """One thing to wait for: the handler's ``Check`` (its fields and wire format, one definition for both sides),
    built through the constructors below, which refuse at synth what the handler would refuse at deploy time."""

    @staticmethod
    def nodes(selector: str, minimum: int = 1, description: str = "") -> ReadinessCheck:
        """At least ``minimum`` nodes matching the label ``selector`` are Ready; ``description`` names them in the
        error (default "nodes labelled <selector>")."""
        _valid("selector", selector, SELECTOR, "must be a label selector of key=value, key!=value or key terms")
        if minimum < 1:
            raise ConfigError("minimum", minimum, "must be at least 1")
        return ReadinessCheck("nodes", selector=selector, minimum=minimum, description=description)

    @staticmethod
    def daemonset(namespace: str, name: str) -> ReadinessCheck:
        """The DaemonSet runs at least one ready pod (not every node's: a node in repair must not hold a deployment)."""
        return ReadinessCheck("daemonset", namespace=_namespace(namespace), name=_object(name))

    @staticmethod
    def deployment(namespace: str, name: str) -> ReadinessCheck:
        """The Deployment is Available with at least one available replica."""
        return ReadinessCheck("deployment", namespace=_namespace(namespace), name=_object(name))

    @staticmethod
    def endpoints(namespace: str, service: str) -> ReadinessCheck:
        """The Service has a ready endpoint address: a webhook behind it answers."""
        return ReadinessCheck("endpoints", namespace=_namespace(namespace), name=_object(service))

    @staticmethod
    def addon(addon_name: str) -> ReadinessCheck:
        """The EKS add-on ``addon_name`` of the installer's cluster is ACTIVE (a failed one fails the wait at once;
        make the Readiness depend on the add-on resource)."""
        return ReadinessCheck("addon", name=_valid("addon_name", addon_name, ADDON_NAME, "must be an EKS add-on name"))


def _namespace(value: str) -> str:
    return _valid("namespace", value, NAMESPACE_NAME, "must be a Kubernetes namespace name (DNS-1123 label)")


def _object(value: str) -> str:
    return _valid("name", value, OBJECT_NAME, "must be a Kubernetes object name (DNS-1123 subdomain)")


class Readiness(CustomResource):
    """Waits, at most ``timeout`` (1 to 50 minutes), until every check passes, tested in order; the deployment
    fails otherwise with one line naming ``what`` ("HyperPod nodes", "cert-manager", "Kueue webhook"), what the
    first unready check saw and the command that shows it, e.g. ``HyperPod nodes not ready within 35 min: 0 of at
    least 1 nodes labelled sagemaker.amazonaws.com/cluster-name=demo Ready (0 registered) (kubectl get nodes -l
    sagemaker.amazonaws.com/cluster-name=demo)``. The time limits and why: this module's docstring."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        installer: HelmInstaller,
        checks: Sequence[ReadinessCheck],
        what: str,
        timeout: Duration = DEFAULT_TIMEOUT,
    ) -> None:
        if not checks:
            raise ConfigError("checks", [], "a Readiness needs at least one check")
        if not what.strip() or "\n" in what:
            raise ConfigError("what", what, "must be a short phrase on one line")
        seconds = timeout.to_seconds()
        if not 60 <= seconds <= MAX_TIMEOUT_SECONDS:
            raise ConfigError("timeout", f"{seconds:g} s", f"must be 1 to {MAX_TIMEOUT_SECONDS // 60} minutes: the "
                              "readiness provider gives up after "
                              f"{READINESS_TOTAL_TIMEOUT_SECONDS // 60} minutes")
        stack = Stack.of(scope)
        provider = installer.readiness_provider()
        if any(check.kind == "addon" for check in checks):
            installer.allow_describe_addons()
        super().__init__(
            scope, construct_id,
            service_token=provider.service_token,
            service_timeout=Duration.seconds(SERVICE_TIMEOUT_SECONDS),
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": installer.eks_cluster.cluster_name,
                "Region": stack.region,
                "What": what.strip(),
                "TimeoutSeconds": str(int(seconds)),
                "Checks": stack.to_json_string([check.to_property() for check in checks]),
            },
        )
        self.what = what.strip()
        self.checks = tuple(checks)
        # The checks need the access entry and the path to the API server, as a HelmRelease does.
        self.node.add_dependency(installer.access_entry, installer.api_ingress)
