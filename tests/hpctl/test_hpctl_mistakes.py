"""Ordinary mistakes end in one line and exit 2; region and target resolution; prompts that say what happens."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
import yaml
from hpctl_testkit import (
    CLUSTER,
    CLUSTER_ARN,
    REGION,
    cluster_description,
    config_data,
    moto_cluster,
    offer_every_type,
    stubbed,
)
from moto import mock_aws

from hpctl import cli, preflight
from hpctl.commands import terminal
from hpctl.target import parse_duration, resolve
from infra.config import parse_config

BASE = ("--cluster", CLUSTER, "--region", REGION)
NODE = "i-0123456789abcdef0"


def one_line_exit_2(code: int, err: str) -> bool:
    return code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Answer 'n' to every prompt and keep the prompts."""
    prompts: list[str] = []
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: True)
    monkeypatch.setattr(terminal, "_ask", lambda prompt: prompts.append(prompt) or "n")
    return prompts


# --- files and paths -------------------------------------------------------------------------------


def test_kubeconfig_pointing_at_a_directory_is_one_line(run, tmp_path: Path) -> None:
    eks, stub = stubbed("eks")
    stub.add_response("describe_cluster", {"cluster": {"name": "e", "arn": "arn:aws:eks:us-west-2:1:cluster/e",
                                                       "endpoint": "https://e"}})
    code, _, err = run("kubeconfig", "--eks-cluster", "e", "--region", REGION, "--kubeconfig", str(tmp_path),
                       clients={"eks": eks})
    assert one_line_exit_2(code, err) and "is a directory" in err


@pytest.mark.parametrize("clusters", ["oops", 7, {"name": "x"}])
def test_kubeconfig_whose_clusters_is_not_a_list_is_left_untouched(run, tmp_path: Path, clusters) -> None:
    path = tmp_path / "kubeconfig"
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": clusters})
    path.write_text(text)
    eks, stub = stubbed("eks")
    stub.add_response("describe_cluster", {"cluster": {"name": "e", "arn": "arn:aws:eks:us-west-2:1:cluster/e",
                                                       "endpoint": "https://e"}})
    code, _, err = run("kubeconfig", "--eks-cluster", "e", "--region", REGION, "--kubeconfig", str(path),
                       clients={"eks": eks})
    assert one_line_exit_2(code, err) and "not a list" in err
    assert path.read_text() == text


def _preflight_clients(eks_template: str) -> dict:
    sq, sq_stub = stubbed("service-quotas")
    sq_stub.add_response("list_service_quotas", {"Quotas": []})
    sso, sso_stub = stubbed("sso-admin")
    sso_stub.add_response("list_instances", {"Instances": []})
    cf, cf_stub = stubbed("cloudformation")
    offer_every_type(cf_stub, parse_config(config_data()))
    cf_stub.add_response("get_template", {"TemplateBody": eks_template})
    return {"service-quotas": sq, "sso-admin": sso, "cloudformation": cf}


@mock_aws
def test_preflight_with_a_truncated_synthesized_template_is_one_line(
    run, config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight, "head_status", lambda url: 200)
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": {"hp-eks": {
        "type": "aws:cloudformation:stack", "properties": {"templateFile": "hp-eks.template.json"}}}}))
    (tmp_path / "hp-eks.template.json").write_text('{"Resources": {"Cluster": ')
    clients = _preflight_clients(json.dumps({"Resources": {}}))
    code, _, err = run("preflight", "--config", str(config_file), "--cdk-out", str(tmp_path), clients=clients)
    assert one_line_exit_2(code, err) and "hp-eks.template.json" in err


def test_preflight_on_a_missing_cdk_out_fails(run, config_file: Path, tmp_path: Path) -> None:
    code, _, err = run("preflight", "--config", str(config_file), "--cdk-out", str(tmp_path / "nope"), clients={})
    assert one_line_exit_2(code, err) and "cdk synth" in err


def test_a_multi_line_aws_error_is_one_line(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_client_error("describe_cluster", "ValidationException", "1 validation error:\n  Value at\n 'x' failed")
    code, _, err = run("status", *BASE, clients={"sagemaker": client})
    assert code == 3 and err.count("\n") == 1 and "1 validation error: Value at 'x' failed" in err


# --- region and target ------------------------------------------------------------------------------


def _resolve(*argv: str):
    return resolve(cli.build_parser().parse_args(["status", *argv]))


def test_region_order_is_flag_then_environment_then_config(monkeypatch, write_config) -> None:
    config = str(write_config(config_data()))  # region us-west-2
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert _resolve("--config", config).region == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "ap-southeast-2")
    assert _resolve("--config", config).region == "ap-southeast-2"
    assert _resolve("--config", config, "--region", "us-east-2").region == "us-east-2"
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert _resolve("--config", config).region == "us-west-2"


def test_the_profiles_region_comes_after_the_environment_and_before_the_config(monkeypatch, write_config,
                                                                              tmp_path: Path) -> None:
    config = str(write_config(config_data()))  # region us-west-2
    (tmp_path / "aws-config").write_text("[profile ops]\nregion = eu-central-1\n[default]\nregion = sa-east-1\n")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert _resolve("--config", config, "--profile", "ops").region == "eu-central-1"
    assert _resolve("--config", config).region == "sa-east-1"  # the default profile's
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert _resolve("--config", config, "--profile", "ops").region == "eu-west-1"
    (tmp_path / "aws-config").write_text("[profile ops]\noutput = json\n")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert _resolve("--config", config, "--profile", "ops").region == "us-west-2"  # no region there: the config's


def test_a_profile_that_does_not_exist_is_one_line(run, monkeypatch, config_file: Path) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    code, out, err = run("status", "--config", str(config_file), "--profile", "missing")
    assert (code, out) == (2, "") and err == "hpctl: The config profile (missing) could not be found\n"


def test_a_region_other_than_the_configs_is_announced(run, monkeypatch, config_file: Path) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    stub.add_response("describe_cluster", cluster_description())
    _, _, err = run("drift", "--config", str(config_file), "--region", REGION, clients={"sagemaker": client})
    assert err == ""  # same region as the config: nothing to say
    _, _, err = run("drift", "--config", str(config_file), clients={"sagemaker": client})
    assert "using region eu-west-1 (from AWS_REGION, AWS_DEFAULT_REGION or the profile)" in err
    assert "not the config's us-west-2" in err


def test_the_region_of_a_cluster_arn_wins_and_a_contradicting_region_is_refused(run, monkeypatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert _resolve("--cluster", CLUSTER_ARN).region == REGION
    code, _, err = run("status", "--cluster", CLUSTER_ARN, "--region", "eu-west-1")
    assert one_line_exit_2(code, err) and "does not match" in err


def test_not_found_names_the_region(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster hp-test not found")
    code, _, err = run("status", *BASE, clients={"sagemaker": client})
    assert code == 3 and REGION in err


def test_global_flags_go_before_or_after_the_command(run) -> None:
    for argv in (("--cluster", CLUSTER, "--region", REGION, "status", "--json"),
                 ("--region", REGION, "--json", "status", "--cluster", CLUSTER)):
        client, stub = stubbed("sagemaker")
        stub.add_response("describe_cluster", cluster_description())
        stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": []})
        code, out, _ = run(*argv, clients={"sagemaker": client})
        assert code == 0 and json.loads(out)["cluster"] == CLUSTER


def test_kubeconfig_with_eks_cluster_and_region_works_outside_the_repository(run, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)  # no config/default.yaml
    eks, stub = stubbed("eks")
    stub.add_response("describe_cluster", {"cluster": {"name": "e", "arn": "arn:aws:eks:eu-west-1:1:cluster/e",
                                                       "endpoint": "https://e"}}, {"name": "e"})
    code, out, err = run("kubeconfig", "--eks-cluster", "e", "--region", "eu-west-1", "--print", clients={"eks": eks})
    assert code == 0, err
    assert yaml.safe_load(out)["users"][0]["user"]["exec"]["args"][:2] == ["--region", "eu-west-1"]


def test_an_explicit_cluster_never_falls_back_to_the_config_eks_cluster(run, config_file: Path) -> None:
    sm, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())  # no Orchestrator
    code, _, err = run("kubeconfig", "--config", str(config_file), "--cluster", "other", "--print",
                       clients={"sagemaker": sm, "eks": stubbed("eks")[0]})
    assert one_line_exit_2(code, err) and "--eks-cluster" in err


def test_drift_warns_when_the_cluster_is_not_the_configs(run, config_file: Path) -> None:
    sm, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    _, _, err = run("drift", "--config", str(config_file), "--cluster", "other", clients={"sagemaker": sm})
    assert "warning: comparing cluster other with the config of hp-test" in err


# --- validation ------------------------------------------------------------------------------------


def test_unknown_status_lists_the_valid_ones(run) -> None:
    code, _, err = run("nodes", *BASE, "--status", "Broken", clients={"sagemaker": stubbed("sagemaker")[0]})
    assert one_line_exit_2(code, err) and "Running" in err and "Failure" in err


def test_status_is_case_insensitive(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": [
        {"InstanceGroupName": "workers", "InstanceId": NODE, "InstanceType": "ml.g5.8xlarge",
         "LaunchTime": "2025-01-01T00:00:00Z", "InstanceStatus": {"Status": "Failure"}}]})
    code, data = run.json("nodes", *BASE, "--status", "failure", clients={"sagemaker": client})
    assert code == 0 and [n["instance_id"] for n in data] == [NODE]


@mock_aws
def test_unknown_group_lists_the_groups(run) -> None:
    moto_cluster(boto3.client("sagemaker", region_name=REGION))
    code, _, err = run("nodes", *BASE, "--group", "wokers")
    assert one_line_exit_2(code, err) and "no instance group wokers" in err and "(have: workers)" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("update-software", *BASE, "--batch-percent", "101"), "out of range: 1-100"),
        (("update-software", *BASE, "--wait-interval", "5000"), "out of range: 0-3600"),
        (("wait", *BASE, "--interval", "0"), "at least 5s"),
        (("events", *BASE, "--since", "1h", "--until", "2h"), "is not before --until"),
    ],
)
def test_out_of_range_values_are_one_line(run, argv, says) -> None:
    code, _, err = run(*argv, clients={"sagemaker": stubbed("sagemaker")[0]})
    assert one_line_exit_2(code, err) and says in err


def test_durations_add_up() -> None:
    assert parse_duration("2h30m") == 9000
    assert parse_duration("1d2h") == 93600
    assert parse_duration("90") == 90


def test_events_level_is_case_insensitive(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("list_cluster_events", {"Events": []})
    code, data = run.json("events", *BASE, "--level", "warn", clients={"sagemaker": client})
    assert code == 0 and data == []


# --- what the prompts say ---------------------------------------------------------------------------


def test_replace_prompt_lists_the_nodes_and_says_the_volumes_go(run, tty) -> None:
    code, _, _ = run("replace", NODE, *BASE, clients={"sagemaker": stubbed("sagemaker")[0]})
    assert code == 1
    assert NODE in tty[0] and "root and secondary volumes" in tty[0]


def test_update_software_without_a_batch_size_says_all_at_once(run, tty) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_response("describe_cluster", cluster_description())
    run("update-software", *BASE, "--group", "workers", clients={"sagemaker": client})
    assert "every node of workers is patched at once" in tty[0]
