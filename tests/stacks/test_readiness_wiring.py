"""What waits for what in the app: a HyperPod node and the Pod Identity agent before whatever runs pods on the
nodes, cert-manager before the training operator, Kueue before the quotas, the FSx driver before its claim."""

from __future__ import annotations

import copy

import pytest
from aws_cdk import App, Stack

from infra.composition import _nodes_ready, needs_nodes, nodes_to_wait_for
from infra.config import parse_config
from infra.facts.names import HYPERPOD_CLUSTER_NAME_LABEL
from tests.conftest import default_config_data, mutate, new_app
from tests.template_graph import readiness_checks, waits_for

NODES = "HyperPod nodes"


def _readiness(resources, what):
    return [(k, r) for k, r in resources.items()
            if r["Type"] == "Custom::HyperPodReadiness" and r["Properties"]["What"] == what]


def test_the_hyperpod_stack_ends_with_a_wait_for_a_node_and_the_pod_identity_agent(default_synth):
    resources = default_synth.template("hyperpod")["Resources"]
    ((ready_id, ready),) = _readiness(resources, NODES)
    (cluster_id,) = default_synth.resources("hyperpod", "AWS::SageMaker::Cluster")
    assert cluster_id in ready["DependsOn"]
    assert readiness_checks(ready) == [
        {"kind": "nodes", "selector": f"{HYPERPOD_CLUSTER_NAME_LABEL}=hyperpod-dev", "minimum": 1},
        {"kind": "daemonset", "namespace": "kube-system", "name": "eks-pod-identity-agent"},
    ]
    # AWS's 30 minutes for a node and 5 for the agent, within CloudFormation's hour.
    assert ready["Properties"]["TimeoutSeconds"] == "2100"
    assert ready["Properties"]["ServiceTimeout"] == "3600"
    # The observability stack's add-ons come after the whole HyperPod stack, so after this wait.
    app = default_synth.app
    assert app.observability is not None and app.hyperpod in app.observability.dependencies


@pytest.mark.parametrize("variant", ["addons_synth", "governance_synth"])
def test_every_addon_of_the_hyperpod_stack_waits_for_the_node(request, variant):
    synth = request.getfixturevalue(variant)
    resources = synth.template("hyperpod")["Resources"]
    ((ready_id, _),) = _readiness(resources, NODES)
    addons = [k for k, r in resources.items() if r["Type"] == "AWS::EKS::Addon"]
    assert addons
    for addon_id in addons:
        assert waits_for(resources, addon_id, ready_id), addon_id


@pytest.mark.parametrize(("variant", "part", "expected"), [
    ("addons_synth", "hyperpod", {"cert-manager"}),
    ("governance_synth", "hyperpod", {"amazon-sagemaker-hyperpod-taskgovernance"}),
    ("fsx_synth", "storage", {"aws-fsx-csi-driver"}),
])
def test_every_addon_readiness_checks_that_eks_reports_it_active(request, variant, part, expected):
    resources = request.getfixturevalue(variant).template(part)["Resources"]
    seen = set()
    for ready in [r for r in resources.values() if r["Type"] == "Custom::HyperPodReadiness"]:
        what = ready["Properties"]["What"]
        if what == NODES:
            continue
        checks = readiness_checks(ready)
        assert checks[0] == {"kind": "addon", "name": what}
        assert all(c["kind"] == "deployment" for c in checks[1:]) and len(checks) > 1
        seen.add(what)
    assert seen == expected


def test_the_installer_may_describe_only_this_clusters_addons(governance_synth):
    resources = governance_synth.template("hyperpod")["Resources"]
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                  for s in r["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "eks:DescribeAddon"]
    (statement,) = statements
    resource = statement["Resource"]
    assert ":addon/hyperpod-dev-eks/*" in str(resource), resource


def _config(changes):
    return parse_config(mutate(changes))


def test_nothing_that_needs_nodes_means_no_wait():
    config = _config({"observability": {"container_insights": False, "dashboard": False,
                                         "prometheus": {"enabled": False}, "grafana": {"enabled": False},
                                         "alerts": {"enabled": False}}})
    assert needs_nodes(config) == []
    assert _nodes_ready(Stack(App(), "S"), config, installer=None, hyperpod_cluster=None) is None  # type: ignore[arg-type]


def test_groups_that_ask_for_no_node_say_what_is_not_waited_for():
    data = default_config_data()
    groups = copy.deepcopy(data["hyperpod"]["instance_groups"])
    for group in groups:
        group["instance_count"] = 0
        group["deep_health_checks"] = []
    config = parse_config(mutate({"hyperpod": {"instance_groups": groups}}, data))
    assert nodes_to_wait_for(config) == 0
    assert "observability" in needs_nodes(config)
    stack = Stack(App(), "S")
    assert _nodes_ready(stack, config, installer=None, hyperpod_cluster=None) is None  # type: ignore[arg-type]
    (note,) = [m.data for m in stack.node.metadata if m.type == "aws:cdk:info"]
    assert note.startswith("observability: not waiting for HyperPod nodes")
    assert "DEGRADED until a node joins" in note


def _readiness_built(data) -> list[str]:
    """The Readiness constructs a config builds (the construct tree only: nothing is synthesized)."""
    from infra.constructs.readiness import Readiness
    from stacks.app_builder import build_app

    built = build_app(new_app(), parse_config(data), nag=False)
    return sorted(n.node.path for stack in built.stacks for n in stack.node.find_all() if isinstance(n, Readiness))


def _no_node_groups(data, **changes):
    groups = copy.deepcopy(data["hyperpod"]["instance_groups"])
    for group in groups:
        group.update(changes)
    return groups


def test_storage_waits_for_nothing_when_no_node_is_waited_for():
    """With no node asked for, the FSx controller can never become available: its claim waits for the add-on
    resource only, as everything else does then (a wait that cannot pass would roll the stack back)."""
    data = mutate({"storage": {"fsx_lustre": {"enabled": True}}})
    assert any(path.endswith("FsxCsiDriver/Addon/Ready") for path in _readiness_built(data))
    data["hyperpod"]["instance_groups"] = _no_node_groups(data, instance_count=0, deep_health_checks=[])
    assert _readiness_built(data) == []


@pytest.mark.parametrize("changes", [{"capacity": "spot"}, {"wait_for_nodes": False}])
def test_spot_capacity_or_the_switch_means_no_wait(changes):
    data = default_config_data()
    if "wait_for_nodes" in changes:
        data["hyperpod"].update(changes)
    else:
        data["hyperpod"]["instance_groups"] = _no_node_groups(data, **changes)
    config = parse_config(data)
    stack = Stack(App(), "S")
    assert _nodes_ready(stack, config, installer=None, hyperpod_cluster=None) is None  # type: ignore[arg-type]
    (note,) = [m.data for m in stack.node.metadata if m.type == "aws:cdk:info"]
    assert "not waiting for HyperPod nodes" in note
