"""The consumer example: another team's app imports `infra`, uses an existing VPC and a shared EKS cluster."""

from __future__ import annotations

import json

from tests.conftest import CONSUMER_APP as APP_FILE
from tests.conftest import ROOT, cdk_json_context


def _types(template):
    return [r["Type"] for r in template["Resources"].values()]


def test_existing_vpc_is_used_not_created(consumer):
    _, templates, _ = consumer
    types = _types(templates["TeamHyperPod"])
    assert "AWS::EC2::VPC" not in types and "AWS::EC2::Subnet" not in types
    assert types.count("AWS::EKS::Cluster") == 1 and types.count("AWS::SageMaker::Cluster") == 1
    (cluster,) = [r for r in templates["TeamHyperPod"]["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert cluster["Properties"]["VpcConfig"]["Subnets"] == ["subnet-0bbbbbbbbbbbbbbb1"]
    assert {"Key": "cost-center", "Value": "ml-research"} in cluster["Properties"]["Tags"]


def test_shared_eks_cluster_is_joined_not_created(consumer):
    _, templates, _ = consumer
    template = templates["TeamHyperPodOnSharedEks"]
    types = _types(template)
    assert "AWS::EKS::Cluster" not in types and "AWS::EC2::SecurityGroup" in types  # the installer's group only
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    assert "cluster/platform-eks" in json.dumps(cluster["Properties"]["Orchestrator"])
    assert cluster["Properties"]["VpcConfig"]["SecurityGroupIds"] == ["sg-0ccccccccccccccc1"]
    (ingress,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert ingress["Properties"]["GroupId"] == "sg-0ddddddddddddddd1"
    entries = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::EKS::AccessEntry"]
    assert [e["ClusterName"] for e in entries] == ["platform-eks"]


def test_consumer_app_passes_cdk_nag(consumer):
    outdir, _, _ = consumer
    report = json.loads((outdir / "validation-report.json").read_text())
    names = {p["pluginName"] for p in report["pluginReports"]}
    assert "AwsSolutions" in names
    for plugin in report["pluginReports"]:
        assert plugin["conclusion"] == "success", json.dumps(plugin["violations"])[:3000]


def test_the_integration_takes_under_twenty_lines():
    source = APP_FILE.read_text()
    body = source.split("def hyperpod_in_existing_vpc")[1].split("\ndef ")[0]
    code = [line for line in body.splitlines()[1:] if line.strip() and not line.strip().startswith(('"""', "#"))]
    assert len(code) < 20, len(code)


def test_the_consumer_app_synthesizes_without_warnings(consumer):
    """Imported subnets name their route tables (else six @aws-cdk/aws-ec2:noSubnetRouteTableId warnings)."""
    _, _, stacks = consumer
    warnings = [(node.node.path, entry.data) for stack in stacks for node in stack.node.find_all()
                for entry in node.node.metadata if entry.type == "aws:cdk:warning"]
    assert warnings == []


def test_the_consumer_app_sets_the_apps_feature_flags_and_synthesizes_with_the_projects_node():
    consumer_json = json.loads((APP_FILE.parent / "cdk.json").read_text())
    assert consumer_json["context"] == cdk_json_context()  # else the CDK CLI lists the flags not configured
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\nconsumer-synth:", 1)[1].split("\n\n", 1)[0]
    assert "cd examples/consumer_app && $(CDK) synth" in target and "$(PY) app.py" in target  # the wheel's Node
    assert "$(MAKE) --no-print-directory consumer-synth" in makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
