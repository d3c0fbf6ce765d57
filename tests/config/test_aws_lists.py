"""The copied region and instance-type lists are the installed botocore's, and the config checks against them."""

from __future__ import annotations

import json

from infra.config import cluster_instance_types, sagemaker_regions
from infra.facts.aws_lists import DATA_FILE, from_botocore


def test_the_lists_file_is_the_installed_botocore():
    """infra/facts/aws_lists.json is current: regenerate it with `python -m infra.facts.aws_lists`."""
    assert json.loads(DATA_FILE.read_text(encoding="utf-8")) == from_botocore()


def test_the_lists_hold_what_the_default_config_and_examples_use():
    # Spot checks that the file holds real lists: regions of the aws and aws-cn partitions, GPU and Trainium types.
    assert {"us-west-2", "us-east-1", "cn-north-1"} <= sagemaker_regions()
    assert {"ml.g5.8xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge"} <= cluster_instance_types()
    assert "us-west-9" not in sagemaker_regions()
    assert "ml.g5.9xlarge" not in cluster_instance_types()
