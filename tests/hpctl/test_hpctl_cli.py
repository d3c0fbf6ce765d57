"""Help texts, exit codes, config and AWS error handling of the hpctl entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import EndpointConnectionError
from hpctl_testkit import REGION, stubbed

from hpctl import cli
from hpctl.aws import RETRY_CONFIG, Clients

SUBCOMMANDS = sorted(cli.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]


def test_every_command_is_there() -> None:
    assert (
        sorted(
            [
                "clusters",
                "status",
                "nodes",
                "wait",
                "events",
                "connect",
                "ssh-config",
                "reboot",
                "replace",
                "update-software",
                "kubeconfig",
                "drift",
                "preflight",
                "pre-destroy",
                "render-examples",
                "plan",
            ]
        )
        == SUBCOMMANDS
    )


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_of_every_command_has_an_example_and_exit_codes(run, command: str) -> None:
    code, out, _ = run(command, "--help")
    assert code == 0
    assert "example:" in out
    assert f"hpctl {command}" in out.split("example:")[1] or command in out.split("example:")[1]
    assert "exit codes:" in out and "4  timeout" in out


def test_top_level_help_lists_exit_codes(run) -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert "exit codes:" in out and "3  AWS error" in out


def test_python_dash_m_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hpctl", "--help"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=30,
    )
    assert result.returncode == 0
    assert "update-software" in result.stdout


def test_unknown_command_is_a_usage_error(run) -> None:
    code, _, err = run("frobnicate")
    assert code == 2
    assert "invalid choice" in err


def test_bad_config_is_one_line_and_exit_2(run, write_config) -> None:
    path = write_config({"project": "hp", "region": "us-west-2"})
    code, out, err = run("status", "--config", str(path))
    assert code == 2
    assert out == ""
    assert "Invalid configuration" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_config_file_is_exit_2(run, tmp_path: Path) -> None:
    code, _, err = run("status", "--config", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "no such file" in err


def test_access_denied_is_one_line_and_exit_3(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_client_error(
        "describe_cluster",
        "AccessDeniedException",
        "User is not authorized to perform sagemaker:DescribeCluster",
    )
    code, out, err = run("status", "--cluster", "c1", "--region", REGION, clients={"sagemaker": client})
    assert code == 3
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "access denied for DescribeCluster" in err


def test_throttling_after_retries_says_so(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_client_error("describe_cluster", "ThrottlingException", "Rate exceeded", http_status_code=400)
    code, _, err = run("status", "--cluster", "c1", "--region", REGION, clients={"sagemaker": client})
    assert code == 3
    assert "throttled" in err and "try again later" in err


def test_cluster_not_found_is_exit_3(run) -> None:
    client, stub = stubbed("sagemaker")
    stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster c1 not found")
    code, _, err = run("status", "--cluster", "c1", "--region", REGION, clients={"sagemaker": client})
    assert code == 3
    assert "not found" in err


class _Unreachable:
    def describe_cluster(self, **_: object) -> None:
        raise EndpointConnectionError(endpoint_url="https://api.sagemaker.us-west-2.amazonaws.com/")


def test_endpoint_error_is_one_line_and_exit_3(run) -> None:
    code, _, err = run("status", "--cluster", "c1", "--region", REGION, clients={"sagemaker": _Unreachable()})
    assert code == 3
    assert "cannot reach the AWS endpoint" in err and err.count("\n") == 1


def test_no_credentials_is_one_line_and_exit_3(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    code, _, err = run("status", "--cluster", "c1", "--region", REGION)
    assert code == 3
    assert "no AWS credentials found" in err and "Traceback" not in err


def test_no_region_is_a_usage_error(run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.chdir(tmp_path)  # no config/default.yaml here
    code, _, err = run("status", "--cluster", "c1")
    assert code == 2
    assert "no region" in err


def test_region_comes_from_the_config(config_file: Path) -> None:
    from hpctl.target import resolve

    args = cli.build_parser().parse_args(["status", "--config", str(config_file)])
    target = resolve(args)
    assert (target.cluster, target.region) == ("hp-test", "us-west-2")
    args = cli.build_parser().parse_args(["status", "--config", str(config_file), "--cluster", "other"])
    assert resolve(args).cluster == "other"


def test_clients_use_retries_with_backoff() -> None:
    # botocore stores max_attempts (retries) as total_max_attempts (first try + retries)
    assert RETRY_CONFIG.retries == {"mode": "adaptive", "total_max_attempts": 5}
    client = Clients(REGION)("sagemaker")
    assert client.meta.config.retries["mode"] == "adaptive"
    assert client.meta.region_name == REGION
