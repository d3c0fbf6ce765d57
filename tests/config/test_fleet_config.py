"""The fleet file (infra/config/fleet.py): read and refused like every config, one line naming the key."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config.fleet import load_fleet
from infra.errors import ConfigError
from tests.conftest import ROOT, default_config_data

EXAMPLE = ROOT / "config" / "fleet.example.yaml"


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    # Absolute paths: the fleet file of a test lives in tmp_path.
    for cluster in data["clusters"]:
        cluster["config"] = str((EXAMPLE.parent / cluster["config"]).resolve())
    return data


def _write(tmp_path: Path, data: dict[str, Any], name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _refusal(tmp_path: Path, data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load_fleet(_write(tmp_path, data))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_example_fleet_is_two_stages_in_order_two_accounts_two_regions() -> None:
    fleet = load_fleet(EXAMPLE)
    assert [(s.cluster.name, s.config.project, s.config.account, s.config.region) for s in fleet.stages] == [
        ("dev", "hyperpod-dev", "111111111111", "us-west-2"), ("prod", "hyperpod-prod", "222222222222", "us-east-1")]
    assert fleet.pipeline.source.connection is not None
    # Paths relative to the fleet file's folder, as the pipeline's steps pass them to hpctl from the repository root.
    assert [Path(s.config_path).resolve() for s in fleet.stages] == [
        ROOT / "config" / "default.yaml", ROOT / "config" / "fleet" / "prod.yaml"]
    assert [s.assembly for s in fleet.stages] == ["assembly-dev", "assembly-prod"]
    assert fleet.stages[1].lookup_role_arn == \
        "arn:aws:iam::222222222222:role/cdk-hnb659fds-lookup-role-222222222222-us-east-1"


def test_one_project_twice_in_one_account_and_region_is_refused(tmp_path: Path) -> None:
    data = _example()
    data["clusters"][1].update(config=data["clusters"][0]["config"], account="111111111111", region="us-west-2")
    assert _refusal(tmp_path, data) == (
        f"Invalid configuration in {tmp_path / 'fleet.yaml'}: clusters.1.config: project hyperpod-dev is already "
        "clusters.0's in account 111111111111 region us-west-2: their stacks would be the same stacks; give one "
        f"another project (got {data['clusters'][0]['config']!r}).")


def test_one_project_in_two_accounts_is_accepted(tmp_path: Path) -> None:
    data = _example()
    data["clusters"][1].update(config=data["clusters"][0]["config"], region="us-west-2")
    assert [s.config.project for s in load_fleet(_write(tmp_path, data)).stages] == ["hyperpod-dev"] * 2


@pytest.mark.parametrize(("edit", "key", "words"), [
    (lambda d: d["clusters"][1].update(region="us-east-9"), "clusters.1.region",
     "us-east-9 is not a region where SageMaker is available (per botocore)"),
    (lambda d: d["pipeline"].update(region="mars-1"), "pipeline.region", "mars-1 is not a region"),
    (lambda d: d["clusters"][0].update(account="12345"), "clusters.0.account", "should match pattern"),
    (lambda d: d["clusters"][1].update(region="cn-north-1"), "clusters.1.region",
     "not in the partition of pipeline.region us-west-2"),
    (lambda d: d["clusters"][1].update(name="dev"), "clusters.1.name", "already the name of clusters.0"),
    (lambda d: d["clusters"].clear(), "clusters", "at least 1 item"),
    (lambda d: d["clusters"][0].update(stage=1), "clusters.0.stage", "unknown key"),
    (lambda d: d["pipeline"]["source"].update(codecommit={"repository": "r"}), "pipeline.source",
     "give exactly one of connection, codecommit, s3 (got connection, codecommit)"),
    (lambda d: d["pipeline"]["source"].pop("connection"), "pipeline.source", "(got none)"),
    (lambda d: d["pipeline"]["source"]["connection"].update(connection_arn="arn:aws:s3:::bucket"),
     "pipeline.source.connection.connection_arn", "should match pattern"),
    (lambda d: d["clusters"][0].update(config="nowhere.yaml"), "clusters.0.config", "no such file"),
])
def test_a_bad_fleet_is_one_line_naming_the_key(tmp_path: Path, edit, key: str, words: str) -> None:
    data = _example()
    edit(data)
    message = _refusal(tmp_path, data)
    assert f": {key}: " in message and words in message


def test_a_cluster_config_that_names_another_region_is_refused(tmp_path: Path) -> None:
    data = _example()
    data["clusters"][0]["region"] = "us-east-1"
    message = _refusal(tmp_path, data)
    assert ": clusters.0.region: " in message and "says region us-west-2; the two must agree" in message


def test_a_cluster_config_error_names_its_own_file(tmp_path: Path) -> None:
    config = default_config_data()
    config["eks"]["version"] = "1.20"
    config_path = _write(tmp_path, config, "bad.yaml")
    data = _example()
    data["clusters"][0]["config"] = str(config_path)
    message = _refusal(tmp_path, data)
    assert message.startswith(f"Invalid configuration in {config_path}: eks.version: ")


def test_the_pipeline_app_refuses_a_bad_fleet_in_one_line(tmp_path: Path, capsys) -> None:
    from tests.conftest import new_app

    data = copy.deepcopy(_example())
    data["clusters"][0]["account"] = "1"
    app = new_app(context={"fleet": str(_write(tmp_path, data))}, outdir=str(tmp_path / "out"))
    sys.path.insert(0, str(ROOT))
    import pipeline_app

    with pytest.raises(SystemExit) as exited:
        pipeline_app.main(app)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: Invalid configuration in ") and "clusters.0.account" in err
