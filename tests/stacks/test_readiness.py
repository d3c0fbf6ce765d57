"""A Readiness in a stack: the installer's asynchronous provider, its time limits in the order that lets our own
error reach CloudFormation, DescribeAddon on this cluster's add-ons only, and cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Duration, Environment, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from cdk_nag import AwsSolutionsChecks

from infra.constructs.helm_release import READINESS_QUERY_INTERVAL_SECONDS, HelmInstaller
from infra.constructs.readiness import MAX_TIMEOUT_SECONDS, RESOURCE_TYPE, Readiness, ReadinessCheck
from infra.errors import ConfigError
from infra.guards.nag_pack import HyperPodChecks
from tests.conftest import cdk_json_context, new_app
from tests.template_lint import cfn_lint_problems

NODES = "sagemaker.amazonaws.com/cluster-name=demo"


@dataclass
class Built:
    template: dict[str, Any]
    outdir: Path

    def of_type(self, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == cfn_type}


def _installer_stack(outdir: Path) -> tuple[Any, Stack, HelmInstaller]:
    app = new_app(context={**cdk_json_context(), "aws:cdk:disable-asset-staging": True}, outdir=str(outdir))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    Validations.of(app).add_plugins(HyperPodChecks(app))
    stack = Stack(app, "Waits", env=Environment(account="111122223333", region="us-west-2"))
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0",
                                      availability_zones=["us-west-2a", "us-west-2b"],
                                      private_subnet_ids=["subnet-01111111111111111", "subnet-02222222222222222"],
                                      private_subnet_route_table_ids=["rtb-01111111111111111", "rtb-02222222222222222"])
    installer = HelmInstaller(
        stack, "Installer", eks_cluster=eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="hp-eks"),
        vpc=vpc, subnets=vpc.private_subnets,
        eks_cluster_security_group=ec2.SecurityGroup.from_security_group_id(stack, "ClusterSg", "sg-0123456789abcdef0"),
    )
    return app, stack, installer


def _synth(outdir: Path, with_readiness: bool) -> Built:
    app, stack, installer = _installer_stack(outdir)
    if with_readiness:
        Readiness(stack, "HyperPodNodes", installer=installer, what="HyperPod nodes",
                  checks=[ReadinessCheck.nodes(NODES, description="HyperPod nodes of demo"),
                          ReadinessCheck.daemonset("kube-system", "eks-pod-identity-agent")])
        Readiness(stack, "CertManager", installer=installer, what="cert-manager", timeout=Duration.minutes(10),
                  checks=[ReadinessCheck.addon("cert-manager"),
                          ReadinessCheck.deployment("cert-manager", "cert-manager-webhook"),
                          ReadinessCheck.endpoints("cert-manager", "cert-manager-webhook")])
    assembly = app.synth()
    return Built(assembly.get_stack_by_name("Waits").template, outdir)


@pytest.fixture(scope="module")
def waits(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _synth(tmp_path_factory.mktemp("waits"), with_readiness=True)


@pytest.fixture(scope="module")
def no_waits(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _synth(tmp_path_factory.mktemp("no-waits"), with_readiness=False)


def _functions(built: Built) -> dict[str, dict[str, Any]]:
    return {f["Properties"]["Handler"]: f for f in built.of_type("AWS::Lambda::Function").values()
            if str(f["Properties"].get("Handler")).startswith("runtime.")}


def _statements(built: Built, role_prefix: str) -> list[dict[str, Any]]:
    return [s for p in built.of_type("AWS::IAM::Policy").values()
            if any(r["Ref"].startswith(role_prefix) for r in p["Properties"]["Roles"])
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_an_installer_without_readiness_has_no_waiter(no_waits: Built) -> None:
    assert no_waits.of_type("AWS::StepFunctions::StateMachine") == {}
    assert set(_functions(no_waits)) == {"runtime.chart_installer.handler.on_event"}
    assert "eks:DescribeAddon" not in json.dumps(_statements(no_waits, "InstallerRole"))


def test_readiness_uses_one_asynchronous_provider_of_the_installer(waits: Built) -> None:
    (machine,) = waits.of_type("AWS::StepFunctions::StateMachine").values()
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert "framework-isComplete" in definition and "framework-onTimeout" in definition
    functions = _functions(waits)
    installer = functions["runtime.chart_installer.handler.on_event"]["Properties"]
    for handler in ("runtime.chart_installer.handler.readiness.on_event",
                    "runtime.chart_installer.handler.readiness.is_complete"):
        props = functions[handler]["Properties"]
        # The installer's role (its access entry admits the checks), code asset, layer and VPC placement.
        for shared in ("Role", "Code", "Layers", "VpcConfig"):
            assert props[shared] == installer[shared], (handler, shared)
    resources = waits.of_type(RESOURCE_TYPE)
    assert len(resources) == 2
    tokens = {json.dumps(r["Properties"]["ServiceToken"]) for r in resources.values()}
    assert len(tokens) == 1 and "ReadinessProviderframeworkonEvent" in tokens.pop()
    (framework,) = [f for k, f in waits.of_type("AWS::Lambda::Function").items()
                    if k.startswith("InstallerReadinessProviderframeworkonEvent")]
    env = framework["Properties"]["Environment"]["Variables"]
    assert "ReadinessCheck" in json.dumps(env["USER_IS_COMPLETE_FUNCTION_ARN"])


def test_our_deadline_comes_before_the_frameworks_which_comes_before_cloudformations(waits: Built) -> None:
    (machine,) = waits.of_type("AWS::StepFunctions::StateMachine").values()
    text = "".join(part for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1] if isinstance(part, str))
    found = re.search(r'"Retry":\[\{"ErrorEquals":\["States.ALL"\],"IntervalSeconds":(\d+),"MaxAttempts":(\d+),'
                      r'"BackoffRate":(\d+)\}\]', text)
    assert found, text
    retry = {"IntervalSeconds": int(found[1]), "MaxAttempts": int(found[2]), "BackoffRate": int(found[3])}
    assert retry["IntervalSeconds"] == READINESS_QUERY_INTERVAL_SECONDS and retry["BackoffRate"] == 1
    framework_gives_up = retry["IntervalSeconds"] * retry["MaxAttempts"]  # at the earliest
    for resource in waits.of_type(RESOURCE_TYPE).values():
        props = resource["Properties"]
        service_timeout, wait = int(props["ServiceTimeout"]), int(props["TimeoutSeconds"])
        assert service_timeout > framework_gives_up > wait
        # The first isComplete call after our deadline is one the framework still makes.
        assert MAX_TIMEOUT_SECONDS + retry["IntervalSeconds"] <= framework_gives_up
    assert {int(r["Properties"]["TimeoutSeconds"]) for r in waits.of_type(RESOURCE_TYPE).values()} == {2100, 600}


def test_the_checks_reach_the_handler_in_order(waits: Built) -> None:
    props = waits.template["Resources"]["CertManager"]["Properties"]
    assert props["What"] == "cert-manager" and props["ClusterName"] == "hp-eks"
    assert json.loads(props["Checks"]) == [
        {"kind": "addon", "name": "cert-manager"},
        {"kind": "deployment", "namespace": "cert-manager", "name": "cert-manager-webhook"},
        {"kind": "endpoints", "namespace": "cert-manager", "service": "cert-manager-webhook"},
    ]
    nodes = json.loads(waits.template["Resources"]["HyperPodNodes"]["Properties"]["Checks"])[0]
    assert nodes == {"kind": "nodes", "selector": NODES, "minimum": 1, "description": "HyperPod nodes of demo"}


def test_each_wait_depends_on_the_access_entry_and_the_api_ingress(waits: Built) -> None:
    resources = waits.template["Resources"]
    for resource in waits.of_type(RESOURCE_TYPE).values():
        assert {resources[d]["Type"] for d in resource["DependsOn"]} >= {
            "AWS::EKS::AccessEntry", "AWS::EC2::SecurityGroupIngress"}


def test_describe_addon_is_allowed_on_this_clusters_addons_only(waits: Built) -> None:
    (statement,) = [s for s in _statements(waits, "InstallerRole") if "eks:DescribeAddon" in json.dumps(s["Action"])]
    assert statement["Action"] == "eks:DescribeAddon"
    assert statement["Resource"] == "arn:aws:eks:us-west-2:111122223333:addon/hp-eks/*"
    # parliament's resource types agree: DescribeAddon takes addon/<cluster>/<name>/<id> (a cluster ARN would not do).
    with warnings.catch_warnings():  # parliament imports pkg_resources, which setuptools marks deprecated
        warnings.simplefilter("ignore")
        import parliament
    document = {"Version": "2012-10-17", "Statement": [statement]}
    assert parliament.analyze_policy_string(json.dumps(document)).findings == []


def test_cdk_nag_is_clean_and_each_framework_finding_is_acknowledged_on_one_resource(waits: Built) -> None:
    report = json.loads((waits.outdir / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    nag = plugins["AwsSolutions"]
    assert nag["conclusion"] == "success" and nag["violations"] == []
    acknowledged = set()
    for finding in nag.get("suppressedViolations", []):
        assert len(finding["violatingConstructs"]) == 1, finding["ruleName"]
        assert len(finding["reason"]) >= 30
        path = finding["violatingConstructs"][0]["constructPath"]
        acknowledged.add((finding["ruleName"], path.split("/Provider/")[-1].split("/")[0]))
    for rule in ("AwsSolutions-SF1", "AwsSolutions-SF2"):
        assert (rule, "waiter-state-machine") in acknowledged, sorted(acknowledged)
    assert plugins.get("HyperPod", {"conclusion": "success"})["conclusion"] == "success"


def test_cfn_lint_reports_nothing(waits: Built) -> None:
    assert cfn_lint_problems(waits.outdir / "Waits.template.json") == []


@pytest.mark.parametrize(("make", "key"), [
    (lambda: ReadinessCheck.daemonset("Kube System", "agent"), "namespace"),
    (lambda: ReadinessCheck.deployment("cert-manager", "Web_Hook"), "name"),
    (lambda: ReadinessCheck.nodes("a in (b)"), "selector"),
    (lambda: ReadinessCheck.nodes(NODES, minimum=0), "minimum"),
    (lambda: ReadinessCheck.addon("-cert"), "addon_name"),
])
def test_a_malformed_check_is_refused_at_synth_naming_its_key(make: Any, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make()
    assert raised.value.key == key


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"checks": []}, "checks"),
    ({"timeout": Duration.minutes(51)}, "timeout"),
    ({"timeout": Duration.seconds(30)}, "timeout"),
    ({"what": "two\nlines"}, "what"),
])
def test_a_readiness_out_of_bounds_is_refused_at_synth(tmp_path: Path, kwargs: dict[str, Any], key: str) -> None:
    _, stack, installer = _installer_stack(tmp_path)
    arguments = {"installer": installer, "what": "HyperPod nodes", "checks": [ReadinessCheck.nodes(NODES)], **kwargs}
    with pytest.raises(ConfigError) as raised:
        Readiness(stack, "Wait", **arguments)
    assert raised.value.key == key


def test_a_check_built_at_synth_is_the_check_the_handler_reads():
    from infra.runtime.chart_installer.handler.readiness import _check

    checks = [ReadinessCheck.nodes("sagemaker.amazonaws.com/cluster-name=demo", minimum=2, description="nodes"),
              ReadinessCheck.daemonset("kube-system", "eks-pod-identity-agent"),
              ReadinessCheck.deployment("cert-manager", "cert-manager-webhook"),
              ReadinessCheck.endpoints("kueue-system", "kueue-webhook-service"),
              ReadinessCheck.addon("cert-manager")]
    for index, check in enumerate(checks):
        read = _check(check.to_property(), index)
        assert (read.kind, read.namespace, read.name, read.selector, read.minimum, read.description) == (
            check.kind, check.namespace, check.name, check.selector, check.minimum, check.description)
