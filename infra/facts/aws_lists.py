"""The regions where SageMaker is available and the instance types HyperPod accepts, as botocore lists them.

The config checks ``region`` and every group's ``instance_type`` against these on each synth. Reading them from
botocore (its endpoints file and its SageMaker service model, a few megabytes of JSON) took about half a second
of CPU per synth, so they are copied into ``aws_lists.json``. ``python -m infra.facts.aws_lists`` rewrites the
file from the installed botocore (pinned in requirements.lock), and tests/config/test_aws_lists.py fails when the
two differ, so the copy cannot fall behind a botocore upgrade.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA_FILE = Path(__file__).with_name("aws_lists.json")


@cache
def _lists() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return data


def sagemaker_regions() -> frozenset[str]:
    """Every region of every partition where botocore knows a SageMaker endpoint."""
    return frozenset(_lists()["sagemaker_regions"])


def cluster_instance_types() -> frozenset[str]:
    """Every instance type HyperPod accepts (ClusterInstanceType in botocore's SageMaker model)."""
    return frozenset(_lists()["cluster_instance_types"])


def from_botocore() -> dict[str, list[str]]:
    """The two lists as the installed botocore gives them, sorted."""
    import botocore.session

    session = botocore.session.get_session()
    regions: set[str] = set()
    for partition in session.get_available_partitions():
        regions.update(session.get_available_regions("sagemaker", partition_name=partition))
    types = session.get_service_model("sagemaker").shape_for("ClusterInstanceType").enum
    return {"sagemaker_regions": sorted(regions), "cluster_instance_types": sorted(types)}


if __name__ == "__main__":
    DATA_FILE.write_text(json.dumps(from_botocore(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {DATA_FILE}")
