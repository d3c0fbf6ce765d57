"""docs/architecture.md is regenerated from the session's default synth and must match the checked-in file."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("scripts_diagram", ROOT / "scripts" / "diagram.py")
assert _spec is not None and _spec.loader is not None
diagram = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = diagram  # dataclasses look their module up while the class is created
_spec.loader.exec_module(diagram)

ARCHITECTURE = ROOT / "docs" / "architecture.md"


@pytest.fixture(scope="module")
def rendered(default_synth):
    return diagram.render(default_synth.templates, diagram.stack_dependencies(default_synth.app))


def test_checked_in_architecture_document_is_current(rendered):
    assert ARCHITECTURE.read_text(encoding="utf-8") == rendered, (
        "docs/architecture.md is stale: run `make diagram` and commit the result"
    )


def test_diagram_has_a_subgraph_per_stack_and_the_deployment_order(rendered, default_synth):
    assert "```mermaid\nflowchart LR\n" in rendered
    subgraphs = re.findall(r'^  subgraph (\w+)\["([^ "]+) ', rendered, flags=re.MULTILINE)
    assert [name for _, name in subgraphs] == ["hyperpod-dev-network", "hyperpod-dev-eks", "hyperpod-dev-hyperpod",
                                               "hyperpod-dev-observability"]
    assert set(default_synth.templates) == {name for _, name in subgraphs}
    assert "  hyperpod_dev_eks --> hyperpod_dev_hyperpod\n" in rendered
    assert "  hyperpod_dev_hyperpod --> hyperpod_dev_observability\n" in rendered


def test_hyperpod_cluster_waits_for_the_chart_and_the_scripts(rendered):
    cluster = "hyperpod_dev_hyperpod_AWS_SageMaker_Cluster"
    assert f"hyperpod_dev_hyperpod_Custom_HyperPodHelmRelease -. DependsOn .-> {cluster}" in rendered
    assert f"hyperpod_dev_hyperpod_Custom_CDKBucketDeployment -. DependsOn .-> {cluster}" in rendered
    assert '["HyperPod cluster<br/>hyperpod-dev"]' in rendered
    assert '["4 EKS add-ons<br/>coredns, eks-pod-identity-agent, kube-proxy, vpc-cni"]' in rendered


def test_counts_table_matches_the_templates(rendered, default_synth):
    for stack, template in default_synth.templates.items():
        assert f"| `{stack}` | {len(template['Resources'])} |" in rendered


def test_render_is_deterministic_and_shows_fsx_and_counts():
    templates = {
        "p-storage": {"Resources": {
            "FileSystemB": {"Type": "AWS::FSx::FileSystem"},
            "KeyB": {"Type": "AWS::KMS::Key"},
            "KeyA": {"Type": "AWS::KMS::Key"},
            "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
                "Statement": [{"Principal": {"Service": "pods.eks.amazonaws.com"}}]}}},
        }},
        "p-network": {"Resources": {f"Subnet{i}": {"Type": "AWS::EC2::Subnet"} for i in range(3)}},
    }
    reordered = {k: {"Resources": dict(reversed(v["Resources"].items()))} for k, v in reversed(templates.items())}
    text = diagram.render(templates, {"p-storage": ["p-network"]})
    assert text == diagram.render(reordered, {"p-storage": ["p-network"]})
    assert text.index('subgraph p_network["p-network') < text.index('subgraph p_storage["p-storage')
    assert '["FSx for Lustre file system"]' in text and '["2 KMS keys"]' in text and '["3 subnets"]' in text
    assert '["IAM role<br/>for pods.eks.amazonaws.com"]' in text
    assert "  p_network --> p_storage\n" in text
