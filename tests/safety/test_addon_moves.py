"""An installed EKS add-on keeps its logical ID: the one cert-manager both operators share is installed by the
construct addons.cert_manager_owner names, and the replacement guard refuses a move with the key that avoids it.

Before: cert-manager was the training operator's when it was on, else the inference operator's, so turning the
training operator on where the inference operator had installed cert-manager (or off beside it) moved the add-on to
another logical ID; CloudFormation creates the new one first and EKS refuses a second add-on of one name, so the
deploy failed and rolled back, and nothing said so before it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import parse_config
from infra.errors import ConfigError
from infra.guards.replacement import ADDON_MOVE, findings, guard_replacement, lock_path, snapshot, write_atomically
from tests.conftest import ALL_FEATURES_CONFIG, Synthesized, mutate

CERT_MANAGER = "cert-manager"


def addon_keys(synth: Synthesized) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for stack, template in synth.templates.items():
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "AWS::EKS::Addon":
                keys.setdefault(resource["Properties"]["AddonName"], []).append(f"{stack}/{logical_id}")
    return keys


def depends_on(synth: Synthesized, addon: str) -> list[str]:
    (resource,) = [r for r in synth.template("hyperpod")["Resources"].values()
                   if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == addon]
    return list(resource.get("DependsOn", []))


def test_one_cert_manager_for_both_operators_installed_by_its_owner(all_features_synth, cert_manager_owner_synth):
    (default,) = addon_keys(all_features_synth)[CERT_MANAGER]
    (owned,) = addon_keys(cert_manager_owner_synth)[CERT_MANAGER]
    assert default.split("/")[1].startswith("TrainingOperatorCertManager")
    assert owned.split("/")[1].startswith("InferenceOperatorCertManager")
    # Both operators wait for the one cert-manager to be ready, whoever installs it.
    for synth, ready in ((all_features_synth, "TrainingOperatorCertManagerReady"),
                         (cert_manager_owner_synth, "InferenceOperatorCertManagerReady")):
        for operator in ("amazon-sagemaker-hyperpod-training-operator", "amazon-sagemaker-hyperpod-inference"):
            assert any(d.startswith(ready) for d in depends_on(synth, operator)), (synth.config.project, operator)
    # Nothing else moves: every other add-on keeps its logical ID.
    others = {k: v for k, v in addon_keys(all_features_synth).items() if k != CERT_MANAGER}
    assert others == {k: v for k, v in addon_keys(cert_manager_owner_synth).items() if k != CERT_MANAGER}


def test_the_snapshot_records_each_addon_once(all_features_synth):
    recorded = snapshot(all_features_synth.templates, "p")["addons"]
    assert recorded == {name: keys[0] for name, keys in addon_keys(all_features_synth).items()}
    assert all(len(keys) == 1 for keys in addon_keys(all_features_synth).values())


def _lock(directory: Path, synth: Synthesized) -> Path:
    write_atomically(lock_path(directory, synth.config.project), snapshot(synth.templates, synth.config.project))
    return directory


def _refusal(config: Any, synth: Synthesized, lock_dir: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        guard_replacement(config, synth.templates, lock_dir)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_move_to_the_training_operator_is_refused_with_the_key_that_keeps_it(
        tmp_path, all_features_synth, cert_manager_owner_synth):
    """Deployed: cert-manager installed by the inference operator. New: the default owner, the training operator."""
    lock_dir = _lock(tmp_path, cert_manager_owner_synth)
    message = _refusal(all_features_synth.config, all_features_synth, lock_dir)
    assert message.startswith("Invalid configuration: addons.cert_manager_owner: EKS add-on cert-manager would move")
    assert "set addons.cert_manager_owner: inference_operator to keep it where it is" in message
    # With the key set, the same deploy passes.
    guard_replacement(cert_manager_owner_synth.config, cert_manager_owner_synth.templates, lock_dir)


def test_a_move_away_from_an_operator_turned_off_says_to_keep_it_on(all_features_synth):
    moved = copy.deepcopy(all_features_synth.templates)
    hyperpod = moved[f"{all_features_synth.config.project}-hyperpod"]["Resources"]
    (old,) = [k for k, r in hyperpod.items() if r["Type"] == "AWS::EKS::Addon"
              and r["Properties"]["AddonName"] == CERT_MANAGER]
    hyperpod["InferenceOperatorCertManagerD63432DF"] = hyperpod.pop(old)
    data = yaml.safe_load(ALL_FEATURES_CONFIG.read_text())
    data["addons"]["training_operator"] = {"enabled": False}
    config = parse_config(data, "all-features")
    found = [f for f in findings(snapshot(all_features_synth.templates, "p"), snapshot(moved, "p"), config)
             if f.rule == ADDON_MOVE]
    (finding,) = found
    assert "keep addons.training_operator on while the other operator uses the cert-manager it installed" \
        in finding.reason


def test_another_addon_moved_is_refused_too_and_an_old_lock_compares_nothing(all_features_synth):
    before = snapshot(all_features_synth.templates, "p")
    moved = copy.deepcopy(all_features_synth.templates)
    hyperpod = moved[f"{all_features_synth.config.project}-hyperpod"]["Resources"]
    (old,) = [k for k, r in hyperpod.items() if r["Type"] == "AWS::EKS::Addon"
              and r["Properties"]["AddonName"] == "aws-mountpoint-s3-csi-driver"]
    hyperpod["S3CsiDriverAddonMoved"] = hyperpod.pop(old)
    (finding,) = [f for f in findings(before, snapshot(moved, "p"), all_features_synth.config)
                  if f.rule == ADDON_MOVE]
    assert finding.key == "addons"
    assert finding.reason.startswith(f"EKS add-on aws-mountpoint-s3-csi-driver would move from "
                                     f"{all_features_synth.config.project}-hyperpod/{old} to ")
    assert finding.reason.endswith("keep the construct that installs it")
    # A lock written before add-ons were recorded: nothing to compare, nothing refused.
    del before["addons"]
    assert not [f for f in findings(before, snapshot(moved, "p"), all_features_synth.config) if f.rule == ADDON_MOVE]
    # An add-on removed (not moved) is no move.
    del hyperpod["S3CsiDriverAddonMoved"]
    assert not [f for f in findings(snapshot(all_features_synth.templates, "p"), snapshot(moved, "p"),
                                    all_features_synth.config) if f.rule == ADDON_MOVE]


@pytest.mark.parametrize(("owner", "off"), [("training_operator", "training_operator"),
                                            ("inference_operator", "inference_operator")])
def test_an_owner_that_is_off_is_refused_naming_the_key(owner: str, off: str):
    data = mutate({"addons": {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::example-models"]},
                              "training_operator": {"enabled": True}, "inference_operator": {"enabled": True},
                              "cert_manager_owner": owner}})
    data["addons"][off]["enabled"] = False
    with pytest.raises(ConfigError) as caught:
        parse_config(data, "c")
    assert f"addons.cert_manager_owner: addons.{off} is off, so it installs no cert-manager (got '{owner}')" \
        in str(caught.value)


def test_the_installer_is_the_owner_else_the_training_operator_else_the_inference_operator():
    on = {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::example-models"]}}
    cases = [
        ({}, None),
        ({"training_operator": {"enabled": True}}, "training_operator"),
        ({**on, "inference_operator": {"enabled": True}}, "inference_operator"),
        ({**on, "training_operator": {"enabled": True}, "inference_operator": {"enabled": True}}, "training_operator"),
        ({**on, "training_operator": {"enabled": True}, "inference_operator": {"enabled": True},
          "cert_manager_owner": "inference_operator"}, "inference_operator"),
    ]
    for addons, expected in cases:
        config = parse_config(mutate({"addons": addons}), "c")
        assert config.addons.cert_manager_installer() == expected, addons
        assert config.addons.eks_addons().count(CERT_MANAGER) == (expected is not None)
