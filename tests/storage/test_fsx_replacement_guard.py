"""The replacement guard covers the FSx for Lustre file system: a new AZ/subnet, KMS key or security group
would replace it with an empty one."""

from __future__ import annotations

import copy

import pytest

from infra.errors import ConfigError
from infra.guards.replacement import guard_replacement, lock_path, snapshot, write_atomically


def _file_system(synth):
    (logical_id,) = synth.resources("storage", "AWS::FSx::FileSystem")
    return f"{synth.config.project}-storage", logical_id


def test_the_lock_records_the_file_systems_create_only_fields_and_what_they_point_at(fsx_synth):
    stack, logical_id = _file_system(fsx_synth)
    state = snapshot(fsx_synth.templates, fsx_synth.config.project)["resources"]
    recorded = state[f"{stack}/{logical_id}"]["CreateOnly"]
    assert {"SubnetIds", "SecurityGroupIds", "KmsKeyId", "FileSystemType"} <= set(recorded)
    # The subnet and security group behind the cross-stack exports are guarded too.
    types = {entry["Type"] for key, entry in state.items() if key.startswith(f"{fsx_synth.config.project}-network/")}
    assert {"AWS::EC2::Subnet", "AWS::EC2::SecurityGroup"} <= types


@pytest.mark.parametrize("field", ["SubnetIds", "SecurityGroupIds", "KmsKeyId"])
def test_a_change_that_replaces_the_file_system_is_refused(tmp_path, fsx_synth, field):
    project = fsx_synth.config.project
    write_atomically(lock_path(tmp_path, project), snapshot(fsx_synth.templates, project))
    stack, logical_id = _file_system(fsx_synth)
    changed = copy.deepcopy(fsx_synth.templates)
    changed[stack]["Resources"][logical_id]["Properties"][field] = ["changed"]
    with pytest.raises(ConfigError, match=f"{logical_id} \\(AWS::FSx::FileSystem\\) {field} changes"):
        guard_replacement(fsx_synth.config, changed, tmp_path)
