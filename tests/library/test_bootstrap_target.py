"""scripts/bootstrap_target.py: the environment `make bootstrap` bootstraps, with STS stubbed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from hpctl.aws import Clients
from infra.errors import ConfigError
from tests.conftest import ROOT, default_config_data

_spec = importlib.util.spec_from_file_location("scripts_bootstrap_target", ROOT / "scripts" / "bootstrap_target.py")
assert _spec is not None and _spec.loader is not None
bootstrap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bootstrap)

DEFAULT = str(ROOT / "config" / "default.yaml")
CALLER = {"UserId": "AIDAEXAMPLE", "Account": "444455556666", "Arn": "arn:aws:iam::444455556666:user/deployer"}


@pytest.fixture
def sts():
    """A Clients whose STS answers one GetCallerIdentity; the test fails if more or fewer calls are made."""
    client = boto3.client("sts", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield Clients("us-west-2", preset={"sts": client}), stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def no_sts():
    """A Clients whose STS has no response queued: any call raises."""
    client = boto3.client("sts", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client):
        yield Clients("us-west-2", preset={"sts": client})


def test_explicit_account_and_the_configs_region(no_sts):
    assert bootstrap.bootstrap_target(DEFAULT, "111122223333", None, no_sts) == "aws://111122223333/us-west-2"


def test_the_credentials_account_when_none_is_given(sts):
    clients, stubber = sts
    stubber.add_response("get_caller_identity", CALLER, {})
    assert bootstrap.bootstrap_target(DEFAULT, None, "eu-west-1", clients) == "aws://444455556666/eu-west-1"


def test_the_configs_pinned_account_before_the_credentials(tmp_path: Path, no_sts):
    config = tmp_path / "pinned.yaml"
    config.write_text(yaml.safe_dump(default_config_data() | {"account": "777788889999"}))
    assert bootstrap.bootstrap_target(str(config), None, None, no_sts) == "aws://777788889999/us-west-2"


@pytest.mark.parametrize(("account", "region", "key"),
                         [("1111", None, "ACCOUNT"), ("111122223333", "mars-1", "REGION")])
def test_bad_arguments_are_refused_naming_the_variable(account, region, key, no_sts):
    with pytest.raises(ConfigError, match=f"{key}: "):
        bootstrap.bootstrap_target(DEFAULT, account, region, no_sts)


def test_main_prints_the_target_and_reports_errors_in_one_line(monkeypatch, capsys, sts):
    clients, stubber = sts
    monkeypatch.setattr(bootstrap, "Clients", lambda region: clients)
    assert bootstrap.main(["--config", DEFAULT, "--account", "111122223333", "--region", ""]) == 0
    assert capsys.readouterr().out == "aws://111122223333/us-west-2\n"

    assert bootstrap.main(["--config", DEFAULT, "--account", "12"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    stubber.add_client_error("get_caller_identity", "ExpiredToken", "The security token is expired")
    assert bootstrap.main(["--config", DEFAULT]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the credentials' account (pass ACCOUNT=...)") and "ExpiredToken" in err


def test_trust_options_for_a_fleet_target() -> None:
    """`make bootstrap TRUST=... EXECUTION_POLICIES=...`: the options of `cdk bootstrap` (aws-cdk CLI's --trust and
    --cloudformation-execution-policies), one pair per value."""
    admin = "arn:aws:iam::aws:policy/AdministratorAccess"
    assert bootstrap.trust_options("111111111111, 333333333333", admin) == [
        "--trust", "111111111111", "--trust", "333333333333", "--cloudformation-execution-policies", admin]
    assert bootstrap.trust_options("", "") == []


@pytest.mark.parametrize(("trust", "policies", "key"), [
    ("111111111111", "", "EXECUTION_POLICIES"),  # the CDK CLI refuses --trust without them; refused first here
    ("", "arn:aws:iam::aws:policy/AdministratorAccess", "TRUST"),
    ("1111", "arn:aws:iam::aws:policy/AdministratorAccess", "TRUST"),
    ("111111111111", "AdministratorAccess", "EXECUTION_POLICIES"),
])
def test_trust_without_its_other_half_is_refused(trust: str, policies: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        bootstrap.trust_options(trust, policies)
    assert caught.value.key == key


def test_main_prints_the_trust_options(capsys) -> None:
    admin = "arn:aws:iam::aws:policy/AdministratorAccess"
    assert bootstrap.main(["--trust-options", "--trust", "111111111111", "--execution-policies", admin]) == 0
    assert capsys.readouterr().out == f"--trust 111111111111 --cloudformation-execution-policies {admin}\n"
    assert bootstrap.main(["--trust-options", "--trust", "111111111111"]) == 2
    assert capsys.readouterr().err.startswith("error: Invalid configuration: EXECUTION_POLICIES: required with TRUST")
