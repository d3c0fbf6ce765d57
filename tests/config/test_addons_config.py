"""The addons section: off by default, and each mistake refused naming its key."""

from __future__ import annotations

import pytest

from infra.config import S3CsiConfig, parse_config
from infra.errors import ConfigError
from tests.conftest import default_config_data, mutate


def test_default_config_has_every_addon_off():
    addons = parse_config(default_config_data()).addons
    assert addons.training_operator.enabled is False
    assert addons.s3_csi.enabled is False
    assert addons.s3_csi.bucket_arns == []


def test_a_config_without_the_section_still_parses():
    data = default_config_data()
    data.pop("addons", None)
    assert parse_config(data).addons.s3_csi.enabled is False


@pytest.mark.parametrize(("changes", "key", "words"), [
    ({"addons": {"s3_csi": {"enabled": True}}}, "addons.s3_csi.bucket_arns", "list the buckets"),
    ({"addons": {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::data/prefix"]}}},
     "addons.s3_csi.bucket_arns.0", "general purpose S3 bucket"),
    ({"addons": {"s3_csi": {"bucket_arns": ["arn:aws:s3:::ok-bucket", "s3://ok-bucket"]}}},
     "addons.s3_csi.bucket_arns.1", "general purpose S3 bucket"),
    ({"addons": {"s3_csi": {"bucket_arns": ["arn:aws:s3express:us-west-2:123456789012:bucket/b--usw2-az1--x-s3"]}}},
     "addons.s3_csi.bucket_arns.0", "general purpose S3 bucket"),
    ({"addons": {"s3_csi": {"bucket_arns": ["arn:aws:s3:::same", "arn:aws:s3:::same"]}}},
     "addons.s3_csi.bucket_arns.1", "listed twice"),
    ({"addons": {"training_operator": {"enabled": True}},
      "hyperpod": {"dependencies_chart": {"values": {"cert-manager": {"enabled": True}}}}},
     "hyperpod.dependencies_chart.values.cert-manager.enabled", "installs cert-manager as an EKS add-on"),
    ({"addons": {"training_operator": {"enabled": "yes please"}}}, "addons.training_operator.enabled", ""),
    ({"addons": {"s3_csi": {"buckets": []}}}, "addons.s3_csi.buckets", "unknown key"),
    ({"addons": {"task_governance": {"addon_version": "1.6.0"}}}, "addons.task_governance.addon_version", ""),
    ({"addons": {"training_operator": {"enabled": True},
                 "task_governance": {"enabled": True, "addon_version": "v1.2.9-eksbuild.3"}}},
     "addons.task_governance.addon_version", "v1.3.0-eksbuild.1 or later"),
    ({"tags": {"SageMaker": "false"}}, "tags.SageMaker", "tags the HyperPod cluster SageMaker=true itself"),
])
def test_addon_mistakes_are_refused_naming_the_key(changes, key, words):
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes))
    message = str(caught.value)
    assert f"{key}:" in message
    assert words in message
    assert "\n" not in message


def test_chart_cert_manager_is_fine_without_the_training_operator():
    data = mutate({"hyperpod": {"dependencies_chart": {"values": {"cert-manager": {"enabled": True}}}}})
    assert parse_config(data).hyperpod.dependencies_chart.values["cert-manager"]["enabled"] is True


def test_buckets_of_every_partition_are_accepted_by_the_section():
    # The section takes every partition's form; the whole config then keeps the region's partition only
    # (tests/config/test_hostile_configs.py).
    arns = ["arn:aws:s3:::a.b-c", "arn:aws-cn:s3:::cn-bucket", "arn:aws-us-gov:s3:::gov-bucket"]
    assert S3CsiConfig(enabled=True, bucket_arns=arns).bucket_arns == arns


def test_task_governance_from_v1_3_0_goes_with_the_operator():
    for version in ("v1.3.0-eksbuild.1", "v1.10.0-eksbuild.1"):
        data = mutate({"addons": {"training_operator": {"enabled": True},
                                  "task_governance": {"enabled": True, "addon_version": version}}})
        assert parse_config(data).addons.task_governance.addon_version == version
    # Without the operator an older version is the user's choice.
    data = mutate({"addons": {"task_governance": {"enabled": True, "addon_version": "v1.2.0-eksbuild.1"}}})
    assert parse_config(data).addons.task_governance.addon_version == "v1.2.0-eksbuild.1"


_S3 = {"enabled": True, "bucket_arns": ["arn:aws:s3:::models"]}


@pytest.mark.parametrize(("changes", "key", "words"), [
    ({"addons": {"inference_operator": {"enabled": True}}},
     "addons.inference_operator.enabled", "needs the S3 CSI driver"),
    ({"addons": {"inference_operator": {"enabled": True}, "s3_csi": _S3},
      "hyperpod": {"dependencies_chart": {"values": {"inferenceOperators": {"enabled": True}}}}},
     "hyperpod.dependencies_chart.values.inferenceOperators.enabled", "leave it off in the chart"),
    ({"addons": {"inference_operator": {"enabled": True}, "s3_csi": _S3},
      "hyperpod": {"dependencies_chart": {"values": {"cert-manager": {"enabled": True}}}}},
     "hyperpod.dependencies_chart.values.cert-manager.enabled", "addons.inference_operator installs cert-manager"),
    ({"addons": {"inference_operator": {"enabled": True}, "s3_csi": _S3}, "region": "ca-central-1"},
     "addons.inference_operator.enabled", "not published in ca-central-1"),
    ({"addons": {"inference_operator": {"enabled": True, "addon_version": "1.0"}, "s3_csi": _S3}},
     "addons.inference_operator.addon_version", ""),
])
def test_inference_operator_mistakes_are_refused_naming_the_key(changes, key, words):
    test_addon_mistakes_are_refused_naming_the_key(changes, key, words)


def test_inference_operator_is_off_by_default_and_installs_cert_manager_once():
    assert parse_config(default_config_data()).addons.inference_operator.enabled is False
    alone = parse_config(mutate({"addons": {"inference_operator": {"enabled": True}, "s3_csi": _S3}})).addons
    assert alone.eks_addons().count("cert-manager") == 1
    both = parse_config(mutate({"addons": {"inference_operator": {"enabled": True}, "s3_csi": _S3,
                                           "training_operator": {"enabled": True}}})).addons
    assert both.eks_addons().count("cert-manager") == 1
    assert "amazon-sagemaker-hyperpod-inference" in both.eks_addons()
