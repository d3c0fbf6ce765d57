"""The instance catalog (infra/facts/instances.py) is the one source of instance facts: every reader agrees with it,
every fact names its source, every type is botocore's or flagged, and it is a leaf module."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpctl import examples
from hpctl.commands.plan import _groups as planned_groups
from hpctl.errors import UsageError
from infra.config import InstanceGroupConfig
from infra.errors import ConfigError
from infra.facts import instances
from infra.facts.instances import CATALOG, NOT_IN_BOTOCORE, accelerators_per_instance, is_accelerated, lookup
from infra.facts.ip_plan import UNKNOWN_TYPE_IPS, ips_per_instance
from infra.guards.nag_pack import hyperpod_accelerated_deep_health_checks
from tests.conftest import ROOT, default_config_data

# Types the catalog does not hold: a future GPU, Trainium and Inferentia type and a future CPU type.
NOT_IN_CATALOG = ["ml.p9.48xlarge", "ml.trn9.48xlarge", "ml.inf2.48xlarge", "ml.m9.large"]
EVERY_TYPE = [*CATALOG, *NOT_IN_CATALOG]
FACTS = ("gpus", "neuron", "efa", "ipv4_per_eni", "network_cards")


def test_every_type_is_in_botocores_list_or_flagged_as_not_listed():
    listed = instances.listed_types()
    unflagged = [t for t in CATALOG if t not in listed and t not in NOT_IN_BOTOCORE]
    assert not unflagged, f"not in botocore's ClusterInstanceType list: flag them in NOT_IN_BOTOCORE: {unflagged}"
    stale = [t for t in NOT_IN_BOTOCORE if t not in CATALOG or t in listed]
    assert not stale, f"flagged as not listed, but botocore lists them (or the catalog lacks them): {stale}"
    assert all(CATALOG[t].listed == (t in listed) for t in CATALOG)


def test_every_accelerated_type_botocore_lists_is_in_the_catalog():
    assert {t for t in instances.listed_types() if is_accelerated(t)} <= set(CATALOG)


def test_every_figure_names_its_source_and_only_figures_do():
    for name, known in CATALOG.items():
        for fact in FACTS:
            assert (known.source(fact) is not None) == (getattr(known, fact) is not None), (name, fact)
        assert known.source("listed") == instances.BOTOCORE
        assert known.source("accelerator") == instances.FAMILY_SOURCE
        assert (known.source("accelerators") is None) == (known.accelerators is None), name
        assert (known.source("eks_ips_per_node") is None) == (known.eks_ips_per_node is None), name
        assert (known.source("max_pods") is None) == (known.max_pods is None), name


def test_the_counts_fit_the_accelerator_of_the_family():
    for name, known in CATALOG.items():
        if known.accelerator == "nvidia":
            assert known.gpus != 0 and known.neuron in (0, None), name
        elif known.accelerator == "neuron":
            assert known.gpus == 0 and known.neuron != 0, name
        else:
            assert (known.gpus, known.neuron, known.accelerators) == (0, 0, 0), name


def test_figures_the_sources_settled():
    # The Neuron devices hpctl plan counts (AWS's HyperPod CLI, the Neuron documentation).
    trainium = ("ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.3xlarge")
    assert [CATALOG[t].accelerators for t in trainium] == [16, 16, 1]
    # HyperPod's example: 50 on the primary card + 31 other cards.
    assert CATALOG["ml.p5.48xlarge"].eks_ips_per_node == 81
    # The replaced IP table had 30 IPv4 per interface for these; EC2 (through the VPC CNI's table) has 50.
    assert CATALOG["ml.g5.12xlarge"].ipv4_per_eni == CATALOG["ml.g6.16xlarge"].ipv4_per_eni == 50
    # The sources disagree on EFA of ml.p6e-gb200.36xlarge: no count rather than a guess.
    assert CATALOG["ml.p6e-gb200.36xlarge"].efa is None


@pytest.mark.parametrize("instance_type", EVERY_TYPE)
def test_every_reader_agrees_with_the_catalog(instance_type):
    known = lookup(instance_type)
    accelerated = is_accelerated(instance_type)
    # The nag pack's SM4: an accelerated group without deep health checks is a finding.
    group = {"InstanceGroupName": "workers", "InstanceType": instance_type}
    verdict = hyperpod_accelerated_deep_health_checks({"InstanceGroups": [group]}, {}, "Cluster")
    assert (verdict == ["workers"]) == accelerated
    # The IP plan.
    ips = known.eks_ips_per_node if known is not None else None
    assert ips_per_instance(instance_type) == (UNKNOWN_TYPE_IPS if ips is None else ips)
    # hpctl render-examples: the catalog's GPUs and EFA devices, or both options when it lacks one.
    node = SimpleNamespace(name="workers", instance_type=instance_type, instance_count=2, capacity="on_demand")
    if known is not None and known.gpus is not None and known.efa is not None:
        assert examples.accelerators(node) == (known.gpus, known.efa)
    else:
        with pytest.raises(UsageError, match="in the instance catalog"):
            examples.accelerators(node)
    cluster = SimpleNamespace(hyperpod=SimpleNamespace(instance_groups=[node]))
    if instances.accelerator_kind(instance_type) == "nvidia":
        assert examples.gpu_group(cluster) is node
    else:
        with pytest.raises(UsageError, match="no instance group with NVIDIA GPUs"):
            examples.gpu_group(cluster)
    # hpctl plan: GPUs or Neuron devices per instance.
    count = accelerators_per_instance(instance_type)
    assert count == (known.accelerators if known is not None else None if accelerated else 0)
    if count:
        assert planned_groups(cluster, None)[0] == [(node, count)]
    else:
        with pytest.raises(UsageError, match="no instance group with accelerators"):
            planned_groups(cluster, None)
    # The config's instance-type check: the types botocore lists.
    fields = {**default_config_data()["hyperpod"]["instance_groups"][0], "instance_type": instance_type}
    if known is not None and known.listed:
        assert InstanceGroupConfig.model_validate(fields).instance_type == instance_type
    else:
        with pytest.raises((ConfigError, ValueError), match="not a HyperPod instance type"):
            InstanceGroupConfig.model_validate(fields)


def _project_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    return {n for n in names if n.split(".")[0] in {"infra", "hpctl", "stacks"}}


def test_the_catalog_is_a_leaf_and_no_construct_imports_a_guard():
    assert _project_imports(ROOT / "infra" / "facts" / "instances.py") <= {"infra.facts.aws_lists"}
    for path in sorted((ROOT / "infra" / "constructs").rglob("*.py")):
        guards = {n for n in _project_imports(path) if n.startswith("infra.guards")}
        assert not guards, f"{path.relative_to(ROOT)} imports {guards}: a construct reads facts, never a guard"
