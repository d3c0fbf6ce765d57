"""The lock file refuses config changes that would replace the HyperPod cluster and records routine ones."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import yaml

from infra.config import parse_config
from infra.errors import ConfigError
from infra.hyperpod.lifecycle import check_lifecycle_dir
from infra.hyperpod.lock import guard_replacement, lock_path_for
from tests.conftest import ROOT, default_config_data, routine_change


def _config(data):
    return parse_config(data, "test.yaml")


@pytest.fixture
def lock(tmp_path):
    path = lock_path_for(tmp_path / "cluster.yaml")
    assert path.name == "cluster.lock.json"
    assert guard_replacement(_config(default_config_data()), path) is True
    return path


def test_first_synth_writes_the_lock_and_an_unchanged_config_keeps_it(lock):
    recorded = json.loads(lock.read_text())
    assert recorded["instance_groups"]["gpu-workers"]["instance_type"] == "ml.g5.8xlarge"
    assert guard_replacement(_config(default_config_data()), lock) is False


def test_routine_changes_pass_and_are_recorded(lock):
    assert guard_replacement(_config(routine_change(default_config_data())), lock) is True
    assert set(json.loads(lock.read_text())["instance_groups"]) == {"gpu-workers", "gpu-extra"}


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("instance_type", "ml.g5.12xlarge", "instance_type changes from 'ml.g5.8xlarge' to 'ml.g5.12xlarge'"),
        ("threads_per_core", 2, "threads_per_core changes from 1 to 2"),
    ],
)
def test_create_only_change_of_an_existing_group_is_refused(lock, field, value, words):
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0][field] = value
    with pytest.raises(ConfigError) as caught:
        guard_replacement(_config(data), lock)
    message = str(caught.value)
    assert "REPLACE the whole HyperPod cluster" in message
    assert f"hyperpod.instance_groups[gpu-workers].{words}" in message
    assert "allow_cluster_replacement" in message
    assert json.loads(lock.read_text())["instance_groups"]["gpu-workers"]["instance_type"] == "ml.g5.8xlarge"


def test_cluster_level_create_only_changes_are_refused(lock):
    data = default_config_data()
    data["hyperpod"]["cluster_name"] = "renamed"
    with pytest.raises(ConfigError, match="hyperpod.cluster_name changes"):
        guard_replacement(_config(data), lock)
    data = default_config_data()
    data["network"]["hyperpod_subnets"][0]["cidr"] = "10.2.0.0/16"
    with pytest.raises(ConfigError, match="network.hyperpod_subnets"):
        guard_replacement(_config(data), lock)


def test_replacement_is_accepted_when_the_config_says_so(lock):
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.g5.12xlarge"
    data["hyperpod"]["allow_cluster_replacement"] = True
    assert guard_replacement(_config(data), lock) is True
    assert json.loads(lock.read_text())["instance_groups"]["gpu-workers"]["instance_type"] == "ml.g5.12xlarge"


def test_removed_group_readded_with_another_type_is_a_new_group(lock):
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0]["name"] = "gpu-workers-v2"
    data["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.g5.12xlarge"
    assert guard_replacement(_config(data), lock) is True


def test_committed_default_lock_matches_the_default_config():
    assert guard_replacement(_config(default_config_data()), ROOT / "config" / "default.lock.json") is False


def test_app_refuses_a_replacing_change_without_a_traceback(tmp_path):
    config_path = tmp_path / "cluster.yaml"
    data = default_config_data()
    config_path.write_text(yaml.safe_dump(data))
    guard_replacement(_config(data), lock_path_for(config_path))
    data["hyperpod"]["instance_groups"][0]["threads_per_core"] = 2
    config_path.write_text(yaml.safe_dump(data))
    env = dict(os.environ, CDK_CONTEXT_JSON=json.dumps({"config": str(config_path)}),
               CDK_OUTDIR=str(tmp_path / "out"))
    result = subprocess.run([sys.executable, str(ROOT / "app.py")], capture_output=True, text=True, env=env,
                            cwd=ROOT, check=False, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "threads_per_core changes from 1 to 2" in result.stderr


@pytest.fixture
def scripts(tmp_path):
    directory = tmp_path / "scripts"
    directory.mkdir()
    script = directory / "on_create.sh"
    script.write_bytes(b"#!/usr/bin/env bash\necho ok\n")
    script.chmod(0o755)
    return directory


def test_lifecycle_dir_check_accepts_the_repository_scripts(scripts):
    assert check_lifecycle_dir(ROOT / "lifecycle_scripts", "on_create.sh").name == "on_create.sh"
    assert check_lifecycle_dir(scripts, "on_create.sh") == scripts / "on_create.sh"


def test_lifecycle_dir_check_refuses_a_missing_script(scripts):
    with pytest.raises(ConfigError, match="hyperpod.on_create_script: not found"):
        check_lifecycle_dir(scripts, "setup.sh")
    with pytest.raises(ConfigError, match="hyperpod.lifecycle_scripts_dir: no such directory"):
        check_lifecycle_dir(scripts / "missing", "on_create.sh")


def test_lifecycle_dir_check_refuses_a_script_that_is_not_executable(scripts):
    (scripts / "on_create.sh").chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(ConfigError, match="not executable"):
        check_lifecycle_dir(scripts, "on_create.sh")


def test_lifecycle_dir_check_refuses_crlf_line_endings(scripts):
    helper = scripts / "helper.sh"
    helper.write_bytes(b"#!/usr/bin/env bash\r\necho hi\r\n")
    with pytest.raises(ConfigError, match="helper.sh.*CRLF"):
        check_lifecycle_dir(scripts, "on_create.sh")
