"""The regions where SageMaker is available and the instance types HyperPod accepts, as botocore lists them.

The config checks ``region`` and every group's ``instance_type`` against these on each synth. Reading them from
botocore (its endpoints file and its SageMaker service model, a few megabytes of JSON) took about half a second
of CPU per synth, so they are copied into ``aws_lists.json``. ``python -m infra.facts.aws_lists`` rewrites the
file from the installed botocore (pinned in requirements.lock), and tests/config/test_aws_lists.py fails when the
two differ, so the copy cannot fall behind a botocore upgrade.
"""

from __future__ import annotations

import json
import re
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


# Each partition's regions, as botocore 1.44.8's data/partitions.json matches them (regionRegex, written here with
# ASCII classes); tests/config/test_hostile_configs.py checks every SageMaker region against botocore's own.
_PARTITIONS = (
    ("aws-us-gov", r"us-gov-[a-z]+-[0-9]+"), ("aws-iso", r"us-iso-[a-z]+-[0-9]+"),
    ("aws-iso-b", r"us-isob-[a-z]+-[0-9]+"), ("aws-iso-e", r"eu-isoe-[a-z]+-[0-9]+"),
    ("aws-iso-f", r"us-isof-[a-z]+-[0-9]+"), ("aws-eusc", r"eusc-de-[a-z]+-[0-9]+"), ("aws-cn", r"cn-[a-z]+-[0-9]+"),
    ("aws", r"(?:us|eu|ap|sa|ca|me|af|il|mx)-[a-z]+-[0-9]+"),
)


def partition_of(region: str) -> str:
    """The partition a region belongs to ("aws", "aws-cn", "aws-us-gov", ...); "aws" for one none matches."""
    return next((name for name, pattern in _PARTITIONS if re.fullmatch(pattern, region)), "aws")


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
