"""The fleet's delivery pipeline (stacks/pipeline.py): one synth of a two-stage fleet (two accounts, two regions)
whose second cluster acknowledges a group removal, shared by this module's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config.fleet import Fleet, load_fleet
from tests.conftest import ROOT, cdk_json_context, new_app
from tests.template_lint import cfn_lint_problems

# cfn-lint findings accepted on the pipeline's templates only, with the reason.
PIPELINE_CFN_LINT_IGNORED = {
    "E3703": "CDK Pipelines writes each cross-account deploy action's RoleArn as Fn::Join of 'arn:', AWS::Partition "
             "and the role's path (aws-cdk-lib pipelines); the value is right, only its form is not the one "
             "cfn-lint prefers, and the action's configuration is not ours to rewrite.",
}
RETIRED = "retired-group"


@pytest.fixture(scope="module")
def fleet_synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Fleet, Path, dict[str, Any]]:
    from stacks.app_builder import register_nag
    from stacks.pipeline import build_pipeline

    work = tmp_path_factory.mktemp("fleet")
    prod = yaml.safe_load((ROOT / "config" / "fleet" / "prod.yaml").read_text(encoding="utf-8"))
    prod["hyperpod"]["acknowledge_group_removal"] = [RETIRED]
    (work / "prod.yaml").write_text(yaml.safe_dump(prod), encoding="utf-8")
    data = yaml.safe_load((ROOT / "config" / "fleet.example.yaml").read_text(encoding="utf-8"))
    data["clusters"][0]["config"] = str(ROOT / "config" / "default.yaml")
    data["clusters"][1]["config"] = "prod.yaml"
    (work / "fleet.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    fleet = load_fleet(work / "fleet.yaml")
    context = cdk_json_context()
    context["aws:cdk:disable-asset-staging"] = True  # as tests/conftest.py synthesize(): the templates are the same
    app = new_app(context=context, outdir=str(work / "out"))
    build_pipeline(app, fleet, "config/fleet.example.yaml")
    register_nag(app)  # a finding of either pack fails the synth, as in `make pipeline`
    app.synth()
    out = work / "out"
    template = json.loads((out / "hyperpod-fleet.template.json").read_text(encoding="utf-8"))
    return fleet, out, template


def _resources(template: dict[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == cfn_type}


def _stages(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    [pipeline] = _resources(template, "AWS::CodePipeline::Pipeline").values()
    return {stage["Name"]: stage["Actions"] for stage in pipeline["Properties"]["Stages"]}


def _project(template: dict[str, Any], action: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"][action["Configuration"]["ProjectName"]["Ref"]]


def test_one_stage_per_cluster_in_the_fleets_order(fleet_synth) -> None:
    _, _, template = fleet_synth
    assert list(_stages(template)) == ["Source", "Build", "UpdatePipeline", "Assets", "dev", "prod"]


def test_each_stage_deploys_the_apps_stacks_to_its_account_and_region(fleet_synth) -> None:
    """The stage is build_app's stacks, named as the app names them, pinned to the fleet's environment."""
    fleet, out, _ = fleet_synth
    for stage in fleet.stages:
        manifest = json.loads((out / stage.assembly / "manifest.json").read_text(encoding="utf-8"))
        stacks = {a["properties"]["stackName"]: a["environment"] for a in manifest["artifacts"].values()
                  if a["type"] == "aws:cloudformation:stack"}
        project, env = stage.config.project, f"aws://{stage.cluster.account}/{stage.cluster.region}"
        assert stacks == {f"{project}-{part}": env for part in ("network", "eks", "hyperpod", "observability")}


def test_the_stage_templates_are_the_apps(fleet_synth, default_synth) -> None:
    """The dev stage is config/default.yaml built by the app's own builder: the same resources as `cdk synth`."""
    _, out, _ = fleet_synth
    manifest = json.loads((out / "assembly-dev" / "manifest.json").read_text(encoding="utf-8"))
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "aws:cloudformation:stack":
            continue
        staged = json.loads((out / "assembly-dev" / artifact["properties"]["templateFile"]).read_text())
        app = default_synth.templates[artifact["properties"]["stackName"]]
        assert {k: v["Type"] for k, v in staged["Resources"].items()} == \
            {k: v["Type"] for k, v in app["Resources"].items()}


def test_the_guard_runs_before_every_deploy_and_preflight_after(fleet_synth) -> None:
    _, _, template = fleet_synth
    for name, actions in _stages(template).items():
        if name not in ("dev", "prod"):
            continue
        order = {a["Name"]: a["RunOrder"] for a in actions}
        deploys = [a["RunOrder"] for a in actions if a["ActionTypeId"]["Category"] == "Deploy"]
        assert len(deploys) == 8  # Prepare (change set) and Deploy (execute) of each of the four stacks
        assert order[f"Guard-{name}"] < min(deploys)
        assert order[f"Preflight-{name}"] > max(deploys)


def test_an_acknowledged_removal_waits_for_an_approval_that_names_it(fleet_synth) -> None:
    _, _, template = fleet_synth
    stages = _stages(template)
    assert [a for a in stages["dev"] if a["ActionTypeId"]["Category"] == "Approval"] == []
    [approval] = [a for a in stages["prod"] if a["ActionTypeId"]["Category"] == "Approval"]
    order = {a["Name"]: a["RunOrder"] for a in stages["prod"]}
    deploys = [a["RunOrder"] for a in stages["prod"] if a["ActionTypeId"]["Category"] == "Deploy"]
    assert order["Guard-prod"] < approval["RunOrder"] < min(deploys)
    assert approval["Configuration"]["CustomData"] == (
        f"prod (222222222222 us-east-1): hyperpod.acknowledge_group_removal {RETIRED}: the nodes of these groups "
        "are terminated")


@pytest.mark.parametrize(("step", "command"), [("Guard", "guard"), ("Preflight", "preflight")])
def test_the_steps_run_hpctl_under_the_targets_read_only_role(fleet_synth, step: str, command: str) -> None:
    fleet, _, template = fleet_synth
    stages = _stages(template)
    for stage in fleet.stages:
        name = stage.cluster.name
        [action] = [a for a in stages[name] if a["Name"] == f"{step}-{name}"]
        project = _project(template, action)
        spec = json.loads(project["Properties"]["Source"]["BuildSpec"])
        commands = spec["phases"]["build"]["commands"]
        role = stage.lookup_role_arn
        assert f"role_arn = {role}" in commands[1] and "credential_source = EcsContainer" in commands[1]
        assert commands[2] == (
            f".venv/bin/python -m hpctl {command} --config {stage.config_path} --region {stage.cluster.region} "
            f"--profile fleet-target --cdk-out cdk.out.pipeline/{stage.assembly}")
        # The step's role may assume that one role, and nothing else outside the pipeline's own resources.
        role_id = project["Properties"]["ServiceRole"]["Fn::GetAtt"][0]
        [policy] = [p for p in _resources(template, "AWS::IAM::Policy").values()
                    if {"Ref": role_id} in p["Properties"]["Roles"]]
        assumed = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "sts:AssumeRole" in s["Action"]]
        assert assumed == [{"Action": "sts:AssumeRole", "Effect": "Allow", "Resource": role}]


def test_the_lookup_role_is_cdks(fleet_synth) -> None:
    from aws_cdk import DefaultStackSynthesizer

    from infra.facts.names import CDK_BOOTSTRAP_QUALIFIER, cdk_lookup_role_arn

    assert DefaultStackSynthesizer.DEFAULT_QUALIFIER == CDK_BOOTSTRAP_QUALIFIER
    expected = (DefaultStackSynthesizer.DEFAULT_LOOKUP_ROLE_ARN.replace("${AWS::Partition}", "aws")
                .replace("${Qualifier}", CDK_BOOTSTRAP_QUALIFIER).replace("${AWS::AccountId}", "222222222222")
                .replace("${AWS::Region}", "us-east-1"))
    assert cdk_lookup_role_arn("aws", "222222222222", "us-east-1") == expected


def test_the_synth_step_runs_make_pipeline(fleet_synth) -> None:
    _, _, template = fleet_synth
    [synth] = _stages(template)["Build"]
    spec = json.loads(_project(template, synth)["Properties"]["Source"]["BuildSpec"])
    assert spec["phases"]["build"]["commands"] == ["make pipeline FLEET=config/fleet.example.yaml"]
    assert spec["artifacts"]["base-directory"] == "cdk.out.pipeline"


def test_the_pipeline_templates_pass_cfn_lint(fleet_synth) -> None:
    """The nag packs already passed (the synth fails on a finding); checkov runs in `make lint`."""
    _, out, _ = fleet_synth
    problems = [p for template in sorted(out.glob("*.template.json")) for p in cfn_lint_problems(template, "us-west-2")]
    assert [p for p in problems if p.split(": ", 1)[1].split(" ")[0] not in PIPELINE_CFN_LINT_IGNORED] == []


def test_the_artifact_buckets_are_versioned_and_encrypted(fleet_synth) -> None:
    _, out, template = fleet_synth
    buckets = list(_resources(template, "AWS::S3::Bucket").values())
    for support in out.glob("cross-region-stack-*.template.json"):
        buckets += _resources(json.loads(support.read_text()), "AWS::S3::Bucket").values()
    assert len(buckets) == 2
    for bucket in buckets:
        assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
        [rule] = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"


def test_a_star_resource_statement_with_other_actions_is_not_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resource '*' is acknowledged only for the actions CDK Pipelines writes there; a statement on '*' with any
    other action (here iam:PassRole) keeps its IAM5 finding, so nag fails the synth."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam

    from stacks import pipeline

    acknowledged: list[tuple[str, str]] = []
    monkeypatch.setattr(pipeline, "acknowledge",
                        lambda scope, finding, reason: acknowledged.append((scope.node.id, finding)))
    stack = Stack(App(), "Probe")
    for name, actions in (("Cdk", ["cloudformation:DescribeStacks", "s3:ListBucket"]),
                          ("Other", ["cloudformation:DescribeStacks", "iam:PassRole"])):
        iam.CfnPolicy(stack, name, policy_name=name, roles=["r"], policy_document={
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]})
    pipeline._harden_cdk_pipelines([stack])
    assert acknowledged == [("Cdk", "AwsSolutions-IAM5[Resource::*]")]
