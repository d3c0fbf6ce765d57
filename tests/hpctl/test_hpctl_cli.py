"""Help texts, exit codes, config and AWS error handling of the hpctl entry point; the command families of
hpctl/commands: every command is listed, and the shared options work alike on all."""

from __future__ import annotations

import argparse
import re
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
                "monitoring",
                "quotas",
                "connect",
                "ssh-config",
                "reboot",
                "replace",
                "update-software",
                "kubeconfig",
                "drift",
                "preflight",
                "guard",
                "pre-destroy",
                "render-examples",
                "jobs",
                "endpoints",
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
    assert "exit codes:" in out and "0  success" in out and "2  usage" in out


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
    client = Clients(REGION)("sagemaker")
    # botocore turns max_attempts (retries) into total_max_attempts (first try + retries) when it makes the first
    # client of the config, in place: so the shared config is read only after a client was made.
    assert client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 5}
    assert RETRY_CONFIG.retries == {"mode": "adaptive", "total_max_attempts": 5}
    assert client.meta.region_name == REGION


# --- command families and shared options ---------------------------------------------------------
# What a command needs besides the shared options before it parses.
REQUIRED = {"connect": ["i-0123456789abcdef0"], "plan": ["--checkpoint-gib", "5"], "jobs": ["list"],
            "endpoints": ["list"]}
SHARED = ["--cluster", "c1", "--config", "other.yaml", "--region", "eu-west-1", "--profile", "ops", "--json", "--debug"]
SHARED_VALUES = {
    "cluster": "c1",
    "config": "other.yaml",
    "region": "eu-west-1",
    "profile": "ops",
    "json": True,
    "debug": True,
}


def _commands_of(family: object) -> list[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    family.register(sub)  # type: ignore[attr-defined]
    return list(sub.choices)


def test_each_command_belongs_to_one_family_and_the_top_level_help_lists_them_all(run) -> None:
    by_family = [_commands_of(family) for family in cli.FAMILIES]
    every = [name for names in by_family for name in names]
    assert all(by_family), "a family that registers no command"
    assert len(every) == len(set(every)), "a command registered by two families"
    assert sorted(every) == SUBCOMMANDS
    code, out, _ = run("--help")
    assert code == 0
    listed = re.findall(r"^ {4}(\S+)", out.split("COMMAND")[-1], flags=re.MULTILINE)
    assert listed == every  # in the order of FAMILIES


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_command_takes_the_shared_options_before_or_after_it(command: str) -> None:
    parse = cli.build_parser().parse_args
    after = vars(parse([command, *REQUIRED.get(command, []), *SHARED]))
    before = vars(parse([*SHARED, command, *REQUIRED.get(command, [])]))
    assert {key: after[key] for key in SHARED_VALUES} == SHARED_VALUES
    assert {key: before[key] for key in SHARED_VALUES} == SHARED_VALUES
    bare = vars(parse([command, *REQUIRED.get(command, [])]))
    assert {key: bare[key] for key in SHARED_VALUES} == {
        "cluster": None, "config": None, "region": None, "profile": None, "json": False, "debug": False
    }


def _option(command: str, flag: str) -> argparse.Action | None:
    parser = cli.build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    return next((a for a in parser._actions if flag in a.option_strings), None)


def test_the_commands_that_change_something_take_yes_alike() -> None:
    confirming = [c for c in SUBCOMMANDS if _option(c, "--yes") is not None]
    assert confirming == ["pre-destroy", "reboot", "replace", "update-software"]
    for command in confirming:
        action = _option(command, "--yes")
        assert action is not None
        assert (action.option_strings, action.default, action.help) == (
            ["--yes", "-y"], False, "do not ask for confirmation"
        )
        parse = cli.build_parser().parse_args
        assert parse([command, "-y"]).yes is parse([command, "--yes"]).yes is True


@pytest.mark.parametrize("argv", [["wait", "--interval", "4s"], ["events", "--follow", "--interval", "2s"]])
def test_an_interval_below_the_floor_is_refused_in_one_line(run, argv: list[str]) -> None:
    code, out, err = run(*argv, "--cluster", "c1", "--region", "us-west-2")
    assert (code, out) == (2, "")
    assert err == f"hpctl: --interval {argv[-1]} is too short: at least 5s between polls\n"


def test_no_hpctl_module_imports_the_cdk() -> None:
    """Every module of the package, command families included, loads without aws-cdk-lib (the light install)."""
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import importlib, pkgutil, sys, hpctl\n"
        "names = [m.name for m in pkgutil.walk_packages(hpctl.__path__, 'hpctl.')]\n"
        "names = [n for n in names if n not in ('hpctl.__main__', 'hpctl.plan_plot')]\n"
        "for name in names: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs', 'cdk_nag'))\n"
        "print(len(names), repr(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, timeout=60)
    assert result.returncode == 0, result.stderr
    count, bad = result.stdout.split(" ", 1)
    assert int(count) > len(cli.FAMILIES) and bad.strip() == "[]"


def test_the_layout_table_of_the_docs_names_every_family_and_its_commands() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "hpctl.md").read_text(encoding="utf-8")
    section = page.split("## How the code is laid out", 1)[1]
    documented = {
        module: re.findall(r"`([^`]+)`", commands)
        for module, commands in re.findall(r"^\| `(\w+\.py)` \| (.+) \|$", section, flags=re.MULTILINE)
    }
    assert documented == {f"{f.__name__.rsplit('.', 1)[1]}.py": _commands_of(f) for f in cli.FAMILIES}


def test_main_reuses_one_parser_and_no_call_sees_another_calls_options(config_file: Path) -> None:
    """main() parses with one parser per process; a repeatable option's list is the call's own."""
    assert cli._shared_parser() is cli._shared_parser()
    first = cli.parse(["nodes", "--config", str(config_file), "--group", "a", "--group", "b"])
    second = cli.parse(["nodes", "--config", str(config_file)])
    second.group.append("changed by a handler")
    third = cli.parse(["nodes", "--config", str(config_file)])
    fourth = cli.parse(["nodes", "--config", str(config_file), "--group", "c"])
    assert (first.group, third.group, fourth.group) == (["a", "b"], [], ["c"])
    assert cli.parse(["update-software", "--config", str(config_file)]).alarm == []
    fifth = cli.parse(["nodes", "--config", str(config_file), "--cluster", "other"])
    sixth = cli.parse(["nodes", "--config", str(config_file)])
    assert (fifth.cluster, sixth.cluster) == ("other", None)
